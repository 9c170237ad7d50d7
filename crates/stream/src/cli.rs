//! Command-line entry points behind `eddy stream <sub>` (the server crate
//! calls [`run`]) and the `eddy-stream` example binary: `wordcount`,
//! `wordcount-baseline`, `latency`, `nexmark`, `gen-text`.
//!
//! Long runs show progress (indicatif, on stderr) and stop cleanly on Ctrl-C
//! (the job is cancelled).

use std::fs;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::api::StreamEnv;
use crate::error::{Result, StreamError};
use crate::operator::window::{WindowKind, WindowSpec};
use crate::runtime::{JobConfig, JobHandle, JobResult, JobStatus};
use crate::source::list_input_files;
use crate::types::{fast_map, FastMap};
use crate::Word;

/// `eddy stream <sub>` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum StreamCommand {
    /// Count words of a file or directory with the stream engine.
    Wordcount(WordcountArgs),
    /// Single-threaded hash-map word count (the throughput ceiling).
    WordcountBaseline(BaselineArgs),
    /// End-to-end latency of source -> split -> regex filter -> sink.
    Latency(LatencyArgs),
    /// A Nexmark query over generated events.
    Nexmark(NexmarkArgs),
    /// Generate the Zipf text corpus.
    GenText(GenTextArgs),
}

/// `wordcount` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct WordcountArgs {
    /// Input file, or directory (files starting with `_` or `.` are skipped).
    #[arg(long)]
    pub input: PathBuf,
    /// Parallelism of every operator.
    #[arg(long, default_value_t = 2)]
    pub parallelism: usize,
    /// Write `word,count` CSV lines here.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Records per batch.
    #[arg(long, default_value_t = 1024)]
    pub batch_size: usize,
    /// Checkpoint interval in ms (default: none).
    #[arg(long)]
    pub checkpoint_ms: Option<u64>,
    /// Checkpoint directory (default: in memory).
    #[arg(long)]
    pub checkpoint_dir: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// `wordcount-baseline` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct BaselineArgs {
    /// Input file or directory.
    #[arg(long)]
    pub input: PathBuf,
}

/// `latency` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct LatencyArgs {
    /// Lines per second.
    #[arg(long, default_value_t = 40_000)]
    pub rate: u64,
    /// Duration in seconds.
    #[arg(long, default_value_t = 30)]
    pub seconds: u64,
    /// Parallelism of split and filter (source and sink run at 1).
    #[arg(long, default_value_t = 2)]
    pub parallelism: usize,
    /// Output buffer timeout in microseconds.
    #[arg(long, default_value_t = 1000)]
    pub buffer_timeout_us: u64,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// `nexmark` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct NexmarkArgs {
    /// Query: q0, q1, q2, q3, q5, q7 or q8.
    #[arg(long, default_value = "q0")]
    pub query: String,
    /// Number of events.
    #[arg(long, default_value_t = 1_000_000)]
    pub events: u64,
    /// Parallelism.
    #[arg(long, default_value_t = 2)]
    pub parallelism: usize,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// `gen-text` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct GenTextArgs {
    /// Output file.
    #[arg(long)]
    pub output: PathBuf,
    /// Size in MB (10^6 bytes).
    #[arg(long, default_value_t = 100)]
    pub mb: u64,
    /// Vocabulary size.
    #[arg(long, default_value_t = 50_000)]
    pub words: usize,
    /// Seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

