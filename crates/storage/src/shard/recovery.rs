//! Opening a shard: load the manifest and its files, read the WAL,
//! replay it (cross-shard records only if their transaction committed),
//! delete data files nothing references. See `docs/design/storage.md`,
//! "Recovery", and "Flush and compaction off the commit lock" for the
//! crash states a flush or compaction can leave.

use super::*;

impl Shard {
    /// Opens (recovering) a shard. `tables` are the catalog's tables of this
    /// group; `committed` the cross-shard transactions known committed.
    pub fn open(
        data_dir: &std::path::Path,
        store: Arc<FileStore>,
        group: TableGroupId,
        id: ShardId,
        tables: &[Arc<TableDef>],
        committed: &HashSet<TxnId>,
        sync: bool,
    ) -> Result<Shard> {
        Shard::open_unreplayed(data_dir, store, group, id, tables, sync)?.replay_wal(committed)
    }

    /// Opens a shard's files and reads its WAL without replaying it: the
    /// engine first asks every shard which prepare records it holds
    /// ([`UnreplayedShard::holds_prepare`]) to decide which one-round
    /// cross-shard commits happened (`crate::commit`).
    pub(crate) fn open_unreplayed(
        data_dir: &std::path::Path,
        store: Arc<FileStore>,
        group: TableGroupId,
        id: ShardId,
        tables: &[Arc<TableDef>],
        sync: bool,
    ) -> Result<UnreplayedShard> {
        let rel_dir = format!("tg{}/s{}", group.0, id.0);
        let abs_dir = data_dir.join(&rel_dir);
        std::fs::create_dir_all(&abs_dir).map_err(|e| StorageError::io(&abs_dir, e))?;
        let manifest_path = abs_dir.join("MANIFEST");
        let manifest: Manifest = manifest::read_checked(&manifest_path)?.unwrap_or_default();
        let (wal, entries) = Wal::open(&abs_dir.join("wal"), manifest.flushed_lsn, sync, 64 << 20)?;

        let mut tablets = HashMap::new();
        for def in tables {
            let t = Tablets::new(def.clone());
            if let Some(files) = manifest.table(def.id) {
                load_tablet_files(&store, &rel_dir, &manifest_path, &t, files)?;
            }
            // Indexes are memory only: rebuilt from the files, then kept
            // up by the replay below.
            t.build_indexes(&t.index_list(), Lsn::MAX)?;
            tablets.insert(def.id, Arc::new(t));
        }
        let existing = store.list(&rel_dir)?;
        let max_seen = existing
            .iter()
            .filter_map(|n| n.split('.').next()?.parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        let shard = Shard {
            group,
            id,
            rel_dir,
            abs_dir,
            store,
            visible: AtomicU64::new(0),
            tablets: RwLock::new(tablets),
            commit: Mutex::new(CommitState {
                next_lsn: 0,
                wal,
                next_file_id: max_seen.max(manifest.max_file_id().0) + 1,
                manifest,
            }),
            queue: Mutex::new(Vec::new()),
            flush_lock: Mutex::new(()),
            compact_lock: Mutex::new(()),
            hook: Mutex::new(None),
            poisoned: Mutex::new(None),
            recent: Mutex::new(RecentWrites::default()),
        };
        Ok(UnreplayedShard {
            shard,
            entries,
            existing,
        })
    }
}

/// A shard opened by [`Shard::open_unreplayed`]: files loaded, WAL read,
/// nothing replayed yet.
pub(crate) struct UnreplayedShard {
    shard: Shard,
    entries: Vec<crate::wal::WalEntry>,
    existing: Vec<String>,
}

impl UnreplayedShard {
    /// Whether the prepare record of `txn` at `lsn` is durable in this
    /// shard: flushed (a shard flushes past a prepare record only once its
    /// transaction committed and was applied; a failed one-round commit
    /// poisons its shards, which then never publish past it), or in the
    /// WAL at exactly that LSN and tagged with `txn`.
    pub(crate) fn holds_prepare(&self, txn: TxnId, lsn: Lsn) -> bool {
        if self.shard.commit.lock().manifest.flushed_lsn >= lsn {
            return true;
        }
        self.entries
            .binary_search_by_key(&lsn, |e| e.lsn)
            .ok()
            .and_then(|i| self.entries.get(i))
            .and_then(|e| record_txn(&e.payload))
            == Some(txn.0)
    }

