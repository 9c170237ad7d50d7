//! Window operators: keyed tumbling, sliding and session windows over
//! processing or event time, with allowed lateness and a late side output;
//! and the windowed two-input join.
//!
//! Semantics (checked against a brute-force model in the tests):
//! * a window `[start, end)` fires once the watermark reaches `end - 1`
//!   (processing time: once the clock reaches `end`);
//! * its state is kept until the watermark reaches `end - 1 + lateness`; a
//!   record for a fired window inside that span updates it and re-fires it;
//! * a record whose every window is past that span goes to the late output;
//! * at end of input every remaining window fires.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::operator::keyed::Folder;
use crate::operator::{Emitter, Operator};
use crate::types::{downcast, fast_map, AnyBatch, CheckpointId, Data, FastMap, Key, Timestamp};

/// A time window `[start, end)` in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Window {
    /// Inclusive start.
    pub start: Timestamp,
    /// Exclusive end.
    pub end: Timestamp,
}

/// Window shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    /// Fixed, non-overlapping windows of `size` ms.
    Tumbling {
        /// Window length, ms.
        size: Timestamp,
    },
    /// Windows of `size` ms starting every `slide` ms.
    Sliding {
        /// Window length, ms.
        size: Timestamp,
        /// Distance between starts, ms.
        slide: Timestamp,
    },
    /// Per-key sessions closed after `gap` ms without records.
    Session {
        /// Inactivity gap, ms.
        gap: Timestamp,
    },
}

impl WindowKind {
    /// The windows a record with time `ts` belongs to (sessions: its own
    /// proto-window `[ts, ts + gap)`).
    pub fn assign(&self, ts: Timestamp, out: &mut Vec<Window>) {
        out.clear();
        match *self {
            WindowKind::Tumbling { size } => {
                let start = ts - ts.rem_euclid(size);
                out.push(Window {
                    start,
                    end: start + size,
                });
            }
            WindowKind::Sliding { size, slide } => {
                let mut start = ts - ts.rem_euclid(slide);
                while start > ts - size {
                    out.push(Window {
                        start,
                        end: start + size,
                    });
                    start -= slide;
                }
            }
            WindowKind::Session { gap } => out.push(Window {
                start: ts,
                end: ts + gap,
            }),
        }
    }
}

/// Time domain of a window.
pub enum TimeMode<T> {
    /// Wall clock when the record is processed.
    Processing,
    /// A timestamp carried by the record; progress by watermarks.
    Event(Arc<dyn Fn(&T) -> Timestamp + Send + Sync>),
}

impl<T> Clone for TimeMode<T> {
    fn clone(&self) -> Self {
        match self {
            TimeMode::Processing => TimeMode::Processing,
            TimeMode::Event(f) => TimeMode::Event(f.clone()),
        }
    }
}

/// A window definition: shape, time domain and allowed lateness.
pub struct WindowSpec<T> {
    /// Shape.
    pub kind: WindowKind,
    /// Time domain.
    pub time: TimeMode<T>,
    /// Allowed lateness, ms.
    pub lateness: Timestamp,
}

impl<T> Clone for WindowSpec<T> {
    fn clone(&self) -> Self {
        WindowSpec {
            kind: self.kind,
            time: self.time.clone(),
            lateness: self.lateness,
        }
    }
}

fn ms(d: Duration) -> Timestamp {
    d.as_millis().clamp(1, i64::MAX as u128) as Timestamp
}

impl<T> WindowSpec<T> {
    /// Tumbling windows of `size` (processing time until `event_time`).
    pub fn tumbling(size: Duration) -> Self {
        Self::new(WindowKind::Tumbling { size: ms(size) })
    }
    /// Sliding windows of `size` every `slide`.
    pub fn sliding(size: Duration, slide: Duration) -> Self {
        Self::new(WindowKind::Sliding {
            size: ms(size),
            slide: ms(slide),
        })
    }
    /// Session windows with inactivity `gap`.
    pub fn session(gap: Duration) -> Self {
        Self::new(WindowKind::Session { gap: ms(gap) })
    }
    fn new(kind: WindowKind) -> Self {
        WindowSpec {
            kind,
            time: TimeMode::Processing,
            lateness: 0,
        }
    }
    /// Use event time taken from each record by `ts` (ms).
    pub fn event_time(mut self, ts: impl Fn(&T) -> Timestamp + Send + Sync + 'static) -> Self {
        self.time = TimeMode::Event(Arc::new(ts));
        self
    }
    /// Keep windows open for late records this long after they fire.
    pub fn allowed_lateness(mut self, d: Duration) -> Self {
        self.lateness = d.as_millis().min(i64::MAX as u128) as Timestamp;
        self
    }
}

