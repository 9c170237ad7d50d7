//! Real client programs from `target/drivers/` (installed by
//! `scripts/ci/install-drivers.sh`) run against a test server: shared by
//! `drivers.rs` and `security.rs`. Where the install fails the tests fail in
//! CI (`CI` or `EDDY_REQUIRE_DRIVERS` set) and print a notice and pass
//! elsewhere.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::Server;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the install script once; true when it succeeded.
pub fn drivers_installed() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/ci/install-drivers.sh"))
            .stdin(Stdio::null())
            .output();
        match out {
            Ok(o) if o.status.success() => true,
            Ok(o) => {
                eprintln!(
                    "install-drivers.sh failed:\n{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                );
                false
            }
            Err(e) => {
                eprintln!("cannot run install-drivers.sh: {e}");
                false
            }
        }
    })
}

/// Whether a missing driver must fail the test rather than skip it.
pub fn required() -> bool {
    std::env::var_os("CI").is_some() || std::env::var_os("EDDY_REQUIRE_DRIVERS").is_some()
}

/// `Some(path)` when `path` exists under target/drivers; otherwise fails (CI)
/// or returns None after a notice.
pub fn tool(relative: &str) -> Option<PathBuf> {
    let path = repo_root().join("target/drivers").join(relative);
    if drivers_installed() && path.exists() {
        return Some(path);
    }
    assert!(
        !required(),
        "{} is missing and CI requires the driver tests",
        path.display()
    );
    eprintln!(
        "notice: {} missing; driver test skipped (run scripts/ci/install-drivers.sh)",
        path.display()
    );
    None
}

/// Runs `cmd` with the server's port in its environment, bounded in time,
/// and asserts that it succeeded.
pub fn run_against(server: &Server, mut cmd: Command, what: &str) {
    cmd.current_dir(repo_root())
        .env("EDDY_PORT", server.port.to_string())
        .env("EDDY_USER", "eddy")
        .env("EDDY_PASSWORD", "secret")
        .env("EDDY_DB", "eddy")
        .env_remove("EDDY_REFERENCE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap_or_else(|e| panic!("start {what}: {e}"));
    let out = wait_bounded(child, Duration::from_secs(240), what);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains(": ok"),
        "{what} did not report ok:\n{stdout}\n{stderr}"
    );
}

pub fn wait_bounded(mut child: std::process::Child, limit: Duration, what: &str) -> Output {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let out = child.wait_with_output().expect("collect output");
                panic!(
                    "{what} ran past {limit:?}:\n{}\n{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
    child.wait_with_output().expect("collect output")
}
