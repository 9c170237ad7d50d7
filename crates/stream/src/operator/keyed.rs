//! Keyed operators: rolling `reduce`/`aggregate` (updates coalesced per input
//! batch), `reduce_at_end` (final value per key when input ends) and
//! `process` (a user function over keyed value/list/map state).
//!
//! Their whole state is a map from key to accumulator; it is snapshotted as
//! a list of `(key, acc)` pairs.

use std::marker::PhantomData;

use crate::error::Result;
use crate::operator::{Emitter, Operator};
use crate::state::KeyedState;
use crate::types::{downcast, fast_map, AnyBatch, CheckpointId, Data, FastMap, Key};

/// A user-defined aggregation (`create`, `add`, `merge`, `result`), as in Flink.
pub trait AggregateFunction<T>: Send + Sync + 'static {
    /// Accumulator.
    type Acc: Data;
    /// Result.
    type Out: Data;
    /// A fresh accumulator.
    fn create(&self) -> Self::Acc;
    /// Adds a value.
    fn add(&self, acc: &mut Self::Acc, v: T);
    /// Merges two accumulators (session windows).
    fn merge(&self, acc: &mut Self::Acc, other: Self::Acc);
    /// The result for an accumulator.
    fn result(&self, acc: &Self::Acc) -> Self::Out;
}

/// Internal fold interface shared by reduce and aggregate, keyed and windowed.
pub trait Folder<T>: Send + Sync + 'static {
    /// Accumulator.
    type Acc: Data;
    /// Result.
    type Out: Data;
    /// Accumulator of one value.
    fn first(&self, v: T) -> Self::Acc;
    /// Adds a value.
    fn add(&self, acc: &mut Self::Acc, v: T);
    /// Merges another accumulator in.
    fn merge(&self, acc: &mut Self::Acc, other: Self::Acc);
    /// The result.
    fn out(&self, acc: &Self::Acc) -> Self::Out;
}

/// `reduce(f)` with `f(&mut acc, value)`.
pub struct ReduceFolder<F>(pub F);

impl<T: Data, F: Fn(&mut T, T) + Send + Sync + 'static> Folder<T> for ReduceFolder<F> {
    type Acc = T;
    type Out = T;
    fn first(&self, v: T) -> T {
        v
    }
    fn add(&self, acc: &mut T, v: T) {
        (self.0)(acc, v)
    }
    fn merge(&self, acc: &mut T, other: T) {
        (self.0)(acc, other)
    }
    fn out(&self, acc: &T) -> T {
        acc.clone()
    }
}

/// `aggregate(a)` for an `AggregateFunction`.
pub struct AggFolder<A>(pub A);

impl<T, A: AggregateFunction<T>> Folder<T> for AggFolder<A> {
    type Acc = A::Acc;
    type Out = A::Out;
    fn first(&self, v: T) -> A::Acc {
        let mut a = self.0.create();
        self.0.add(&mut a, v);
        a
    }
    fn add(&self, acc: &mut A::Acc, v: T) {
        self.0.add(acc, v)
    }
    fn merge(&self, acc: &mut A::Acc, other: A::Acc) {
        self.0.merge(acc, other)
    }
    fn out(&self, acc: &A::Acc) -> A::Out {
        self.0.result(acc)
    }
}

/// When a keyed aggregation emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmitMode {
    /// After each input batch, the new value of every key it changed.
    Updates,
    /// Once, the final value of every key, when the input ends.
    AtEnd,
}

/// Keyed rolling aggregation.
pub struct KeyedAggOp<K, T, KF, F: Folder<T>, E, O> {
    key: KF,
    folder: F,
    emit: E,
    mode: EmitMode,
    state: FastMap<K, (F::Acc, u64)>,
    epoch: u64,
    touched: Vec<K>,
    _t: PhantomData<fn(T) -> O>,
}

impl<K: Key, T: Data, KF, F: Folder<T>, E, O> KeyedAggOp<K, T, KF, F, E, O> {
    /// A keyed aggregation emitting `emit(key, result)`.
    pub fn new(key: KF, folder: F, emit: E, mode: EmitMode) -> Self {
        KeyedAggOp {
            key,
            folder,
            emit,
            mode,
            state: fast_map(),
            epoch: 1,
            touched: Vec::new(),
            _t: PhantomData,
        }
    }
}

