//! Every test job gives the same result three ways: straight through, after
//! a checkpoint and restore, and at another parallelism.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::must_agree_three_ways;
use eddy_stream::prelude::*;

const N: u64 = 30_000;
const RATE: f64 = 100_000.0;

/// Event time of record `i`: increasing with bounded disorder (< 100 ms).
fn ts(i: u64) -> i64 {
    (i * 3) as i64 - ((i % 7) * 10) as i64
}

fn words(env: &StreamEnv, out: &CollectHandle<(Word, u64)>) {
    env.generate(Some(N), Some(RATE), |i| {
        format!("w{} w{} x", i % 97, (i * 31) % 13)
    })
    .flat_map(|line: String, o: &mut Vec<(Word, u64)>| {
        for w in line.split_whitespace() {
            o.push((Word::new(w), 1));
        }
    })
    .key_by(|(w, _): &(Word, u64)| w.clone())
    .reduce_at_end(|a: &mut (Word, u64), b| a.1 += b.1)
    .collect_into(out);
}

#[test]
fn wordcount_agrees_and_is_exact() -> Result<()> {
    let got = must_agree_three_ways(words)?;
    let mut expect: BTreeMap<String, u64> = BTreeMap::new();
    for i in 0..N {
        for w in [
            format!("w{}", i % 97),
            format!("w{}", (i * 31) % 13),
            "x".to_string(),
        ] {
            *expect.entry(w).or_default() += 1;
        }
    }
    let got: BTreeMap<String, u64> = got.into_iter().map(|(w, c)| (w.to_string(), c)).collect();
    assert_eq!(got, expect);
    Ok(())
}

fn keyed_state(env: &StreamEnv, out: &CollectHandle<(u64, u64, u64, u64)>) {
    // per key: count (value state), last three values (list state), distinct residues (map state)
    env.generate(Some(N), Some(RATE), |i| (i % 50, i))
        .key_by(|r: &(u64, u64)| r.0)
        .process(
            |k: &u64,
             (_, v): (u64, u64),
             st: &mut KeyedState<u64>,
             o: &mut Vec<(u64, u64, u64, u64)>| {
                // outputs must not depend on arrival order: count, list length, map size
                let c = st.value::<u64>("count")?.get(k).copied().unwrap_or(0) + 1;
                st.value::<u64>("count")?.set(k, c);
                st.list::<u64>("seen")?.add(k, v);
                let len = st.list::<u64>("seen")?.get(k).len() as u64;
                st.map::<u64, u64>("buckets")?.put(k, c % 5, v);
                let buckets = st.map::<u64, u64>("buckets")?.entries(k).len() as u64;
                o.push((*k, c, len, buckets));
                Ok(())
            },
        )
        .collect_into(out);
}

#[test]
fn keyed_value_list_map_state_agrees() -> Result<()> {
    let got = must_agree_three_ways(keyed_state)?;
    assert_eq!(got.len() as u64, N);
    // per key, counts are exactly 1..=n: nothing lost or duplicated
    let mut per_key: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (k, c, len, buckets) in &got {
        assert_eq!(c, len, "list state lost or duplicated an element");
        assert_eq!(*buckets, (*c).min(5), "map state wrong");
        per_key.entry(*k).or_default().push(*c);
    }
    for (k, mut cs) in per_key {
        cs.sort();
        assert_eq!(cs, (1..=N / 50).collect::<Vec<_>>(), "key {k}");
    }
    Ok(())
}

fn event_time_windows(env: &StreamEnv, out: &CollectHandle<(u64, i64, i64, u64)>) {
    let src = env
        .generate(Some(N), Some(RATE), |i| (i % 5, ts(i), 1u64))
        .assign_timestamps(100, |r: &(u64, i64, u64)| r.1);
    let tumbling = src
        .key_by(|r: &(u64, i64, u64)| r.0)
        .window(
            WindowSpec::tumbling(Duration::from_millis(1000)).event_time(|r: &(u64, i64, u64)| r.1),
        )
        .reduce(|a: &mut (u64, i64, u64), b| a.2 += b.2)
        .map(|r| (r.key, r.window.start, r.window.end, r.value.2));
    let sliding = src
        .key_by(|r: &(u64, i64, u64)| r.0 + 100)
        .window(
            WindowSpec::sliding(Duration::from_millis(2000), Duration::from_millis(500))
                .event_time(|r: &(u64, i64, u64)| r.1),
        )
        .reduce(|a: &mut (u64, i64, u64), b| a.2 += b.2)
        .map(|r| (r.key, r.window.start, r.window.end, r.value.2));
    tumbling.union(&[sliding]).collect_into(out);
}

#[test]
fn event_time_tumbling_and_sliding_windows_agree() -> Result<()> {
    let got = must_agree_three_ways(event_time_windows)?;
    let total_tumbling: u64 = got.iter().filter(|r| r.0 < 100).map(|r| r.3).sum();
    assert_eq!(total_tumbling, N);
    let total_sliding: u64 = got.iter().filter(|r| r.0 >= 100).map(|r| r.3).sum();
    assert_eq!(
        total_sliding,
        N * 4,
        "each record is in size/slide = 4 sliding windows"
    );
    Ok(())
}

