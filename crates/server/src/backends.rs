//! The server's connections handed to the SQL layer
//! (`eddy_sql::backends`): `pg_stat_activity` lists the console's registry
//! of sessions (`crate::console::activity`), `pg_cancel_backend` goes
//! through [`Backend::cancel_statement`] as a CancelRequest does, and
//! `pg_terminate_backend` wakes the connection task through its watch
//! (`crate::idle::IdleWatch::terminate`), which closes it with
//! `FATAL 57P01`.
//!
//! Holds the backend weakly: the database (which holds this) is the
//! backend's, and a cycle would keep both alive forever.

use std::sync::{Arc, Weak};

use eddy_sql::backends::{BackendInfo, Backends};

use crate::pg::Backend;

pub struct ServerBackends {
    backend: Weak<Backend>,
    /// Where a cancel's asynchronous half runs: the SQL function that asks
    /// for it may run on a scheduler thread outside tokio.
    runtime: tokio::runtime::Handle,
}

impl ServerBackends {
    /// Called on the server's runtime.
    pub fn new(backend: &Arc<Backend>) -> ServerBackends {
        ServerBackends {
            backend: Arc::downgrade(backend),
            runtime: tokio::runtime::Handle::current(),
        }
    }
}

impl Backends for ServerBackends {
    fn list(&self) -> Vec<BackendInfo> {
        self.backend
            .upgrade()
            .map(|b| b.activity.backends())
            .unwrap_or_default()
    }

    fn cancel(&self, pid: i32) -> bool {
        let Some(backend) = self.backend.upgrade() else {
            return false;
        };
        let Some(session) = backend.activity.by_pid(pid) else {
            return false;
        };
        let (pid, secret) = session.cancel_key();
        let secret = secret.clone();
        self.runtime.spawn(async move {
            backend.cancel_statement(pid, &secret).await;
        });
        true
    }

    fn terminate(&self, pid: i32) -> bool {
        let Some(backend) = self.backend.upgrade() else {
            return false;
        };
        let Some(session) = backend.activity.by_pid(pid) else {
            return false;
        };
        match backend.idle.get(&session.peer) {
            Some(watch) => {
                watch.terminate();
                true
            }
            None => false,
        }
    }
}
