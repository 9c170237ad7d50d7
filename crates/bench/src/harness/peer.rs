//! DuckDB and DataFusion peers, run as separate Python processes by `scripts/bench/peer.py`.
//!
//! The script is compiled into this crate and written next to the data on
//! every run, so `eddy bench` needs only the venv (`scripts/bench/setup.sh`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{EngineRun, Workload};
use crate::error::{BenchError, Result};

/// The peer runner script.
pub const PEER_PY: &str = include_str!("../../../../scripts/bench/peer.py");

/// Engines `peer.py` knows.
pub const PEER_ENGINES: [&str; 3] = ["duckdb", "datafusion", "datafusion-mem"];

/// The Python to run peers with: `explicit`, else `.venv-bench/bin/python` in
/// the current directory or an ancestor, else the one beside this crate's
/// workspace, else `python3`.
pub fn find_python(explicit: Option<PathBuf>) -> PathBuf {
    if let Some(p) = explicit {
        return p;
    }
    let rel = Path::new(".venv-bench/bin/python");
    if let Ok(cwd) = std::env::current_dir() {
        for dir in cwd.ancestors() {
            if dir.join(rel).exists() {
                return dir.join(rel);
            }
        }
    }
    let ws = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    if ws.exists() {
        return ws;
    }
    PathBuf::from("python3")
}

/// Writes the queries of `w` to `dir/<name>.sql`, returning their paths in order.
pub fn write_queries(w: &Workload, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| BenchError::io(dir, e))?;
    w.queries
        .iter()
        .map(|(name, sql)| {
            let p = dir.join(format!("{name}.sql"));
            std::fs::write(&p, sql).map_err(|e| BenchError::io(&p, e))?;
            Ok(p)
        })
        .collect()
}

/// Writes `peer.py` into `dir` and returns its path.
pub fn write_script(dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| BenchError::io(dir, e))?;
    let p = dir.join("peer.py");
    std::fs::write(&p, PEER_PY).map_err(|e| BenchError::io(&p, e))?;
    Ok(p)
}

/// Runs one peer engine over `w` in its own process.
pub fn run_peer(
    python: &Path,
    engine: &str,
    w: &Workload,
    runs: usize,
    threads: Option<usize>,
    scratch: &Path,
) -> Result<EngineRun> {
    let script = write_script(scratch)?;
    let qdir = scratch.join(format!("queries-{}", w.benchmark));
    let queries = write_queries(w, &qdir)?;
    let out = scratch.join(format!("peer-{engine}.json"));
    let _ = std::fs::remove_file(&out);
    let mut cmd = Command::new(python);
    cmd.arg(&script)
        .arg("run")
        .args(["--engine", engine])
        .arg("--data")
        .arg(&w.dir)
        .args(["--tables", &w.tables.join(",")])
        .args(["--runs", &runs.to_string()])
        .arg("--out")
        .arg(&out);
    if let Some(t) = threads {
        cmd.args(["--threads", &t.to_string()]);
    }
    cmd.args(&queries)
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    let status = cmd.status().map_err(|e| BenchError::Process {
        command: format!("{} peer.py", python.display()),
        detail: format!("{e} (run scripts/bench/setup.sh to create .venv-bench)"),
    })?;
    if !status.success() {
        return Err(BenchError::Process {
            command: format!("{} peer.py run --engine {engine}", python.display()),
            detail: status.to_string(),
        });
    }
    let text = std::fs::read_to_string(&out).map_err(|e| BenchError::io(&out, e))?;
    let run: EngineRun = serde_json::from_str(&text)?;
    Ok(run)
}

/// Renders the report's PNG chart with matplotlib through `peer.py chart`.
pub fn chart(python: &Path, report_json: &Path, png: &Path, scratch: &Path) -> Result<()> {
    let script = write_script(scratch)?;
    let out = Command::new(python)
        .arg(&script)
        .arg("chart")
        .arg("--input")
        .arg(report_json)
        .arg("--out")
        .arg(png)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| BenchError::Process {
            command: "peer.py chart".into(),
            detail: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(BenchError::Process {
            command: "peer.py chart".into(),
            detail: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(())
}
