//! Roles: who exists, who may log in, who is a superuser, who is a member
//! of whom, and who may create tables in schema `public`. Table ownership
//! and grants live with each table's definition (`TableDef::owner`/`acl`,
//! so they commit and roll back with the transaction that changes them);
//! `crate::privileges` decides a statement's access from both.
//!
//! Invariants (see `docs/design/security.md`, "Roles and privileges"):
//! * the bootstrap superuser `eddy` and the predefined roles
//!   (`pg_read_server_files`, `pg_write_server_files`, `pg_monitor` and the
//!   roles it includes, `pg_signal_backend`) always exist and
//!   cannot be dropped, renamed or altered through SQL;
//! * a password is kept only as a SCRAM-SHA-256 verifier in PostgreSQL's
//!   format (`SCRAM-SHA-256$iterations:salt$StoredKey:ServerKey`), never in
//!   clear; the verifier's salt comes from the operating system's random
//!   source; a verifier is never shown through SQL (`pg_authid.rolpassword`
//!   reads `********`, as `pg_roles` does in PostgreSQL);
//! * `roles.json` in the data directory is replaced whole, with a
//!   checksum, as the storage catalog is (`eddy_storage::manifest`): after
//!   a crash it is the old or the new file, and a damaged one is refused;
//! * membership has no cycles (GRANT refuses one: 0LP01), so walking it
//!   ends.
//!
//! Role statements are not transactional: inside a transaction block they
//! are refused (25001), as PostgreSQL refuses `CREATE DATABASE` there.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use parking_lot::{Mutex, RwLock};
use ring::rand::SecureRandom;
use serde::{Deserialize, Serialize};

use crate::error::{Result, SqlError};
use crate::server_files::Privileges;

/// The bootstrap superuser: it always exists.
pub const BOOTSTRAP_SUPERUSER: &str = "eddy";
/// Its oid, as PostgreSQL numbers the bootstrap superuser.
pub const BOOTSTRAP_SUPERUSER_OID: i64 = 10;
pub const READ_SERVER_FILES: &str = "pg_read_server_files";
pub const WRITE_SERVER_FILES: &str = "pg_write_server_files";
/// Sees what every connection does in `pg_stat_activity`.
pub const READ_ALL_STATS: &str = "pg_read_all_stats";
/// May cancel and terminate other roles' (not superusers') backends.
pub const SIGNAL_BACKEND: &str = "pg_signal_backend";
pub const MONITOR: &str = "pg_monitor";
/// The predefined roles, their PostgreSQL 15 oids and the predefined roles
/// each is a member of (`pg_monitor` has the privileges of the reading
/// roles, as in PostgreSQL).
const PREDEFINED: [(&str, i64, &[&str]); 7] = [
    (READ_SERVER_FILES, 4569, &[]),
    (WRITE_SERVER_FILES, 4570, &[]),
    ("pg_read_all_settings", 3374, &[]),
    (READ_ALL_STATS, 3375, &[]),
    ("pg_stat_scan_tables", 3377, &[]),
    (
        MONITOR,
        3373,
        &[
            "pg_read_all_settings",
            READ_ALL_STATS,
            "pg_stat_scan_tables",
        ],
    ),
    (SIGNAL_BACKEND, 4200, &[]),
];

/// SCRAM-SHA-256 iterations (PostgreSQL's default).
pub const SCRAM_ITERATIONS: u32 = 4096;
const SALT_LEN: usize = 16;
/// The first oid given to a created role.
const FIRST_ROLE_OID: i64 = 16_384;

/// One role.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleDef {
    pub name: String,
    pub oid: i64,
    pub superuser: bool,
    pub login: bool,
    /// The SCRAM verifier, or `None` (no password: SCRAM logins fail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// Roles this one is a direct member of.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub member_of: Vec<String>,
    /// `eddy` and the `pg_` roles: not changeable through SQL.
    #[serde(default)]
    pub predefined: bool,
}

