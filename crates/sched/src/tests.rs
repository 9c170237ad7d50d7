//! Scheduler behaviour with real threads: results, wake-ups, shares,
//! blocking, aborts and panics.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::{block_in_place, current_group, yield_now, JoinError, Scheduler, SchedulerConfig};

fn scheduler(slots: usize) -> Arc<Scheduler> {
    Scheduler::start(SchedulerConfig::new(slots))
}

fn wait<T>(handle: crate::JoinHandle<T>) -> Result<T, JoinError> {
    futures::executor::block_on(handle)
}

/// Burns CPU for `d` of this thread's CPU time.
fn burn(d: Duration) {
    let start = crate::clock::thread_cpu_ns();
    let want = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let mut x = 0u64;
    while crate::clock::thread_cpu_ns() - start < want {
        for _ in 0..1000 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
    }
    std::hint::black_box(x);
}

#[test]
fn a_context_returns_its_result_and_runs_in_its_group() {
    let s = scheduler(2);
    let g = s.group("analytics", 3);
    let h = g.spawn(async { current_group().map(|g| (g.class().to_string(), g.share())) });
    assert_eq!(wait(h), Ok(Some(("analytics".to_string(), 3))));
}

#[test]
fn a_context_that_yields_or_waits_is_resumed() {
    let s = scheduler(1);
    let g = s.group("serving", 1);
    let (tx, rx) = futures::channel::oneshot::channel::<u32>();
    let h = g.spawn(async move {
        for _ in 0..10 {
            yield_now().await;
        }
        rx.await.unwrap_or(0) + 1
    });
    std::thread::sleep(Duration::from_millis(20));
    tx.send(41).ok();
    assert_eq!(wait(h), Ok(42));
}

/// CPU each group got while all of them burned CPU on `slots` slots.
fn cpu_split(slots: usize, shares: &[u32], contexts_per_group: usize) -> Vec<f64> {
    let s = scheduler(slots);
    let stop = Arc::new(AtomicBool::new(false));
    let groups: Vec<_> = shares.iter().map(|sh| s.group("analytics", *sh)).collect();
    let mut handles = Vec::new();
    for g in &groups {
        for _ in 0..contexts_per_group {
            let stop = Arc::clone(&stop);
            handles.push(g.spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    burn(Duration::from_micros(500));
                    yield_now().await;
                }
            }));
        }
    }
    std::thread::sleep(Duration::from_millis(800));
    let cpu: Vec<f64> = groups.iter().map(|g| g.cpu_time().as_secs_f64()).collect();
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        wait(h).ok();
    }
    cpu
}

#[test]
fn equal_shares_get_equal_cpu() {
    let cpu = cpu_split(1, &[1, 1, 1, 1], 1);
    let mean = cpu.iter().sum::<f64>() / 4.0;
    for c in &cpu {
        assert!((c - mean).abs() / mean < 0.10, "CPU split {cpu:?}");
    }
}

#[test]
fn share_two_gets_twice_the_cpu_of_share_one() {
    // two contexts in the share-1 group: shares are per group, not per context
    let cpu = cpu_split(1, &[1, 2], 2);
    let ratio = cpu[1] / cpu[0];
    assert!(
        (1.8..2.2).contains(&ratio),
        "CPU split {cpu:?}, ratio {ratio}"
    );
}

#[test]
fn a_waking_serving_context_runs_within_a_quantum_of_busy_analytics() {
    let s = scheduler(1);
    let stop = Arc::new(AtomicBool::new(false));
    let mut busy = Vec::new();
    for _ in 0..8 {
        let g = s.group("analytics", 1);
        let stop = Arc::clone(&stop);
        busy.push(g.spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                burn(Duration::from_millis(1));
                yield_now().await;
            }
        }));
    }
    let serving = s.group("serving", 8);
    let mut worst = Duration::ZERO;
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(3));
        let sent = Instant::now();
        let h = serving.spawn(async move { sent.elapsed() });
        worst = worst.max(wait(h).unwrap_or(Duration::MAX));
    }
    stop.store(true, Ordering::Relaxed);
    for h in busy {
        wait(h).ok();
    }
    // one quantum is ~1 ms of analytics; allow for a loaded test machine
    assert!(worst < Duration::from_millis(50), "worst wake-up {worst:?}");
}

#[test]
fn block_in_place_lets_another_context_run() {
    let s = scheduler(1);
    let g = s.group("serving", 1);
    let blocked = g.spawn(async {
        block_in_place(|| std::thread::sleep(Duration::from_millis(300)));
        Instant::now()
    });
    std::thread::sleep(Duration::from_millis(20));
    let other = g.spawn(async { Instant::now() });
    let other_at = wait(other).unwrap_or_else(|_| Instant::now());
    let blocked_at = wait(blocked).unwrap_or_else(|_| Instant::now());
    assert!(
        other_at < blocked_at,
        "the second context waited for the blocked one"
    );
}

#[test]
fn a_worker_blocked_without_saying_so_is_replaced() {
    let s = scheduler(1);
    let g = s.group("serving", 1);
    let blocked = g.spawn(async {
        std::thread::sleep(Duration::from_millis(300)); // no block_in_place
        Instant::now()
    });
    std::thread::sleep(Duration::from_millis(20));
    let other = g.spawn(async { Instant::now() });
    let other_at = wait(other).unwrap_or_else(|_| Instant::now());
    let blocked_at = wait(blocked).unwrap_or_else(|_| Instant::now());
    assert!(
        other_at < blocked_at,
        "the monitor did not hand the slot over"
    );
    assert!(s.threads() >= 2);
}

