//! A real Apache Kafka broker (single node, KRaft mode) for end-to-end
//! tests, from the jars `scripts/ci/install-kafka.sh` puts in
//! `target/kafka/` and the installed Java 17. The broker's storage is
//! formatted in a temporary directory and it listens on free loopback
//! ports; it is killed when the [`Broker`] is dropped.
//!
//! Where the install fails (no mvn, no java, no network) [`Broker::start`]
//! returns `None` after a notice, unless `CI` or `EDDY_REQUIRE_KAFKA` is
//! set: then it fails the test.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::drivers::repo_root;
use crate::common::free_port;

pub struct Broker {
    child: Child,
    pub port: u16,
    dir: tempfile::TempDir,
}

/// Whether a missing Kafka must fail the test rather than skip it.
pub fn required() -> bool {
    std::env::var_os("CI").is_some() || std::env::var_os("EDDY_REQUIRE_KAFKA").is_some()
}

fn skip_or_fail(why: &str) -> Option<Broker> {
    assert!(!required(), "{why}, and CI requires the Kafka tests");
    eprintln!("NOTICE: {why}; the Kafka test is skipped");
    None
}

fn jars() -> Option<PathBuf> {
    let out = Command::new("bash")
        .arg(repo_root().join("scripts/ci/install-kafka.sh"))
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            eprintln!(
                "install-kafka.sh failed:\n{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            return None;
        }
        Err(e) => {
            eprintln!("cannot run install-kafka.sh: {e}");
            return None;
        }
    }
    let dir = repo_root().join("target/kafka");
    let has_broker = std::fs::read_dir(&dir).ok()?.flatten().any(|e| {
        let name = e.file_name();
        let name = name.to_string_lossy();
        name.starts_with("kafka_2.13-") && name.ends_with(".jar")
    });
    has_broker.then_some(dir)
}

impl Broker {
    /// Formats storage and starts a broker; waits until it accepts
    /// connections (at most 90 s).
    pub fn start() -> Option<Broker> {
        let Some(jars) = jars() else {
            return skip_or_fail("Apache Kafka is not installed (scripts/ci/install-kafka.sh)");
        };
        let classpath = format!("{}/*", jars.display());
        let dir = tempfile::tempdir().expect("broker dir");
        let port = free_port();
        let controller = free_port();
        let props = dir.path().join("server.properties");
        std::fs::write(
            &props,
            format!(
                "process.roles=broker,controller\n\
                 node.id=1\n\
                 controller.quorum.voters=1@127.0.0.1:{controller}\n\
                 listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
                 controller.listener.names=CONTROLLER\n\
                 listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
                 inter.broker.listener.name=PLAINTEXT\n\
                 log.dirs={}\n\
                 num.partitions=1\n\
                 offsets.topic.replication.factor=1\n\
                 transaction.state.log.replication.factor=1\n\
                 transaction.state.log.min.isr=1\n\
                 group.initial.rebalance.delay.ms=0\n",
                dir.path().join("logs").display()
            ),
        )
        .expect("server.properties");
        let java_opts = ["-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"];
        let format = Command::new("java")
            .args(java_opts)
            .arg("-cp")
            .arg(&classpath)
            .args([
                "kafka.tools.StorageTool",
                "format",
                "-t",
                "MkU3OEVBNTcwNTJENDM2Qg",
                "-c",
            ])
            .arg(&props)
            .stdin(Stdio::null())
            .output();
        match format {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                return skip_or_fail(&format!(
                    "kafka-storage format failed: {}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                ))
            }
            Err(e) => return skip_or_fail(&format!("cannot run java: {e}")),
        }
        let log = std::fs::File::create(dir.path().join("broker.log")).expect("broker log");
        let child = Command::new("java")
            .args(java_opts)
            .arg("-cp")
            .arg(&classpath)
            .arg("kafka.Kafka")
            .arg(&props)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().expect("log")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start the Kafka broker");
        let mut broker = Broker { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(90);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = broker.child.try_wait() {
                panic!("the Kafka broker exited ({status}): {}", broker.log_tail());
            }
            assert!(
                Instant::now() < deadline,
                "the Kafka broker did not start: {}",
                broker.log_tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(broker)
    }

    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("broker.log")).unwrap_or_default();
        let start = text.len().saturating_sub(4000);
        text.get(start..).unwrap_or_default().to_string()
    }

    /// A client of the broker.
    pub async fn client(&self) -> rskafka::client::Client {
        rskafka::client::ClientBuilder::new(vec![self.address()])
            .build()
            .await
            .expect("Kafka client")
    }

    /// Creates `topic` with `partitions` partitions and waits until every
    /// partition accepts requests.
    pub async fn create_topic(&self, topic: &str, partitions: i32) {
        let client = self.client().await;
        client
            .controller_client()
            .expect("controller")
            .create_topic(topic, partitions, 1, 10_000)
            .await
            .expect("create topic");
        for p in 0..partitions {
            let pc = client
                .partition_client(
                    topic,
                    p,
                    rskafka::client::partition::UnknownTopicHandling::Retry,
                )
                .await
                .expect("partition");
            pc.get_offset(rskafka::client::partition::OffsetAt::Latest)
                .await
                .expect("partition ready");
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
