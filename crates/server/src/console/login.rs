//! Who is asking the console. With password authentication (`--auth
//! scram`), every route but `/health` needs the name and password of an
//! Eddy role that may log in, sent as HTTP Basic credentials and checked
//! against the role's SCRAM verifier (the same one its PostgreSQL logins
//! use; the password itself is never stored). Failed checks count in the
//! server's per-address limit on failed logins, shared with the
//! PostgreSQL port. With trust authentication (loopback only) the console,
//! like the port, asks nothing.
//!
//! What a role then sees and may do follows `pg_stat_activity` and
//! `pg_cancel_backend` (`eddy_sql::backends`): a statement's text and
//! client address only where the role may see that session's activity,
//! the cancel button only where it may signal the session.
//!
//! Basic credentials travel in clear text over plain HTTP: the console
//! listens on loopback by default; elsewhere put a TLS proxy in front.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use base64::Engine as _;
use eddy_sql::roles::Roles;

use super::http::{Request, Response};
use super::Console;
use crate::auth::LoginGate;

/// The role a request is served to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Viewer {
    /// The server trusts every local client (`--auth trust`).
    Trusted,
    /// A role that gave its password.
    Role(String),
}

impl Viewer {
    /// Whether this viewer may see what a session of `owner` does.
    pub fn sees(&self, roles: &Roles, owner: &str) -> bool {
        match self {
            Viewer::Trusted => true,
            Viewer::Role(me) => eddy_sql::backends::sees(roles, me, owner),
        }
    }

    /// Whether this viewer may cancel a statement of `owner`.
    pub fn may_signal(&self, roles: &Roles, owner: &str) -> bool {
        match self {
            Viewer::Trusted => true,
            Viewer::Role(me) => eddy_sql::backends::may_signal(roles, me, owner),
        }
    }

    /// The role's name, for the pages' header.
    pub fn name(&self) -> Option<&str> {
        match self {
            Viewer::Trusted => None,
            Viewer::Role(r) => Some(r),
        }
    }
}

/// The user and password of an `Authorization: Basic ...` header.
pub fn basic_credentials(header: &str) -> Option<(String, String)> {
    let (scheme, encoded) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

fn unauthorized(why: &str) -> Response {
    Response::text(401, "Unauthorized", why).with_header(
        "WWW-Authenticate",
        "Basic realm=\"Eddy console\", charset=\"UTF-8\"".into(),
    )
}

/// The viewer of `request`, or the answer that refuses it (401, or 429
/// while the address has too many failed logins).
pub async fn authenticate(
    console: &Arc<Console>,
    request: &Request,
    peer: IpAddr,
) -> Result<Viewer, Response> {
    if !console.info.password_required() {
        return Ok(Viewer::Trusted);
    }
    let failed = &console.backend.failed_logins;
    if let LoginGate::Closed { retry_after } = failed.gate(peer, Instant::now()) {
        let seconds = retry_after.as_secs().max(1);
        return Err(Response::text(
            429,
            "Too Many Requests",
            &format!("too many failed logins from {peer}; try again in {seconds} s"),
        )
        .with_header("Retry-After", seconds.to_string()));
    }
    let Some((user, password)) = request.header("authorization").and_then(basic_credentials) else {
        return Err(unauthorized(
            "the console needs the name and password of an Eddy role",
        ));
    };
    let roles = Arc::clone(&console.backend.db.roles);
    let name = user.clone();
    // PBKDF2 with the verifier's iterations: milliseconds of CPU
    let verified = tokio::task::spawn_blocking(move || {
        roles
            .login_verifier(&name)
            .is_some_and(|v| v.verifies(&password))
    })
    .await
    .unwrap_or(false);
    if !verified {
        failed.record_failure(peer, Instant::now());
        tracing::warn!(%peer, user = %user, "console login failed");
        return Err(unauthorized(&format!(
            "password authentication failed for user \"{user}\""
        )));
    }
    Ok(Viewer::Role(user))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_read_as_browsers_send_them() {
        // "eddy:s3:cret" (a colon in the password is the password's)
        assert_eq!(
            basic_credentials("Basic ZWRkeTpzMzpjcmV0"),
            Some(("eddy".into(), "s3:cret".into()))
        );
        assert_eq!(
            basic_credentials("basic  ZWRkeTpzMzpjcmV0 "),
            Some(("eddy".into(), "s3:cret".into()))
        );
        for bad in ["Bearer ZWRkeTpzMzpjcmV0", "Basic !!!", "Basic ZWRkeQ==", ""] {
            assert_eq!(basic_credentials(bad), None, "{bad}");
        }
    }
}
