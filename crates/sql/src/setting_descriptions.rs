//! The description column of `SHOW ALL`: PostgreSQL 15's `short_desc` for
//! the settings Eddy shares with it (read from `pg_settings`), and Eddy's
//! own words for `eddy.*`. A setting without one (a custom `app.x`) shows
//! NULL.

/// The description `SHOW ALL` gives `name` (a lower-case setting key).
pub fn setting_description(name: &str) -> Option<&'static str> {
    Some(match name {
        "application_name" => "Sets the application name to be reported in statistics and logs.",
        "client_encoding" => "Sets the client's character set encoding.",
        "datestyle" => "Sets the display format for date and time values.",
        "default_table_access_method" => "Sets the default table access method for new tables.",
        "default_tablespace" => {
            "Sets the default tablespace to create tables and indexes in."
        }
        "default_transaction_isolation" => {
            "Sets the transaction isolation level of each new transaction."
        }
        "default_transaction_read_only" => "Sets the default read-only status of new transactions.",
        "extra_float_digits" => "Sets the number of digits displayed for floating-point values.",
        "idle_in_transaction_session_timeout" => {
            "Sets the maximum allowed idle time between queries, when in a transaction."
        }
        "integer_datetimes" => "Shows whether datetimes are integer based.",
        "intervalstyle" => "Sets the display format for interval values.",
        "is_superuser" => "Shows whether the current user is a superuser.",
        "jit" => "Allow JIT compilation (Eddy compiles no query, whatever the value).",
        "lc_collate" => "Shows the collation order locale.",
        "lc_ctype" => "Shows the character classification and case conversion locale.",
        "lock_timeout" => "Sets the maximum allowed duration of any wait for a lock.",
        "max_identifier_length" => "Shows the maximum identifier length.",
        "max_index_keys" => "Shows the maximum number of index keys.",
        "search_path" => "Sets the schema search order for names that are not schema-qualified.",
        "server_encoding" => "Shows the server (database) character set encoding.",
        "server_version" => "Shows the server version.",
        "server_version_num" => "Shows the server version as an integer.",
        "standard_conforming_strings" => "Causes '...' strings to treat backslashes literally.",
        "statement_timeout" => "Sets the maximum allowed duration of any statement.",
        "synchronize_seqscans" => "Enable synchronized sequential scans.",
        "timezone" => "Sets the time zone for displaying and interpreting time stamps.",
        "transaction_isolation" => "Sets the current transaction's isolation level.",
        "transaction_read_only" => "Sets the current transaction's read-only status.",
        "xmloption" => {
            "Sets whether XML data in implicit parsing and serialization operations is to be considered as documents or content fragments."
        }
        "eddy.gpu" => "Whether analytical operators may run on a GPU: auto, on or off.",
        "eddy.gpu_min_rows" => "Fewest input rows for which an operator is offloaded to a GPU.",
        "eddy.gpu_fuse" => {
            "Whether a star join and the aggregation above it run as one GPU kernel."
        }
        "eddy.gpu_kernel_cache_dir" => {
            "Directory of compiled GPU kernels (one for the whole server)."
        }
        "eddy.query_memory_limit" => {
            "Memory one query may hold before it spills to disk or fails with 53200."
        }
        "eddy.scheduling_group" => "Scheduling group in which the session's queries run.",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_setting_is_described() {
        for (name, _) in crate::session::DEFAULT_SETTINGS {
            assert!(setting_description(name).is_some(), "{name}");
        }
        assert_eq!(setting_description("app.custom"), None);
    }
}
