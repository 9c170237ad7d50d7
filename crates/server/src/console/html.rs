//! HTML building blocks of the console: escaping and the page frame.
//!
//! Every string that did not come from this file (statement text, table
//! and view names, addresses, error messages) goes through [`esc`] before
//! it reaches a page; pages carry no script (the response's
//! Content-Security-Policy forbids one).

use std::fmt::Write;

/// `s` as HTML text or attribute value.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Bytes as B, KiB, MiB or GiB.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut unit = "B";
    for u in UNITS {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

/// A duration in seconds, as people read it.
pub fn seconds(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1000.0)
    } else if s < 120.0 {
        format!("{s:.1} s")
    } else if s < 7200.0 {
        format!("{:.0} min {:.0} s", (s / 60.0).floor(), s % 60.0)
    } else {
        format!(
            "{:.0} h {:.0} min",
            (s / 3600.0).floor(),
            (s % 3600.0) / 60.0
        )
    }
}

/// The pages, in the navigation's order: (path, title).
pub const PAGES: [(&str, &str); 5] = [
    ("/", "Overview"),
    ("/statements", "Statements"),
    ("/tables", "Tables"),
    ("/streams", "Streams"),
    ("/scheduler", "Scheduler"),
];

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}\
header{background:#16324f;color:#fff;padding:10px 24px;display:flex;gap:24px;align-items:baseline}\
header b{font-size:20px}header a{color:#cfe3ff;text-decoration:none}header a.on{color:#fff;font-weight:600;border-bottom:2px solid #fff}\
main{padding:16px 24px}h1{font-size:22px;margin:8px 0 16px}h2{font-size:17px;margin:20px 0 8px}\
table{border-collapse:collapse;background:#fff;margin-bottom:12px}th,td{border:1px solid #d5dae1;padding:5px 9px;text-align:left;vertical-align:top;font-size:14px}\
th{background:#e9edf2}td.n{text-align:right;font-variant-numeric:tabular-nums}\
pre{margin:0;white-space:pre-wrap;max-width:640px;font-size:13px}\
.note{background:#fff8e1;border:1px solid #f0d98a;padding:8px 12px;max-width:820px}\
.muted{color:#66707d}.graph{display:flex;align-items:center;gap:8px;flex-wrap:wrap;margin:6px 0}\
.node{background:#fff;border:1px solid #8aa4c2;border-radius:6px;padding:6px 10px;font-size:13px}\
.node b{display:block}.arrow{color:#66707d}\
button{background:#b3261e;color:#fff;border:0;border-radius:4px;padding:4px 10px;cursor:pointer}";

/// Pages that reload themselves (every 5 s): what changes by the second.
const REFRESHING: [&str; 2] = ["/statements", "/streams"];

/// A whole page: the frame with navigation around `body`.
pub fn page(path: &str, title: &str, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 2048);
    let refresh = if REFRESHING.contains(&path) {
        "<meta http-equiv=\"refresh\" content=\"5\">"
    } else {
        ""
    };
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">{refresh}<title>{} · Eddy console</title><style>{STYLE}</style></head><body><header><b>Eddy</b>",
        esc(title)
    );
    for (p, t) in PAGES {
        let class = if p == path { " class=\"on\"" } else { "" };
        let _ = write!(out, "<a href=\"{p}\"{class}>{t}</a>");
    }
    let _ = writeln!(
        out,
        "<a href=\"/metrics\">/metrics</a></header><main><h1>{}</h1>{body}</main></body></html>",
        esc(title)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_everything_that_could_open_markup() {
        assert_eq!(
            esc("<script>alert('x') & \"y\"</script>"),
            "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;"
        );
    }

    #[test]
    fn formats_sizes_and_durations() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(2048), "2.0 KiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
        assert_eq!(seconds(0.25), "250 ms");
        assert_eq!(seconds(12.34), "12.3 s");
        assert_eq!(seconds(600.0), "10 min 0 s");
    }
}