/// One fired window result.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WindowResult<K, O> {
    /// The key.
    pub key: K,
    /// The window.
    pub window: Window,
    /// The aggregate.
    pub value: O,
}

/// Output of a window operator before it is split into main and late streams.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum WindowEvent<K, O, T> {
    /// A window fired (or re-fired with a late update).
    Fired(WindowResult<K, O>),
    /// A record too late for every window it belongs to.
    Late(T),
}

/// Current wall-clock time in ms since the Unix epoch.
pub fn now_ms() -> Timestamp {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as Timestamp)
        .unwrap_or(0)
}

/// Snapshot of a window operator: its watermark and every key's panes.
type WindowSnapshot<K, P> = (Timestamp, Vec<(K, Vec<P>)>);

#[derive(Serialize, Deserialize, Clone)]
struct Pane<A> {
    window: Window,
    acc: A,
    fired: bool,
}

/// Keyed window aggregation.
pub struct WindowOp<K, T, KF, F: Folder<T>> {
    key: KF,
    folder: F,
    spec: WindowSpec<T>,
    panes: FastMap<K, Vec<Pane<F::Acc>>>,
    wm: Timestamp,
    min_end: Timestamp,
    scratch: Vec<Window>,
}

impl<K: Key, T: Data, KF: Fn(&T) -> K, F: Folder<T>> WindowOp<K, T, KF, F> {
    /// A window operator.
    pub fn new(key: KF, folder: F, spec: WindowSpec<T>) -> Self {
        WindowOp {
            key,
            folder,
            spec,
            panes: fast_map(),
            wm: Timestamp::MIN,
            min_end: Timestamp::MAX,
            scratch: Vec::new(),
        }
    }

    /// Adds one record; returns it back if it is late for every window.
    fn add(&mut self, r: T, ts: Timestamp, out: &mut Vec<WindowEvent<K, F::Out, T>>) -> Option<T> {
        let mut windows = std::mem::take(&mut self.scratch);
        self.spec.kind.assign(ts, &mut windows);
        let wm = self.wm;
        let lateness = self.spec.lateness;
        windows.retain(|w| wm < (w.end - 1).saturating_add(lateness));
        if windows.is_empty() {
            self.scratch = windows;
            return Some(r);
        }
        let k = (self.key)(&r);
        let panes = self.panes.entry(k.clone()).or_default();
        let session = matches!(self.spec.kind, WindowKind::Session { .. });
        let n = windows.len();
        let mut r = Some(r);
        for (i, w) in windows.iter().enumerate() {
            let v = if i + 1 == n { r.take() } else { r.clone() };
            let Some(v) = v else { break };
            let idx = if session {
                // merge every pane overlapping the proto-window into one
                let mut merged = Pane {
                    window: *w,
                    acc: self.folder.first(v),
                    fired: false,
                };
                let mut j = 0;
                while j < panes.len() {
                    let p = &panes[j];
                    if p.window.start < merged.window.end && merged.window.start < p.window.end {
                        let p = panes.swap_remove(j);
                        merged.window.start = merged.window.start.min(p.window.start);
                        merged.window.end = merged.window.end.max(p.window.end);
                        // `merged.fired` stays false: the merged session is a new
                        // window; if the watermark already passed its end it fires
                        // below at once (a late update), otherwise when it passes.
                        let mut acc = p.acc;
                        self.folder.merge(&mut acc, merged.acc);
                        merged.acc = acc;
                    } else {
                        j += 1;
                    }
                }
                panes.push(merged);
                panes.len() - 1
            } else {
                match panes.iter().position(|p| p.window == *w) {
                    Some(j) => {
                        self.folder.add(&mut panes[j].acc, v);
                        j
                    }
                    None => {
                        panes.push(Pane {
                            window: *w,
                            acc: self.folder.first(v),
                            fired: false,
                        });
                        panes.len() - 1
                    }
                }
            };
            let p = &mut panes[idx];
            self.min_end = self.min_end.min(p.window.end);
            // a window already past the watermark (a late update) fires at once
            if p.window.end - 1 <= wm {
                p.fired = true;
                out.push(WindowEvent::Fired(WindowResult {
                    key: k.clone(),
                    window: p.window,
                    value: self.folder.out(&p.acc),
                }));
            }
        }
        self.scratch = windows;
        None
    }

