//! The write-ahead log of one shard (or of the cross-shard commit log).
//!
//! Layout: a directory of segment files named `<first-lsn>.wal` (20 digits).
//! A segment is a sequence of frames `[len: u32 LE][crc32c(payload): u32 LE]
//! [payload]`; the payload starts with the record's LSN (u64 LE).
//!
//! Invariants:
//! * LSNs strictly increase across frames and segments.
//! * [`Wal::append`] writes all frames of a group commit with one `write`
//!   and then one `fdatasync`; nothing is acknowledged before that returns.
//!   A new segment's directory entry is fsync'd before its first frame is
//!   acknowledged.
//! * On open, a frame whose checksum or length is wrong at the **tail** of
//!   the last segment (nothing valid after it) is a torn write of an
//!   unacknowledged group: it is cut off. A bad frame anywhere else is
//!   corruption and fails the open with the file named: the log never skips
//!   acknowledged data silently.
//! * [`Wal::truncate_through`] deletes only whole segments whose every record
//!   is covered by a durable flush.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use eddy_common::Lsn;

use crate::error::{Result, StorageError};

const FRAME_HEADER: usize = 8;
/// A frame larger than this is treated as garbage, not allocated.
const MAX_FRAME: usize = 1 << 30;

pub struct Wal {
    dir: PathBuf,
    /// (first lsn, path) of every segment, oldest first.
    segments: Vec<(Lsn, PathBuf)>,
    current: File,
    current_len: u64,
    segment_bytes: u64,
    sync: bool,
    last_lsn: Lsn,
}

/// A record read back during recovery.
pub struct WalEntry {
    pub lsn: Lsn,
    pub payload: Vec<u8>,
}

fn segment_name(first: Lsn) -> String {
    format!("{:020}.wal", first.0)
}

pub fn fsync_dir(dir: &Path) -> Result<()> {
    let d = File::open(dir).map_err(|e| StorageError::io(dir, e))?;
    d.sync_all().map_err(|e| StorageError::io(dir, e))
}

impl Wal {
    /// Opens (or creates) the log in `dir` and returns every intact record
    /// with an LSN greater than `after`, in order.
    pub fn open(
        dir: &Path,
        after: Lsn,
        sync: bool,
        segment_bytes: u64,
    ) -> Result<(Wal, Vec<WalEntry>)> {
        fs::create_dir_all(dir).map_err(|e| StorageError::io(dir, e))?;
        let mut segments = Vec::new();
        for ent in fs::read_dir(dir).map_err(|e| StorageError::io(dir, e))? {
            let ent = ent.map_err(|e| StorageError::io(dir, e))?;
            let name = ent.file_name().to_string_lossy().to_string();
            if let Some(stem) = name.strip_suffix(".wal") {
                if let Ok(n) = stem.parse::<u64>() {
                    segments.push((Lsn(n), ent.path()));
                }
            }
        }
        segments.sort();
        let mut entries = Vec::new();
        let mut last_lsn = Lsn::ZERO;
        let n = segments.len();
        for (i, (_, path)) in segments.iter().enumerate() {
            let is_last = i + 1 == n;
            let mut bytes = Vec::new();
            File::open(path)
                .and_then(|mut f| f.read_to_end(&mut bytes))
                .map_err(|e| StorageError::io(path, e))?;
            let mut pos = 0usize;
            while pos < bytes.len() {
                match parse_frame(&bytes, pos) {
                    Some((lsn, payload, next)) => {
                        if lsn <= last_lsn {
                            return Err(StorageError::corrupt(
                                path,
                                format!("LSN {lsn} at offset {pos} does not follow {last_lsn}"),
                            ));
                        }
                        last_lsn = lsn;
                        if lsn > after {
                            entries.push(WalEntry {
                                lsn,
                                payload: payload.to_vec(),
                            });
                        }
                        pos = next;
                    }
                    None => {
                        if is_last && !valid_frame_follows(&bytes, pos) {
                            tracing::warn!(
                                path = %path.display(),
                                offset = pos,
                                dropped_bytes = bytes.len() - pos,
                                "discarding torn tail of the WAL"
                            );
                            let f = OpenOptions::new()
                                .write(true)
                                .open(path)
                                .map_err(|e| StorageError::io(path, e))?;
                            f.set_len(pos as u64)
                                .and_then(|_| f.sync_all())
                                .map_err(|e| StorageError::io(path, e))?;
                            break;
                        }
                        return Err(StorageError::corrupt(
                            path,
                            format!("WAL record at offset {pos} fails its checksum"),
                        ));
                    }
                }
            }
        }
        let (current, current_len, segments) = match segments.last() {
            Some((_, path)) => {
                let f = OpenOptions::new()
                    .append(true)
                    .open(path)
                    .map_err(|e| StorageError::io(path, e))?;
                let len = f.metadata().map_err(|e| StorageError::io(path, e))?.len();
                (f, len, segments)
            }
            None => {
                let first = Lsn(after.0.max(last_lsn.0) + 1);
                let path = dir.join(segment_name(first));
                let f = create_segment(dir, &path)?;
                (f, 0, vec![(first, path)])
            }
        };
        Ok((
            Wal {
                dir: dir.to_path_buf(),
                segments,
                current,
                current_len,
                segment_bytes,
                sync,
                last_lsn,
            },
            entries,
        ))
    }

