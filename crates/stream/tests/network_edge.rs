//! A network edge between two TaskManager processes on loopback: this test
//! re-executes its own binary as the second TaskManager (selected by the
//! `EDDY_STREAM_TM` environment variable). Both processes build the same
//! job; key-partitioned channels that cross TaskManagers go over TCP.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use eddy_stream::prelude::*;

const N: u64 = 20_000;

fn free_addr() -> Result<String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| StreamError::io("bind", e))?;
    Ok(l.local_addr()
        .map_err(|e| StreamError::io("addr", e))?
        .to_string())
}

/// Runs this process's TaskManager of the two-process job; returns its results.
fn run_task_manager(local: u32, addrs: Vec<String>) -> Result<Vec<(u64, u64)>> {
    let cfg = JobConfig::default()
        .parallelism(2)
        .restart_attempts(0)
        .cluster(ClusterConfig {
            data_addrs: addrs,
            local,
            slots: 1,
        });
    let env = StreamEnv::new(cfg);
    let out = env
        .generate(Some(N), None, |i| ((i / 2) % 10, 1u64))
        .key_by(|r: &(u64, u64)| r.0)
        .reduce_at_end(|a: &mut (u64, u64), b| a.1 += b.1)
        .collect();
    let r = env.execute("two-process")?;
    assert_eq!(r.status, JobStatus::Finished);
    Ok(out.take())
}

#[test]
fn two_task_managers_exchange_records_over_tcp() -> Result<()> {
    if let Ok(local) = std::env::var("EDDY_STREAM_TM") {
        // child: the second TaskManager; prints its results for the parent
        let addrs: Vec<String> = std::env::var("EDDY_STREAM_ADDRS")
            .unwrap_or_default()
            .split(',')
            .map(String::from)
            .collect();
        let rows = run_task_manager(local.parse().unwrap_or(1), addrs)?;
        println!("RESULT {}", serde_json::to_string(&rows)?);
        return Ok(());
    }
    let addrs = vec![free_addr()?, free_addr()?];
    let exe = std::env::current_exe().map_err(|e| StreamError::io("current_exe", e))?;
    let mut child = Command::new(exe)
        .args([
            "two_task_managers_exchange_records_over_tcp",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("EDDY_STREAM_TM", "1")
        .env("EDDY_STREAM_ADDRS", addrs.join(","))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| StreamError::io("spawn child", e))?;
    let local = run_task_manager(0, addrs);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match child.try_wait().map_err(|e| StreamError::io("wait", e))? {
            Some(_) => break,
            None if Instant::now() > deadline => {
                let _ = child.kill();
                panic!("child TaskManager did not finish in 60 s");
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    let output = child
        .wait_with_output()
        .map_err(|e| StreamError::io("child output", e))?;
    assert!(output.status.success(), "child failed");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.find("RESULT ").map(|i| &l[i + "RESULT ".len()..]))
        .unwrap_or_else(|| panic!("child printed no result: {stdout}"));
    let remote: Vec<(u64, u64)> = serde_json::from_str(line)?;
    let local = local?;
    assert!(
        !local.is_empty() && !remote.is_empty(),
        "both TaskManagers own some keys"
    );
    let mut all: BTreeMap<u64, u64> = BTreeMap::new();
    for (k, c) in local.into_iter().chain(remote) {
        assert!(
            all.insert(k, c).is_none(),
            "key {k} counted on both TaskManagers"
        );
    }
    // every key got records from both sources, half of them over TCP
    let expect: BTreeMap<u64, u64> = (0..10).map(|k| (k, N / 10)).collect();
    assert_eq!(all, expect);
    Ok(())
}