#[test]
fn abort_drops_the_future_without_polling_it_again() {
    let s = scheduler(1);
    let g = s.group("analytics", 1);
    let polls = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicBool::new(false));
    struct OnDrop(Arc<AtomicBool>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let (p, d) = (Arc::clone(&polls), OnDrop(Arc::clone(&dropped)));
    let h = g.spawn(async move {
        let _d = d;
        loop {
            p.fetch_add(1, Ordering::SeqCst);
            futures::future::pending::<()>().await;
        }
    });
    std::thread::sleep(Duration::from_millis(20));
    h.abort();
    assert_eq!(wait(h), Err(JoinError::Aborted));
    assert!(dropped.load(Ordering::SeqCst));
    assert_eq!(polls.load(Ordering::SeqCst), 1);
}

#[test]
fn a_panicking_context_does_not_stop_the_scheduler() {
    let s = scheduler(1);
    let g = s.group("serving", 1);
    let h = g.spawn(async {
        if std::hint::black_box(true) {
            panic!("boom");
        }
    });
    assert_eq!(wait(h), Err(JoinError::Panicked));
    assert_eq!(wait(g.spawn(async { 7 })), Ok(7));
}

#[test]
fn metrics_count_cpu_and_contexts_by_class() {
    let s = scheduler(1);
    let g = s.group("background", 1);
    wait(g.spawn(async { burn(Duration::from_millis(20)) })).ok();
    // the worker charges the poll just after the result is sent
    let deadline = Instant::now() + Duration::from_secs(2);
    let c = loop {
        let c = s
            .classes()
            .into_iter()
            .find(|c| c.name == "background")
            .expect("class listed");
        if c.polls >= 1 || Instant::now() > deadline {
            break c;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(c.cpu >= Duration::from_millis(15), "{c:?}");
    assert_eq!(c.contexts, 0);
    assert_eq!(c.queued, 0);
    assert!(c.polls >= 1);
    // the 20 ms poll is in the (5 ms, 20 ms] or (20 ms, 100 ms] bucket
    assert_eq!(c.poll_buckets.iter().sum::<u64>(), c.polls);
    assert!(c.poll_buckets[3] + c.poll_buckets[4] >= 1, "{c:?}");
}

#[test]
fn tokio_sockets_and_timers_work_inside_contexts() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let mut config = SchedulerConfig::new(1);
    config.runtime = Some(rt.handle().clone());
    let s = Scheduler::start(config);
    let g = s.group("serving", 1);
    let h = g.spawn(async {
        let start = Instant::now();
        tokio::time::sleep(Duration::from_millis(30)).await;
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move { tx.send(5u8).await.ok() });
        (start.elapsed(), rx.recv().await)
    });
    let (slept, got) = wait(h).expect("result");
    assert!(slept >= Duration::from_millis(30));
    assert_eq!(got, Some(5));
}

#[test]
fn nested_blocking_sections_give_the_slot_up_once() {
    let s = scheduler(1);
    let g = s.group("serving", 1);
    let nested = g.spawn(async {
        block_in_place(|| block_in_place(|| std::thread::sleep(Duration::from_millis(100))));
        Instant::now()
    });
    std::thread::sleep(Duration::from_millis(20));
    let other = g.spawn(async { Instant::now() });
    let other_at = wait(other).unwrap_or_else(|_| Instant::now());
    let nested_at = wait(nested).unwrap_or_else(|_| Instant::now());
    assert!(
        other_at < nested_at,
        "the second context waited for the blocked one"
    );
    // the slot came back exactly once: once every context has finished, no
    // slot is held. (Counting contexts that overlap in time is no test of
    // this: on a loaded machine the monitor rightly hands the slot of a
    // descheduled worker to a spare thread.)
    let hs: Vec<_> = (0..4)
        .map(|_| g.spawn(async { burn(Duration::from_millis(2)) }))
        .collect();
    for h in hs {
        assert_eq!(wait(h), Ok(()));
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while s.slots_held() != 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(s.slots_held(), 0, "a slot is still counted as held");
}

#[test]
fn a_context_moved_to_another_group_is_charged_there_until_the_guard_drops() {
    let s = scheduler(1);
    let home = s.group("serving", 1);
    let query = s.group("analytics", 1);
    let q = query.clone();
    let h = home.spawn(async move {
        {
            let _moved = crate::switch_context_group(&q).expect("on a worker");
            assert_eq!(
                current_group().map(|g| g.class().to_string()).as_deref(),
                Some("analytics")
            );
            burn(Duration::from_millis(30));
            yield_now().await; // charged and re-queued in the query's group
            burn(Duration::from_millis(30));
            yield_now().await;
        }
        assert_eq!(
            current_group().map(|g| g.class().to_string()).as_deref(),
            Some("serving")
        );
    });
    wait(h).expect("ran");
    std::thread::sleep(Duration::from_millis(20));
    assert!(
        query.cpu_time() >= Duration::from_millis(50),
        "query {:?}",
        query.cpu_time()
    );
    assert!(
        home.cpu_time() < Duration::from_millis(20),
        "home {:?}",
        home.cpu_time()
    );
    assert!(
        crate::switch_context_group(&query).is_none(),
        "off a worker"
    );
}
