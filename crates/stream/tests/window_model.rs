//! Window semantics with out-of-order events checked against a brute-force
//! model (proptest): tumbling and sliding event-time windows with allowed
//! lateness and the late side output; and a session-window case.

use std::collections::BTreeMap;

use eddy_stream::operator::keyed::ReduceFolder;
use eddy_stream::operator::window::{Window, WindowEvent, WindowKind, WindowOp, WindowSpec};
use eddy_stream::operator::{Emitter, Operator};
use eddy_stream::prelude::*;
use eddy_stream::types::AnyBatch;
use proptest::prelude::*;

type Rec = (u8, i64, u64); // key, event time, value
type Out = WindowEvent<u8, Rec, Rec>;

#[derive(Default)]
struct Sink {
    events: Vec<(Out, i64)>, // event and the watermark current when it was emitted
    wm: i64,
}

impl Emitter for Sink {
    fn emit(&mut self, batch: AnyBatch) -> Result<()> {
        let v = eddy_stream::types::downcast::<Out>(batch)?;
        let wm = self.wm;
        self.events.extend(v.into_iter().map(|e| (e, wm)));
        Ok(())
    }
    fn watermark(&mut self, _wm: i64) -> Result<()> {
        Ok(())
    }
}

#[derive(Debug, Clone)]
enum Step {
    Rec(Rec),
    Wm(i64),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![
            4 => (0u8..3, 0i64..200, 1u64..5).prop_map(Step::Rec),
            1 => (0i64..220).prop_map(Step::Wm),
        ],
        1..80,
    )
}

fn run(kind: WindowKind, lateness: i64, steps: &[Step]) -> Result<Sink> {
    let mut spec: WindowSpec<Rec> =
        WindowSpec::tumbling(std::time::Duration::from_millis(1)).event_time(|r: &Rec| r.1);
    spec.kind = kind;
    spec.lateness = lateness;
    let mut op = WindowOp::new(
        |r: &Rec| r.0,
        ReduceFolder(|a: &mut Rec, b: Rec| a.2 += b.2),
        spec,
    );
    let mut sink = Sink {
        wm: i64::MIN,
        ..Default::default()
    };
    for s in steps {
        match s {
            Step::Rec(r) => op.process(0, Box::new(vec![*r]), &mut sink)?,
            Step::Wm(w) => {
                // watermarks only advance
                if *w > sink.wm {
                    sink.wm = *w;
                    op.watermark(*w, &mut sink)?;
                }
            }
        }
    }
    sink.wm = i64::MAX;
    op.finish(&mut sink)?;
    Ok(sink)
}

/// Brute force: per record, the watermark when it arrived decides which of
/// its windows still accept it; a record no window accepts is late.
fn model(
    kind: WindowKind,
    lateness: i64,
    steps: &[Step],
) -> (BTreeMap<(u8, Window), u64>, Vec<Rec>) {
    let mut wm = i64::MIN;
    let mut sums = BTreeMap::new();
    let mut late = Vec::new();
    let mut ws = Vec::new();
    for s in steps {
        match s {
            Step::Wm(w) => wm = wm.max(*w),
            Step::Rec(r) => {
                kind.assign(r.1, &mut ws);
                let mut accepted = false;
                for w in &ws {
                    if wm < w.end - 1 + lateness {
                        *sums.entry((r.0, *w)).or_insert(0) += r.2;
                        accepted = true;
                    }
                }
                if !accepted {
                    late.push(*r);
                }
            }
        }
    }
    (sums, late)
}

fn check(
    kind: WindowKind,
    lateness: i64,
    steps: &[Step],
) -> std::result::Result<(), TestCaseError> {
    let sink = run(kind, lateness, steps).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let (sums, mut late) = model(kind, lateness, steps);
    let mut last: BTreeMap<(u8, Window), u64> = BTreeMap::new();
    let mut fires: BTreeMap<(u8, Window), u32> = BTreeMap::new();
    let mut got_late = Vec::new();
    for (e, wm) in &sink.events {
        match e {
            WindowEvent::Fired(r) => {
                prop_assert!(
                    r.window.end - 1 <= *wm,
                    "window {:?} fired at watermark {}",
                    r.window,
                    wm
                );
                last.insert((r.key, r.window), r.value.2);
                *fires.entry((r.key, r.window)).or_insert(0) += 1;
            }
            WindowEvent::Late(r) => got_late.push(*r),
        }
    }
    prop_assert_eq!(&last, &sums, "final window results differ from the model");
    if lateness == 0 {
        prop_assert!(
            fires.values().all(|n| *n == 1),
            "a window fired twice without lateness"
        );
    }
    got_late.sort();
    late.sort();
    prop_assert_eq!(got_late, late, "late side output differs from the model");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn tumbling_matches_model(steps in steps(), lateness in prop_oneof![Just(0i64), 1i64..40]) {
        check(WindowKind::Tumbling { size: 20 }, lateness, &steps)?;
    }

    #[test]
    fn sliding_matches_model(steps in steps(), lateness in prop_oneof![Just(0i64), 1i64..40]) {
        check(WindowKind::Sliding { size: 30, slide: 10 }, lateness, &steps)?;
    }
}

#[test]
fn session_windows_merge_on_overlap() -> Result<()> {
    let kind = WindowKind::Session { gap: 10 };
    // key 0: 0, 5, 12 form one session [0, 22); 40 is its own; out of order 3 merges in
    let steps = vec![
        Step::Rec((0, 5, 1)),
        Step::Rec((0, 0, 1)),
        Step::Rec((0, 12, 1)),
        Step::Rec((1, 7, 10)),
        Step::Rec((0, 40, 1)),
        Step::Rec((0, 3, 1)),
        Step::Wm(30),
        Step::Rec((0, 2, 1)), // late: its session fired and no lateness
    ];
    let sink = run(kind, 0, &steps)?;
    let mut fired = Vec::new();
    let mut late = Vec::new();
    for (e, _) in sink.events {
        match e {
            WindowEvent::Fired(r) => fired.push((r.key, r.window.start, r.window.end, r.value.2)),
            WindowEvent::Late(r) => late.push(r),
        }
    }
    fired.sort();
    assert_eq!(fired, vec![(0, 0, 22, 4), (0, 40, 50, 1), (1, 7, 17, 10)]);
    assert_eq!(late, vec![(0, 2, 1)]);
    Ok(())
}

#[test]
fn late_record_extending_a_fired_session_fires_the_merged_session() -> Result<()> {
    let kind = WindowKind::Session { gap: 10 };
    // [0, 10) fires at watermark 9; a record at 8 (within the lateness)
    // extends it to [0, 18), which must fire again once the watermark passes 17
    let steps = vec![
        Step::Rec((0, 0, 1)),
        Step::Wm(9),
        Step::Rec((0, 8, 1)),
        Step::Wm(12),
        Step::Wm(17),
    ];
    let sink = run(kind, 100, &steps)?;
    let fired: Vec<(u8, i64, i64, u64, i64)> = sink
        .events
        .into_iter()
        .filter_map(|(e, wm)| match e {
            WindowEvent::Fired(r) => Some((r.key, r.window.start, r.window.end, r.value.2, wm)),
            WindowEvent::Late(_) => None,
        })
        .collect();
    assert_eq!(fired, vec![(0, 0, 10, 1, 9), (0, 0, 18, 2, 17)]);
    Ok(())
}
