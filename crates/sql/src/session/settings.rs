//! Which `SET name = value` Eddy accepts. A setting is accepted only where
//! Eddy does what it asks: those it implements (timeouts, isolation, read
//! only, TimeZone (`crate::session_zone`), `eddy.*`), those whose only meaningful values are Eddy's own
//! behaviour (`client_encoding = UTF8`, `DateStyle = ISO`,
//! `standard_conforming_strings = on`, `extra_float_digits` 1 to 3), those
//! that change nothing Eddy has (`application_name`, `client_min_messages`,
//! `row_security`, `check_function_bodies`, `synchronous_commit`: Eddy
//! always commits durably, which every value allows), a `search_path` that
//! names `public` or pg_dump's empty one (`crate::search_path`), and custom
//! `prefix.name` placeholders, which PostgreSQL also accepts freely.
//! Anything else (`work_mem`, `enable_seqscan`, `DateStyle = German`) is
//! refused with 0A000 instead of being stored and ignored.

use crate::error::{Result, SqlError};

/// Settings whose value Eddy checks elsewhere (`control.rs`, the GPU
/// setting) or that it honours as given.
const HONOURED: &[&str] = &[
    "default_transaction_isolation",
    "default_transaction_read_only",
    "idle_in_transaction_session_timeout",
    "lock_timeout",
    "statement_timeout",
    "transaction_isolation",
    "transaction_read_only",
];

/// Settings that change nothing in Eddy, whatever their value.
const NO_EFFECT: &[&str] = &[
    "application_name",
    "client_min_messages",
    "row_security",
    "check_function_bodies",
    "synchronous_commit",
    // whether a scan may start where another is (PostgreSQL's default on);
    // Eddy's scans never join another's, which both values allow
    "synchronize_seqscans",
];

/// The value to store for `SET name = value`, or why it is refused.
pub(super) fn validate_setting(name: &str, value: &str) -> Result<String> {
    let unquoted = value.trim().trim_matches('\'').trim_matches('"');
    let lower = unquoted.to_ascii_lowercase();
    let refuse = |why: &str| {
        Err(SqlError::FeatureNotSupported(format!(
            "{name} = {value} is not supported: {why}"
        )))
    };
    match name {
        _ if HONOURED.contains(&name) || NO_EFFECT.contains(&name) => Ok(value.to_string()),
        // checked by the GPU options (`eddy.gpu`, `eddy.gpu_min_rows`, ...)
        _ if name.starts_with("eddy.gpu") => Ok(value.to_string()),
        // applied by the session (`crate::memory`), which checks the size
        super::MEMORY_SETTING => match crate::memory::parse_memory_size(unquoted) {
            Some(b) if b > 0 => Ok(unquoted.to_string()),
            _ => Err(SqlError::InvalidParameter(format!(
                "invalid value for parameter \"{name}\": \"{value}\" (a size such as 256MB)"
            ))),
        },
        "search_path" => check_search_path(name, value),
        // every zone Eddy reads and writes timestamps in
        // (`crate::session_zone`), stored as SHOW prints it
        "timezone" => {
            crate::session_zone::SessionZone::parse(unquoted).map(|z| z.name().to_string())
        }
        // applied by the session, which checks the group exists
        crate::scheduling::SCHEDULING_SETTING => Ok(lower),
        "client_encoding" | "names" => match lower.replace(['-', '_'], "").as_str() {
            "utf8" | "unicode" => Ok("UTF8".into()),
            // PostgreSQL converts nothing for a SQL_ASCII client (bytes go
            // as stored), which is what Eddy does: libpq under the C locale
            // (psql's `client_encoding=auto`) asks for it at startup
            "sqlascii" => Ok("SQL_ASCII".into()),
            _ => refuse("Eddy speaks UTF8 only"),
        },
        "datestyle" => {
            let parts: Vec<String> = lower.split(',').map(|p| p.trim().to_string()).collect();
            if parts.iter().all(|p| {
                matches!(
                    p.as_str(),
                    "iso" | "mdy" | "dmy" | "ymd" | "us" | "european"
                )
            }) && parts.iter().any(|p| p == "iso")
            {
                Ok(unquoted.to_string())
            } else {
                refuse("dates are written in ISO style only")
            }
        }
        // Eddy has no xml type, so nothing parses XML; the value is still
        // checked as PostgreSQL checks it
        "xmloption" => match lower.as_str() {
            "content" | "document" => Ok(lower),
            _ => Err(SqlError::InvalidParameter(format!(
                "invalid value for parameter \"{name}\": \"{unquoted}\""
            ))),
        },
        // Eddy has one tablespace, the default ('' or pg_default)
        "default_tablespace" => match lower.as_str() {
            "" | "pg_default" => Ok(unquoted.to_string()),
            _ => refuse("Eddy has no tablespaces besides the default"),
        },
        // Eddy's tables are of one access method, which pg_class and pg_am
        // report as heap (PostgreSQL's default and pg_dump's setting)
        "default_table_access_method" => match lower.as_str() {
            "heap" => Ok(lower),
            _ => refuse("Eddy has one table access method, heap"),
        },
        "intervalstyle" => match lower.as_str() {
            "postgres" => Ok(lower),
            _ => refuse("intervals are written in postgres style only"),
        },
        // Eddy compiles no query to machine code: with JIT off or on
        // (PostgreSQL's "where available"), no query is JIT-compiled, as in
        // a PostgreSQL built without LLVM, which accepts both
        "jit" => match lower.as_str() {
            "on" | "true" | "1" | "yes" => Ok("on".into()),
            "off" | "false" | "0" | "no" => Ok("off".into()),
            _ => Err(SqlError::InvalidParameter(format!(
                "parameter \"{name}\" requires a Boolean value"
            ))),
        },
        "standard_conforming_strings" => match lower.as_str() {
            "on" | "true" | "1" | "yes" => Ok("on".into()),
            _ => refuse("backslashes in string literals are always literal"),
        },
        "extra_float_digits" => match lower.parse::<i32>() {
            // 1 to 3 all mean the shortest exact text, which Eddy writes
            Ok(1..=3) => Ok(lower),
            Ok(_) => refuse("floats are always written in their shortest exact form"),
            Err(_) => Err(SqlError::InvalidParameter(format!(
                "invalid value for parameter \"{name}\": \"{value}\""
            ))),
        },
        _ if name.contains('.') && !name.starts_with("eddy.") => Ok(value.to_string()),
        _ => Err(SqlError::FeatureNotSupported(format!(
            "parameter \"{name}\" is not supported by Eddy"
        ))),
    }
}

