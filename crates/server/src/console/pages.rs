//! The console's HTML pages, rendered on the server from `console::data`
//! (the same structs `/api/...` returns as JSON). No script: the cancel
//! button is a plain form that POSTs to `/api/statements/<id>/cancel`.

use std::fmt::Write;

use super::data::{Overview, Scheduler, Statements, Streams, Tables};
use super::html::{bytes, esc, page, seconds};

fn row(out: &mut String, key: &str, value: &str) {
    let _ = write!(out, "<tr><th>{}</th><td>{value}</td></tr>", esc(key));
}

pub fn overview(o: &Overview) -> String {
    let mut b = String::new();
    b.push_str("<table>");
    row(&mut b, "Version", &esc(o.version));
    row(&mut b, "Uptime", &seconds(o.uptime_seconds));
    row(
        &mut b,
        "Data directory",
        &format!("<code>{}</code>", esc(&o.data_dir)),
    );
    row(
        &mut b,
        "PostgreSQL protocol",
        &format!(
            "<code>{}</code> (auth {}, TLS {})",
            esc(&o.pg_addr),
            esc(o.auth),
            if o.tls { "on" } else { "off" }
        ),
    );
    row(
        &mut b,
        "HTTP",
        &format!(
            "<code>{}</code> ({})",
            esc(&o.http_addr),
            if o.https { "HTTPS" } else { "plain HTTP" }
        ),
    );
    row(
        &mut b,
        "Connections",
        &format!("{} of at most {}", o.connections, o.max_connections),
    );
    row(
        &mut b,
        "Running statements",
        &format!("<a href=\"/statements\">{}</a>", o.running_statements),
    );
    row(
        &mut b,
        "Tables",
        &format!(
            "<a href=\"/tables\">{}</a> ({} in files)",
            o.tables,
            bytes(o.table_file_bytes)
        ),
    );
    row(
        &mut b,
        "Materialized views",
        &format!("<a href=\"/streams\">{}</a>", o.materialized_views),
    );
    b.push_str("</table>");
    b.push_str(
        "<p class=\"muted\">Every page has its data as JSON under <code>/api/</code>: \
         <a href=\"/api/overview\">/api/overview</a>, <a href=\"/api/statements\">/api/statements</a>, \
         <a href=\"/api/tables\">/api/tables</a>, <a href=\"/api/streams\">/api/streams</a>, \
         <a href=\"/api/scheduler\">/api/scheduler</a>. Prometheus metrics: \
         <a href=\"/metrics\">/metrics</a>.</p>",
    );
    page("/", "Overview", &b)
}

pub fn statements(s: &Statements) -> String {
    let mut b = String::new();
    let _ = write!(
        b,
        "<p>{} running of {} open sessions. <a href=\"/statements\">Refresh</a></p>",
        s.running.len(),
        s.sessions.len()
    );
    if let Some(role) = &s.viewer {
        let _ = write!(b, "<p class=\"muted\">Shown to role {}.</p>", esc(role));
    }
    if let Some(why) = &s.cancel_refused {
        let _ = write!(b, "<p class=\"note\">Cancel is off: {}</p>", esc(why));
    }
    if s.running.is_empty() {
        b.push_str("<p class=\"muted\">No statement is running.</p>");
    } else {
        b.push_str("<table><tr><th>Statement</th><th>Session</th><th>PID</th><th>User</th><th>Client</th><th>Elapsed</th><th>Text</th><th></th></tr>");
        for r in &s.running {
            let _ = write!(
                b,
                "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td><pre>{}</pre></td><td>",
                esc(&r.id),
                r.session,
                r.pid,
                esc(&r.user),
                esc(&r.client),
                seconds(r.elapsed_seconds),
                esc(&r.text)
            );
            if s.cancel_refused.is_none() && r.may_cancel {
                let _ = write!(
                    b,
                    "<form method=\"post\" action=\"/api/statements/{}/cancel\"><button type=\"submit\">Cancel</button></form>",
                    esc(&r.id)
                );
            }
            b.push_str("</td></tr>");
        }
        b.push_str("</table>");
    }
    b.push_str(
        "<p class=\"muted\">Cancel stops the statement as a PostgreSQL CancelRequest (psql's \
         Ctrl-C) does: the client gets SQLSTATE 57014 and the statement's writes are undone.</p>",
    );
    b.push_str("<h2>Sessions</h2>");
    if s.sessions.is_empty() {
        b.push_str("<p class=\"muted\">No client is connected.</p>");
    } else {
        b.push_str("<table><tr><th>Session</th><th>PID</th><th>User</th><th>Client</th><th>Connected for</th><th>Statements</th><th>Running</th></tr>");
        for x in &s.sessions {
            let _ = write!(
                b,
                "<tr><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
                x.session,
                x.pid,
                esc(&x.user),
                esc(&x.client),
                seconds(x.connected_seconds),
                x.statements,
                x.running.as_deref().map(esc).unwrap_or_else(|| "idle".into())
            );
        }
        b.push_str("</table>");
    }
    page("/statements", "Running statements", &b)
}

