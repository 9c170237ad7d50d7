//! Who may log in and what each user may do: the accounts (from the config
//! file and `EDDY_PASSWORD`), the SCRAM secrets, and the limit on failed
//! logins per client address.
//!
//! Invariants (see `docs/design/security.md`):
//! * the superuser `eddy` always exists and is the only superuser unless a
//!   `[[users]]` entry says `superuser = true`; every other user, and under
//!   `--auth trust` every name that is not configured, has no privilege
//!   beyond the tables (no server files);
//! * under SCRAM no password is empty (refused at start-up);
//! * salts and the server secret come from the operating system's random
//!   source (`ring::rand::SystemRandom`); SCRAM nonces from pgwire's
//!   `rand::random`, a cryptographic generator seeded from the same source;
//! * an unknown user gets a salt derived from the server secret and its
//!   name (stable for the server's life, different between names, looking
//!   like any other salt), and fails exactly as a wrong password does
//!   (FATAL 28P01, same message, no extra key derivation to time);
//! * after [`MAX_FAILED_LOGINS`] failed password checks from one address
//!   within [`FAILED_LOGIN_WINDOW`], that address's further logins are
//!   refused (FATAL 28000) until the oldest failure leaves the window.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use std::sync::Arc;

use eddy_sql::roles::Roles;
use pgwire::api::auth::sasl::scram::ScramSecret;
use pgwire::api::auth::{AuthSource, LoginInfo, Password};
use pgwire::error::PgWireResult;
use ring::rand::SecureRandom;

use crate::config;

/// The bootstrap superuser: it always exists.
pub const SUPERUSER: &str = "eddy";

/// SCRAM-SHA-256 iterations (PostgreSQL's default).
pub const SCRAM_ITERATIONS: usize = eddy_sql::roles::SCRAM_ITERATIONS as usize;

/// Salt length in bytes (PostgreSQL's).
const SALT_LEN: usize = 16;

/// Failed password checks one address may make within the window.
pub const MAX_FAILED_LOGINS: usize = 5;
pub const FAILED_LOGIN_WINDOW: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("SCRAM authentication needs a password for the superuser \"eddy\": set EDDY_PASSWORD or a [[users]] entry in the config file")]
    NoSuperuserPassword,
    #[error("EDDY_PASSWORD is empty: SCRAM authentication needs a non-empty password")]
    EmptyEnvPassword,
    #[error("user \"{0}\" in the config file has an empty password: SCRAM authentication needs a non-empty one")]
    EmptyPassword(String),
    #[error("user \"{0}\" appears twice in the config file")]
    Duplicate(String),
    #[error("user \"eddy\" is the bootstrap superuser: it cannot have superuser = false")]
    SuperuserDemoted,
    #[error("user \"{user}\": unknown role \"{role}\" (the roles are pg_read_server_files and pg_write_server_files)")]
    UnknownRole { user: String, role: String },
    #[error("the operating system's random source failed")]
    Random,
    #[error("user \"{0}\" from the config file could not be written to the roles: {1}")]
    Seed(String, String),
}

/// The users the config file names (and `EDDY_PASSWORD`), checked at
/// start-up and then written into the database's roles
/// ([`Accounts::seed`]): the config file is authoritative for the users it
/// names, at every start; roles made with SQL live only in the catalog.
#[derive(Debug, Default)]
pub struct Accounts {
    users: Vec<SeedUser>,
}

#[derive(Debug)]
struct SeedUser {
    name: String,
    /// `None` under trust when none is configured.
    password: Option<String>,
    superuser: bool,
    roles: Vec<String>,
}