    /// Replays the WAL: records of cross-shard transactions only where
    /// `committed` holds their id.
    pub(crate) fn replay_wal(self, committed: &HashSet<TxnId>) -> Result<Shard> {
        let UnreplayedShard {
            shard,
            entries,
            existing,
        } = self;
        let mut st = shard.commit.lock();
        let mut last = st.manifest.flushed_lsn;
        let mut referenced: HashSet<String> = st.manifest.all_file_names().into_iter().collect();
        let replayed = entries.len();
        for e in entries {
            last = e.lsn;
            shard.replay(&e.payload, e.lsn, committed, &mut referenced)?;
        }
        st.next_lsn = last.0.max(st.wal.last_lsn().0) + 1;
        shard.visible.store(st.next_lsn - 1, AtOrd::Release);
        *shard.recent.lock() = RecentWrites::starting_at(Lsn(st.next_lsn - 1));
        // Garbage: files of failed bulk loads, superseded files whose
        // deletion was cut short by a crash.
        for name in existing {
            let is_data = name.ends_with(".row") || name.ends_with(".arrow");
            if is_data && !referenced.contains(&name) {
                tracing::info!(shard = %shard.rel_dir, file = %name, "removing unreferenced file");
                shard.store.delete(&format!("{}/{name}", shard.rel_dir))?;
            }
        }
        if replayed > 0 {
            tracing::info!(shard = %shard.rel_dir, records = replayed, lsn = %last, "replayed WAL");
        }
        drop(st);
        Ok(shard)
    }
}

impl Shard {
    fn replay(
        &self,
        payload: &[u8],
        lsn: Lsn,
        committed: &HashSet<TxnId>,
        referenced: &mut HashSet<String>,
    ) -> Result<()> {
        let bad = || {
            StorageError::corrupt(
                self.abs_dir.join("wal"),
                format!("undecodable record at LSN {lsn}"),
            )
        };
        let mut r = Reader::new(payload);
        let kind = r.u8().map_err(|_| bad())?;
        let txn = r.u64().map_err(|_| bad())?;
        if txn != 0 && !committed.contains(&TxnId(txn)) {
            tracing::info!(shard = %self.rel_dir, %lsn, txn, "skipping record of an uncommitted transaction");
            return Ok(());
        }
        match kind {
            REC_WRITE => {
                let n = r.varint().map_err(|_| bad())? as usize;
                let mut ops = Vec::with_capacity(n.min(1 << 16));
                for _ in 0..n {
                    let table = TableId(r.u32().map_err(|_| bad())?);
                    let is_put = r.u8().map_err(|_| bad())? == 1;
                    let key = r.len_prefixed().map_err(|_| bad())?.to_vec();
                    let row = if is_put {
                        let bytes = r.len_prefixed().map_err(|_| bad())?;
                        Some(bytes)
                    } else {
                        None
                    };
                    let Some(t) = self.tablets.read().get(&table).cloned() else {
                        continue; // dropped or truncated table
                    };
                    let row = match row {
                        Some(b) => {
                            let width = t.def.read().columns.len();
                            let row = decode_row_bytes(b, width, "WAL record")?;
                            Some((row, Arc::from(b)))
                        }
                        None => None,
                    };
                    ops.push(LoggedOp { table, key, row });
                }
                self.apply(&ops, lsn)
            }
            REC_BULK => {
                let json = r.len_prefixed().map_err(|_| bad())?;
                let files: BulkFiles = serde_json::from_slice(json).map_err(|_| bad())?;
                for f in &files.row {
                    referenced.insert(row_file_name(f.id));
                }
                for f in &files.col {
                    referenced.insert(column_file_name(f.id));
                }
                self.install_bulk(&files, lsn)
            }
            _ => Err(bad()),
        }
    }
}

fn load_tablet_files(
    store: &FileStore,
    rel_dir: &str,
    manifest_path: &std::path::Path,
    t: &Tablets,
    files: &TabletFiles,
) -> Result<()> {
    if let Some(rl) = &t.row {
        let mut v = RowVersion::default();
        for m in &files.row_l0 {
            v.l0.push(Arc::new(RowFile::open(store, rel_dir, m.clone())?));
        }
        for m in &files.row_l1 {
            v.l1.push(Arc::new(RowFile::open(store, rel_dir, m.clone())?));
        }
        *rl.write() = Arc::new(v);
    }
    if let Some(cl) = &t.col {
        let mut v = ColumnVersion::new(columns_of(&t.def.read()));
        for m in &files.col {
            let deletes = match files.col_deletes.get(&m.id.0) {
                Some(b) => DeleteMap::from_bitmap(manifest::bitmap_from_bytes(manifest_path, b)?),
                None => DeleteMap::default(),
            };
            let f = ColumnFile::open(store, rel_dir, m.clone(), Arc::new(Mutex::new(deletes)))?;
            v.files.push(Arc::new(f));
        }
        *cl.write() = Arc::new(v);
    }
    Ok(())
}

/// The transaction id a WAL record is tagged with (0: none), if the record
/// is long enough to carry one.
fn record_txn(payload: &[u8]) -> Option<u64> {
    let bytes = payload.get(1..9)?;
    Some(u64::from_le_bytes(<[u8; 8]>::try_from(bytes).ok()?))
}