impl<K, T, KF, F, E, O> Operator for KeyedAggOp<K, T, KF, F, E, O>
where
    K: Key,
    T: Data,
    O: Data,
    KF: Fn(&T) -> K + Send,
    F: Folder<T>,
    E: Fn(&K, F::Out) -> O + Send,
{
    fn process(&mut self, _input: usize, batch: AnyBatch, out: &mut dyn Emitter) -> Result<()> {
        let v = downcast::<T>(batch)?;
        let updates = self.mode == EmitMode::Updates;
        self.epoch += 1;
        for r in v {
            let k = (self.key)(&r);
            match self.state.get_mut(&k) {
                Some((acc, ep)) => {
                    self.folder.add(acc, r);
                    if updates && *ep != self.epoch {
                        *ep = self.epoch;
                        self.touched.push(k);
                    }
                }
                None => {
                    let acc = self.folder.first(r);
                    if updates {
                        self.touched.push(k.clone());
                    }
                    self.state.insert(k, (acc, self.epoch));
                }
            }
        }
        if updates && !self.touched.is_empty() {
            let mut o = Vec::with_capacity(self.touched.len());
            for k in self.touched.drain(..) {
                if let Some((acc, _)) = self.state.get(&k) {
                    o.push((self.emit)(&k, self.folder.out(acc)));
                }
            }
            out.emit(Box::new(o))?;
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut dyn Emitter) -> Result<()> {
        if self.mode == EmitMode::AtEnd && !self.state.is_empty() {
            let mut o = Vec::with_capacity(1024);
            for (k, (acc, _)) in &self.state {
                o.push((self.emit)(k, self.folder.out(acc)));
                if o.len() >= 1024 {
                    out.emit(Box::new(std::mem::replace(
                        &mut o,
                        Vec::with_capacity(1024),
                    )))?;
                }
            }
            if !o.is_empty() {
                out.emit(Box::new(o))?;
            }
        }
        Ok(())
    }

    fn snapshot(&mut self, _id: CheckpointId) -> Result<Option<Vec<u8>>> {
        let v: Vec<(&K, &F::Acc)> = self.state.iter().map(|(k, (a, _))| (k, a)).collect();
        Ok(Some(serde_json::to_vec(&v)?))
    }

    fn restore(&mut self, state: &[u8]) -> Result<()> {
        let v: Vec<(K, F::Acc)> = serde_json::from_slice(state)?;
        self.state.clear();
        for (k, a) in v {
            self.state.insert(k, (a, 0));
        }
        Ok(())
    }
}

/// Keyed process function: `f(key, value, state, out)`.
pub struct KeyedProcessOp<K, T, O, KF, F> {
    key: KF,
    f: F,
    state: KeyedState<K>,
    _t: PhantomData<fn(T) -> O>,
}

impl<K: Key, T, O, KF, F> KeyedProcessOp<K, T, O, KF, F> {
    /// Wraps `f`.
    pub fn new(key: KF, f: F) -> Self {
        KeyedProcessOp {
            key,
            f,
            state: KeyedState::default(),
            _t: PhantomData,
        }
    }
}

impl<K, T, O, KF, F> Operator for KeyedProcessOp<K, T, O, KF, F>
where
    K: Key,
    T: Data,
    O: Data,
    KF: Fn(&T) -> K + Send,
    F: FnMut(&K, T, &mut KeyedState<K>, &mut Vec<O>) -> Result<()> + Send,
{
    fn process(&mut self, _input: usize, batch: AnyBatch, out: &mut dyn Emitter) -> Result<()> {
        let v = downcast::<T>(batch)?;
        let mut o = Vec::new();
        for r in v {
            let k = (self.key)(&r);
            (self.f)(&k, r, &mut self.state, &mut o)?;
        }
        if !o.is_empty() {
            out.emit(Box::new(o))?;
        }
        Ok(())
    }
    fn snapshot(&mut self, _id: CheckpointId) -> Result<Option<Vec<u8>>> {
        Ok(Some(self.state.snapshot()?))
    }
    fn restore(&mut self, state: &[u8]) -> Result<()> {
        self.state.restore(state)
    }
}
