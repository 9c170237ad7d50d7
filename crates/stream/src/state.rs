//! Keyed state (value, list and map state) that a keyed operator owns and
//! that is snapshotted at every checkpoint.
//!
//! Invariant: a subtask only ever holds state for keys that hash to it
//! (keyed streams are hash-partitioned with `types::key_hash`), so a
//! snapshot restored at the same parallelism is complete.
//! Restored state stays as JSON until first accessed with its type.

use std::any::Any;
use std::collections::BTreeMap;
use std::marker::PhantomData;

use serde::{Deserialize, Serialize};

use crate::error::{Result, StreamError};
use crate::types::{fast_map, Data, FastMap, Key};

/// A kind of keyed state that can be saved and loaded.
trait StateKind: Send + 'static {
    fn to_json(&self) -> Result<serde_json::Value>;
}

/// Value state: one `V` per key.
pub struct ValueState<K, V> {
    map: FastMap<K, V>,
}

impl<K: Key, V: Data> ValueState<K, V> {
    /// The value for `key`.
    pub fn get(&self, key: &K) -> Option<&V> {
        self.map.get(key)
    }
    /// Sets the value for `key`.
    pub fn set(&mut self, key: &K, v: V) {
        self.map.insert(key.clone(), v);
    }
    /// Removes the value for `key`.
    pub fn clear(&mut self, key: &K) {
        self.map.remove(key);
    }
    /// Number of keys holding a value.
    pub fn len(&self) -> usize {
        self.map.len()
    }
    /// Whether no key holds a value.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl<K: Key, V: Data> StateKind for ValueState<K, V> {
    fn to_json(&self) -> Result<serde_json::Value> {
        let v: Vec<(&K, &V)> = self.map.iter().collect();
        Ok(serde_json::to_value(v)?)
    }
}

/// List state: a list of `V` per key.
pub struct ListState<K, V> {
    map: FastMap<K, Vec<V>>,
}

impl<K: Key, V: Data> ListState<K, V> {
    /// Appends to the list of `key`.
    pub fn add(&mut self, key: &K, v: V) {
        match self.map.get_mut(key) {
            Some(l) => l.push(v),
            None => {
                self.map.insert(key.clone(), vec![v]);
            }
        }
    }
    /// The list of `key` (empty if none).
    pub fn get(&self, key: &K) -> &[V] {
        self.map.get(key).map_or(&[], |l| l.as_slice())
    }
    /// Removes the list of `key`.
    pub fn clear(&mut self, key: &K) {
        self.map.remove(key);
    }
}

impl<K: Key, V: Data> StateKind for ListState<K, V> {
    fn to_json(&self) -> Result<serde_json::Value> {
        let v: Vec<(&K, &Vec<V>)> = self.map.iter().collect();
        Ok(serde_json::to_value(v)?)
    }
}

/// Map state: a map `UK -> UV` per key.
pub struct MapState<K, UK, UV> {
    map: FastMap<K, FastMap<UK, UV>>,
}

impl<K: Key, UK: Key, UV: Data> MapState<K, UK, UV> {
    /// The entry `uk` of `key`.
    pub fn get(&self, key: &K, uk: &UK) -> Option<&UV> {
        self.map.get(key).and_then(|m| m.get(uk))
    }
    /// Sets the entry `uk` of `key`.
    pub fn put(&mut self, key: &K, uk: UK, v: UV) {
        match self.map.get_mut(key) {
            Some(m) => {
                m.insert(uk, v);
            }
            None => {
                let mut m = fast_map();
                m.insert(uk, v);
                self.map.insert(key.clone(), m);
            }
        }
    }
    /// Removes the entry `uk` of `key`.
    pub fn remove(&mut self, key: &K, uk: &UK) -> Option<UV> {
        self.map.get_mut(key).and_then(|m| m.remove(uk))
    }
    /// The entries of `key`, in no particular order.
    pub fn entries(&self, key: &K) -> Vec<(&UK, &UV)> {
        self.map
            .get(key)
            .map_or_else(Vec::new, |m| m.iter().collect())
    }
}

impl<K: Key, UK: Key, UV: Data> StateKind for MapState<K, UK, UV> {
    fn to_json(&self) -> Result<serde_json::Value> {
        let v: Vec<(&K, Vec<(&UK, &UV)>)> = self
            .map
            .iter()
            .map(|(k, m)| (k, m.iter().collect()))
            .collect();
        Ok(serde_json::to_value(v)?)
    }
}

struct Slot {
    data: Box<dyn Any + Send>,
    save: fn(&(dyn Any + Send)) -> Result<serde_json::Value>,
}

fn save_as<S: StateKind>(d: &(dyn Any + Send)) -> Result<serde_json::Value> {
    d.downcast_ref::<S>()
        .ok_or_else(|| StreamError::Internal("state slot type mismatch".into()))?
        .to_json()
}