fn join_and_connect(env: &StreamEnv, out: &CollectHandle<(u64, u64, u64)>) {
    let a = env
        .generate(Some(N / 3), Some(RATE / 3.0), |i| (i % 20, i as i64 * 9))
        .assign_timestamps(50, |r: &(u64, i64)| r.1);
    let b = env
        .generate(Some(N / 3), Some(RATE / 3.0), |i| {
            (i % 30, i as i64 * 9 + 1)
        })
        .assign_timestamps(50, |r: &(u64, i64)| r.1);
    let spec = JoinSpec::event_time(
        WindowKind::Tumbling { size: 500 },
        |r: &(u64, i64)| r.1,
        |r: &(u64, i64)| r.1,
    );
    let joined = a
        .join(
            &b,
            |r| r.0,
            |r| r.0,
            spec,
            |k: &u64, x: &(u64, i64), y: &(u64, i64)| {
                (*k, (x.1 / 500) as u64, (y.1 - x.1).unsigned_abs())
            },
        )
        .unwrap_or_else(|e| panic!("join plan: {e}"));
    let connected = a
        .connect(&b)
        .flat_map(
            |x: (u64, i64), o: &mut Vec<(u64, u64, u64)>| o.push((1000 + x.0, 0, 0)),
            |_y: (u64, i64), _o| {},
        )
        .key_by(|r: &(u64, u64, u64)| r.0)
        .reduce_at_end(|acc: &mut (u64, u64, u64), _| acc.2 += 1);
    joined.union(&[connected]).collect_into(out);
}

#[test]
fn window_join_and_connect_agree() -> Result<()> {
    let got = must_agree_three_ways(join_and_connect)?;
    assert!(got.iter().any(|r| r.0 < 1000), "join produced nothing");
    let connected: u64 = got.iter().filter(|r| r.0 >= 1000).map(|r| r.2 + 1).sum();
    assert_eq!(connected, N / 3);
    Ok(())
}

#[test]
fn file_sources_csv_and_json_lines() -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| StreamError::io("tmp", e))?;
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).map_err(|e| StreamError::io("mkdir", e))?;
    let mut csv = String::new();
    let mut json = String::new();
    for i in 0..1000 {
        csv.push_str(&format!("k{},\"{}\"\n", i % 7, i));
        json.push_str(&format!("{{\"k\":{},\"v\":{}}}\n", i % 7, i));
    }
    std::fs::write(input.join("a.csv"), &csv).map_err(|e| StreamError::io("w", e))?;
    std::fs::write(input.join("_ignored.csv"), "zz,1\n").map_err(|e| StreamError::io("w", e))?;
    let jdir = dir.path().join("json");
    std::fs::create_dir_all(&jdir).map_err(|e| StreamError::io("mkdir", e))?;
    std::fs::write(jdir.join("a.jsonl"), &json).map_err(|e| StreamError::io("w", e))?;

    #[derive(Clone, serde::Serialize, serde::Deserialize)]
    struct Rec {
        k: u64,
        v: u64,
    }
    let env = StreamEnv::new(JobConfig::default().parallelism(2).slots(2));
    let rows = env.read_csv(&input).collect();
    let sums = env
        .read_json_lines::<Rec>(&jdir)
        .key_by(|r: &Rec| r.k)
        .reduce_at_end(|a: &mut Rec, b| a.v += b.v)
        .collect();
    env.execute("files")?;
    let rows = rows.take();
    assert_eq!(rows.len(), 1000, "the _ file is skipped");
    assert!(rows.iter().all(|r| r.len() == 2 && r[0].starts_with('k')));
    let total: u64 = sums.take().iter().map(|r| r.v).sum();
    assert_eq!(total, (0..1000).sum::<u64>());

    // a malformed JSON line fails the job with a parse error, not a panic
    std::fs::write(jdir.join("b.jsonl"), "{not json\n").map_err(|e| StreamError::io("w", e))?;
    let env = StreamEnv::new(
        JobConfig::default()
            .parallelism(1)
            .slots(1)
            .restart_attempts(0),
    );
    let _ = env.read_json_lines::<Rec>(&jdir).collect();
    let err = env.execute("bad-json");
    assert!(matches!(err, Err(StreamError::Task { .. })), "{err:?}");
    Ok(())
}

#[test]
fn unbounded_job_runs_until_cancelled_and_processing_time_windows_fire() -> Result<()> {
    let env = StreamEnv::new(JobConfig::default().parallelism(1).slots(1));
    let out = env
        .generate(None, Some(20_000.0), |i| (i % 3, 1u64))
        .key_by(|r: &(u64, u64)| r.0)
        .window(WindowSpec::tumbling(Duration::from_millis(50)))
        .reduce(|a: &mut (u64, u64), b| a.1 += b.1)
        .collect();
    let h = env.submit("unbounded")?;
    std::thread::sleep(Duration::from_millis(400));
    assert!(matches!(h.status(), JobStatus::Running(0)));
    assert!(h.source_records() > 0);
    h.cancel();
    let r = h.wait()?;
    assert_eq!(r.status, JobStatus::Cancelled);
    // nothing is committed without a completed checkpoint: the collect sink is transactional
    assert!(out.is_empty());
    Ok(())
}

#[test]
fn socket_source_reads_lines() -> Result<()> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| StreamError::io("bind", e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| StreamError::io("addr", e))?
        .to_string();
    let server = std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            use std::io::Write;
            for i in 0..500 {
                let _ = writeln!(s, "line {i}");
            }
        }
    });
    let env = StreamEnv::new(JobConfig::default().parallelism(2).slots(2));
    let out = env
        .socket_text_stream(&addr)
        .filter(|l: &String| l.starts_with("line"))
        .collect();
    env.execute("socket")?;
    let _ = server.join();
    let mut v = out.take();
    v.sort_by_key(|l| l[5..].parse::<u32>().unwrap_or(u32::MAX));
    assert_eq!(v.len(), 500);
    assert_eq!(v[499], "line 499");
    Ok(())
}