impl Accounts {
    /// The accounts of `users` (the config file) and `env_password`
    /// (`EDDY_PASSWORD`, which sets the superuser's password). With
    /// `need_passwords` (SCRAM), every password must be non-empty and the
    /// superuser must have one.
    pub fn new(
        users: &[config::User],
        env_password: Option<String>,
        need_passwords: bool,
    ) -> Result<Accounts, AccountError> {
        let mut seeds: Vec<SeedUser> = Vec::new();
        for u in users {
            if seeds.iter().any(|s| s.name == u.name) {
                return Err(AccountError::Duplicate(u.name.clone()));
            }
            let superuser = match (u.name == SUPERUSER, u.superuser) {
                (true, Some(false)) => return Err(AccountError::SuperuserDemoted),
                (true, _) => true,
                (false, s) => s.unwrap_or(false),
            };
            for role in &u.roles {
                if !matches!(
                    role.as_str(),
                    eddy_sql::roles::READ_SERVER_FILES | eddy_sql::roles::WRITE_SERVER_FILES
                ) {
                    return Err(AccountError::UnknownRole {
                        user: u.name.clone(),
                        role: role.clone(),
                    });
                }
            }
            seeds.push(SeedUser {
                name: u.name.clone(),
                password: Some(u.password.clone()),
                superuser,
                roles: u.roles.clone(),
            });
        }
        if !seeds.iter().any(|s| s.name == SUPERUSER) {
            seeds.push(SeedUser {
                name: SUPERUSER.to_string(),
                password: None,
                superuser: true,
                roles: Vec::new(),
            });
        }
        if let Some(pw) = env_password {
            if need_passwords && pw.is_empty() {
                return Err(AccountError::EmptyEnvPassword);
            }
            if let Some(su) = seeds.iter_mut().find(|s| s.name == SUPERUSER) {
                su.password = Some(pw);
            }
        }
        if need_passwords {
            if seeds
                .iter()
                .any(|s| s.name == SUPERUSER && s.password.is_none())
            {
                return Err(AccountError::NoSuperuserPassword);
            }
            if let Some(s) = seeds
                .iter()
                .find(|s| s.password.as_deref().is_some_and(str::is_empty))
            {
                return Err(AccountError::EmptyPassword(s.name.clone()));
            }
        }
        for s in &mut seeds {
            // under trust an empty configured password means none
            if s.password.as_deref().is_some_and(str::is_empty) {
                s.password = None;
            }
        }
        Ok(Accounts { users: seeds })
    }

    /// Writes the configured users into `roles` (a SCRAM verifier with a
    /// fresh salt for each password; never the password itself).
    pub fn seed(&self, roles: &Roles) -> Result<(), AccountError> {
        for u in &self.users {
            roles
                .seed(&u.name, u.password.as_deref(), u.superuser, &u.roles)
                .map_err(|e| AccountError::Seed(u.name.clone(), e.to_string()))?;
        }
        Ok(())
    }
}

/// The SCRAM side of login: each role's verifier from the database's roles
/// (`eddy_sql::roles`), and the secret unknown users' salts derive from.
pub struct ScramUsers {
    roles: std::sync::OnceLock<Arc<Roles>>,
    secret: ring::hmac::Key,
}

impl std::fmt::Debug for ScramUsers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramUsers").finish_non_exhaustive()
    }
}

impl ScramUsers {
    pub fn new() -> Result<ScramUsers, AccountError> {
        let rng = ring::rand::SystemRandom::new();
        let mut secret = [0u8; 32];
        rng.fill(&mut secret).map_err(|_| AccountError::Random)?;
        Ok(ScramUsers {
            roles: std::sync::OnceLock::new(),
            secret: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &secret),
        })
    }

    /// The roles logins are checked against (until set, every login fails
    /// as an unknown user's).
    pub fn serve(&self, roles: Arc<Roles>) {
        let _ = self.roles.set(roles);
    }

    /// What an unknown user (or one that may not log in, or has no
    /// password) is challenged with: a salt that is stable for this server
    /// and differs between names, and keys no client can match (so the
    /// proof fails as a wrong password's does).
    fn unknown(&self, user: &str) -> ScramSecret {
        let salt = ring::hmac::sign(&self.secret, format!("salt:{user}").as_bytes());
        let salted = ring::hmac::sign(&self.secret, format!("password:{user}").as_bytes());
        ScramSecret::verifier_from_salted_password(
            salt.as_ref()[..SALT_LEN].to_vec(),
            salted.as_ref().to_vec(),
            SCRAM_ITERATIONS,
        )
    }

    fn lookup(&self, user: &str) -> ScramSecret {
        match self.roles.get().and_then(|r| r.login_verifier(user)) {
            Some(v) => ScramSecret::Verifier {
                salt: v.salt,
                iterations: v.iterations as usize,
                stored_key: v.stored_key,
                server_key: v.server_key,
            },
            None => self.unknown(user),
        }
    }
}

