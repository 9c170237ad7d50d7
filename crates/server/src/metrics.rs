//! Statement counters and latency histograms, printed in the Prometheus
//! text format; the console's HTTP listener (`crate::console`) serves them
//! at `GET /metrics`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use parking_lot::Mutex;

#[derive(Default)]
struct KindStats {
    count: u64,
    errors: u64,
    sum_micros: u64,
    hist: Option<Histogram<u64>>,
}

/// Per statement kind: count, errors, latency histogram (microseconds).
#[derive(Default)]
pub struct Metrics {
    kinds: Mutex<BTreeMap<&'static str, KindStats>>,
    pub connections: AtomicI64,
    /// Other components' figures (stream jobs), appended to the exposition.
    sections: Mutex<Vec<Section>>,
}

type Section = Box<dyn Fn(&mut String) + Send + Sync>;

impl Metrics {
    pub fn record(&self, kind: &'static str, elapsed: Duration, ok: bool) {
        let micros = elapsed.as_micros().min(u64::MAX as u128) as u64;
        let mut kinds = self.kinds.lock();
        let k = kinds.entry(kind).or_default();
        k.count += 1;
        if !ok {
            k.errors += 1;
        }
        k.sum_micros = k.sum_micros.saturating_add(micros);
        let h = k.hist.get_or_insert_with(|| {
            Histogram::new_with_bounds(1, 3_600_000_000, 3)
                .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable_hist()))
        });
        let _ = h.record(micros.max(1));
    }

    /// Adds a component whose figures `render` appends.
    pub fn add_section(&self, section: Section) {
        self.sections.lock().push(section);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for section in self.sections.lock().iter() {
            section(&mut out);
        }
        let kinds = self.kinds.lock();
        out.push_str("# HELP eddy_statements_total Statements executed, by kind.\n# TYPE eddy_statements_total counter\n");
        for (k, s) in kinds.iter() {
            let _ = writeln!(out, "eddy_statements_total{{kind=\"{k}\"}} {}", s.count);
        }
        out.push_str("# HELP eddy_statement_errors_total Statements that failed, by kind.\n# TYPE eddy_statement_errors_total counter\n");
        for (k, s) in kinds.iter() {
            let _ = writeln!(
                out,
                "eddy_statement_errors_total{{kind=\"{k}\"}} {}",
                s.errors
            );
        }
        out.push_str("# HELP eddy_statement_duration_seconds Statement latency, by kind.\n# TYPE eddy_statement_duration_seconds summary\n");
        for (k, s) in kinds.iter() {
            if let Some(h) = &s.hist {
                for q in [0.5, 0.9, 0.99, 0.999] {
                    let _ = writeln!(
                        out,
                        "eddy_statement_duration_seconds{{kind=\"{k}\",quantile=\"{q}\"}} {:.6}",
                        h.value_at_quantile(q) as f64 / 1e6
                    );
                }
            }
            let _ = writeln!(
                out,
                "eddy_statement_duration_seconds_sum{{kind=\"{k}\"}} {:.6}",
                s.sum_micros as f64 / 1e6
            );
            let _ = writeln!(
                out,
                "eddy_statement_duration_seconds_count{{kind=\"{k}\"}} {}",
                s.count
            );
        }
        out.push_str(
            "# HELP eddy_connections Open client connections.\n# TYPE eddy_connections gauge\n",
        );
        let _ = writeln!(
            out,
            "eddy_connections {}",
            self.connections.load(Ordering::Relaxed)
        );
        out.push_str(&eddy_gpu::GPU_METRICS.render_prometheus());
        out
    }
}

fn unreachable_hist() -> Histogram<u64> {
    // Histogram::new(3) only fails for sigfig > 5; this is never reached.
    match Histogram::new(2) {
        Ok(h) => h,
        Err(_) => std::process::abort(),
    }
}

/// A per-class series: name, Prometheus type, help, value of one class.
type ClassSeries = (
    &'static str,
    &'static str,
    &'static str,
    fn(&eddy_sched::ClassSnapshot) -> String,
);

