//! Where the SQL layer's work runs: on `eddy-sched`'s execution contexts
//! when the caller is one (the server), on tokio otherwise (tests, tools).
//!
//! * An analytical query's physical plan runs in a scheduling group of its
//!   own (class `analytics`, the session's share): its root stream is
//!   polled by a context of that group, and the connection's context only
//!   receives batches.
//! * DataFusion spawns tasks (repartition, coalesce, buffered sorts) with
//!   `tokio::spawn`; the tracer installed by [`install_datafusion_tracer`]
//!   runs each of them as a context of the group that spawned it instead,
//!   leaving only a waiter on tokio. A spawn from outside any group stays on
//!   tokio unchanged.
//! * Eddy's storage scans are contexts of the query's group that produce one
//!   batch per poll.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;

use datafusion::common::runtime::{set_join_set_tracer, JoinSetTracer};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{execute_stream, ExecutionPlan};
use eddy_sched::{class, JoinError};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};

use crate::error::Result;

/// Sends DataFusion's spawned futures to the spawning context's group.
struct RunInCurrentGroup;

impl JoinSetTracer for RunInCurrentGroup {
    fn trace_future(
        &self,
        fut: BoxFuture<'static, Box<dyn Any + Send>>,
    ) -> BoxFuture<'static, Box<dyn Any + Send>> {
        let Some(group) = eddy_sched::current_group() else {
            return fut;
        };
        // aborted with DataFusion's task: dropping the tokio waiter drops
        // the handle, which stops the context
        let handle = group.spawn(fut).abort_on_drop();
        async move {
            match handle.await {
                Ok(out) => out,
                // the tokio task that waits reports the panic as the
                // spawned task's, exactly as without the scheduler
                Err(JoinError::Panicked) => {
                    std::panic::resume_unwind(Box::new("a DataFusion task panicked"))
                }
                Err(JoinError::Aborted) => {
                    std::panic::resume_unwind(Box::new("the scheduler stopped a DataFusion task"))
                }
            }
        }
        .boxed()
    }

    fn trace_block(
        &self,
        f: Box<dyn FnOnce() -> Box<dyn Any + Send> + Send>,
    ) -> Box<dyn FnOnce() -> Box<dyn Any + Send> + Send> {
        // blocking closures stay on tokio's blocking pool: Eddy's plans
        // have none (file formats DataFusion reads itself use it)
        f
    }
}

static TRACER: RunInCurrentGroup = RunInCurrentGroup;

/// Makes DataFusion's spawned tasks run in the spawning context's group.
/// Once per process; later calls do nothing.
pub fn install_datafusion_tracer() {
    // AlreadySet: installed by an earlier call, which is this same tracer
    let _ = set_join_set_tracer(&TRACER);
}

/// Runs a storage scan: as a context of the current group, or on tokio's
/// blocking pool outside the scheduler.
pub(crate) fn spawn_storage_scan(scan: impl Future<Output = ()> + Send + 'static) {
    match eddy_sched::current_group() {
        Some(group) => {
            // the scan stops by itself when its receiver is dropped
            drop(group.spawn(scan));
        }
        None => {
            tokio::task::spawn_blocking(move || futures::executor::block_on(scan));
        }
    }
}

/// A new group of class `group` with `share` on `scheduler`, or on the
/// scheduler of the calling context; `None` when there is neither.
pub(crate) fn new_group(
    scheduler: Option<&eddy_sched::Scheduler>,
    group: &str,
    share: u32,
) -> Option<eddy_sched::Group> {
    match (scheduler, eddy_sched::current_group()) {
        (Some(s), _) => Some(s.group(group, share)),
        (None, Some(current)) => Some(current.sibling(group, share)),
        (None, None) => None,
    }
}

/// The group a plan runs in: the statement's (the group the calling
/// context moved to for the statement), else a new one.
fn statement_group(
    scheduler: Option<&eddy_sched::Scheduler>,
    group: &str,
    share: u32,
) -> Option<eddy_sched::Group> {
    match eddy_sched::current_group() {
        Some(current) if current.class() != class::SERVING => Some(current),
        _ => new_group(scheduler, group, share),
    }
}

/// Executes a physical plan in the statement's group (see
/// [`statement_group`]); plainly without a scheduler.
pub(crate) fn execute_in_query_group(
    plan: Arc<dyn ExecutionPlan>,
    task_ctx: Arc<TaskContext>,
    scheduler: Option<&eddy_sched::Scheduler>,
    group: &str,
    share: u32,
    admission: Option<&Arc<crate::admission::Admission>>,
) -> Result<SendableRecordBatchStream> {
    let admitted = |stream| match admission {
        Some(gate) => gate.admit(stream),
        None => Ok(stream),
    };
    let Some(group) = statement_group(scheduler, group, share) else {
        return admitted(execute_stream(plan, task_ctx)?);
    };
    // operators that spawn while being set up charge the query's group
    let stream = {
        let _entered = group.enter();
        admitted(execute_stream(plan, task_ctx)?)?
    };
    let schema = stream.schema();
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    let producer = group
        .spawn(async move {
            let mut stream = stream;
            while let Some(batch) = stream.next().await {
                if tx.send(batch).await.is_err() {
                    return; // the client's side went away
                }
            }
        })
        .abort_on_drop();
    // the output owns the producer: dropping it (cancel, disconnect, a
    // portal closed early) stops the query's context
    let out = futures::stream::unfold((rx, producer), |(mut rx, producer)| async move {
        rx.recv().await.map(|batch| (batch, (rx, producer)))
    });
    Ok(Box::pin(RecordBatchStreamAdapter::new(schema, out)))
}

