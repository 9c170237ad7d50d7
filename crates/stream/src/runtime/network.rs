//! Network edges: a channel whose producer and consumer run on different
//! TaskManagers is a memory channel plus a network task on each side — a
//! `NetworkSender` thread that drains the producer's channel into a TCP
//! connection, and a receiver thread that fills the consumer's channel.
//!
//! Wire format per connection: the channel id (u64 LE), then frames
//! `[kind u8][len u32 LE][payload]` with kind 0 = data (the batch encoded by
//! the producer's `TypeInfo`), 1 = watermark (i64), 2 = barrier (u64),
//! 3 = end. Frames of one channel are FIFO, like a memory channel.

use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::error::{Result, StreamError};
use crate::runtime::task::{send_blocking, TaskEvent};
use crate::types::{AnyBatch, CheckpointId, Message, SubtaskId};

/// Encodes a batch of the producer's type.
pub type EncodeFn = fn(&AnyBatch) -> Result<Vec<u8>>;
/// Decodes a batch of the producer's type.
pub type DecodeFn = fn(&[u8]) -> Result<AnyBatch>;

const MAX_FRAME: usize = 256 << 20;

fn net(e: std::io::Error, what: &str) -> StreamError {
    StreamError::Network(format!("{what}: {e}"))
}

fn write_frame(w: &mut impl Write, kind: u8, payload: &[u8]) -> Result<()> {
    w.write_all(&[kind]).map_err(|e| net(e, "write"))?;
    w.write_all(&(payload.len() as u32).to_le_bytes())
        .map_err(|e| net(e, "write"))?;
    w.write_all(payload).map_err(|e| net(e, "write"))
}

/// Poll interval of socket reads and writes: a blocked network task notices
/// cancellation within this time.
const IO_POLL: Duration = Duration::from_millis(100);

/// A TCP stream whose blocking reads and writes wake up every `IO_POLL` to
/// check the attempt's cancel flag (a timed-out `read`/`write` transfers
/// nothing, so retrying it loses no bytes).
struct CancellableStream {
    s: TcpStream,
    cancel: Arc<AtomicBool>,
}

impl CancellableStream {
    fn new(s: TcpStream, cancel: Arc<AtomicBool>) -> Result<Self> {
        s.set_read_timeout(Some(IO_POLL))
            .map_err(|e| net(e, "read timeout"))?;
        s.set_write_timeout(Some(IO_POLL))
            .map_err(|e| net(e, "write timeout"))?;
        Ok(CancellableStream { s, cancel })
    }
    fn retry<T>(
        &mut self,
        mut f: impl FnMut(&mut TcpStream) -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        loop {
            match f(&mut self.s) {
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    if self.cancel.load(Ordering::Relaxed) {
                        return Err(std::io::Error::other("cancelled"));
                    }
                }
                r => return r,
            }
        }
    }
}

impl Read for CancellableStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.retry(|s| s.read(buf))
    }
}

impl Write for CancellableStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.retry(|s| s.write(buf))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.retry(|s| s.flush())
    }
}