/// What `CREATE ROLE` / `ALTER ROLE` set; `None` leaves a field as it is
/// (or at its default for a new role).
#[derive(Clone, Debug, Default)]
pub struct RoleOptions {
    pub superuser: Option<bool>,
    pub login: Option<bool>,
    /// `Some(None)`: `PASSWORD NULL`.
    pub password: Option<Option<String>>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct RolesFile {
    next_oid: i64,
    roles: Vec<RoleDef>,
    /// Roles holding CREATE on schema `public` (`None`: PUBLIC). PostgreSQL
    /// 15 gives it to no one but the schema's owner by default.
    #[serde(default)]
    public_schema_create: Vec<Option<String>>,
}

impl RolesFile {
    fn role(&self, name: &str) -> Option<&RoleDef> {
        self.roles.iter().find(|r| r.name == name)
    }

    /// `name` and every role it is a member of, directly or not.
    fn closure(&self, name: &str) -> HashSet<String> {
        let mut seen = HashSet::new();
        let mut todo = vec![name.to_string()];
        while let Some(n) = todo.pop() {
            if !seen.insert(n.clone()) {
                continue;
            }
            if let Some(r) = self.role(&n) {
                todo.extend(r.member_of.iter().cloned());
            }
        }
        seen
    }

    /// The bootstrap superuser and the predefined roles, added where
    /// missing (a new data directory, or one made before roles existed).
    fn with_builtins(mut self) -> RolesFile {
        if self.role(BOOTSTRAP_SUPERUSER).is_none() {
            self.roles.insert(
                0,
                RoleDef {
                    name: BOOTSTRAP_SUPERUSER.into(),
                    oid: BOOTSTRAP_SUPERUSER_OID,
                    superuser: true,
                    login: true,
                    password: None,
                    member_of: Vec::new(),
                    predefined: true,
                },
            );
        }
        for (name, oid, member_of) in PREDEFINED {
            if self.role(name).is_none() {
                self.roles.push(RoleDef {
                    name: name.into(),
                    oid,
                    superuser: false,
                    login: false,
                    password: None,
                    member_of: member_of.iter().map(|m| m.to_string()).collect(),
                    predefined: true,
                });
            }
        }
        self.next_oid = self.next_oid.max(FIRST_ROLE_OID);
        self
    }
}

/// The roles of one database directory.
pub struct Roles {
    path: Option<PathBuf>,
    state: RwLock<RolesFile>,
    /// Serialises writers: a change is computed, written and published
    /// under it.
    write: Mutex<()>,
    /// Bumped by every change, so callers can cache decisions.
    version: AtomicU64,
}

impl std::fmt::Debug for Roles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Roles")
            .field("roles", &self.state.read().roles.len())
            .finish_non_exhaustive()
    }
}

impl Roles {
    /// The roles kept in `data_dir/roles.json` (created on the first
    /// change).
    pub fn open(data_dir: &Path) -> Result<Roles> {
        let path = data_dir.join("roles.json");
        let file: RolesFile = eddy_storage::manifest::read_checked(&path)?.unwrap_or_default();
        Ok(Roles {
            path: Some(path),
            state: RwLock::new(file.with_builtins()),
            write: Mutex::new(()),
            version: AtomicU64::new(1),
        })
    }

    /// Roles that live only in memory (tests, tools).
    pub fn in_memory() -> Roles {
        Roles {
            path: None,
            state: RwLock::new(RolesFile::default().with_builtins()),
            write: Mutex::new(()),
            version: AtomicU64::new(1),
        }
    }

    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    pub fn get(&self, name: &str) -> Option<RoleDef> {
        self.state.read().role(name).cloned()
    }

    pub fn list(&self) -> Vec<RoleDef> {
        self.state.read().roles.clone()
    }

    /// What `user` may do beyond tables. A name that is not a role (a
    /// trust login under an unknown name) has nothing.
    pub fn privileges_of(&self, user: &str) -> Privileges {
        let st = self.state.read();
        match st.role(user) {
            Some(r) if r.superuser => Privileges::SUPERUSER,
            Some(_) => {
                let all = st.closure(user);
                Privileges {
                    superuser: false,
                    read_server_files: all.contains(READ_SERVER_FILES),
                    write_server_files: all.contains(WRITE_SERVER_FILES),
                }
            }
            None => Privileges::default(),
        }
    }

