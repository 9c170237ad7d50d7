//! Fault injection: a keyed counting job over a replayable file source whose
//! tasks panic at random points several times. The final output must be
//! exact — nothing lost, nothing duplicated — in the keyed state, in the
//! transactional collect sink, and in the exactly-once file sink.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use eddy_stream::prelude::*;
use rand::{Rng, SeedableRng};

const LINES: u64 = 12_000;
const KEYS: u64 = 37;

#[test]
fn random_panics_never_lose_or_duplicate() -> Result<()> {
    let seed: u64 = rand::random();
    println!("fault injection seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    // panic points: counter values at which a task panics, each once, spaced apart
    let mut upstream: Vec<u64> = (0..3)
        .map(|i| 1_500 + i * 3_000 + rng.random_range(0..1_000))
        .collect();
    let mut downstream: Vec<u64> = (0..2)
        .map(|i| 3_000 + i * 4_000 + rng.random_range(0..1_000))
        .collect();
    upstream.sort();
    downstream.sort();
    let (up, down) = (Arc::new(upstream), Arc::new(downstream));

    let dir = tempfile::tempdir().map_err(|e| StreamError::io("tmp", e))?;
    let input = dir.path().join("input.txt");
    let mut f = std::fs::File::create(&input).map_err(|e| StreamError::io("create", e))?;
    for i in 0..LINES {
        writeln!(f, "k{} {}", i % KEYS, i).map_err(|e| StreamError::io("write", e))?;
    }
    drop(f);
    let sink_dir = dir.path().join("sink");

    let cfg = JobConfig::default()
        .parallelism(2)
        .slots(2)
        .batch_size(32)
        .checkpoint_interval(Duration::from_millis(15))
        .checkpoint_dir(dir.path().join("checkpoints"))
        .restart_attempts(10);
    let env = StreamEnv::new(cfg);
    let seen_up = Arc::new(AtomicU64::new(0));
    let seen_down = Arc::new(AtomicU64::new(0));
    let (su, sd) = (seen_up.clone(), seen_down.clone());
    let parsed = env.read_text_file(&input).map(move |line: String| {
        let n = su.fetch_add(1, Ordering::SeqCst);
        if up.binary_search(&n).is_ok() {
            panic!("injected upstream failure at record {n}");
        }
        std::thread::sleep(Duration::from_micros(20)); // long enough for checkpoints between failures
        let mut it = line.split(' ');
        let k = it.next().unwrap_or("").to_string();
        let v: u64 = it.next().and_then(|s| s.parse().ok()).unwrap_or(u64::MAX);
        (k, v)
    });
    parsed.write_text(&sink_dir, |r: &(String, u64), s: &mut String| {
        s.push_str(&r.0);
        s.push(',');
        s.push_str(&r.1.to_string());
    });
    let counts = parsed
        .key_by(|r: &(String, u64)| r.0.clone())
        .process(
            move |k: &String,
                  _r: (String, u64),
                  st: &mut KeyedState<String>,
                  out: &mut Vec<(String, u64)>| {
                let n = sd.fetch_add(1, Ordering::SeqCst);
                if down.binary_search(&n).is_ok() {
                    panic!("injected downstream failure at record {n}");
                }
                let c = st.value::<u64>("count")?.get(k).copied().unwrap_or(0) + 1;
                st.value::<u64>("count")?.set(k, c);
                out.push((k.clone(), c));
                Ok(())
            },
        )
        .collect();
    let r = env.execute("fault-injection")?;
    assert_eq!(r.status, JobStatus::Finished);
    assert!(
        r.restarts >= 2,
        "expected several restarts, got {}",
        r.restarts
    );
    assert!(
        seen_up.load(Ordering::SeqCst) > LINES,
        "failures must have caused replay"
    );

    // keyed state + collect sink: per key the running counts are exactly 1..=n
    let mut per_key: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (k, c) in counts.take() {
        per_key.entry(k).or_default().push(c);
    }
    assert_eq!(per_key.len() as u64, KEYS);
    for (k, mut cs) in per_key {
        cs.sort();
        let n = LINES / KEYS + u64::from(k[1..].parse::<u64>().unwrap_or(0) < LINES % KEYS);
        assert_eq!(cs.len() as u64, n, "key {k}: lost or duplicated updates");
        assert!(
            cs.iter().copied().eq(1..=n),
            "key {k}: counts are not 1..=n"
        );
    }

    // exactly-once file sink: every input record exactly once, no pending files left
    let mut lines = read_committed_lines(&sink_dir)?;
    lines.sort_by_key(|l| {
        l.split(',')
            .nth(1)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(u64::MAX)
    });
    assert_eq!(
        lines.len() as u64,
        LINES,
        "file sink lost or duplicated records"
    );
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(
            l,
            &format!("k{},{}", i as u64 % KEYS, i),
            "file sink line {i}"
        );
    }
    let leftovers: Vec<String> = std::fs::read_dir(&sink_dir)
        .map_err(|e| StreamError::io("read_dir", e))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().to_string()))
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(
        leftovers.is_empty(),
        "uncommitted files left: {leftovers:?}"
    );
    Ok(())
}

#[test]
fn restarts_are_bounded() {
    let env = StreamEnv::new(
        JobConfig::default()
            .parallelism(1)
            .slots(1)
            .restart_attempts(2),
    );
    let _ = env
        .generate(Some(1000), None, |i| i)
        .map(|i: u64| if i == 500 { panic!("always fails") } else { i })
        .collect();
    let r = env.execute("always-fails");
    assert!(
        matches!(r, Err(StreamError::RestartsExhausted { attempts: 3, .. })),
        "{r:?}"
    );
}
