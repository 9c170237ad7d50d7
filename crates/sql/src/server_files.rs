//! Who may make the server read or write its own file system through SQL
//! (`COPY ... FROM 'file'` / `COPY ... TO 'file'`), and which files no SQL
//! ever touches.
//!
//! Invariants (see `docs/design/security.md`):
//! * a session without [`Privileges::superuser`] or the matching
//!   `pg_read_server_files` / `pg_write_server_files` role never opens a
//!   server file (42501, PostgreSQL's wording); `COPY FROM STDIN` / `TO
//!   STDOUT` need no privilege;
//! * only absolute paths, resolved through symlinks before any check;
//! * only regular files are read or written: a device (`/dev/zero`), a
//!   FIFO, a socket or a directory is refused (42809) before it is opened,
//!   and checked again on the opened descriptor, so a COPY never blocks on
//!   a FIFO or reads an endless device;
//! * `/proc`, `/sys` and `/dev` are never read or written, by anyone;
//! * the data directory and the config file are never written, by anyone,
//!   and read only by a superuser (not by a `pg_read_server_files` holder).

use std::path::{Path, PathBuf};

use crate::error::{Result, SqlError};

/// What a session may do beyond its own tables. Set by the front end from
/// the authenticated user (the server's superusers and configured roles);
/// a session starts with none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Privileges {
    pub superuser: bool,
    /// Member of `pg_read_server_files`: `COPY ... FROM 'file'`.
    pub read_server_files: bool,
    /// Member of `pg_write_server_files`: `COPY ... TO 'file'`.
    pub write_server_files: bool,
}

impl Privileges {
    pub const SUPERUSER: Privileges = Privileges {
        superuser: true,
        read_server_files: true,
        write_server_files: true,
    };
}

/// Trees of the file system that are not files: never read or written.
const PSEUDO_FILE_SYSTEMS: &[&str] = &["/proc", "/sys", "/dev"];

/// The server's own files, as COPY must see them.
#[derive(Clone, Debug, Default)]
pub struct ServerFiles {
    /// The data directory, resolved (`None` if it cannot be resolved: then
    /// nothing can be checked against it, and file COPY is refused).
    data_dir: Option<PathBuf>,
    /// The configuration file (it holds passwords), resolved.
    config_file: Option<PathBuf>,
}

impl ServerFiles {
    pub fn new(data_dir: &Path) -> ServerFiles {
        ServerFiles {
            data_dir: std::fs::canonicalize(data_dir).ok(),
            config_file: None,
        }
    }

    /// Also protect the configuration file at `path`.
    pub fn with_config_file(mut self, path: &Path) -> ServerFiles {
        self.config_file = std::fs::canonicalize(path).ok();
        self
    }