/// Per-class scheduler counters (`eddy_sched`): CPU time, polls, time
/// runnable contexts waited for a slot, contexts queued now, groups and
/// contexts alive.
pub fn render_scheduler(out: &mut String, scheduler: &eddy_sched::Scheduler) {
    let classes = scheduler.classes();
    let series: [ClassSeries; 7] = [
        (
            "eddy_sched_cpu_seconds_total",
            "counter",
            "CPU time used by execution contexts, by scheduling class.",
            |c| format!("{:.6}", c.cpu.as_secs_f64()),
        ),
        (
            "eddy_sched_polls_total",
            "counter",
            "Polls of execution contexts, by scheduling class.",
            |c| c.polls.to_string(),
        ),
        (
            "eddy_sched_wait_seconds_total",
            "counter",
            "Time runnable contexts waited for a CPU slot, by scheduling class.",
            |c| format!("{:.6}", c.wait.as_secs_f64()),
        ),
        (
            "eddy_sched_max_wait_seconds",
            "gauge",
            "Longest wait of a runnable context for a CPU slot since start, by scheduling class.",
            |c| format!("{:.6}", c.max_wait.as_secs_f64()),
        ),
        (
            "eddy_sched_queued",
            "gauge",
            "Runnable contexts waiting for a CPU slot now, by scheduling class.",
            |c| c.queued.to_string(),
        ),
        (
            "eddy_sched_groups",
            "gauge",
            "Scheduling groups alive now, by class.",
            |c| c.groups.to_string(),
        ),
        (
            "eddy_sched_contexts",
            "gauge",
            "Execution contexts alive now, by scheduling class.",
            |c| c.contexts.to_string(),
        ),
    ];
    for (name, kind, help, value) in series {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for c in &classes {
            let _ = writeln!(out, "{name}{{class=\"{}\"}} {}", c.name, value(c));
        }
    }
    let _ = writeln!(
        out,
        "# HELP eddy_sched_poll_seconds CPU time of one poll of an execution context (the quantum a waking context may wait for), by scheduling class.\n# TYPE eddy_sched_poll_seconds histogram"
    );
    for c in &classes {
        let mut cumulative = 0u64;
        for (i, n) in c.poll_buckets.iter().enumerate() {
            cumulative += n;
            let le = eddy_sched::POLL_BUCKETS_NS
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |ns| format!("{}", *ns as f64 / 1e9));
            let _ = writeln!(
                out,
                "eddy_sched_poll_seconds_bucket{{class=\"{}\",le=\"{le}\"}} {cumulative}",
                c.name
            );
        }
        let _ = writeln!(
            out,
            "eddy_sched_poll_seconds_sum{{class=\"{}\"}} {:.6}\neddy_sched_poll_seconds_count{{class=\"{}\"}} {}",
            c.name,
            c.cpu.as_secs_f64(),
            c.name,
            c.polls
        );
    }
    let _ = writeln!(
        out,
        "# HELP eddy_sched_threads Scheduler worker threads (slots plus spares for blocked workers).\n# TYPE eddy_sched_threads gauge\neddy_sched_threads {}",
        scheduler.threads()
    );
}

/// The admission gate's series (`eddy_sql::admission`), where one is set.
pub fn render_admission(out: &mut String, gate: &eddy_sql::admission::Admission) {
    use std::fmt::Write;
    let s = gate.stats();
    let series: [(&str, &str, &str, String); 6] = [
        (
            "eddy_admission_max_running",
            "gauge",
            "Analytical statements admitted at once (scheduler.max_running_queries).",
            s.max_running.to_string(),
        ),
        (
            "eddy_admission_running",
            "gauge",
            "Analytical statements holding a place now.",
            s.running.to_string(),
        ),
        (
            "eddy_admission_queued",
            "gauge",
            "Analytical statements waiting for a place now.",
            s.queued.to_string(),
        ),
        (
            "eddy_admission_admitted_total",
            "counter",
            "Analytical statements given a place.",
            s.admitted.to_string(),
        ),
        (
            "eddy_admission_refused_total",
            "counter",
            "Analytical statements refused with 53000 because the queue was full.",
            s.refused.to_string(),
        ),
        (
            "eddy_admission_wait_seconds_total",
            "counter",
            "Time analytical statements waited in the queue.",
            format!("{:.6}", s.wait_ns as f64 / 1e9),
        ),
    ];
    for (name, kind, help, value) in series {
        let _ = write!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counts_and_quantiles() {
        let m = Metrics::default();
        m.record("select", Duration::from_millis(2), true);
        m.record("select", Duration::from_millis(4), false);
        let text = m.render();
        assert!(text.contains("eddy_statements_total{kind=\"select\"} 2"));
        assert!(text.contains("eddy_statement_errors_total{kind=\"select\"} 1"));
        assert!(text.contains("quantile=\"0.99\""));
    }
}