    pub fn last_lsn(&self) -> Lsn {
        self.last_lsn
    }

    /// The highest LSN this log has used or reserved, even if truncation
    /// removed its record: the next LSN must be above it.
    pub fn lsn_floor(&self) -> Lsn {
        let seg_start = self.segments.last().map_or(0, |s| s.0 .0.saturating_sub(1));
        Lsn(self.last_lsn.0.max(seg_start))
    }

    /// Appends `records` (each `(lsn, payload-without-lsn)`) and makes them
    /// durable. LSNs must be increasing and above every earlier record.
    pub fn append(&mut self, records: &[(Lsn, &[u8])]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        self.write(records)?;
        if self.sync {
            let path = &self.segments[self.segments.len() - 1].1;
            self.current
                .sync_data()
                .map_err(|e| StorageError::io(path, e))?;
        }
        Ok(())
    }

    /// Writes `records` like [`Wal::append`] but does not wait for the
    /// disk: the caller makes them durable through [`Wal::sync_handle`]
    /// before it acknowledges anything that depends on them.
    pub fn write(&mut self, records: &[(Lsn, &[u8])]) -> Result<()> {
        let Some(&(first, _)) = records.first() else {
            return Ok(());
        };
        if self.current_len >= self.segment_bytes {
            self.rotate(first)?;
        }
        let mut buf = Vec::with_capacity(records.iter().map(|r| r.1.len() + 16).sum());
        for &(lsn, payload) in records {
            debug_assert!(lsn > self.last_lsn);
            let len = (payload.len() + 8) as u32;
            let mut crc = crc32c::crc32c(&lsn.0.to_le_bytes());
            crc = crc32c::crc32c_append(crc, payload);
            buf.extend_from_slice(&len.to_le_bytes());
            buf.extend_from_slice(&crc.to_le_bytes());
            buf.extend_from_slice(&lsn.0.to_le_bytes());
            buf.extend_from_slice(payload);
            self.last_lsn = lsn;
        }
        let path = &self.segments[self.segments.len() - 1].1;
        self.current
            .write_all(&buf)
            .map_err(|e| StorageError::io(path, e))?;
        self.current_len += buf.len() as u64;
        Ok(())
    }

    fn rotate(&mut self, first: Lsn) -> Result<()> {
        // Frames written but not yet synced (Wal::write) become durable
        // before the log moves on: a sync handle only covers its segment.
        if self.sync {
            let old = &self.segments[self.segments.len() - 1].1;
            self.current
                .sync_data()
                .map_err(|e| StorageError::io(old, e))?;
        }
        let path = self.dir.join(segment_name(first));
        self.current = create_segment(&self.dir, &path)?;
        self.current_len = 0;
        self.segments.push((first, path));
        Ok(())
    }

    /// Deletes segments all of whose records have LSN `<= through`. Starts a
    /// fresh segment first so that the current one can go too.
    pub fn truncate_through(&mut self, through: Lsn) -> Result<()> {
        if self.last_lsn <= through && self.current_len > 0 {
            self.rotate(Lsn(through.0.max(self.last_lsn.0) + 1))?;
        }
        while self.segments.len() > 1 && self.segments[1].0 .0 <= through.0 + 1 {
            let (_, path) = self.segments.remove(0);
            fs::remove_file(&path).map_err(|e| StorageError::io(&path, e))?;
        }
        Ok(())
    }

    /// A handle on the current segment for `fdatasync` outside the log's
    /// lock (so that writers can append meanwhile): syncing it makes every
    /// frame written so far durable (earlier segments were synced when the
    /// log rotated). `None` when the log is not synced (tests, benchmarks).
    pub fn sync_handle(&self) -> Result<Option<SyncHandle>> {
        if !self.sync {
            return Ok(None);
        }
        let path = self.segments[self.segments.len() - 1].1.clone();
        let file = self
            .current
            .try_clone()
            .map_err(|e| StorageError::io(&path, e))?;
        Ok(Some(SyncHandle { file, path }))
    }

    /// Total bytes in live segments (for flush decisions and metrics).
    pub fn current_segment_len(&self) -> u64 {
        self.current_len
    }
}

fn create_segment(dir: &Path, path: &Path) -> Result<File> {
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| StorageError::io(path, e))?;
    f.sync_all().map_err(|e| StorageError::io(path, e))?;
    fsync_dir(dir)?;
    Ok(f)
}