/// The keyed state of one operator instance: named value, list and map
/// states. Accessing a name with a different kind or type than before is
/// an error (`StreamError::Plan`).
pub struct KeyedState<K> {
    slots: BTreeMap<String, Slot>,
    restored: BTreeMap<String, serde_json::Value>,
    _k: PhantomData<fn(K)>,
}

impl<K: Key> Default for KeyedState<K> {
    fn default() -> Self {
        KeyedState {
            slots: BTreeMap::new(),
            restored: BTreeMap::new(),
            _k: PhantomData,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct SavedState {
    states: BTreeMap<String, serde_json::Value>,
}

impl<K: Key> KeyedState<K> {
    fn slot<S: StateKind>(
        &mut self,
        name: &str,
        load: impl FnOnce(Option<serde_json::Value>) -> Result<S>,
    ) -> Result<&mut S> {
        if !self.slots.contains_key(name) {
            let s = load(self.restored.remove(name))?;
            self.slots.insert(
                name.to_string(),
                Slot {
                    data: Box::new(s),
                    save: save_as::<S>,
                },
            );
        }
        self.slots
            .get_mut(name)
            .and_then(|s| s.data.downcast_mut::<S>())
            .ok_or_else(|| {
                StreamError::Plan(format!("state '{name}' used with two different types"))
            })
    }

    /// The value state `name`.
    pub fn value<V: Data>(&mut self, name: &str) -> Result<&mut ValueState<K, V>> {
        self.slot(name, |saved| {
            let mut map = fast_map();
            if let Some(j) = saved {
                let v: Vec<(K, V)> = serde_json::from_value(j)?;
                map.extend(v);
            }
            Ok(ValueState { map })
        })
    }

    /// The list state `name`.
    pub fn list<V: Data>(&mut self, name: &str) -> Result<&mut ListState<K, V>> {
        self.slot(name, |saved| {
            let mut map = fast_map();
            if let Some(j) = saved {
                let v: Vec<(K, Vec<V>)> = serde_json::from_value(j)?;
                map.extend(v);
            }
            Ok(ListState { map })
        })
    }

    /// The map state `name`.
    pub fn map<UK: Key, UV: Data>(&mut self, name: &str) -> Result<&mut MapState<K, UK, UV>> {
        self.slot(name, |saved| {
            let mut map = fast_map();
            if let Some(j) = saved {
                let v: Vec<(K, Vec<(UK, UV)>)> = serde_json::from_value(j)?;
                for (k, entries) in v {
                    let mut m = fast_map();
                    m.extend(entries);
                    map.insert(k, m);
                }
            }
            Ok(MapState { map })
        })
    }

    /// Serialises every state (also those restored and not touched since).
    pub fn snapshot(&self) -> Result<Vec<u8>> {
        let mut states = self.restored.clone();
        for (name, slot) in &self.slots {
            states.insert(name.clone(), (slot.save)(slot.data.as_ref())?);
        }
        Ok(serde_json::to_vec(&SavedState { states })?)
    }

    /// Replaces all state by a snapshot.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let saved: SavedState = serde_json::from_slice(bytes)?;
        self.slots.clear();
        self.restored = saved.states;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_roundtrip_all_kinds() -> Result<()> {
        let mut s: KeyedState<String> = KeyedState::default();
        s.value::<u64>("count")?.set(&"a".to_string(), 3);
        s.list::<i32>("l")?.add(&"a".to_string(), 1);
        s.list::<i32>("l")?.add(&"a".to_string(), 2);
        s.map::<u32, String>("m")?
            .put(&"b".to_string(), 7, "x".into());
        let bytes = s.snapshot()?;
        let mut r: KeyedState<String> = KeyedState::default();
        r.restore(&bytes)?;
        assert_eq!(r.value::<u64>("count")?.get(&"a".to_string()), Some(&3));
        assert_eq!(r.list::<i32>("l")?.get(&"a".to_string()), &[1, 2]);
        assert_eq!(
            r.map::<u32, String>("m")?
                .get(&"b".to_string(), &7)
                .map(|s| s.as_str()),
            Some("x")
        );
        // untouched restored state survives a second snapshot
        let mut r2: KeyedState<String> = KeyedState::default();
        r2.restore(&r.snapshot()?)?;
        assert_eq!(r2.value::<u64>("count")?.get(&"a".to_string()), Some(&3));
        Ok(())
    }

    #[test]
    fn type_confusion_is_an_error() -> Result<()> {
        let mut s: KeyedState<u32> = KeyedState::default();
        s.value::<u64>("x")?.set(&1, 1);
        assert!(s.list::<u64>("x").is_err());
        Ok(())
    }
}