pub fn tables(t: &Tables) -> String {
    let mut b = String::new();
    if t.tables.is_empty() {
        b.push_str("<p class=\"muted\">No tables yet.</p>");
    } else {
        b.push_str("<table><tr><th>Table</th><th>Kind</th><th>Rows</th><th>Files on disk</th><th>Files</th><th>Memtables</th><th>Shards</th><th>Orientation</th><th>Table group</th><th>Primary key</th></tr>");
        for x in &t.tables {
            let _ = write!(
                b,
                "<tr><td><a href=\"#t-{name}\">{name}</a></td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{} rows, {}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(x.kind),
                if x.rows_exact { x.rows.to_string() } else { format!("\u{2248} {}", x.rows) },
                bytes(x.file_bytes),
                x.files.len(),
                x.memtable_rows,
                bytes(x.memtable_bytes),
                x.shard_count,
                esc(&x.orientation),
                esc(&x.table_group),
                esc(&x.primary_key.join(", ")),
                name = esc(&x.name),
            );
        }
        b.push_str("</table>");
        b.push_str(
            "<p class=\"muted\">Rows are live rows, counted exactly for tables with a row \
             tablet of at most 200,000 versions; a count marked \u{2248} comes from storage \
             metadata without a scan, where updated or deleted rows not yet compacted count \
             again. Files on disk excludes the write-ahead logs.</p>",
        );
        for x in &t.tables {
            let _ = write!(
                b,
                "<h2 id=\"t-{name}\">{name}</h2><p>Columns: <code>{}</code>. Visible LSN per shard: {}.</p>",
                esc(&x.columns.join(", ")),
                esc(&format!("{:?}", x.shard_lsns)),
                name = esc(&x.name),
            );
            if x.files.is_empty() {
                b.push_str("<p class=\"muted\">No files yet: every row is still in memtables (and the WAL).</p>");
                continue;
            }
            b.push_str("<table><tr><th>Shard</th><th>File</th><th>Kind</th><th>Level</th><th>Rows</th><th>Size</th></tr>");
            for f in &x.files {
                let _ = write!(
                    b,
                    "<tr><td class=\"n\">{}</td><td><code>{}</code></td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                    f.shard,
                    esc(&f.name),
                    esc(f.kind),
                    f.level.map(|l| l.to_string()).unwrap_or_default(),
                    f.rows,
                    bytes(f.bytes)
                );
            }
            b.push_str("</table>");
        }
    }
    page("/tables", "Tables", &b)
}