    fn protected(&self, path: &Path) -> Option<&'static str> {
        if self
            .data_dir
            .as_deref()
            .is_some_and(|d| path.starts_with(d))
        {
            return Some("the data directory");
        }
        if self.config_file.as_deref() == Some(path) {
            return Some("the configuration file");
        }
        None
    }

    /// Opens `path` for `COPY ... FROM`, or says why not.
    pub fn open_for_read(&self, path: &str, who: Privileges) -> Result<std::fs::File> {
        if !(who.superuser || who.read_server_files) {
            return Err(SqlError::InsufficientPrivilege(
                "must be superuser or have privileges of the pg_read_server_files role to COPY from a file".into(),
            ));
        }
        let resolved = resolve(path, "from")?;
        refuse_pseudo(path, &resolved)?;
        if !who.superuser {
            if let Some(what) = self.protected(&resolved) {
                return Err(SqlError::InsufficientPrivilege(format!(
                    "could not open file \"{path}\" for reading: it is {what}, which only a superuser may read"
                )));
            }
        }
        if self.data_dir.is_none() {
            return Err(unresolved_data_dir());
        }
        must_be_regular(path, &resolved)?;
        let file = std::fs::File::open(&resolved).map_err(|e| io(path, e))?;
        // the path may have changed between the check and the open
        let meta = file.metadata().map_err(|e| io(path, e))?;
        if !meta.file_type().is_file() {
            return Err(not_regular(path));
        }
        Ok(file)
    }

    /// Creates (or truncates) `path` for `COPY ... TO`, or says why not.
    pub fn open_for_write(&self, path: &str, who: Privileges) -> Result<std::fs::File> {
        if !(who.superuser || who.write_server_files) {
            return Err(SqlError::InsufficientPrivilege(
                "must be superuser or have privileges of the pg_write_server_files role to COPY to a file".into(),
            ));
        }
        let given = Path::new(path);
        if !given.is_absolute() {
            return Err(SqlError::InvalidName(
                "relative path not allowed for COPY to file".into(),
            ));
        }
        let (Some(parent), Some(name)) = (given.parent(), given.file_name()) else {
            return Err(not_regular(path));
        };
        let parent = std::fs::canonicalize(parent).map_err(|e| io(path, e))?;
        let mut resolved = parent.join(name);
        if std::fs::symlink_metadata(&resolved).is_ok() {
            // an existing file (or a link to one): check what it really is
            resolved = std::fs::canonicalize(&resolved).map_err(|e| io(path, e))?;
        }
        refuse_pseudo(path, &resolved)?;
        if resolved.exists() {
            must_be_regular(path, &resolved)?;
        }
        if let Some(what) = self.protected(&resolved) {
            return Err(SqlError::InsufficientPrivilege(format!(
                "could not open file \"{path}\" for writing: it is {what}, which SQL never writes"
            )));
        }
        if self.data_dir.is_none() {
            return Err(unresolved_data_dir());
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&resolved)
            .map_err(|e| io(path, e))?;
        let meta = file.metadata().map_err(|e| io(path, e))?;
        if !meta.file_type().is_file() {
            return Err(not_regular(path));
        }
        Ok(file)
    }
}

/// `path` made absolute and free of symlinks (it must exist).
fn resolve(path: &str, direction: &str) -> Result<PathBuf> {
    if !Path::new(path).is_absolute() {
        return Err(SqlError::InvalidName(format!(
            "relative path not allowed for COPY {direction} file"
        )));
    }
    std::fs::canonicalize(path).map_err(|e| io(path, e))
}

fn refuse_pseudo(path: &str, resolved: &Path) -> Result<()> {
    if PSEUDO_FILE_SYSTEMS.iter().any(|p| resolved.starts_with(p)) {
        return Err(SqlError::InsufficientPrivilege(format!(
            "COPY does not read or write \"{path}\": files under /proc, /sys and /dev are not data files"
        )));
    }
    Ok(())
}

fn must_be_regular(path: &str, resolved: &Path) -> Result<()> {
    let meta = std::fs::metadata(resolved).map_err(|e| io(path, e))?;
    if meta.is_dir() {
        return Err(SqlError::WrongObjectType(format!(
            "\"{path}\" is a directory"
        )));
    }
    if !meta.file_type().is_file() {
        return Err(not_regular(path));
    }
    Ok(())
}

fn not_regular(path: &str) -> SqlError {
    SqlError::WrongObjectType(format!(
        "\"{path}\" is not a regular file: COPY reads and writes only regular files"
    ))
}

fn unresolved_data_dir() -> SqlError {
    SqlError::InsufficientPrivilege(
        "COPY to or from a file is unavailable: the data directory's location could not be resolved".into(),
    )
}

