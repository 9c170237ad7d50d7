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
use eddy_sql::server_files::Privileges;
use pgwire::api::auth::sasl::scram::gen_salted_password;
use pgwire::api::auth::{AuthSource, LoginInfo, Password};
use pgwire::error::PgWireResult;
use ring::rand::SecureRandom;

use crate::config;

/// The bootstrap superuser: it always exists.
pub const SUPERUSER: &str = "eddy";

/// SCRAM-SHA-256 iterations (PostgreSQL's default).
pub const SCRAM_ITERATIONS: usize = 4096;

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
}

/// Every configured user's privileges. A name not here (a trust login
/// under an unconfigured name) has none.
#[derive(Debug, Default)]
pub struct Accounts {
    privileges: HashMap<String, Privileges>,
    /// Users and cleartext passwords, for SCRAM (empty under trust).
    passwords: Vec<(String, String)>,
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
        let mut privileges = HashMap::new();
        let mut passwords = Vec::new();
        for u in users {
            if privileges.contains_key(&u.name) {
                return Err(AccountError::Duplicate(u.name.clone()));
            }
            let superuser = match (u.name == SUPERUSER, u.superuser) {
                (true, Some(false)) => return Err(AccountError::SuperuserDemoted),
                (true, _) => true,
                (false, s) => s.unwrap_or(false),
            };
            let mut p = Privileges {
                superuser,
                ..Privileges::default()
            };
            for role in &u.roles {
                match role.as_str() {
                    "pg_read_server_files" => p.read_server_files = true,
                    "pg_write_server_files" => p.write_server_files = true,
                    other => {
                        return Err(AccountError::UnknownRole {
                            user: u.name.clone(),
                            role: other.to_string(),
                        });
                    }
                }
            }
            if superuser {
                p = Privileges::SUPERUSER;
            }
            privileges.insert(u.name.clone(), p);
            passwords.push((u.name.clone(), u.password.clone()));
        }
        privileges.insert(SUPERUSER.to_string(), Privileges::SUPERUSER);
        if let Some(pw) = env_password {
            if need_passwords && pw.is_empty() {
                return Err(AccountError::EmptyEnvPassword);
            }
            passwords.retain(|u| u.0 != SUPERUSER);
            passwords.push((SUPERUSER.to_string(), pw));
        }
        if need_passwords {
            if !passwords.iter().any(|u| u.0 == SUPERUSER) {
                return Err(AccountError::NoSuperuserPassword);
            }
            if let Some((name, _)) = passwords.iter().find(|u| u.1.is_empty()) {
                return Err(AccountError::EmptyPassword(name.clone()));
            }
        }
        Ok(Accounts {
            privileges,
            passwords,
        })
    }

    pub fn privileges_of(&self, user: &str) -> Privileges {
        self.privileges.get(user).copied().unwrap_or_default()
    }

    /// The SCRAM secrets of these accounts.
    pub fn scram_users(&self) -> Result<ScramUsers, AccountError> {
        ScramUsers::new(&self.passwords)
    }
}

/// Users' SCRAM salted passwords (derived once at start, each with its
/// own random salt), and the secret unknown users' salts derive from.
pub struct ScramUsers {
    users: HashMap<String, (Vec<u8>, Vec<u8>)>,
    secret: ring::hmac::Key,
}

impl std::fmt::Debug for ScramUsers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramUsers")
            .field("users", &self.users.len())
            .finish_non_exhaustive()
    }
}

impl ScramUsers {
    pub fn new(list: &[(String, String)]) -> Result<ScramUsers, AccountError> {
        let rng = ring::rand::SystemRandom::new();
        let mut secret = [0u8; 32];
        rng.fill(&mut secret).map_err(|_| AccountError::Random)?;
        let mut users = HashMap::new();
        for (name, pw) in list {
            let mut salt = vec![0u8; SALT_LEN];
            rng.fill(&mut salt).map_err(|_| AccountError::Random)?;
            let salted = gen_salted_password(pw, &salt, SCRAM_ITERATIONS);
            users.insert(name.clone(), (salt, salted));
        }
        Ok(ScramUsers {
            users,
            secret: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &secret),
        })
    }

    /// What an unknown user is challenged with: a salt that is stable for
    /// this server and differs between names, and a salted password no
    /// client can know (so the proof fails as a wrong password's does).
    fn unknown(&self, user: &str) -> (Vec<u8>, Vec<u8>) {
        let salt = ring::hmac::sign(&self.secret, format!("salt:{user}").as_bytes());
        let salted = ring::hmac::sign(&self.secret, format!("password:{user}").as_bytes());
        (salt.as_ref()[..SALT_LEN].to_vec(), salted.as_ref().to_vec())
    }

    fn lookup(&self, user: &str) -> (Vec<u8>, Vec<u8>) {
        match self.users.get(user) {
            Some((salt, salted)) => (salt.clone(), salted.clone()),
            None => self.unknown(user),
        }
    }
}

#[async_trait]
impl AuthSource for ScramUsers {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        let (salt, salted) = self.lookup(login.user().unwrap_or_default());
        Ok(Password::new(Some(salt), salted))
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
        assert_eq!(a.privileges_of("eddy"), Privileges::SUPERUSER);
        assert_eq!(a.privileges_of("root2"), Privileges::SUPERUSER);
        assert_eq!(a.privileges_of("alice"), Privileges::default());
        assert_eq!(a.privileges_of("nobody"), Privileges::default());
        let l = a.privileges_of("loader");
        assert!(l.read_server_files && !l.write_server_files && !l.superuser);
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

    #[test]
    fn unknown_users_get_a_stable_plausible_salt() {
        let u = ScramUsers::new(&[("eddy".into(), "secret".into())]).unwrap();
        let (s1, p1) = u.lookup("mallory");
        let (s2, p2) = u.lookup("mallory");
        let (s3, _) = u.lookup("trudy");
        let (known, _) = u.lookup("eddy");
        assert_eq!((s1.clone(), p1), (s2, p2));
        assert_ne!(s1, s3);
        assert_eq!(s1.len(), known.len());
        assert_ne!(s1, vec![0u8; SALT_LEN]);
        assert_ne!(known, vec![0u8; SALT_LEN]);
        // another server (another secret) gives another salt
        let other = ScramUsers::new(&[]).unwrap();
        assert_ne!(other.lookup("mallory").0, s1);
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