/// Runs a subcommand, printing its report to stdout.
pub fn run(cmd: StreamCommand) -> Result<()> {
    match cmd {
        StreamCommand::Wordcount(a) => {
            let r = wordcount(&a)?;
            println!(
                "wordcount: {} bytes in {:.3} s = {:.1} MB/s (parallelism {}, {} words, {} distinct, status {:?})",
                r.bytes, r.seconds, r.mb_per_s, a.parallelism, r.total_words, r.distinct_words, r.status
            );
        }
        StreamCommand::WordcountBaseline(a) => {
            let r = wordcount_baseline(&a.input)?;
            println!(
                "wordcount-baseline: {} bytes in {:.3} s = {:.1} MB/s ({} words, {} distinct)",
                r.bytes, r.seconds, r.mb_per_s, r.total_words, r.distinct_words
            );
        }
        StreamCommand::Latency(a) => {
            let r = latency(&a)?;
            println!(
                "latency: rate {}/s for {} s, {} samples: p50 {:.3} ms, p99 {:.3} ms, p999 {:.3} ms, max {:.3} ms",
                a.rate, a.seconds, r.samples, r.p50_ms, r.p99_ms, r.p999_ms, r.max_ms
            );
        }
        StreamCommand::Nexmark(a) => {
            let r = nexmark(&a)?;
            println!(
                "nexmark {}: {} events in {:.3} s = {:.0} events/s ({:.0} events/s per core), {} results",
                a.query, r.events, r.seconds, r.events_per_s, r.events_per_s_per_core, r.results
            );
        }
        StreamCommand::GenText(a) => {
            let n = gen_text(&a.output, a.mb, a.words, a.seed)?;
            println!("gen-text: wrote {} bytes to {}", n, a.output.display());
        }
    }
    Ok(())
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Installs a Ctrl-C handler that sets a flag (the running job is cancelled).
pub fn install_ctrl_c() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
}

/// Waits for a job with a progress spinner; Ctrl-C cancels it.
fn wait_with_progress(h: JobHandle, quiet: bool, what: &str) -> Result<JobResult> {
    install_ctrl_c();
    let pb = if quiet {
        indicatif::ProgressBar::hidden()
    } else {
        let pb = indicatif::ProgressBar::new_spinner();
        pb.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {elapsed} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        pb
    };
    let start = Instant::now();
    while !h.is_done() {
        if INTERRUPTED.load(Ordering::SeqCst) {
            h.cancel();
        }
        let n = h.source_records();
        let rate = n as f64 / start.elapsed().as_secs_f64().max(1e-9);
        pb.set_message(format!("{what}: {n} records ({rate:.0}/s)"));
        pb.tick();
        std::thread::sleep(Duration::from_millis(100));
    }
    pb.finish_and_clear();
    h.wait()
}

/// Result of a word count.
#[derive(Debug, Clone)]
pub struct WordcountReport {
    /// Input bytes.
    pub bytes: u64,
    /// Wall time.
    pub seconds: f64,
    /// Input MB/s (10^6 bytes).
    pub mb_per_s: f64,
    /// Words counted.
    pub total_words: u64,
    /// Distinct words.
    pub distinct_words: usize,
    /// Job status.
    pub status: JobStatus,
}

fn input_bytes(p: &Path) -> Result<u64> {
    Ok(list_input_files(p)?.iter().map(|f| f.1).sum())
}

/// Builds the WordCount job: lines -> split -> key by word -> count.
pub fn wordcount_job(env: &StreamEnv, input: &Path) -> crate::api::DataStream<(Word, u64)> {
    env.read_text_file(input)
        .flat_map(|line: String, out: &mut Vec<(Word, u64)>| {
            for w in line.split_whitespace() {
                out.push((Word::new(w), 1));
            }
        })
        .name("split")
        .key_by(|(w, _): &(Word, u64)| w.clone())
        .reduce_at_end(|acc: &mut (Word, u64), v: (Word, u64)| acc.1 += v.1)
        .name("count")
}

/// `eddy stream wordcount`.
pub fn wordcount(a: &WordcountArgs) -> Result<WordcountReport> {
    let bytes = input_bytes(&a.input)?;
    let mut cfg = JobConfig::default()
        .parallelism(a.parallelism)
        .slots(a.parallelism)
        .batch_size(a.batch_size);
    if let Some(ms) = a.checkpoint_ms {
        cfg = cfg.checkpoint_interval(Duration::from_millis(ms));
    }
    if let Some(d) = &a.checkpoint_dir {
        cfg = cfg.checkpoint_dir(d.clone());
    }
    let env = StreamEnv::new(cfg);
    let counts = wordcount_job(&env, &a.input).collect();
    let start = Instant::now();
    let h = env.submit("wordcount")?;
    let res = wait_with_progress(h, a.quiet, "wordcount")?;
    let seconds = start.elapsed().as_secs_f64();
    let rows = counts.take();
    if let Some(out) = &a.output {
        let f = fs::File::create(out).map_err(|e| StreamError::io(out.display().to_string(), e))?;
        let mut w = BufWriter::new(f);
        let mut sorted = rows.clone();
        sorted.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
        for (word, c) in &sorted {
            writeln!(w, "{word},{c}").map_err(|e| StreamError::io(out.display().to_string(), e))?;
        }
        w.flush()
            .map_err(|e| StreamError::io(out.display().to_string(), e))?;
    }
    Ok(WordcountReport {
        bytes,
        seconds,
        mb_per_s: bytes as f64 / 1e6 / seconds,
        total_words: rows.iter().map(|r| r.1).sum(),
        distinct_words: rows.len(),
        status: res.status,
    })
}

