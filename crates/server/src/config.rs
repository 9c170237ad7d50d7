//! Server configuration: a TOML file (every key optional) overridden by
//! command-line flags and `EDDY_PASSWORD`.
//!
//! ```toml
//! [server]
//! pg_addr = "127.0.0.1:5433"
//! http_addr = "127.0.0.1:8080"
//! auth = "scram"          # or "cert" (client certificates), "trust" (loopback only)
//! max_connections = 100   # more are refused with FATAL 53300
//! tls_cert = "server.crt" # PEM certificate chain; with tls_key, TLS is on
//! tls_key = "server.key"  # PEM private key (PKCS#8, PKCS#1 or SEC1)
//! tls_require_remote = false  # refuse plaintext from non-loopback clients
//! http_plain = false      # with TLS on, keep the console on plain HTTP
//! tls_client_ca = "ca.crt"     # CAs of client certificates (auth = "cert")
//! tls_crl = "ca.crl"            # revoked client certificates (PEM CRLs)
//! clientcert = "verify-full"    # a certificate as well as the password
//! memory_limit = "8GB"          # all running queries together (default: half the RAM)
//! query_memory_limit = "2GB"    # one query (default: a quarter of memory_limit)
//!
//! [[users]]
//! name = "eddy"            # the bootstrap superuser (EDDY_PASSWORD wins)
//! password = "secret"
//!
//! [[users]]
//! name = "loader"
//! password = "another"
//! superuser = false        # the default for every user but "eddy"
//! roles = ["pg_read_server_files"]   # or pg_write_server_files
//!
//! [storage]
//! memtable_bytes = 67108864   # flush threshold per tablet
//! default_shard_count = 2     # shards of the default table group
//! sync = true                 # fsync the WAL before acknowledging
//! background_compaction = true
//!
//! [scheduler]
//! slots = 2                   # contexts running at once (default: the cores)
//! serving_share = 8           # share of all connections together
//! connections_on = "io_threads" # or "contexts" (on the scheduler's slots)
//! worker_nice = 10            # OS niceness of the scheduler's workers
//!
//! [scheduler.groups]          # groups for analytical queries, by share
//! reporting = 1               # (`analytics`, share 1, always exists)
//! dashboards = 4
//!
//! [scheduler.roles]           # the group a role's sessions start in
//! grafana = "dashboards"
//! ```

use std::path::Path;