    /// `user` and every role whose privileges it has (PostgreSQL's
    /// INHERIT, which every Eddy role has).
    pub fn effective_roles(&self, user: &str) -> HashSet<String> {
        self.state.read().closure(user)
    }

    /// Whether `user` may create tables in schema `public`.
    pub fn may_create_in_public(&self, user: &str) -> bool {
        let st = self.state.read();
        let all = st.closure(user);
        st.public_schema_create
            .iter()
            .any(|g| g.as_ref().is_none_or(|r| all.contains(r)))
    }

    /// Roles holding CREATE on `public` (`None`: PUBLIC), for `nspacl`.
    pub fn public_schema_create(&self) -> Vec<Option<String>> {
        self.state.read().public_schema_create.clone()
    }

    /// The SCRAM verifier `user` logs in with: `None` when it does not
    /// exist, may not log in, or has no password.
    pub fn login_verifier(&self, user: &str) -> Option<ScramVerifier> {
        let st = self.state.read();
        let r = st.role(user)?;
        if !r.login {
            return None;
        }
        ScramVerifier::parse(r.password.as_deref()?).ok()
    }

    pub fn create(&self, name: &str, opts: &RoleOptions, in_roles: &[String]) -> Result<()> {
        check_role_name(name)?;
        self.change(|f| {
            if f.role(name).is_some() {
                return Err(SqlError::DuplicateObject(format!(
                    "role \"{name}\" already exists"
                )));
            }
            for r in in_roles {
                if f.role(r).is_none() {
                    return Err(undefined_role(r));
                }
            }
            let oid = f.next_oid;
            f.next_oid += 1;
            f.roles.push(RoleDef {
                name: name.to_string(),
                oid,
                superuser: opts.superuser.unwrap_or(false),
                login: opts.login.unwrap_or(false),
                password: opts.password.clone().flatten(),
                member_of: in_roles.to_vec(),
                predefined: false,
            });
            Ok(())
        })
    }

    pub fn alter(&self, name: &str, opts: &RoleOptions) -> Result<()> {
        self.change(|f| {
            let r = f
                .roles
                .iter_mut()
                .find(|r| r.name == name)
                .ok_or_else(|| undefined_role(name))?;
            if r.predefined && (name != BOOTSTRAP_SUPERUSER || opts.superuser.is_some() || opts.login.is_some()) {
                return Err(SqlError::InsufficientPrivilege(format!(
                    "permission denied to alter role\nDETAIL:  Only the password of \"{BOOTSTRAP_SUPERUSER}\" may be changed; role \"{name}\" is built in."
                )));
            }
            if let Some(s) = opts.superuser {
                r.superuser = s;
            }
            if let Some(l) = opts.login {
                r.login = l;
            }
            if let Some(p) = &opts.password {
                r.password = p.clone();
            }
            Ok(())
        })
    }

    /// Drops `name`; the caller has checked that no table depends on it.
    pub fn drop_role(&self, name: &str) -> Result<()> {
        self.change(|f| {
            let r = f.role(name).ok_or_else(|| undefined_role(name))?;
            if r.predefined {
                return Err(SqlError::InsufficientPrivilege(format!(
                    "cannot drop role \"{name}\": it is built in"
                )));
            }
            f.roles.retain(|r| r.name != name);
            for r in &mut f.roles {
                r.member_of.retain(|m| m != name);
            }
            f.public_schema_create
                .retain(|g| g.as_deref() != Some(name));
            Ok(())
        })
    }

    /// `GRANT role TO member`.
    pub fn grant_membership(&self, role: &str, member: &str) -> Result<()> {
        self.change(|f| {
            if f.role(role).is_none() {
                return Err(undefined_role(role));
            }
            if f.role(member).is_none() {
                return Err(undefined_role(member));
            }
            if f.closure(role).contains(member) {
                return Err(SqlError::InvalidGrant(format!(
                    "role \"{role}\" is a member of role \"{member}\""
                )));
            }
            if let Some(m) = f.roles.iter_mut().find(|r| r.name == member) {
                if !m.member_of.iter().any(|r| r == role) {
                    m.member_of.push(role.to_string());
                }
            }
            Ok(())
        })
    }