pub fn streams(s: &Streams) -> String {
    let mut b = String::new();
    if s.jobs.is_empty() {
        b.push_str("<p class=\"muted\">No stream jobs: create a source and a materialized view over it (<code>CREATE SOURCE</code>, <code>CREATE MATERIALIZED VIEW</code>).</p>");
    }
    for j in &s.jobs {
        let r = &j.job;
        let _ = write!(
            b,
            "<h2>{}</h2><p>Status: <b>{}</b>. Source <code>{}</code> ({}), checkpoint every {} ms.</p>",
            esc(&r.view),
            esc(&r.status),
            esc(&r.source),
            esc(&r.connector),
            r.checkpoint_interval_ms
        );
        b.push_str("<div class=\"graph\">");
        for (i, v) in r.graph.vertices.iter().enumerate() {
            if i > 0 {
                let strategy = r
                    .graph
                    .edges
                    .iter()
                    .find(|e| e.to == v.id)
                    .map(|e| e.strategy)
                    .unwrap_or("");
                let _ = write!(b, "<span class=\"arrow\">&rarr; {}</span>", esc(strategy));
            }
            let _ = write!(
                b,
                "<div class=\"node\"><b>{}</b>parallelism {}{}</div>",
                esc(&v.operators.join(" \u{2192} ")),
                v.parallelism,
                if v.operators.len() > 1 {
                    ", chained"
                } else {
                    ""
                }
            );
        }
        if r.graph.vertices.is_empty() {
            b.push_str("<div class=\"node\">job not started</div>");
        }
        let _ = write!(
            b,
            "<span class=\"arrow\">&rarr; commit at each checkpoint</span><div class=\"node\"><b>table {}</b>sink</div></div>",
            esc(&r.view)
        );
        if !r.steps.is_empty() {
            b.push_str("<p>The view operator, for each batch:</p><ol>");
            for step in &r.steps {
                let _ = write!(b, "<li><code>{}</code></li>", esc(step));
            }
            b.push_str("</ol>");
        }
        b.push_str("<table>");
        row(
            &mut b,
            "Throughput",
            &match (j.throughput_rows_per_second, j.throughput_window_seconds) {
                (Some(rate), Some(window)) => {
                    format!("{rate:.0} source rows/s committed (last {window:.0} s)")
                }
                _ => "measuring (needs two samples, one a second)".to_string(),
            },
        );
        row(
            &mut b,
            "Last checkpoint",
            &match (&r.last_checkpoint, j.last_commit_age_seconds) {
                (Some(ck), Some(age)) => format!(
                    "#{} covering {} source rows, committed {} ago",
                    ck.checkpoint,
                    ck.source_rows,
                    seconds(age)
                ),
                _ => "none committed yet".to_string(),
            },
        );
        let freshness = if r.freshness.is_empty() {
            "no commit yet".to_string()
        } else {
            r.freshness
                .iter()
                .map(|(q, secs)| format!("p{} {}", q * 100.0, seconds(*secs)))
                .collect::<Vec<_>>()
                .join(", ")
                + &format!(" ({} rows since start)", r.freshness_count)
        };
        row(&mut b, "Freshness (arrival to visible)", &esc(&freshness));
        row(
            &mut b,
            "Commits since start",
            &format!("{} ({} rows written)", r.commits, r.rows_written),
        );
        row(
            &mut b,
            "Source records emitted",
            &r.source_records
                .map(|n| n.to_string())
                .unwrap_or_else(|| "job not running".into()),
        );
        row(&mut b, "Back-pressure", &esc(s.back_pressure));
        row(
            &mut b,
            "Definition",
            &format!("<pre>{}</pre>", esc(&r.definition)),
        );
        b.push_str("</table>");
    }
    page("/streams", "Stream jobs", &b)
}

pub fn scheduler(s: &Scheduler) -> String {
    let mut b = String::new();
    let _ = write!(b, "<p class=\"note\">{}</p>", esc(s.note));
    b.push_str("<h2>tokio runtime</h2><table>");
    row(&mut b, "Worker threads", &s.tokio_workers.to_string());
    row(&mut b, "Tasks alive", &s.tokio_alive_tasks.to_string());
    row(
        &mut b,
        "Global queue depth",
        &s.tokio_global_queue_depth.to_string(),
    );
    row(&mut b, "CPUs available", &s.cpus.to_string());
    row(
        &mut b,
        "Client connections",
        &s.connections_in_flight.to_string(),
    );
    b.push_str("</table>");
    page("/scheduler", "Scheduler", &b)
}

#[cfg(test)]
mod tests {
    use super::super::activity::RunningStatement;
    use super::*;

    #[test]
    fn statement_text_is_escaped() {
        let s = Statements {
            sessions: Vec::new(),
            running: vec![RunningStatement {
                id: "1.2".into(),
                session: 1,
                pid: 100,
                user: "<u>".into(),
                client: "127.0.0.1:1".into(),
                connected_at_micros: 0,
                started_at_micros: 0,
                elapsed_seconds: 1.5,
                text: "SELECT '<script>alert(1)</script>'".into(),
                may_cancel: true,
            }],
            cancel_refused: None,
            viewer: None,
        };
        let html = statements(&s);
        assert!(!html.contains("<script>"));
        assert!(!html.contains("<u>"));
        assert!(html.contains("&lt;script&gt;"));
        assert!(html.contains("/api/statements/1.2/cancel"));
    }

    #[test]
    fn no_cancel_button_when_cancel_is_refused() {
        let s = Statements {
            sessions: Vec::new(),
            running: vec![RunningStatement {
                id: "1.2".into(),
                session: 1,
                pid: 100,
                user: "eddy".into(),
                client: "10.0.0.1:1".into(),
                connected_at_micros: 0,
                started_at_micros: 0,
                elapsed_seconds: 1.5,
                text: "SELECT 1".into(),
                may_cancel: true,
            }],
            cancel_refused: Some("not loopback".into()),
            viewer: None,
        };
        let html = statements(&s);
        assert!(!html.contains("<form"));
        assert!(html.contains("Cancel is off"));
    }
}