/// The ceiling: a plain single-threaded hash-map word count (read lines,
/// split on whitespace, count in a hash map).
pub fn wordcount_baseline(input: &Path) -> Result<WordcountReport> {
    let start = Instant::now();
    let mut counts: FastMap<String, u64> = fast_map();
    let mut bytes = 0u64;
    let mut line = String::new();
    for (p, _) in list_input_files(input)? {
        let f = fs::File::open(&p).map_err(|e| StreamError::io(p.display().to_string(), e))?;
        let mut r = BufReader::with_capacity(1 << 20, f);
        loop {
            line.clear();
            let n = r
                .read_line(&mut line)
                .map_err(|e| StreamError::io(p.display().to_string(), e))?;
            if n == 0 {
                break;
            }
            bytes += n as u64;
            for w in line.split_whitespace() {
                match counts.get_mut(w) {
                    Some(c) => *c += 1,
                    None => {
                        counts.insert(w.to_string(), 1);
                    }
                }
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(WordcountReport {
        bytes,
        seconds,
        mb_per_s: bytes as f64 / 1e6 / seconds,
        total_words: counts.values().sum(),
        distinct_words: counts.len(),
        status: JobStatus::Finished,
    })
}

/// SplitMix64: a tiny deterministic generator, stable across crate versions.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The benchmark vocabulary: `n` distinct lowercase words, deterministic by seed.
pub fn vocabulary(n: usize, seed: u64) -> Vec<String> {
    let mut rng = SplitMix(seed);
    let mut seen = std::collections::HashSet::new();
    let mut words = Vec::with_capacity(n);
    while words.len() < n {
        let len = 2 + (rng.next() % 6 + rng.next() % 6) as usize; // 2..=12, peaked at 7
        let w: String = (0..len)
            .map(|_| (b'a' + (rng.next() % 26) as u8) as char)
            .collect();
        if seen.insert(w.clone()) {
            words.push(w);
        }
    }
    words
}

/// Writes `mb` MB of Zipf(1.0)-distributed text over `words` words (about
/// 12 words a line), deterministic by seed. Returns the bytes written.
pub fn gen_text(output: &Path, mb: u64, words: usize, seed: u64) -> Result<u64> {
    let vocab = vocabulary(words.max(1), seed);
    let mut cdf = Vec::with_capacity(vocab.len());
    let mut acc = 0.0;
    for r in 1..=vocab.len() {
        acc += 1.0 / r as f64;
        cdf.push(acc);
    }
    let total = acc;
    let mut rng = SplitMix(seed ^ 0xabcdef);
    let f =
        fs::File::create(output).map_err(|e| StreamError::io(output.display().to_string(), e))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let target = mb * 1_000_000;
    let mut written = 0u64;
    let mut line = String::with_capacity(256);
    while written < target {
        line.clear();
        let n = 8 + rng.next() % 9;
        for i in 0..n {
            let u = rng.unit() * total;
            let idx = cdf.partition_point(|c| *c < u).min(vocab.len() - 1);
            if i > 0 {
                line.push(' ');
            }
            line.push_str(&vocab[idx]);
        }
        line.push('\n');
        w.write_all(line.as_bytes())
            .map_err(|e| StreamError::io(output.display().to_string(), e))?;
        written += line.len() as u64;
    }
    w.flush()
        .map_err(|e| StreamError::io(output.display().to_string(), e))?;
    Ok(written)
}

/// Result of the latency benchmark.
#[derive(Debug, Clone)]
pub struct LatencyReport {
    /// Samples recorded.
    pub samples: u64,
    /// Median, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// 99.9th percentile, ms.
    pub p999_ms: f64,
    /// Maximum, ms.
    pub max_ms: f64,
}

static LAT_EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

fn mono_ns() -> u64 {
    LAT_EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

const LAT_WORDS: [&str; 20] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
];

/// `eddy stream latency`: timestamped lines -> split -> regex filter -> a
/// sink recording now - emit time in an HdrHistogram.
pub fn latency(a: &LatencyArgs) -> Result<LatencyReport> {
    let cfg = JobConfig::default()
        .parallelism(a.parallelism)
        .slots(a.parallelism.max(1))
        .buffer_timeout(Duration::from_micros(a.buffer_timeout_us));
    let env = StreamEnv::new(cfg);
    let hist = Arc::new(Mutex::new(
        hdrhistogram::Histogram::<u64>::new_with_bounds(1, 600_000_000, 3)
            .map_err(|e| StreamError::Internal(format!("histogram: {e}")))?,
    ));
    let h2 = hist.clone();
    let re = regex_lite::Regex::new("^[a-m][a-z]*$")
        .map_err(|e| StreamError::Internal(e.to_string()))?;
    mono_ns();
    env.generate(Some(a.rate * a.seconds), Some(a.rate as f64), |i: u64| {
        let mut s = mono_ns().to_string();
        for k in 0..4u64 {
            s.push(' ');
            s.push_str(LAT_WORDS[((i * 7 + k * 13) % 20) as usize]);
        }
        s
    })
    .set_parallelism(1)
    .rebalance()
    .flat_map(|line: String, out: &mut Vec<(u64, String)>| {
        let mut it = line.split(' ');
        let ts = it.next().and_then(|t| t.parse::<u64>().ok()).unwrap_or(0);
        for w in it {
            out.push((ts, w.to_string()));
        }
    })
    .filter(move |(_, w): &(u64, String)| re.is_match(w))
    .rebalance()
    .set_parallelism(1)
    .for_each(move |(ts, _): (u64, String)| {
        let us = (mono_ns().saturating_sub(ts) / 1000).max(1);
        let _ = h2.lock().record(us);
    })
    .set_parallelism(1);
    let h = env.submit("latency")?;
    wait_with_progress(h, a.quiet, "latency")?;
    let hist = hist.lock();
    Ok(LatencyReport {
        samples: hist.len(),
        p50_ms: hist.value_at_quantile(0.5) as f64 / 1000.0,
        p99_ms: hist.value_at_quantile(0.99) as f64 / 1000.0,
        p999_ms: hist.value_at_quantile(0.999) as f64 / 1000.0,
        max_ms: hist.max() as f64 / 1000.0,
    })
}

/// Result of a Nexmark run.
#[derive(Debug, Clone)]
pub struct NexmarkReport {
    /// Events generated.
    pub events: u64,
    /// Wall time.
    pub seconds: f64,
    /// Throughput.
    pub events_per_s: f64,
    /// Throughput per core (divided by parallelism).
    pub events_per_s_per_core: f64,
    /// Result records.
    pub results: usize,
}

/// Builds a Nexmark query; returns a handle counting its results.
pub fn nexmark_job(
    env: &StreamEnv,
    query: &str,
    events: u64,
) -> Result<crate::operator::sink::CollectHandle<u64>> {
    use nexmark::event::Event;
    let ev = env.nexmark(events);
    let bids = ev.flat_map(|e: Event, out: &mut Vec<nexmark::event::Bid>| {
        if let Event::Bid(b) = e {
            out.push(b)
        }
    });
    let ts = |ms: u64| ms as i64;
    // every query ends in a per-subtask count of its results
    let count = |s: crate::api::DataStream<u64>| s.collect();
    Ok(match query {
        "q0" => count(bids.map(|b| b.price as u64)),
        "q1" => count(bids.map(|b| (b.price as f64 * 0.908) as u64)),
        "q2" => count(
            bids.filter(|b| b.auction % 123 == 0)
                .map(|b| b.auction as u64),
        ),
        "q3" => {
            #[derive(Clone, serde::Serialize, serde::Deserialize)]
            enum Q3 {
                Person(u64, String, String, String),
                Auction(u64, u64),
            }
            let input = ev.flat_map(|e: Event, out: &mut Vec<Q3>| match e {
                Event::Person(p) if ["OR", "ID", "CA"].contains(&p.state.as_str()) => {
                    out.push(Q3::Person(p.id as u64, p.name, p.city, p.state))
                }
                Event::Auction(a) if a.category == 10 => {
                    out.push(Q3::Auction(a.seller as u64, a.id as u64))
                }
                _ => {}
            });
            count(
                input
                    .key_by(|q: &Q3| match q {
                        Q3::Person(id, ..) => *id,
                        Q3::Auction(seller, _) => *seller,
                    })
                    .process(|_k: &u64, q: Q3, st, out: &mut Vec<u64>| {
                        match q {
                            Q3::Person(id, name, ..) => {
                                for a in st.list::<u64>("auctions")?.get(&id).to_vec() {
                                    out.push(a);
                                }
                                st.list::<u64>("auctions")?.clear(&id);
                                st.value::<String>("person")?.set(&id, name);
                            }
                            Q3::Auction(seller, id) => {
                                if st.value::<String>("person")?.get(&seller).is_some() {
                                    out.push(id);
                                } else {
                                    st.list::<u64>("auctions")?.add(&seller, id);
                                }
                            }
                        }
                        Ok(())
                    }),
            )
        }
        "q5" => {
            let spec = WindowSpec::sliding(Duration::from_secs(10), Duration::from_secs(2))
                .event_time(move |b: &(u64, u64, u64)| b.2 as i64);
            let counts = bids
                .map(move |b| (b.auction as u64, 1u64, ts(b.date_time) as u64))
                .assign_timestamps(1000, |b: &(u64, u64, u64)| b.2 as i64)
                .key_by(|b: &(u64, u64, u64)| b.0)
                .window(spec)
                .reduce(|a: &mut (u64, u64, u64), b| a.1 += b.1);
            count(
                counts
                    .key_by(|r| r.window.start)
                    .reduce_at_end(|a, b| {
                        if b.value.1 > a.value.1 {
                            *a = b
                        }
                    })
                    .map(|r| r.value.0),
            )
        }
        "q7" => {
            let spec = WindowSpec::tumbling(Duration::from_secs(10))
                .event_time(|b: &(u64, u64)| b.1 as i64);
            count(
                bids.map(move |b| (b.price as u64, ts(b.date_time) as u64))
                    .assign_timestamps(1000, |b: &(u64, u64)| b.1 as i64)
                    .key_by(|_| 0u8)
                    .window(spec)
                    .reduce(|a: &mut (u64, u64), b| {
                        if b.0 > a.0 {
                            *a = b
                        }
                    })
                    .map(|r| r.value.0),
            )
        }
        "q8" => {
            let persons = ev
                .flat_map(|e: Event, out: &mut Vec<(u64, String, i64)>| {
                    if let Event::Person(p) = e {
                        out.push((p.id as u64, p.name, p.date_time as i64))
                    }
                })
                .assign_timestamps(1000, |p: &(u64, String, i64)| p.2);
            let auctions = ev
                .flat_map(|e: Event, out: &mut Vec<(u64, i64)>| {
                    if let Event::Auction(a) = e {
                        out.push((a.seller as u64, a.date_time as i64))
                    }
                })
                .assign_timestamps(1000, |a: &(u64, i64)| a.1);
            let spec = crate::api::JoinSpec::event_time(
                WindowKind::Tumbling { size: 10_000 },
                |p: &(u64, String, i64)| p.2,
                |a: &(u64, i64)| a.1,
            );
            count(persons.join(&auctions, |p| p.0, |a| a.0, spec, |k: &u64, _p, _a| *k)?)
        }
        q => {
            return Err(StreamError::Plan(format!(
                "nexmark query {q} is not implemented (q0-q3, q5, q7, q8 are)"
            )))
        }
    })
}

/// `eddy stream nexmark`.
pub fn nexmark(a: &NexmarkArgs) -> Result<NexmarkReport> {
    let env = StreamEnv::new(
        JobConfig::default()
            .parallelism(a.parallelism)
            .slots(a.parallelism),
    );
    let out = nexmark_job(&env, &a.query, a.events)?;
    let start = Instant::now();
    let h = env.submit(&format!("nexmark-{}", a.query))?;
    wait_with_progress(h, a.quiet, "nexmark")?;
    let seconds = start.elapsed().as_secs_f64();
    let eps = a.events as f64 / seconds;
    Ok(NexmarkReport {
        events: a.events,
        seconds,
        events_per_s: eps,
        events_per_s_per_core: eps / a.parallelism.max(1) as f64,
        results: out.len(),
    })
}
