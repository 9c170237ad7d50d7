//! Shared helpers of the integration tests. Helpers that assert start with `must_`.

#![allow(dead_code)]

use std::fmt::Debug;
use std::path::Path;
use std::time::Duration;

use eddy_stream::prelude::*;

/// A test job: builds its graph on `env`, sending output into `out`.
pub type BuildJob<T> = fn(&StreamEnv, &CollectHandle<T>);

fn base(parallelism: usize) -> JobConfig {
    JobConfig::default()
        .parallelism(parallelism)
        .slots(parallelism)
        .batch_size(64)
        .restart_attempts(0)
}

/// Runs `build` straight through at parallelism `p`.
pub fn run_straight<T: Data + Ord + Debug>(build: BuildJob<T>, p: usize) -> Result<Vec<T>> {
    let env = StreamEnv::new(base(p));
    let out = CollectHandle::default();
    build(&env, &out);
    let r = env.execute("straight")?;
    assert_eq!(r.status, JobStatus::Finished);
    let mut v = out.take();
    v.sort();
    Ok(v)
}

/// Runs `build` with checkpoints, halts it after `halt_after` checkpoints
/// (as if the process died), then runs it again restoring from the newest
/// checkpoint in the same directory.
pub fn run_with_restore<T: Data + Ord + Debug>(
    build: BuildJob<T>,
    p: usize,
    dir: &Path,
    halt_after: u64,
) -> Result<Vec<T>> {
    let out = CollectHandle::default();
    let cfg = base(p)
        .checkpoint_interval(Duration::from_millis(20))
        .checkpoint_dir(dir.to_path_buf());
    let env = StreamEnv::new(cfg.clone().halt_after_checkpoints(halt_after));
    build(&env, &out);
    let r1 = env.execute("restore-job")?;
    assert_eq!(
        r1.status,
        JobStatus::Halted,
        "job ended before its checkpoint; make it slower"
    );
    let env2 = StreamEnv::new(cfg.restore_from_latest(true));
    build(&env2, &out);
    let r2 = env2.execute("restore-job")?;
    assert_eq!(r2.status, JobStatus::Finished);
    let mut v = out.take();
    v.sort();
    Ok(v)
}

/// Asserts that a job gives the same non-empty result straight through at
/// parallelism 2, after a checkpoint and restore, and at parallelism 3.
pub fn must_agree_three_ways<T: Data + Ord + Debug>(build: BuildJob<T>) -> Result<Vec<T>> {
    let straight = run_straight(build, 2)?;
    assert!(!straight.is_empty(), "job produced nothing");
    let dir = tempfile::tempdir().map_err(|e| StreamError::io("tempdir", e))?;
    let restored = run_with_restore(build, 2, dir.path(), 2)?;
    must_equal(&straight, &restored, "restore changed the result");
    let other = run_straight(build, 3)?;
    must_equal(&straight, &other, "parallelism changed the result");
    Ok(straight)
}

/// Asserts two sorted result lists are equal, printing only the first difference.
pub fn must_equal<T: PartialEq + Debug>(a: &[T], b: &[T], what: &str) {
    if a == b {
        return;
    }
    let i = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    panic!(
        "{what}: lengths {} vs {}, first difference at {i}: {:?} vs {:?}",
        a.len(),
        b.len(),
        a.get(i),
        b.get(i)
    );
}