/// `set_config(name, value, is_local)`'s check (`crate::set_config`): SET's,
/// for the settings that check fully here. Those the session checks or acts
/// on when they are set (timeouts, isolation, the time zone, memory,
/// scheduling, GPU) are refused (0A000): the function's change is applied
/// after its statement, too late to refuse a bad value.
pub(crate) fn validate_set_config(name: &str, value: &str) -> Result<String> {
    if HONOURED.contains(&name)
        || name == "timezone"
        || name == super::MEMORY_SETTING
        || name == crate::scheduling::SCHEDULING_SETTING
        || name.starts_with("eddy.")
    {
        return Err(SqlError::FeatureNotSupported(format!(
            "set_config('{name}', ...) is not supported: use SET {name}"
        )));
    }
    validate_setting(name, value)
}

/// A search path names `public`, `"$user"` and user schemas
/// (`crate::schemas`; one that does not exist is skipped, as PostgreSQL
/// skips it), and, after one of those, `pg_catalog`: before them,
/// PostgreSQL would create new relations in `pg_catalog` (and refuse
/// them), and Eddy always searches `pg_catalog` first. `pg_temp` and
/// `information_schema` are refused: Eddy cannot search them at the place
/// the path gives them, and storing them while searching elsewhere would
/// be accepting and ignoring them. The empty path (pg_dump's) resolves
/// unqualified names nowhere (`crate::search_path`).
fn check_search_path(name: &str, value: &str) -> Result<String> {
    let mut has_schema = false;
    for schema in crate::schemas::path_elements(value, "$user") {
        match schema.as_str() {
            "pg_catalog" if has_schema => {}
            "pg_catalog" | "information_schema" | "pg_temp" => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "{name} = {value} is not supported: Eddy searches {schema} only at its usual place"
                )))
            }
            s if crate::schemas::is_system_schema(s) && s != crate::schemas::PUBLIC => {
                return Err(SqlError::FeatureNotSupported(format!(
                    "{name} = {value} is not supported: Eddy searches {schema} only at its usual place"
                )))
            }
            _ => has_schema = true,
        }
    }
    Ok(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_what_eddy_honours() {
        assert!(validate_setting("statement_timeout", "5s").is_ok());
        assert!(validate_setting("application_name", "'app'").is_ok());
        assert!(validate_setting("myapp.user_id", "42").is_ok());
        assert_eq!(
            validate_setting("client_encoding", "'utf-8'").unwrap(),
            "UTF8"
        );
        assert!(validate_setting("datestyle", "'ISO, MDY'").is_ok());
        for path in [
            "public",
            "\"$user\", public",
            "PUBLIC, pg_catalog",
            "\"$user\", \"public\", pg_catalog",
            // pg_dump's empty path, and one naming only a schema Eddy never has
            "",
            "''",
            "\"$user\"",
            // user schemas (one that does not exist is skipped)
            "myschema",
            "myschema, public",
            "\"Public\"",
            "app, pg_catalog",
        ] {
            assert!(validate_setting("search_path", path).is_ok(), "{path}");
        }
        for (name, value) in [
            ("work_mem", "'1GB'"),
            ("enable_seqscan", "off"),
            ("datestyle", "'German'"),
            ("client_encoding", "'LATIN1'"),
            ("extra_float_digits", "0"),
            ("eddy.nonsense", "1"),
            ("search_path", "pg_temp, public"),
            ("search_path", "information_schema, public"),
            ("search_path", "pg_catalog"),
            ("search_path", "pg_catalog, public"),
        ] {
            let e = validate_setting(name, value).unwrap_err();
            assert_eq!(e.sqlstate(), "0A000", "{name}");
        }
    }
}
