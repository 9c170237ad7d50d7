//! Open-file limit versus `max_connections`, checked at start-up.
//!
//! Every connection holds two descriptors (its socket and the idle
//! watcher's duplicate, `idle::Fd`), and storage keeps WAL segments and
//! data files open. A server whose limit cannot hold `max_connections`
//! would fail accepts under load instead of answering 53300, so at
//! start-up the soft limit is raised (up to the hard limit) to what the
//! configured connections need, and the server refuses to start when the
//! hard limit is too low, naming both ways out.

/// Descriptors per connection: the socket and its duplicate.
const PER_CONNECTION: u64 = 2;
/// Descriptors kept for everything else: listeners, the console, WAL
/// segments, data files being written or compacted, logs.
const RESERVED: u64 = 512;

/// The open-file limit the server needs for `max_connections`.
pub fn needed(max_connections: usize) -> u64 {
    u64::try_from(max_connections)
        .unwrap_or(u64::MAX)
        .saturating_mul(PER_CONNECTION)
        .saturating_add(RESERVED)
}

/// Makes sure the process may open [`needed`] files: returns the soft
/// limit in force afterwards, or why it cannot be raised far enough.
pub fn ensure(max_connections: usize) -> Result<u64, String> {
    let need = needed(max_connections);
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit for the call's duration.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(format!(
            "cannot read the open-file limit: {}",
            std::io::Error::last_os_error()
        ));
    }
    if lim.rlim_cur >= need {
        return Ok(lim.rlim_cur);
    }
    if lim.rlim_max < need {
        return Err(format!(
            "max_connections = {max_connections} needs about {need} open files, but this \
             process may open at most {} (hard limit); raise the limit (ulimit -n, \
             LimitNOFILE=) or lower max_connections",
            lim.rlim_max
        ));
    }
    let raised = libc::rlimit {
        rlim_cur: need,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: `raised` is a valid rlimit, read only by the call.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Err(format!(
            "cannot raise the open-file limit from {} to {need}: {}",
            lim.rlim_cur,
            std::io::Error::last_os_error()
        ));
    }
    tracing::info!(
        from = lim.rlim_cur,
        to = need,
        max_connections,
        "raised the open-file limit for max_connections"
    );
    Ok(need)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_two_per_connection_and_a_reserve() {
        assert_eq!(needed(100), 712);
        assert_eq!(needed(usize::MAX), u64::MAX);
    }

    #[test]
    fn a_small_need_is_met_by_the_current_limit() {
        // 0 connections need only the reserve, which any test runner has
        assert!(ensure(0).is_ok());
    }
}