    /// `REVOKE role FROM member` (a warning-free no-op when not a member,
    /// as the caller reports).
    pub fn revoke_membership(&self, role: &str, member: &str) -> Result<bool> {
        let mut was = false;
        self.change(|f| {
            if f.role(role).is_none() {
                return Err(undefined_role(role));
            }
            let m = f
                .roles
                .iter_mut()
                .find(|r| r.name == member)
                .ok_or_else(|| undefined_role(member))?;
            was = m.member_of.iter().any(|r| r == role);
            m.member_of.retain(|r| r != role);
            Ok(())
        })?;
        Ok(was)
    }

    /// `GRANT/REVOKE CREATE ON SCHEMA public TO/FROM grantee` (`None`:
    /// PUBLIC).
    pub fn set_public_schema_create(&self, grantee: Option<&str>, grant: bool) -> Result<()> {
        self.change(|f| {
            if let Some(g) = grantee {
                if f.role(g).is_none() {
                    return Err(undefined_role(g));
                }
            }
            let key = grantee.map(str::to_string);
            f.public_schema_create.retain(|g| *g != key);
            if grant {
                f.public_schema_create.push(key);
            }
            Ok(())
        })
    }

    /// Makes `name` exist as the config file describes it: a login role
    /// with this password, superuser or not, a member of `roles` (the
    /// config file is authoritative for the users it names, at every
    /// start).
    pub fn seed(
        &self,
        name: &str,
        password: Option<&str>,
        superuser: bool,
        roles: &[String],
    ) -> Result<()> {
        check_role_name(name)?;
        let verifier = password.map(scram_verifier).transpose()?;
        self.change(|f| {
            for r in roles {
                if f.role(r).is_none() {
                    return Err(undefined_role(r));
                }
            }
            if f.role(name).is_none() {
                let oid = f.next_oid;
                f.next_oid += 1;
                f.roles.push(RoleDef {
                    name: name.to_string(),
                    oid,
                    superuser,
                    login: true,
                    password: None,
                    member_of: Vec::new(),
                    predefined: false,
                });
            }
            if let Some(r) = f.roles.iter_mut().find(|r| r.name == name) {
                if !r.predefined || name == BOOTSTRAP_SUPERUSER {
                    r.superuser = superuser || name == BOOTSTRAP_SUPERUSER;
                    r.login = true;
                }
                if verifier.is_some() {
                    r.password = verifier.clone();
                }
                for role in roles {
                    if !r.member_of.contains(role) {
                        r.member_of.push(role.clone());
                    }
                }
            }
            Ok(())
        })
    }

    /// Applies `edit` to a copy, writes it, then publishes it.
    fn change(&self, edit: impl FnOnce(&mut RolesFile) -> Result<()>) -> Result<()> {
        let _w = self.write.lock();
        let mut next = self.state.read().clone();
        edit(&mut next)?;
        if let Some(path) = &self.path {
            eddy_storage::manifest::write_atomic(path, &next)?;
        }
        *self.state.write() = next;
        self.version.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }
}

fn undefined_role(name: &str) -> SqlError {
    SqlError::UndefinedObject(format!("role \"{name}\" does not exist"))
}

/// PostgreSQL reserves `pg_` names and `public` (and NAMEDATALEN).
fn check_role_name(name: &str) -> Result<()> {
    if name.starts_with("pg_") {
        return Err(SqlError::ReservedName(format!(
            "role name \"{name}\" is reserved\nDETAIL:  Role names starting with \"pg_\" are reserved."
        )));
    }
    if matches!(
        name,
        "public" | "none" | "current_user" | "session_user" | "current_role"
    ) {
        return Err(SqlError::ReservedName(format!(
            "role name \"{name}\" is reserved"
        )));
    }
    if name.is_empty() || name.len() > 63 {
        return Err(SqlError::InvalidName(format!(
            "role name \"{name}\" must be 1 to 63 bytes long"
        )));
    }
    Ok(())
}