#[async_trait]
impl AuthSource for ScramUsers {
    async fn get_password(&self, _login: &LoginInfo) -> PgWireResult<Password> {
        // only verifiers are kept: nothing here can give a password
        Err(pgwire::error::PgWireError::InvalidSASLState)
    }

    async fn get_scram_secret(&self, login: &LoginInfo) -> PgWireResult<(ScramSecret, Option<()>)> {
        Ok((self.lookup(login.user().unwrap_or_default()), None))
    }
}

/// Whether an address may try a password now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoginGate {
    Open,
    Closed { retry_after: Duration },
}

/// Failed password checks by client address, within a sliding window.
pub struct FailedLogins {
    max: usize,
    window: Duration,
    by_addr: parking_lot::Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
}

/// Addresses tracked at most; past this, addresses whose failures all left
/// the window are forgotten first (an attacker with many addresses cannot
/// grow the table without bound).
const MAX_TRACKED_ADDRESSES: usize = 65_536;

impl Default for FailedLogins {
    fn default() -> Self {
        FailedLogins::new(MAX_FAILED_LOGINS, FAILED_LOGIN_WINDOW)
    }
}

impl FailedLogins {
    pub fn new(max: usize, window: Duration) -> FailedLogins {
        FailedLogins {
            max,
            window,
            by_addr: parking_lot::Mutex::default(),
        }
    }

    pub fn gate(&self, addr: IpAddr, now: Instant) -> LoginGate {
        let mut map = self.by_addr.lock();
        let Some(times) = map.get_mut(&addr) else {
            return LoginGate::Open;
        };
        let window = self.window;
        times.retain(|t| now.saturating_duration_since(*t) < window);
        if times.len() < self.max {
            if times.is_empty() {
                map.remove(&addr);
            }
            return LoginGate::Open;
        }
        let oldest = times.front().copied().unwrap_or(now);
        LoginGate::Closed {
            retry_after: window.saturating_sub(now.saturating_duration_since(oldest)),
        }
    }

    pub fn record_failure(&self, addr: IpAddr, now: Instant) {
        let mut map = self.by_addr.lock();
        if map.len() >= MAX_TRACKED_ADDRESSES && !map.contains_key(&addr) {
            let window = self.window;
            map.retain(|_, times| {
                times
                    .back()
                    .is_some_and(|t| now.saturating_duration_since(*t) < window)
            });
            if map.len() >= MAX_TRACKED_ADDRESSES {
                // still full of live entries: this address is not tracked
                // (the others keep their limits)
                return;
            }
        }
        let times = map.entry(addr).or_default();
        times.push_back(now);
        while times.len() > self.max {
            times.pop_front();
        }
    }
}