/// Parses the frame at `pos`: `(lsn, payload after the lsn, next pos)`.
fn parse_frame(bytes: &[u8], pos: usize) -> Option<(Lsn, &[u8], usize)> {
    let hdr = bytes.get(pos..pos + FRAME_HEADER)?;
    let len = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]) as usize;
    let crc = u32::from_le_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]);
    if !(8..=MAX_FRAME).contains(&len) {
        return None;
    }
    let body = bytes.get(pos + FRAME_HEADER..pos + FRAME_HEADER + len)?;
    if crc32c::crc32c(body) != crc {
        return None;
    }
    let mut lsn = [0u8; 8];
    lsn.copy_from_slice(&body[..8]);
    Some((
        Lsn(u64::from_le_bytes(lsn)),
        &body[8..],
        pos + FRAME_HEADER + len,
    ))
}

/// Whether any intact frame starts after the damaged one at `pos`: if so the
/// damage is not a torn tail but corruption of acknowledged data.
fn valid_frame_follows(bytes: &[u8], pos: usize) -> bool {
    // If the damaged frame's length is plausible, look where it says the next
    // frame starts; also scan forward, since the length itself may be damaged.
    if let Some(hdr) = bytes.get(pos..pos + 4) {
        let len = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]) as usize;
        if (8..=MAX_FRAME).contains(&len) && parse_frame(bytes, pos + FRAME_HEADER + len).is_some()
        {
            return true;
        }
    }
    (pos + 1..bytes.len().saturating_sub(FRAME_HEADER + 8))
        .any(|p| parse_frame(bytes, p).is_some_and(|(lsn, _, _)| lsn.0 > 0))
}

/// A log segment to make durable (see [`Wal::sync_handle`]).
pub struct SyncHandle {
    file: File,
    path: PathBuf,
}

impl SyncHandle {
    pub fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| StorageError::io(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn append_n(wal: &mut Wal, from: u64, n: u64) {
        for i in from..from + n {
            let p = format!("record {i}");
            wal.append(&[(Lsn(i), p.as_bytes())]).unwrap();
        }
    }

    #[test]
    fn written_frames_sync_through_a_handle_across_rotations() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path(), Lsn::ZERO, true, 64).unwrap();
        for i in 1..=20u64 {
            wal.write(&[(Lsn(i), format!("frame {i}").as_bytes())])
                .unwrap();
        }
        // segments of 64 bytes: the writes rotated several times
        assert!(wal.segments.len() > 3);
        wal.sync_handle()
            .unwrap()
            .expect("a synced log")
            .sync()
            .unwrap();
        drop(wal);
        let (_, got) = Wal::open(dir.path(), Lsn::ZERO, true, 64).unwrap();
        assert_eq!(got.len(), 20);
        assert_eq!(got[19].payload, b"frame 20");
        let (unsynced, _) = Wal::open(&dir.path().join("nosync"), Lsn::ZERO, false, 64).unwrap();
        assert!(unsynced.sync_handle().unwrap().is_none());
    }

    #[test]
    fn records_survive_reopen_and_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, got) = Wal::open(dir.path(), Lsn::ZERO, true, 64).unwrap();
        assert!(got.is_empty());
        append_n(&mut wal, 1, 10);
        drop(wal);
        let (mut wal, got) = Wal::open(dir.path(), Lsn(3), true, 64).unwrap();
        assert_eq!(got.len(), 7);
        assert_eq!(got[0].lsn, Lsn(4));
        assert_eq!(got[0].payload, b"record 4");
        wal.truncate_through(Lsn(10)).unwrap();
        append_n(&mut wal, 11, 2);
        drop(wal);
        let (_, got) = Wal::open(dir.path(), Lsn::ZERO, true, 64).unwrap();
        assert_eq!(
            got.iter().map(|e| e.lsn.0).collect::<Vec<_>>(),
            vec![11, 12]
        );
    }

    #[test]
    fn torn_tail_is_discarded_but_middle_damage_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path(), Lsn::ZERO, true, 1 << 20).unwrap();
        append_n(&mut wal, 1, 5);
        drop(wal);
        let seg = fs::read_dir(dir.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let good = fs::read(&seg).unwrap();

        // torn tail: the last frame half-written
        fs::write(&seg, &good[..good.len() - 5]).unwrap();
        let (_, got) = Wal::open(dir.path(), Lsn::ZERO, true, 1 << 20).unwrap();
        assert_eq!(got.len(), 4);

        // a flipped byte in the second record is corruption, and names the file
        let mut bad = good.clone();
        bad[FRAME_HEADER + 17 + FRAME_HEADER + 12] ^= 0x40;
        fs::write(&seg, &bad).unwrap();
        match Wal::open(dir.path(), Lsn::ZERO, true, 1 << 20) {
            Err(StorageError::Corrupt { path, .. }) => assert_eq!(path, seg),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("corruption went unnoticed"),
        }
    }
}