/// A SCRAM-SHA-256 verifier: what the server needs to check a client's
/// proof and sign its answer, and nothing that logs in by itself.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramVerifier {
    pub iterations: u32,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl std::fmt::Debug for ScramVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramVerifier")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl ScramVerifier {
    /// PostgreSQL's text form:
    /// `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`.
    pub fn parse(text: &str) -> Result<ScramVerifier> {
        let bad = || SqlError::InvalidParameter("malformed SCRAM-SHA-256 verifier".into());
        let rest = text.strip_prefix("SCRAM-SHA-256$").ok_or_else(bad)?;
        let (params, keys) = rest.split_once('$').ok_or_else(bad)?;
        let (iterations, salt) = params.split_once(':').ok_or_else(bad)?;
        let (stored, server) = keys.split_once(':').ok_or_else(bad)?;
        let iterations: u32 = iterations.parse().map_err(|_| bad())?;
        let salt = B64.decode(salt).map_err(|_| bad())?;
        let stored_key = B64.decode(stored).map_err(|_| bad())?;
        let server_key = B64.decode(server).map_err(|_| bad())?;
        if iterations == 0 || salt.is_empty() || stored_key.len() != 32 || server_key.len() != 32 {
            return Err(bad());
        }
        Ok(ScramVerifier {
            iterations,
            salt,
            stored_key,
            server_key,
        })
    }

    pub fn to_text(&self) -> String {
        format!(
            "SCRAM-SHA-256${}:{}${}:{}",
            self.iterations,
            B64.encode(&self.salt),
            B64.encode(&self.stored_key),
            B64.encode(&self.server_key)
        )
    }

    /// The verifier of `password` with a fresh random salt.
    pub fn derive(password: &str) -> Result<ScramVerifier> {
        let mut salt = vec![0u8; SALT_LEN];
        ring::rand::SystemRandom::new()
            .fill(&mut salt)
            .map_err(|_| {
                SqlError::Internal("the operating system's random source failed".into())
            })?;
        Ok(ScramVerifier::derive_with_salt(
            password,
            salt,
            SCRAM_ITERATIONS,
        ))
    }

    /// Whether `password` is the one this verifier was derived from
    /// (its StoredKey recomputed with the verifier's salt and iterations,
    /// compared in constant time): for logins that carry a password
    /// rather than a SCRAM exchange (the console's HTTP Basic).
    pub fn verifies(&self, password: &str) -> bool {
        let candidate =
            ScramVerifier::derive_with_salt(password, self.salt.clone(), self.iterations);
        candidate.stored_key.len() == self.stored_key.len()
            && candidate
                .stored_key
                .iter()
                .zip(&self.stored_key)
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }

    /// RFC 5802's keys for `password` (SASLprep-normalised, as libpq and
    /// PostgreSQL do; a password that cannot be normalised is used as is).
    pub fn derive_with_salt(password: &str, salt: Vec<u8>, iterations: u32) -> ScramVerifier {
        let normalized = stringprep::saslprep(password)
            .map(|c| c.into_owned())
            .unwrap_or_else(|_| password.to_string());
        let mut salted = [0u8; 32];
        let iters = std::num::NonZeroU32::new(iterations).unwrap_or(std::num::NonZeroU32::MIN);
        ring::pbkdf2::derive(
            ring::pbkdf2::PBKDF2_HMAC_SHA256,
            iters,
            &salt,
            normalized.as_bytes(),
            &mut salted,
        );
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &salted);
        let client_key = ring::hmac::sign(&key, b"Client Key");
        let stored_key = ring::digest::digest(&ring::digest::SHA256, client_key.as_ref());
        let server_key = ring::hmac::sign(&key, b"Server Key");
        ScramVerifier {
            iterations,
            salt,
            stored_key: stored_key.as_ref().to_vec(),
            server_key: server_key.as_ref().to_vec(),
        }
    }
}