/// Whether a plaintext connection must be refused: TLS is required for
/// clients that are not on this machine.
pub fn must_refuse_plaintext(require_tls_remote: bool, secure: bool, peer: IpAddr) -> bool {
    require_tls_remote && !secure && !peer.to_canonical().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_sql::server_files::Privileges;

    fn user(name: &str, pw: &str, superuser: Option<bool>, roles: &[&str]) -> config::User {
        config::User {
            name: name.into(),
            password: pw.into(),
            superuser,
            roles: roles.iter().map(|r| r.to_string()).collect(),
        }
    }

    #[test]
    fn only_the_configured_superusers_are_superusers() {
        let a = Accounts::new(
            &[
                user("alice", "a", None, &[]),
                user("root2", "r", Some(true), &[]),
                user("loader", "l", None, &["pg_read_server_files"]),
            ],
            Some("secret".into()),
            true,
        )
        .unwrap();
        let roles = Roles::in_memory();
        a.seed(&roles).unwrap();
        assert_eq!(roles.privileges_of("eddy"), Privileges::SUPERUSER);
        assert_eq!(roles.privileges_of("root2"), Privileges::SUPERUSER);
        assert_eq!(roles.privileges_of("alice"), Privileges::default());
        assert_eq!(roles.privileges_of("nobody"), Privileges::default());
        let l = roles.privileges_of("loader");
        assert!(l.read_server_files && !l.write_server_files && !l.superuser);
        // passwords are kept only as verifiers
        let stored = roles.get("alice").and_then(|r| r.password).unwrap();
        assert!(stored.starts_with("SCRAM-SHA-256$4096:"), "{stored}");
        assert!(roles.login_verifier("alice").is_some());
    }

    #[test]
    fn empty_passwords_and_bad_entries_are_refused() {
        let e = |users: &[config::User], env: Option<&str>, scram| {
            Accounts::new(users, env.map(String::from), scram).err()
        };
        assert!(matches!(
            e(&[], Some(""), true),
            Some(AccountError::EmptyEnvPassword)
        ));
        assert!(matches!(
            e(&[], None, true),
            Some(AccountError::NoSuperuserPassword)
        ));
        assert!(matches!(
            e(&[user("bob", "", None, &[])], Some("x"), true),
            Some(AccountError::EmptyPassword(_))
        ));
        assert!(matches!(
            e(&[user("eddy", "x", Some(false), &[])], None, true),
            Some(AccountError::SuperuserDemoted)
        ));
        assert!(matches!(
            e(&[user("bob", "x", None, &["pg_monitor"])], Some("x"), true),
            Some(AccountError::UnknownRole { .. })
        ));
        assert!(matches!(
            e(
                &[user("bob", "x", None, &[]), user("bob", "y", None, &[])],
                Some("x"),
                true
            ),
            Some(AccountError::Duplicate(_))
        ));
        // trust needs no password at all
        assert!(e(&[user("bob", "", None, &[])], Some(""), false).is_none());
    }

    fn salt(s: &ScramSecret) -> Vec<u8> {
        match s {
            ScramSecret::Verifier { salt, .. } | ScramSecret::SaltedPassword { salt, .. } => {
                salt.clone()
            }
        }
    }

    #[test]
    fn unknown_users_get_a_stable_plausible_salt() {
        let roles = Arc::new(Roles::in_memory());
        Accounts::new(&[], Some("secret".into()), true)
            .unwrap()
            .seed(&roles)
            .unwrap();
        let u = ScramUsers::new().unwrap();
        u.serve(Arc::clone(&roles));
        let s1 = salt(&u.lookup("mallory"));
        assert_eq!(s1, salt(&u.lookup("mallory")));
        assert_ne!(s1, salt(&u.lookup("trudy")));
        let known = salt(&u.lookup("eddy"));
        assert_eq!(s1.len(), known.len());
        assert_ne!(s1, vec![0u8; SALT_LEN]);
        assert_ne!(known, vec![0u8; SALT_LEN]);
        // a role that may not log in looks like an unknown one
        assert_eq!(salt(&u.lookup("pg_read_server_files")).len(), SALT_LEN);
        // another server (another secret) gives another salt
        let other = ScramUsers::new().unwrap();
        assert_ne!(salt(&other.lookup("mallory")), s1);
    }

    #[test]
    fn failed_logins_close_the_gate_for_one_window() {
        let limit = FailedLogins::new(3, Duration::from_secs(60));
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let t0 = Instant::now();
        for i in 0..3 {
            assert_eq!(limit.gate(a, t0), LoginGate::Open, "attempt {i}");
            limit.record_failure(a, t0 + Duration::from_secs(i));
        }
        assert_eq!(
            limit.gate(a, t0 + Duration::from_secs(10)),
            LoginGate::Closed {
                retry_after: Duration::from_secs(50)
            }
        );
        // other addresses are not affected
        assert_eq!(limit.gate(b, t0 + Duration::from_secs(10)), LoginGate::Open);
        // once the oldest failure leaves the window, one more try
        assert_eq!(limit.gate(a, t0 + Duration::from_secs(60)), LoginGate::Open);
        limit.record_failure(a, t0 + Duration::from_secs(60));
        assert!(matches!(
            limit.gate(a, t0 + Duration::from_millis(60_500)),
            LoginGate::Closed { .. }
        ));
        // all of them gone: open, and the entry is forgotten
        assert_eq!(
            limit.gate(a, t0 + Duration::from_secs(200)),
            LoginGate::Open
        );
        assert!(limit.by_addr.lock().is_empty());
    }

    #[test]
    fn tls_is_required_only_for_remote_plaintext() {
        let remote: IpAddr = "192.0.2.7".parse().unwrap();
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        let local6: IpAddr = "::1".parse().unwrap();
        assert!(must_refuse_plaintext(true, false, remote));
        assert!(!must_refuse_plaintext(true, true, remote));
        assert!(!must_refuse_plaintext(false, false, remote));
        for l in [local, mapped, local6] {
            assert!(!must_refuse_plaintext(true, false, l));
        }
    }
}
