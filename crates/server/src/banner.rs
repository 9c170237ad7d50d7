//! The start-up message `eddy server` prints to stderr once it listens:
//! where it listens, the psql command line that connects, where the data
//! lives, and the metrics and console URLs. Plain text for a person, not a
//! log line (logs can be filtered away with `EDDY_LOG`; this cannot).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// Where the superuser's password comes from, for the psql hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PasswordFrom {
    /// `--auth trust`: no password.
    None,
    /// `EDDY_PASSWORD` in the server's environment.
    Env,
    /// The config file's `[[users]]` entry.
    ConfigFile,
    /// `--auth cert`: no password, a client certificate whose common name
    /// is the user.
    Certificate,
}

/// What the message says.
pub struct StartupInfo<'a> {
    pub version: &'a str,
    pub pg: SocketAddr,
    pub http: SocketAddr,
    pub password: PasswordFrom,
    pub tls: bool,
    /// The console is served over HTTPS.
    pub https: bool,
    pub data_dir: &'a Path,
    pub config_file: Option<&'a Path>,
}

/// The address a client on this machine connects to: the listener's own,
/// or loopback when it listens on every address.
fn local_ip(addr: &SocketAddr) -> IpAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    }
}

fn url_host(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
    }
}

/// Quotes `s` for a POSIX shell when it needs it.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:=,@".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn listens(addr: &SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        format!("{addr} (every interface)")
    } else {
        addr.to_string()
    }
}

/// The message, ending with a newline.
pub fn startup_message(i: &StartupInfo<'_>) -> String {
    let host = local_ip(&i.pg);
    let port = i.pg.port();
    let psql = if i.password == PasswordFrom::Certificate {
        format!(
            "psql \"host={host} port={port} user=eddy dbname=eddy sslmode=require \
             sslcert=eddy.crt sslkey=eddy.key\""
        )
    } else if i.tls {
        format!("psql \"host={host} port={port} user=eddy dbname=eddy sslmode=require\"")
    } else {
        format!("psql -h {host} -p {port} -U eddy eddy")
    };
    let (connect, hint) = match i.password {
        PasswordFrom::None => (psql, String::new()),
        PasswordFrom::Certificate => (
            psql,
            "\n             (eddy.crt: a certificate for CN=eddy issued by a CA of --tls-client-ca)"
                .to_string(),
        ),
        PasswordFrom::Env => (
            format!("PGPASSWORD=\"$EDDY_PASSWORD\" {psql}"),
            "\n             (the password is the server's EDDY_PASSWORD; without PGPASSWORD psql asks for it)".to_string(),
        ),
        PasswordFrom::ConfigFile => (
            psql,
            format!(
                "\n             (psql asks for the password of user eddy in {}; or set PGPASSWORD)",
                i.config_file
                    .map(|p| shell_word(&p.display().to_string()))
                    .unwrap_or_else(|| "the config file".into())
            ),
        ),
    };
    let http = format!(
        "{}://{}:{}",
        if i.https { "https" } else { "http" },
        url_host(local_ip(&i.http)),
        i.http.port()
    );
    format!(
        "\nEddy {version} is ready.\n  \
         PostgreSQL:  {pg} (auth {auth}, TLS {tls})\n  \
         Connect:     {connect}{hint}\n  \
         Data:        {data}\n  \
         Console:     {http}/{console_login}\n  \
         Metrics:     {http}/metrics\n  \
         Stop:        Ctrl-C or SIGTERM (flushes, then exits)\n\n",
        version = i.version,
        pg = listens(&i.pg),
        auth = match i.password {
            PasswordFrom::None => "trust",
            PasswordFrom::Certificate => "cert",
            PasswordFrom::Env | PasswordFrom::ConfigFile => "scram",
        },
        tls = if i.tls { "on" } else { "off" },
        console_login = if i.password == PasswordFrom::None {
            ""
        } else {
            " (log in as a role, e.g. eddy, with its password)"
        },
        data = i.data_dir.display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(password: PasswordFrom, tls: bool, pg: &str) -> String {
        startup_message(&StartupInfo {
            version: "0.1.0",
            pg: pg.parse().unwrap(),
            http: "0.0.0.0:8080".parse().unwrap(),
            password,
            tls,
            https: tls,
            data_dir: Path::new("/var/lib/eddy"),
            config_file: Some(Path::new("/etc/eddy it.toml")),
        })
    }

    #[test]
    fn trust_connects_without_a_password() {
        let m = info(PasswordFrom::None, false, "127.0.0.1:5433");
        assert!(m.contains("Connect:     psql -h 127.0.0.1 -p 5433 -U eddy eddy\n"));
        assert!(m.contains("Data:        /var/lib/eddy\n"));
        assert!(m.contains("Console:     http://127.0.0.1:8080/\n"));
        assert!(m.contains("Metrics:     http://127.0.0.1:8080/metrics\n"));
    }

    #[test]
    fn scram_hints_at_the_password() {
        let m = info(PasswordFrom::Env, false, "0.0.0.0:5433");
        assert!(m.contains("PGPASSWORD=\"$EDDY_PASSWORD\" psql -h 127.0.0.1 -p 5433 -U eddy eddy"));
        assert!(m.contains("0.0.0.0:5433 (every interface)"));
        assert!(m.contains("Console:     http://127.0.0.1:8080/ (log in as a role"));
        let m = info(PasswordFrom::ConfigFile, false, "[::]:5433");
        assert!(m.contains("psql -h ::1 -p 5433 -U eddy eddy"));
        assert!(m.contains("'/etc/eddy it.toml'"));
    }

    #[test]
    fn tls_asks_for_sslmode_require() {
        let m = info(PasswordFrom::Env, true, "127.0.0.1:5433");
        assert!(
            m.contains("psql \"host=127.0.0.1 port=5433 user=eddy dbname=eddy sslmode=require\"")
        );
        assert!(m.contains("Console:     https://127.0.0.1:8080/ (log in as a role"));
        assert!(m.contains("Metrics:     https://127.0.0.1:8080/metrics\n"));
    }
}