/// The stored form of a password given in SQL or the config file: a
/// SCRAM verifier given as one is kept (after checking it), anything else
/// is a cleartext password and is hashed. MD5 hashes are refused: Eddy
/// authenticates with SCRAM only.
pub fn scram_verifier(password: &str) -> Result<String> {
    if password.starts_with("SCRAM-SHA-256$") {
        return ScramVerifier::parse(password).map(|v| v.to_text());
    }
    if password.len() == 35
        && password.starts_with("md5")
        && password[3..].bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Err(SqlError::FeatureNotSupported(
            "MD5-hashed passwords are not supported: Eddy authenticates with SCRAM-SHA-256 only"
                .into(),
        ));
    }
    if password.is_empty() {
        return Err(SqlError::InvalidParameter(
            "empty password: a role without a password is made with PASSWORD NULL".into(),
        ));
    }
    ScramVerifier::derive(password).map(|v| v.to_text())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifier_matches_postgresql() {
        // RFC 7677's example (password "pencil" and its salt); the keys
        // were computed independently with Python's hashlib
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap_or_default();
        let v = ScramVerifier::derive_with_salt("pencil", salt, 4096);
        assert_eq!(
            v.to_text(),
            "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU="
        );
        assert_eq!(ScramVerifier::parse(&v.to_text()).ok(), Some(v.clone()));
        assert!(v.verifies("pencil"));
        assert!(!v.verifies("pencil "));
        assert!(!v.verifies(""));
    }

    #[test]
    fn passwords_are_never_kept_in_clear() {
        let stored = scram_verifier("s3cret").unwrap_or_default();
        assert!(stored.starts_with("SCRAM-SHA-256$4096:"));
        assert!(!stored.contains("s3cret"));
        // two derivations of one password differ (fresh salts)
        assert_ne!(stored, scram_verifier("s3cret").unwrap_or_default());
        assert!(matches!(
            scram_verifier("md5a3556571e93b0d20722ba62be61e8c2d"),
            Err(SqlError::FeatureNotSupported(_))
        ));
        assert!(scram_verifier("SCRAM-SHA-256$x").is_err());
    }

    #[test]
    fn membership_is_transitive_and_acyclic() {
        let r = Roles::in_memory();
        let none = RoleOptions::default();
        for n in ["a", "b", "c"] {
            assert!(r.create(n, &none, &[]).is_ok());
        }
        assert!(r.grant_membership("b", "a").is_ok());
        assert!(r.grant_membership("c", "b").is_ok());
        assert!(r.effective_roles("a").contains("c"));
        assert!(matches!(
            r.grant_membership("a", "c"),
            Err(SqlError::InvalidGrant(_))
        ));
        assert!(r.grant_membership(READ_SERVER_FILES, "c").is_ok());
        assert!(r.privileges_of("a").read_server_files);
        assert!(!r.privileges_of("a").write_server_files);
        assert!(r.drop_role("c").is_ok());
        assert!(!r.privileges_of("a").read_server_files);
        assert!(r.privileges_of(BOOTSTRAP_SUPERUSER).superuser);
        assert!(!r.privileges_of("nobody").superuser);
    }

    #[test]
    fn builtin_roles_stay() {
        let r = Roles::in_memory();
        assert!(r.drop_role(BOOTSTRAP_SUPERUSER).is_err());
        assert!(r.drop_role(READ_SERVER_FILES).is_err());
        let demote = RoleOptions {
            superuser: Some(false),
            ..RoleOptions::default()
        };
        assert!(r.alter(BOOTSTRAP_SUPERUSER, &demote).is_err());
        assert!(matches!(
            r.create("pg_mine", &RoleOptions::default(), &[]),
            Err(SqlError::ReservedName(_))
        ));
    }

    #[test]
    fn roles_survive_a_reopen() {
        let dir = std::env::temp_dir().join(format!("eddy-roles-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        {
            let r = Roles::open(&dir).expect("open");
            let opts = RoleOptions {
                login: Some(true),
                password: Some(Some(scram_verifier("pw").expect("hash"))),
                ..RoleOptions::default()
            };
            r.create("alice", &opts, &[]).expect("create");
            r.set_public_schema_create(Some("alice"), true)
                .expect("grant");
        }
        let r = Roles::open(&dir).expect("reopen");
        assert!(r.login_verifier("alice").is_some());
        assert!(r.may_create_in_public("alice"));
        assert!(!r.may_create_in_public("bob"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