fn io(path: &str, source: std::io::Error) -> SqlError {
    SqlError::Io {
        path: path.to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, ServerFiles, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("catalog.json"), "{}").unwrap();
        let config = dir.path().join("eddy.toml");
        std::fs::write(&config, "[server]\n").unwrap();
        let files = ServerFiles::new(&data).with_config_file(&config);
        (dir, files, config)
    }

    const READER: Privileges = Privileges {
        superuser: false,
        read_server_files: true,
        write_server_files: false,
    };
    const WRITER: Privileges = Privileges {
        superuser: false,
        read_server_files: false,
        write_server_files: true,
    };

    fn code(r: Result<std::fs::File>) -> &'static str {
        match r {
            Ok(_) => "ok",
            Err(e) => e.sqlstate(),
        }
    }

    #[test]
    fn without_a_privilege_no_file_is_opened() {
        let (dir, files, _) = setup();
        let f = dir.path().join("plain.csv");
        std::fs::write(&f, "1\n").unwrap();
        let f = f.to_str().unwrap();
        assert_eq!(code(files.open_for_read(f, Privileges::default())), "42501");
        assert_eq!(
            code(files.open_for_write(f, Privileges::default())),
            "42501"
        );
        assert_eq!(code(files.open_for_write(f, READER)), "42501");
        assert_eq!(code(files.open_for_read(f, WRITER)), "42501");
        assert_eq!(code(files.open_for_read(f, READER)), "ok");
        assert_eq!(code(files.open_for_write(f, WRITER)), "ok");
        assert_eq!(code(files.open_for_read(f, Privileges::SUPERUSER)), "ok");
    }

    #[test]
    fn server_files_are_protected() {
        let (dir, files, config) = setup();
        let catalog = dir.path().join("data/catalog.json");
        let (catalog, config) = (catalog.to_str().unwrap(), config.to_str().unwrap());
        // a role holder reads neither; a superuser reads both
        assert_eq!(code(files.open_for_read(catalog, READER)), "42501");
        assert_eq!(code(files.open_for_read(config, READER)), "42501");
        assert_eq!(
            code(files.open_for_read(config, Privileges::SUPERUSER)),
            "ok"
        );
        // nobody writes them, nor a new file in the data directory
        assert_eq!(
            code(files.open_for_write(catalog, Privileges::SUPERUSER)),
            "42501"
        );
        assert_eq!(
            code(files.open_for_write(config, Privileges::SUPERUSER)),
            "42501"
        );
        let new = dir.path().join("data/new.csv");
        assert_eq!(
            code(files.open_for_write(new.to_str().unwrap(), Privileges::SUPERUSER)),
            "42501"
        );
        // through a symlink or a `..` either
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(dir.path().join("data/catalog.json"), &link).unwrap();
        assert_eq!(
            code(files.open_for_write(link.to_str().unwrap(), Privileges::SUPERUSER)),
            "42501"
        );
        assert_eq!(
            code(files.open_for_read(link.to_str().unwrap(), READER)),
            "42501"
        );
        let dotdot = format!("{}/x/../data/catalog.json", dir.path().display());
        std::fs::create_dir(dir.path().join("x")).unwrap();
        assert_eq!(code(files.open_for_read(&dotdot, READER)), "42501");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("data/catalog.json")).unwrap(),
            "{}"
        );
    }

    #[test]
    fn only_regular_files_even_for_a_superuser() {
        let (dir, files, _) = setup();
        let su = Privileges::SUPERUSER;
        assert_eq!(code(files.open_for_read("/dev/zero", su)), "42501");
        assert_eq!(code(files.open_for_read("/proc/self/environ", su)), "42501");
        assert_eq!(code(files.open_for_write("/dev/null", su)), "42501");
        assert_eq!(
            code(files.open_for_read(dir.path().to_str().unwrap(), su)),
            "42809"
        );
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let fifo = fifo.to_str().unwrap();
            assert_eq!(code(files.open_for_read(fifo, su)), "42809");
            assert_eq!(code(files.open_for_write(fifo, su)), "42809");
        }
        assert_eq!(code(files.open_for_read("relative.csv", su)), "42602");
        assert_eq!(code(files.open_for_write("relative.csv", su)), "42602");
        assert_eq!(code(files.open_for_read("/no/such/file", su)), "58P01");
    }
}