    /// Fires windows reaching `wm` and drops those past their lateness.
    fn advance(&mut self, wm: Timestamp, out: &mut Vec<WindowEvent<K, F::Out, T>>) {
        self.wm = self.wm.max(wm);
        if wm < self.min_end - 1 {
            return;
        }
        let lateness = self.spec.lateness;
        let mut min_end = Timestamp::MAX;
        let folder = &self.folder;
        self.panes.retain(|k, panes| {
            panes.sort_by_key(|p| p.window);
            panes.retain_mut(|p| {
                if !p.fired && p.window.end - 1 <= wm {
                    p.fired = true;
                    out.push(WindowEvent::Fired(WindowResult {
                        key: k.clone(),
                        window: p.window,
                        value: folder.out(&p.acc),
                    }));
                }
                let keep = wm < (p.window.end - 1).saturating_add(lateness);
                if keep {
                    let due = if p.fired {
                        (p.window.end - 1).saturating_add(lateness) + 1
                    } else {
                        p.window.end
                    };
                    min_end = min_end.min(due);
                }
                keep
            });
            !panes.is_empty()
        });
        self.min_end = min_end;
    }

    fn emit(out: &mut dyn Emitter, v: Vec<WindowEvent<K, F::Out, T>>) -> Result<()> {
        if v.is_empty() {
            return Ok(());
        }
        out.emit(Box::new(v))
    }
}

