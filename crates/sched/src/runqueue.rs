//! The run queue: runnable contexts by group, picked by virtual runtime.
//!
//! Pure data structure (no locks, no threads) so the choice can be
//! model-tested: the scheduler holds it under its lock.
//!
//! Invariants:
//! * a group is present iff it has a queued context, and then once;
//! * `pick` takes the front context of the group with the smallest virtual
//!   runtime (ties: the group queued earliest); contexts of one group leave
//!   in the order they arrived;
//! * `min_vruntime` never decreases; a group that becomes runnable is raised
//!   to at least `min_vruntime - wake_credit`.

use std::collections::VecDeque;

/// What the run queue needs to know of a group.
pub(crate) trait RunGroup {
    fn vruntime(&self) -> u64;
    fn raise_vruntime_to(&self, floor: u64);
    fn same_group(&self, other: &Self) -> bool;
}

struct Runnable<G, T> {
    group: G,
    tasks: VecDeque<T>,
}

pub(crate) struct RunQueue<G, T> {
    groups: Vec<Runnable<G, T>>,
    min_vruntime: u64,
    wake_credit: u64,
}

impl<G: RunGroup, T> RunQueue<G, T> {
    pub(crate) fn new(wake_credit: u64) -> Self {
        RunQueue {
            groups: Vec::new(),
            min_vruntime: 0,
            wake_credit,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    pub(crate) fn min_vruntime(&self) -> u64 {
        self.min_vruntime
    }

    pub(crate) fn push(&mut self, group: G, task: T) {
        if let Some(r) = self.groups.iter_mut().find(|r| r.group.same_group(&group)) {
            r.tasks.push_back(task);
            return;
        }
        group.raise_vruntime_to(self.min_vruntime.saturating_sub(self.wake_credit));
        self.groups.push(Runnable {
            group,
            tasks: VecDeque::from([task]),
        });
    }

    pub(crate) fn pick(&mut self) -> Option<T> {
        let mut best: Option<(usize, u64)> = None;
        for (i, r) in self.groups.iter().enumerate() {
            let v = r.group.vruntime();
            if best.is_none_or(|(_, b)| v < b) {
                best = Some((i, v));
            }
        }
        let (index, vruntime) = best?;
        let runnable = self.groups.get_mut(index)?;
        let task = runnable.tasks.pop_front();
        if runnable.tasks.is_empty() {
            // `remove`, not `swap_remove`: ties go to the group queued first
            self.groups.remove(index);
        }
        self.min_vruntime = self.min_vruntime.max(vruntime);
        task
    }

    /// Everything queued, for shutdown (dropped by the caller, unlocked).
    pub(crate) fn take_all(&mut self) -> Vec<T> {
        self.groups.drain(..).flat_map(|r| r.tasks).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use proptest::prelude::*;

    use super::*;

    #[derive(Clone)]
    struct G(usize, Rc<Cell<u64>>);

    impl RunGroup for G {
        fn vruntime(&self) -> u64 {
            self.1.get()
        }
        fn raise_vruntime_to(&self, floor: u64) {
            self.1.set(self.1.get().max(floor));
        }
        fn same_group(&self, other: &Self) -> bool {
            self.0 == other.0
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// A context of group `g` becomes runnable.
        Arrive(usize),
        /// The next context runs and is charged `cpu` ns at the group's share.
        Run(u64),
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        proptest::collection::vec(
            prop_oneof![
                (0usize..5).prop_map(Op::Arrive),
                (0u64..5_000_000).prop_map(Op::Run),
            ],
            1..200,
        )
    }

    proptest! {
        /// Random arrivals and runs: each pick is a context of a runnable
        /// group with the smallest virtual runtime, FIFO within its group,
        /// every arrival is picked exactly once, and min_vruntime only grows.
        #[test]
        fn picks_follow_vruntime_order(ops in ops(), shares in proptest::collection::vec(1u64..10, 5)) {
            let groups: Vec<G> = (0..5).map(|i| G(i, Rc::new(Cell::new(0)))).collect();
            let mut q: RunQueue<G, (usize, usize)> = RunQueue::new(2_000_000);
            // the model: per group, its queued sequence numbers
            let mut model: Vec<VecDeque<usize>> = vec![VecDeque::new(); 5];
            let mut seq = 0usize;
            let mut last_min = 0u64;
            for op in ops {
                match op {
                    Op::Arrive(g) => {
                        q.push(groups[g].clone(), (g, seq));
                        model[g].push_back(seq);
                        seq += 1;
                    }
                    Op::Run(cpu) => {
                        let smallest = (0..5)
                            .filter(|g| !model[*g].is_empty())
                            .map(|g| groups[g].vruntime())
                            .min();
                        match q.pick() {
                            None => prop_assert!(smallest.is_none()),
                            Some((g, s)) => {
                                prop_assert_eq!(Some(groups[g].vruntime()), smallest);
                                prop_assert_eq!(model[g].pop_front(), Some(s));
                                groups[g].1.set(groups[g].vruntime() + cpu / shares[g]);
                            }
                        }
                        prop_assert!(q.min_vruntime() >= last_min);
                        last_min = q.min_vruntime();
                    }
                }
            }
            let rest = q.take_all().len();
            prop_assert_eq!(rest, model.iter().map(VecDeque::len).sum::<usize>());
        }

        /// A group that waited cannot come back further behind than the
        /// wake credit.
        #[test]
        fn waking_group_gets_bounded_credit(busy in 1u64..50, credit in 0u64..10) {
            let a = G(0, Rc::new(Cell::new(0)));
            let b = G(1, Rc::new(Cell::new(0)));
            let mut q: RunQueue<G, u8> = RunQueue::new(credit);
            for _ in 0..busy {
                q.push(a.clone(), 0);
                q.pick();
                a.1.set(a.vruntime() + 10);
                q.push(a.clone(), 0);
                q.pick();
            }
            q.push(b.clone(), 1);
            prop_assert!(b.vruntime() + credit >= q.min_vruntime());
        }
    }
}