fn connect(addr: &str, cancel: &AtomicBool) -> Result<TcpStream> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => return Ok(s),
            Err(e) => {
                if cancel.load(Ordering::Relaxed) {
                    return Err(StreamError::Cancelled);
                }
                if Instant::now() > deadline {
                    return Err(net(e, &format!("connect {addr}")));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

fn run_sender(
    rx: Receiver<Message>,
    channel: usize,
    addr: &str,
    encode: EncodeFn,
    cancel: &Arc<AtomicBool>,
) -> Result<()> {
    let s = connect(addr, cancel)?;
    s.set_nodelay(true).map_err(|e| net(e, "nodelay"))?;
    let mut w = BufWriter::with_capacity(1 << 16, CancellableStream::new(s, cancel.clone())?);
    w.write_all(&(channel as u64).to_le_bytes())
        .map_err(|e| net(e, "handshake"))?;
    loop {
        let msg = match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => {
                if cancel.load(Ordering::Relaxed) {
                    return Err(StreamError::Cancelled);
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return Err(StreamError::ChannelClosed),
        };
        let end = matches!(msg, Message::End);
        match msg {
            Message::Data(b) => write_frame(&mut w, 0, &encode(&b)?)?,
            Message::Watermark(t) => write_frame(&mut w, 1, &t.to_le_bytes())?,
            Message::Barrier(id) => write_frame(&mut w, 2, &id.0.to_le_bytes())?,
            Message::End => write_frame(&mut w, 3, &[])?,
        }
        if rx.is_empty() || end {
            w.flush().map_err(|e| net(e, "flush"))?;
        }
        if end {
            return Ok(());
        }
    }
}

/// Starts the sender task of one outgoing network channel.
pub fn spawn_sender(
    rx: Receiver<Message>,
    channel: usize,
    addr: String,
    encode: EncodeFn,
    cancel: Arc<AtomicBool>,
    events: Sender<TaskEvent>,
    owner: SubtaskId,
) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("net-send-{channel}"))
        .spawn(move || {
            if let Err(e) = run_sender(rx, channel, &addr, encode, &cancel) {
                if !matches!(e, StreamError::Cancelled) && !cancel.load(Ordering::Relaxed) {
                    let _ = events.send(TaskEvent::Failed {
                        task: owner,
                        error: e,
                    });
                }
            }
        })
        .map_err(|e| StreamError::io("spawn network sender", e))
}

fn read_exact(r: &mut impl Read, buf: &mut [u8]) -> Result<()> {
    r.read_exact(buf).map_err(|e| net(e, "read"))
}

fn run_receiver(
    s: TcpStream,
    incoming: &HashMap<usize, (Sender<Message>, DecodeFn)>,
    cancel: &Arc<AtomicBool>,
) -> Result<()> {
    let mut r = BufReader::with_capacity(1 << 16, CancellableStream::new(s, cancel.clone())?);
    let mut id = [0u8; 8];
    read_exact(&mut r, &mut id)?;
    let channel = u64::from_le_bytes(id) as usize;
    let Some((tx, decode)) = incoming.get(&channel) else {
        return Err(StreamError::Network(format!("unknown channel {channel}")));
    };
    let mut payload = Vec::new();
    loop {
        let mut head = [0u8; 5];
        read_exact(&mut r, &mut head)?;
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if len > MAX_FRAME {
            return Err(StreamError::Network(format!("frame of {len} bytes")));
        }
        payload.resize(len, 0);
        read_exact(&mut r, &mut payload)?;
        let word = || -> Result<[u8; 8]> {
            payload
                .get(..8)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| StreamError::Network("short frame".into()))
        };
        let msg = match head[0] {
            0 => Message::Data(decode(&payload)?),
            1 => Message::Watermark(i64::from_le_bytes(word()?)),
            2 => Message::Barrier(CheckpointId(u64::from_le_bytes(word()?))),
            3 => Message::End,
            k => return Err(StreamError::Network(format!("unknown frame kind {k}"))),
        };
        let end = matches!(msg, Message::End);
        send_blocking(tx, msg, cancel)?;
        if end {
            return Ok(());
        }
    }
}

/// Accepts one connection per incoming network channel and starts a
/// receiver task for each. Returns when every expected channel connected
/// (or on cancel / timeout).
pub fn spawn_listener(
    listener: TcpListener,
    incoming: HashMap<usize, (Sender<Message>, DecodeFn)>,
    cancel: Arc<AtomicBool>,
    events: Sender<TaskEvent>,
    owner: SubtaskId,
) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("net-listen".into())
        .spawn(move || {
            let incoming = Arc::new(incoming);
            let fail = |e: StreamError| {
                let _ = events.send(TaskEvent::Failed {
                    task: owner,
                    error: e,
                });
            };
            if let Err(e) = listener.set_nonblocking(true) {
                return fail(net(e, "listener"));
            }
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut handles = Vec::new();
            while handles.len() < incoming.len() {
                if cancel.load(Ordering::Relaxed) {
                    return;
                }
                match listener.accept() {
                    Ok((s, _)) => {
                        if let Err(e) = s.set_nonblocking(false) {
                            return fail(net(e, "accept"));
                        }
                        let inc = incoming.clone();
                        let c = cancel.clone();
                        let ev = events.clone();
                        let h =
                            std::thread::Builder::new()
                                .name("net-recv".into())
                                .spawn(move || {
                                    if let Err(e) = run_receiver(s, &inc, &c) {
                                        if !matches!(e, StreamError::Cancelled)
                                            && !c.load(Ordering::Relaxed)
                                        {
                                            let _ = ev.send(TaskEvent::Failed {
                                                task: owner,
                                                error: e,
                                            });
                                        }
                                    }
                                });
                        match h {
                            Ok(h) => handles.push(h),
                            Err(e) => return fail(StreamError::io("spawn receiver", e)),
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        if Instant::now() > deadline {
                            return fail(StreamError::Network(
                                "peers did not connect in 60 s".into(),
                            ));
                        }
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(e) => return fail(net(e, "accept")),
                }
            }
            for h in handles {
                let _ = h.join();
            }
        })
        .map_err(|e| StreamError::io("spawn network listener", e))
}