use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {source}")]
    Parse {
        path: String,
        #[source]
        source: toml::de::Error,
    },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub server: ServerSection,
    #[serde(default)]
    pub users: Vec<User>,
    #[serde(default)]
    pub storage: StorageSection,
    #[serde(default)]
    pub scheduler: SchedulerSection,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerSection {
    /// Execution contexts running at once (default: the machine's cores).
    pub slots: Option<usize>,
    /// Where connections run: "io_threads" (default: on the network
    /// runtime's threads, outside the scheduler, which then runs queries,
    /// scans and their tasks) or "contexts" (as execution contexts of the
    /// `serving` group, on the scheduler's slots).
    pub connections_on: Option<String>,
    /// OS niceness of the scheduler's workers (0 to 19; default 10 with
    /// connections on "io_threads", so that a waking connection preempts
    /// analytical work at once, and 0 with "contexts").
    pub worker_nice: Option<i32>,
    /// Share of the serving group, which all connections' protocol work,
    /// fixed-plan lookups and single-row writes are charged to (default 8;
    /// an analytical query's group has its group's share, 1 by default).
    pub serving_share: Option<u32>,
    /// Named groups for analytical queries and their shares (1 to 1000);
    /// sessions pick one with `SET eddy.scheduling_group`.
    #[serde(default)]
    pub groups: std::collections::BTreeMap<String, u32>,
    /// The group each role's sessions start in.
    #[serde(default)]
    pub roles: std::collections::BTreeMap<String, String>,
    /// Admission control: analytical statements (everything DataFusion
    /// executes; never fixed-plan lookups or single-row writes) running at
    /// once. Default: no limit.
    pub max_running_queries: Option<usize>,
    /// Statements waiting for a place beyond `max_running_queries`; more
    /// are refused with 53000 (default 256).
    pub max_queued_queries: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    /// PostgreSQL protocol address (default 127.0.0.1:5433).
    pub pg_addr: Option<String>,
    /// HTTP address for /metrics (default 127.0.0.1:8080).
    pub http_addr: Option<String>,
    /// "scram" (default) or "trust".
    pub auth: Option<String>,
    /// Client connections served at once (default 100); more are refused.
    pub max_connections: Option<usize>,
    /// PEM certificate chain for TLS (needs `tls_key`).
    pub tls_cert: Option<std::path::PathBuf>,
    /// PEM private key for TLS (needs `tls_cert`).
    pub tls_key: Option<std::path::PathBuf>,
    /// Refuse connections without TLS from non-loopback clients (default
    /// false; needs `tls_cert` and `tls_key`).
    pub tls_require_remote: Option<bool>,
    /// With TLS on, serve the console and `/metrics` on plain HTTP
    /// rather than HTTPS (default false; needs `tls_cert` and `tls_key`).
    pub http_plain: Option<bool>,
    /// PEM file of the CAs client certificates are verified against
    /// (`auth = "cert"` logs in by them).
    pub tls_client_ca: Option<std::path::PathBuf>,
    /// PEM file of certificate revocation lists for client certificates
    /// (needs `tls_client_ca`).
    pub tls_crl: Option<std::path::PathBuf>,
    /// A client certificate every login needs as well: "verify-ca", or
    /// "verify-full" (its common name is the user); needs `tls_client_ca`.
    pub clientcert: Option<String>,
    /// Memory for all running queries together, e.g. "8GB" (default: half
    /// the machine's memory); sorts and aggregations spill beyond it.
    pub memory_limit: Option<String>,
    /// Memory for one query, e.g. "2GB" (default: a quarter of
    /// `memory_limit`); sessions may change theirs with
    /// `SET eddy.query_memory_limit`.
    pub query_memory_limit: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct User {
    pub name: String,
    /// Cleartext (SCRAM secrets are derived at start-up); must not be
    /// empty under SCRAM.
    pub password: String,
    /// May read and write server files through COPY (default false;
    /// always true for "eddy").
    pub superuser: Option<bool>,
    /// Predefined roles granted: `pg_read_server_files`,
    /// `pg_write_server_files`.
    #[serde(default)]
    pub roles: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageSection {
    /// Memtable flush threshold per tablet, in bytes (default 64 MiB).
    pub memtable_bytes: Option<usize>,
    /// Shards of the default table group (default 2).
    pub default_shard_count: Option<u32>,
    /// fsync the WAL before acknowledging a write (default true).
    pub sync: Option<bool>,
    /// Run compaction in the background (default true).
    pub background_compaction: Option<bool>,
}

impl FileConfig {
    pub fn load(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.display().to_string(),
            source: e,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.display().to_string(),
            source: e,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_config() {
        let c: FileConfig = toml::from_str(
            "[server]\nauth = \"trust\"\ntls_cert = \"c.pem\"\ntls_key = \"k.pem\"\ntls_require_remote = true\n[[users]]\nname = \"a\"\npassword = \"b\"\nroles = [\"pg_read_server_files\"]\n[storage]\ndefault_shard_count = 4\n[scheduler]\nslots = 3\n[scheduler.groups]\nreporting = 2\n[scheduler.roles]\na = \"reporting\"\n",
        )
        .unwrap();
        assert_eq!(c.server.auth.as_deref(), Some("trust"));
        assert_eq!(c.users.len(), 1);
        assert_eq!(c.users[0].roles, ["pg_read_server_files"]);
        assert_eq!(c.users[0].superuser, None);
        assert_eq!(c.server.tls_require_remote, Some(true));
        assert_eq!(c.storage.default_shard_count, Some(4));
        assert!(toml::from_str::<FileConfig>("[bogus]\n").is_err());
    }
}
