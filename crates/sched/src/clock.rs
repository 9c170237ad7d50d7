//! CPU time of threads: what a scheduling group is charged for a poll.
//!
//! A poll is charged the CPU time its thread spent in it, not its wall time,
//! so a context that waits for a disk read or a lock inside a poll is not
//! charged for the wait (and the monitor can tell such a worker from a busy
//! one by comparing the two).

use std::time::Instant;

/// Nanoseconds of CPU time the calling thread has used.
#[cfg(target_os = "linux")]
pub(crate) fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn thread_cpu_ns() -> u64 {
    wall_ns()
}

/// The CPU clock of the calling thread, readable from another thread while
/// this one lives.
#[cfg(target_os = "linux")]
pub(crate) fn current_thread_clock() -> Option<libc::clockid_t> {
    let mut id: libc::clockid_t = 0;
    // SAFETY: pthread_self() is the calling thread, and `id` is a valid
    // out-pointer for the duration of the call.
    let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
    (rc == 0).then_some(id)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn current_thread_clock() -> Option<i32> {
    None
}

/// Reads a clock; `None` when the kernel refuses (e.g. the thread is gone).
#[cfg(target_os = "linux")]
pub(crate) fn clock_ns(id: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer for the duration of the call; an
    // invalid clock id makes the call fail with EINVAL, nothing worse.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    if rc != 0 {
        return None;
    }
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u64::try_from(ts.tv_nsec).ok()?;
    Some(secs.saturating_mul(1_000_000_000).saturating_add(nanos))
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn clock_ns(_id: i32) -> Option<u64> {
    None
}

/// Lowers the calling thread's CPU priority (Linux: a thread's niceness is
/// its own). Failure only costs the priority, so it is logged, not fatal.
#[cfg(target_os = "linux")]
pub(crate) fn set_thread_nice(nice: i32) {
    // SAFETY: gettid has no preconditions; setpriority on our own thread id
    // with PRIO_PROCESS changes only this thread's niceness.
    let rc = unsafe {
        let tid = libc::syscall(libc::SYS_gettid);
        libc::setpriority(libc::PRIO_PROCESS, u32::try_from(tid).unwrap_or(0), nice)
    };
    if rc != 0 {
        tracing::warn!(nice, error = %std::io::Error::last_os_error(), "cannot lower a scheduler worker's priority");
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn set_thread_nice(_nice: i32) {}

/// The clock id type of [`current_thread_clock`].
#[cfg(target_os = "linux")]
pub(crate) type ClockId = libc::clockid_t;
#[cfg(not(target_os = "linux"))]
pub(crate) type ClockId = i32;

/// Monotonic nanoseconds since the first call in this process.
pub(crate) fn wall_ns() -> u64 {
    use std::sync::OnceLock;
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = EPOCH.get_or_init(Instant::now);
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_cpu_time_advances_with_work_not_with_sleep() {
        let t0 = thread_cpu_ns();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let slept = thread_cpu_ns() - t0;
        let t1 = thread_cpu_ns();
        let mut x = 0u64;
        let start = Instant::now();
        while start.elapsed().as_millis() < 30 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        std::hint::black_box(x);
        let worked = thread_cpu_ns() - t1;
        assert!(slept < 10_000_000, "sleeping cost {slept} ns of CPU");
        assert!(
            worked > 10_000_000,
            "30 ms of work cost only {worked} ns of CPU"
        );
    }

    #[test]
    fn another_thread_clock_is_readable() {
        let id = current_thread_clock().expect("clock id");
        assert!(clock_ns(id).is_some());
    }
}