/// The setting naming the group a session's queries run in.
pub const SCHEDULING_SETTING: &str = "eddy.scheduling_group";

/// The group analytical queries run in unless a session or role says
/// otherwise.
pub const DEFAULT_GROUP: &str = class::ANALYTICS;

/// Named scheduling groups for analytical queries and their shares, and
/// which group each role's sessions start in (the `[scheduler]` section of
/// the configuration file).
#[derive(Clone, Debug)]
pub struct SchedulingGroups {
    shares: std::collections::BTreeMap<String, u32>,
    role_groups: std::collections::BTreeMap<String, String>,
}

impl Default for SchedulingGroups {
    fn default() -> Self {
        SchedulingGroups {
            shares: [(DEFAULT_GROUP.to_string(), 1)].into_iter().collect(),
            role_groups: Default::default(),
        }
    }
}

/// Why a scheduling configuration is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SchedulingConfigError {
    #[error("scheduling group \"{0}\": a name is lower-case letters, digits and _")]
    BadName(String),
    #[error("scheduling group \"{0}\" is the server's own (serving, ingest, background)")]
    Reserved(String),
    #[error("scheduling group \"{name}\": share {share} is outside {min}..={max}")]
    BadShare {
        name: String,
        share: u32,
        min: u32,
        max: u32,
    },
    #[error("role \"{role}\" is given scheduling group \"{group}\", which is not defined")]
    UnknownGroup { role: String, group: String },
}

impl SchedulingGroups {
    /// Groups (name, share) in addition to `analytics` (whose share they
    /// may change), and role defaults.
    pub fn new(
        groups: impl IntoIterator<Item = (String, u32)>,
        roles: impl IntoIterator<Item = (String, String)>,
    ) -> std::result::Result<SchedulingGroups, SchedulingConfigError> {
        let mut out = SchedulingGroups::default();
        for (name, share) in groups {
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                return Err(SchedulingConfigError::BadName(name));
            }
            if [class::SERVING, class::INGEST, class::BACKGROUND].contains(&name.as_str()) {
                return Err(SchedulingConfigError::Reserved(name));
            }
            if !(eddy_sched::MIN_SHARE..=eddy_sched::MAX_SHARE).contains(&share) {
                return Err(SchedulingConfigError::BadShare {
                    name,
                    share,
                    min: eddy_sched::MIN_SHARE,
                    max: eddy_sched::MAX_SHARE,
                });
            }
            out.shares.insert(name, share);
        }
        for (role, group) in roles {
            if !out.shares.contains_key(&group) {
                return Err(SchedulingConfigError::UnknownGroup { role, group });
            }
            out.role_groups.insert(role, group);
        }
        Ok(out)
    }

    /// The share of a group, if it is defined.
    pub fn share(&self, group: &str) -> Option<u32> {
        self.shares.get(group).copied()
    }

    /// The group a role's sessions start in.
    pub fn group_of_role(&self, role: &str) -> &str {
        self.role_groups
            .get(role)
            .map(String::as_str)
            .unwrap_or(DEFAULT_GROUP)
    }

    /// Every group and its share, by name.
    pub fn groups(&self) -> impl Iterator<Item = (&str, u32)> {
        self.shares.iter().map(|(n, s)| (n.as_str(), *s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_checked_when_configured() {
        let ok = SchedulingGroups::new(
            [("reporting".to_string(), 1), ("dashboards".to_string(), 4)],
            [("alice".to_string(), "dashboards".to_string())],
        )
        .expect("valid");
        assert_eq!(ok.share("dashboards"), Some(4));
        assert_eq!(ok.share("analytics"), Some(1));
        assert_eq!(ok.group_of_role("alice"), "dashboards");
        assert_eq!(ok.group_of_role("bob"), "analytics");
        assert!(matches!(
            SchedulingGroups::new([("serving".to_string(), 2)], []),
            Err(SchedulingConfigError::Reserved(_))
        ));
        assert!(matches!(
            SchedulingGroups::new([("x".to_string(), 0)], []),
            Err(SchedulingConfigError::BadShare { .. })
        ));
        assert!(matches!(
            SchedulingGroups::new([("Big".to_string(), 1)], []),
            Err(SchedulingConfigError::BadName(_))
        ));
        assert!(matches!(
            SchedulingGroups::new([], [("a".to_string(), "nope".to_string())]),
            Err(SchedulingConfigError::UnknownGroup { .. })
        ));
    }
}