impl<K, T, KF, F> Operator for WindowOp<K, T, KF, F>
where
    K: Key,
    T: Data,
    KF: Fn(&T) -> K + Send,
    F: Folder<T>,
{
    fn process(&mut self, _input: usize, batch: AnyBatch, out: &mut dyn Emitter) -> Result<()> {
        let v = downcast::<T>(batch)?;
        let mut o = Vec::new();
        let now = now_ms();
        for r in v {
            let ts = match &self.spec.time {
                TimeMode::Processing => now,
                TimeMode::Event(f) => f(&r),
            };
            if let Some(late) = self.add(r, ts, &mut o) {
                o.push(WindowEvent::Late(late));
            }
        }
        Self::emit(out, o)
    }

    fn watermark(&mut self, wm: Timestamp, out: &mut dyn Emitter) -> Result<()> {
        if let TimeMode::Event(_) = self.spec.time {
            let mut o = Vec::new();
            self.advance(wm, &mut o);
            Self::emit(out, o)?;
        }
        out.watermark(wm)
    }

    fn next_timer(&self) -> Option<Instant> {
        match self.spec.time {
            TimeMode::Processing if self.min_end != Timestamp::MAX => {
                let wait = (self.min_end - now_ms()).max(0) as u64;
                Some(Instant::now() + Duration::from_millis(wait))
            }
            _ => None,
        }
    }

    fn on_timer(&mut self, _now: Instant, out: &mut dyn Emitter) -> Result<()> {
        if let TimeMode::Processing = self.spec.time {
            let mut o = Vec::new();
            self.advance(now_ms() - 1, &mut o);
            Self::emit(out, o)?;
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut dyn Emitter) -> Result<()> {
        let mut o = Vec::new();
        self.advance(Timestamp::MAX - 1, &mut o);
        Self::emit(out, o)
    }

    fn snapshot(&mut self, _id: CheckpointId) -> Result<Option<Vec<u8>>> {
        let panes: Vec<(&K, &Vec<Pane<F::Acc>>)> = self.panes.iter().collect();
        Ok(Some(serde_json::to_vec(&(self.wm, panes))?))
    }

    fn restore(&mut self, state: &[u8]) -> Result<()> {
        let (wm, panes): WindowSnapshot<K, Pane<F::Acc>> = serde_json::from_slice(state)?;
        self.wm = wm;
        self.panes.clear();
        self.min_end = Timestamp::MIN + 1; // force a rescan on the next advance
        for (k, p) in panes {
            self.panes.insert(k, p);
        }
        Ok(())
    }
}

#[derive(Serialize, Deserialize)]
struct JoinPane<A, B> {
    window: Window,
    left: Vec<A>,
    right: Vec<B>,
}

/// Windowed inner join of two keyed inputs: for every key and window, emits
/// `f(a, b)` for each pair when the window fires. Records later than the
/// watermark for their window are dropped.
pub struct WindowJoinOp<K, A, B, O, KA, KB, F> {
    ka: KA,
    kb: KB,
    f: F,
    kind: WindowKind,
    ta: TimeMode<A>,
    tb: TimeMode<B>,
    panes: FastMap<K, Vec<JoinPane<A, B>>>,
    wm: Timestamp,
    scratch: Vec<Window>,
    _t: PhantomData<fn() -> O>,
}

impl<K: Key, A, B, O, KA, KB, F> WindowJoinOp<K, A, B, O, KA, KB, F> {
    /// A window join.
    pub fn new(ka: KA, kb: KB, kind: WindowKind, ta: TimeMode<A>, tb: TimeMode<B>, f: F) -> Self {
        WindowJoinOp {
            ka,
            kb,
            f,
            kind,
            ta,
            tb,
            panes: fast_map(),
            wm: Timestamp::MIN,
            scratch: Vec::new(),
            _t: PhantomData,
        }
    }
}

impl<K, A, B, O, KA, KB, F> WindowJoinOp<K, A, B, O, KA, KB, F>
where
    K: Key,
    A: Data,
    B: Data,
    O: Data,
    F: Fn(&K, &A, &B) -> O + Send,
{
    fn fire(&mut self, wm: Timestamp, out: &mut dyn Emitter) -> Result<()> {
        self.wm = self.wm.max(wm);
        let mut o = Vec::new();
        let f = &self.f;
        self.panes.retain(|k, panes| {
            panes.retain(|p| {
                if p.window.end - 1 <= wm {
                    for a in &p.left {
                        for b in &p.right {
                            o.push(f(k, a, b));
                        }
                    }
                    false
                } else {
                    true
                }
            });
            !panes.is_empty()
        });
        if !o.is_empty() {
            out.emit(Box::new(o))?;
        }
        Ok(())
    }
}

impl<K, A, B, O, KA, KB, F> Operator for WindowJoinOp<K, A, B, O, KA, KB, F>
where
    K: Key,
    A: Data,
    B: Data,
    O: Data,
    KA: Fn(&A) -> K + Send,
    KB: Fn(&B) -> K + Send,
    F: Fn(&K, &A, &B) -> O + Send,
{
    fn process(&mut self, input: usize, batch: AnyBatch, _out: &mut dyn Emitter) -> Result<()> {
        let now = now_ms();
        let mut ws = std::mem::take(&mut self.scratch);
        if input == 0 {
            for a in downcast::<A>(batch)? {
                let ts = match &self.ta {
                    TimeMode::Processing => now,
                    TimeMode::Event(f) => f(&a),
                };
                self.kind.assign(ts, &mut ws);
                let k = (self.ka)(&a);
                let panes = self.panes.entry(k).or_default();
                for w in ws.iter().filter(|w| w.end - 1 > self.wm) {
                    match panes.iter_mut().find(|p| p.window == *w) {
                        Some(p) => p.left.push(a.clone()),
                        None => panes.push(JoinPane {
                            window: *w,
                            left: vec![a.clone()],
                            right: Vec::new(),
                        }),
                    }
                }
            }
        } else {
            for b in downcast::<B>(batch)? {
                let ts = match &self.tb {
                    TimeMode::Processing => now,
                    TimeMode::Event(f) => f(&b),
                };
                self.kind.assign(ts, &mut ws);
                let k = (self.kb)(&b);
                let panes = self.panes.entry(k).or_default();
                for w in ws.iter().filter(|w| w.end - 1 > self.wm) {
                    match panes.iter_mut().find(|p| p.window == *w) {
                        Some(p) => p.right.push(b.clone()),
                        None => panes.push(JoinPane {
                            window: *w,
                            left: Vec::new(),
                            right: vec![b.clone()],
                        }),
                    }
                }
            }
        }
        self.scratch = ws;
        Ok(())
    }

    fn watermark(&mut self, wm: Timestamp, out: &mut dyn Emitter) -> Result<()> {
        if matches!(self.ta, TimeMode::Event(_)) {
            self.fire(wm, out)?;
        }
        out.watermark(wm)
    }

    fn next_timer(&self) -> Option<Instant> {
        match self.ta {
            TimeMode::Processing if !self.panes.is_empty() => {
                Some(Instant::now() + Duration::from_millis(5))
            }
            _ => None,
        }
    }

    fn on_timer(&mut self, _now: Instant, out: &mut dyn Emitter) -> Result<()> {
        if matches!(self.ta, TimeMode::Processing) {
            self.fire(now_ms() - 1, out)?;
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut dyn Emitter) -> Result<()> {
        self.fire(Timestamp::MAX - 1, out)
    }

    fn snapshot(&mut self, _id: CheckpointId) -> Result<Option<Vec<u8>>> {
        let panes: Vec<(&K, &Vec<JoinPane<A, B>>)> = self.panes.iter().collect();
        Ok(Some(serde_json::to_vec(&(self.wm, panes))?))
    }

    fn restore(&mut self, state: &[u8]) -> Result<()> {
        let (wm, panes): WindowSnapshot<K, JoinPane<A, B>> = serde_json::from_slice(state)?;
        self.wm = wm;
        self.panes = panes.into_iter().collect::<FastMap<_, _>>();
        Ok(())
    }
}
