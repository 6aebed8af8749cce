//! [`FileStore`]: Java's `DLedgerMmapFileStore` — appends as leader and follower, truncation,
//! the commit index, reads by index, and its two background services (flush + checkpoint, and
//! cleaning).
//!
//! All state sits behind one mutex (Java's `synchronized (memberState)` around appends and
//! truncation; Java's reads and its cleaner run without it, we take it for them too). The flush
//! thread takes the lock only to list what to flush and to note what it flushed; the `msync`
//! itself runs outside it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use parking_lot::Mutex;
use remoting::service::Service;
use tracing::{error, info, warn};

use super::clean::{self, CleanConfig};
use super::props_file::{self, CHECKPOINT_FILE, COMMITTED_INDEX_KEY};
use super::recovery::{self, Recovered};
use super::segments::{Segment, SegmentList};
use super::term::CurrentTerm;
use super::{unit_offset, IndexUnit, StoreError, INDEX_UNIT_SIZE};
use crate::config::DLedgerConfig;
use crate::entry::{Entry, BODY_OFFSET, CURRENT_MAGIC, MIN_BLANK_LEN};
use crate::log::{LogError, RaftLog};

/// The largest entry (header + body) Java 0.3.1.2 can write or receive: its per-thread encode
/// buffer is 4 MiB, and a larger entry fails there.
pub const MAX_ENTRY_SIZE: usize = 4 * 1024 * 1024;

/// Runs on a leader's new entry after its index, term and pos are set and before it is written:
/// `body` is the entry's body as it will be written (RocketMQ's commit log writes `pos + 48`, the
/// record's physical offset, at body offset 28). Java's `AppendHook`.
pub type AppendHook = Box<dyn Fn(&mut [u8], &Entry) + Send + Sync>;

/// Called (under the store's lock: keep it short) with the new committed pos.
pub type CommitListener = Box<dyn Fn(i64) + Send + Sync>;

struct Inner {
    data: SegmentList,
    index: SegmentList,
    begin_index: i64,
    end_index: i64,
    end_term: i64,
    committed_index: i64,
    committed_pos: i64,
    hooks: Vec<AppendHook>,
    /// Told whenever the committed pos moves (the broker's dispatcher wakes on it).
    commit_listener: Option<CommitListener>,
    /// Set when a write failed half-way: the files no longer match the indexes above, so every
    /// later write is refused until a restart recovers from the files.
    broken: Option<String>,
}

struct Shared {
    node_dir: PathBuf,
    data_dir: PathBuf,
    store_base_dir: PathBuf,
    flush_interval: Duration,
    checkpoint_interval: Duration,
    clean: CleanConfig,
    term: CurrentTerm,
    disk_full: AtomicBool,
    clean_enabled: AtomicBool,
    /// Serialises checkpoint writes (flush thread and shutdown).
    checkpoint_lock: Mutex<()>,
}

/// The DLedger file store of one member.
pub struct FileStore {
    inner: Arc<Mutex<Inner>>,
    shared: Arc<Shared>,
    services: Mutex<Vec<Service>>,
    shut_down: AtomicBool,
}

fn io_err(e: std::io::Error) -> LogError {
    LogError::Io(e.to_string())
}

fn check_size(size: usize, data_segment_size: usize) -> Result<(), LogError> {
    if size > MAX_ENTRY_SIZE || size + MIN_BLANK_LEN > data_segment_size {
        return Err(LogError::Inconsistent(format!(
            "an entry of {size} bytes is larger than the store takes ({MAX_ENTRY_SIZE} bytes, and a {data_segment_size}-byte segment less 8)"
        )));
    }
    Ok(())
}

impl Inner {
    fn check_writable(&self) -> Result<(), LogError> {
        match &self.broken {
            Some(why) => Err(LogError::Io(format!("the store refuses writes after a failed write ({why}); restart to recover"))),
            None => Ok(()),
        }
    }

    fn get(&self, index: i64) -> Option<Entry> {
        if index < 0 || index < self.begin_index || index > self.end_index {
            return None;
        }
        let entry = recovery::read_entry(&self.data, &self.index, index);
        if entry.is_none() {
            warn!(index, "entry in range but unreadable");
        }
        entry
    }

    fn unit(&self, index: i64) -> Option<IndexUnit> {
        IndexUnit::decode(self.index.read(unit_offset(index)?, INDEX_UNIT_SIZE)?)
    }

    /// Java `reviseLedgerBeginIndex`: the first data segment's entry at its start position.
    fn revise_begin_index(&mut self) {
        let Some(first) = self.data.segments().first() else { return };
        let Some(index) = first.raw(first.start() + 8, 8).and_then(|b| super::be_i64(b, 0)) else { return };
        self.begin_index = index;
        if let Some(off) = unit_offset(index) {
            self.index.reset_start(off);
        }
    }

    /// Java `updateCommittedIndex`, with the current term read from `current_term`.
    fn update_committed(&mut self, term: i64, current_term: i64, new: i64) {
        if new == -1 || self.end_index == -1 || term < current_term || new == self.committed_index {
            return;
        }
        if new < self.committed_index || new < self.begin_index {
            warn!(new, committed = self.committed_index, begin = self.begin_index, "[MONITOR] skip update of the committed index");
            return;
        }
        let new = new.min(self.end_index);
        let Some(unit) = self.unit(new) else {
            error!(index = new, "cannot read the index unit of the new committed index");
            return;
        };
        self.committed_index = new;
        self.committed_pos = unit.pos + i64::from(unit.size);
        if let Some(listener) = &self.commit_listener {
            listener(self.committed_pos);
        }
    }

    /// Makes room in both lists and writes `bytes` (already carrying its pos) and its unit.
    fn write_entry(&mut self, bytes: &[u8], unit: &IndexUnit) -> Result<(), LogError> {
        let at = self.data.append(bytes).map_err(io_err)?;
        let at_unit = self.index.append(&unit.encode()).map_err(io_err)?;
        if at as i64 != unit.pos || Some(at_unit) != unit_offset(unit.index) {
            return Err(LogError::Io(format!("entry {} landed at {at} / unit at {at_unit}", unit.index)));
        }
        Ok(())
    }

    /// Rolls both lists so `size` bytes land at `pos` and the unit of `index` at its place;
    /// nothing is written when they would not.
    fn prepare(&mut self, size: usize, pos: Option<i64>, index: i64) -> Result<i64, LogError> {
        let landing = self.data.landing(size, true);
        if let Some(pos) = pos {
            if landing as i64 != pos {
                return Err(LogError::Inconsistent(format!("entry {index} would land at {landing}, not at its pos {pos}")));
            }
        }
        let unit_at = unit_offset(index).ok_or_else(|| LogError::Inconsistent(format!("index {index}")))?;
        if self.index.landing(INDEX_UNIT_SIZE, false) != unit_at {
            return Err(LogError::Io(format!("the index ends at {}, not at entry {index}'s unit {unit_at}", self.index.max_wrote())));
        }
        let at = self.data.pre_append(size, true).map_err(io_err)?;
        self.index.pre_append(INDEX_UNIT_SIZE, false).map_err(io_err)?;
        Ok(at as i64)
    }

    fn append_leader(&mut self, term: i64, body: Bytes) -> Result<Entry, LogError> {
        self.check_writable()?;
        if term < self.end_term {
            return Err(LogError::Inconsistent(format!("term {term} is older than the last entry's {}", self.end_term)));
        }
        let index = self.end_index + 1;
        let mut entry = Entry { magic: CURRENT_MAGIC, index, term, pos: 0, channel: 0, chain_crc: 0, body_crc: 0, body };
        let size = entry.size();
        check_size(size, self.data.segment_size())?;
        entry.pos = self.prepare(size, None, index)?;
        let mut bytes = entry.encode();
        for hook in &self.hooks {
            hook(&mut bytes[BODY_OFFSET..], &entry);
        }
        let unit = IndexUnit { magic: CURRENT_MAGIC, pos: entry.pos, size: size as i32, index, term };
        if let Err(e) = self.write_entry(&bytes, &unit) {
            self.broken = Some(e.to_string());
            return Err(e);
        }
        self.end_index = index;
        self.end_term = term;
        if self.begin_index == -1 {
            self.begin_index = index;
        }
        entry.body = bytes.freeze().slice(BODY_OFFSET..);
        Ok(entry)
    }

    fn append_follower(&mut self, entry: &Entry) -> Result<(), LogError> {
        self.check_writable()?;
        if entry.index != self.end_index + 1 {
            return Err(LogError::Inconsistent(format!("entry {} does not follow the end {}", entry.index, self.end_index)));
        }
        // Recovery stops at an entry of a lower term than the one before it (Java's too), so it
        // would take this entry and everything after it away at the next start (Java writes it).
        if entry.term < self.end_term {
            return Err(LogError::Inconsistent(format!("entry {} of term {} after one of term {}", entry.index, entry.term, self.end_term)));
        }
        self.check_follower_entry(entry)?;
        let size = entry.size();
        self.prepare(size, Some(entry.pos), entry.index)?;
        let unit = IndexUnit { magic: entry.magic, pos: entry.pos, size: size as i32, index: entry.index, term: entry.term };
        if let Err(e) = self.write_entry(&entry.encode(), &unit) {
            self.broken = Some(e.to_string());
            return Err(e);
        }
        self.end_index = entry.index;
        self.end_term = entry.term;
        if self.begin_index == -1 {
            self.begin_index = entry.index;
        }
        Ok(())
    }

    /// What recovery would refuse later is refused now (Java writes it).
    fn check_follower_entry(&self, entry: &Entry) -> Result<(), LogError> {
        if entry.magic != CURRENT_MAGIC {
            return Err(LogError::Inconsistent(format!("entry {} has magic {}", entry.index, entry.magic)));
        }
        if entry.index < 0 || entry.pos < 0 {
            return Err(LogError::Inconsistent(format!("entry {} at pos {}", entry.index, entry.pos)));
        }
        check_size(entry.size(), self.data.segment_size())
    }

    /// Java's `truncate`: keep the local entry at `entry.index` if equal and cut after it, else
    /// cut where it goes and write it; then the index. Where Java cuts at `entry.pos` we cut
    /// right after our entry `index - 1` when `entry` lands exactly there by the roll rule (so an
    /// entry of ours that still sat before a segment boundary the leader rolled to is erased, not
    /// revived by the next recovery), refusing it when its term is lower than that entry's
    /// (recovery would stop at it); when it would not land there, or when we do not hold `index - 1`, the
    /// data is rebuilt at `entry.pos` (Java's `rebuildWithPos`, also where Java would leave a
    /// hole). Everything is checked before anything is cut.
    fn truncate(&mut self, entry: &Entry) -> Result<(), LogError> {
        self.check_writable()?;
        let existed = self.get(entry.index).is_some_and(|local| local == *entry);
        let plan = if existed { DataCut::At(entry.pos as u64 + entry.size() as u64) } else { self.plan_replacement(entry)? };
        let unit_at = unit_offset(entry.index).ok_or_else(|| LogError::Inconsistent(format!("index {}", entry.index)))?;
        let result = self.truncate_files(entry, plan, unit_at);
        if let Err(e) = &result {
            self.broken = Some(e.to_string());
            return result;
        }
        self.end_index = entry.index;
        self.end_term = entry.term;
        self.revise_begin_index();
        if self.committed_index > self.end_index {
            // Java keeps a committed index past the end; readers would then see bytes being rewritten.
            warn!(committed = self.committed_index, end = self.end_index, "truncated below the committed index");
            self.committed_index = self.end_index;
            self.committed_pos = self.unit(self.end_index).map_or(-1, |u| u.pos + i64::from(u.size));
        }
        Ok(())
    }

    /// Where the data must end for `entry` (not held as is) to be written next.
    fn plan_replacement(&self, entry: &Entry) -> Result<DataCut, LogError> {
        self.check_follower_entry(entry)?;
        let size = entry.size() as u64;
        let segment = self.data.segment_size() as u64;
        let landing_after = |end: u64| {
            let rel = end % segment;
            if rel + size + MIN_BLANK_LEN as u64 <= segment {
                end
            } else {
                end - rel + segment
            }
        };
        let pos = entry.pos as u64;
        if landing_after(pos) != pos {
            return Err(LogError::Inconsistent(format!("entry {} of {size} bytes cannot start at {pos}", entry.index)));
        }
        let previous = entry.index - 1;
        if previous >= self.begin_index && previous <= self.end_index && previous >= 0 {
            if let Some(unit) = self.unit(previous) {
                let end = (unit.pos + i64::from(unit.size)) as u64;
                if end <= pos && landing_after(end) == pos {
                    // An entry of a lower term than ours before it is not the leader's next one
                    // (ours is not the leader's), and recovery would stop at it and take it away
                    // (0.3.1.2 writes it). Refused, nothing cut: the leader compares further down.
                    if unit.term > entry.term {
                        return Err(LogError::Inconsistent(format!("entry {} of term {} after our entry of term {}", entry.index, entry.term, unit.term)));
                    }
                    return Ok(DataCut::At(end));
                }
            }
            warn!(index = entry.index, pos, "[TRUNCATE] the entry does not follow our entry before it: rebuilding the data");
            return Ok(DataCut::Rebuild(pos));
        }
        if self.data.is_empty() && pos == 0 {
            return Ok(DataCut::At(0));
        }
        if !self.data.is_empty() && pos == self.data.min_offset() {
            return Ok(DataCut::At(pos));
        }
        Ok(DataCut::Rebuild(pos))
    }

    fn truncate_files(&mut self, entry: &Entry, plan: DataCut, unit_at: u64) -> Result<(), LogError> {
        let size = entry.size();
        let end = self.data.max_wrote();
        match plan {
            DataCut::At(cut) => {
                if cut != end {
                    warn!(index = entry.index, cut, end, "[TRUNCATE] cut is not at the end of the data (usual on an old leader)");
                }
                if !self.data.is_empty() {
                    self.data.truncate(cut);
                }
            }
            DataCut::Rebuild(pos) => {
                warn!(index = entry.index, pos, end, "[TRUNCATE] rebuilding the data at the entry");
                self.data.rebuild_at(pos).map_err(io_err)?;
            }
        }
        let held = self.data.max_wrote() == entry.pos as u64 + size as u64 && self.get_at_end(entry);
        if !held {
            let at = self.data.pre_append(size, true).map_err(io_err)?;
            if at as i64 != entry.pos {
                return Err(LogError::Io(format!("entry {} would land at {at}, not {}", entry.index, entry.pos)));
            }
            let at = self.data.append(&entry.encode()).map_err(io_err)?;
            if at as i64 != entry.pos {
                return Err(LogError::Io(format!("entry {} landed at {at}, not {}", entry.index, entry.pos)));
            }
        }
        if unit_at >= self.index.min_offset() && unit_at <= self.index.max_wrote() && !self.index.is_empty() {
            self.index.truncate(unit_at);
        }
        if self.index.max_wrote() != unit_at || self.index.min_offset() > unit_at {
            warn!(unit_at, "[TRUNCATE] rebuilding the index at the cut");
            self.index.rebuild_at(unit_at).map_err(io_err)?;
        }
        let at = self.index.pre_append(INDEX_UNIT_SIZE, false).map_err(io_err)?;
        let unit = IndexUnit { magic: entry.magic, pos: entry.pos, size: size as i32, index: entry.index, term: entry.term };
        let landed = self.index.append(&unit.encode()).map_err(io_err)?;
        if at != unit_at || landed != unit_at {
            return Err(LogError::Io(format!("unit of entry {} landed at {landed}, not {unit_at}", entry.index)));
        }
        Ok(())
    }

    /// Whether the data now ends with `entry`'s exact bytes (the kept equal entry).
    fn get_at_end(&self, entry: &Entry) -> bool {
        let Ok(pos) = u64::try_from(entry.pos) else { return false };
        self.data.read(pos, entry.size()).is_some_and(|bytes| Entry::decode(bytes).is_ok_and(|local| local == *entry))
    }
}

/// How a truncation leaves the data before the entry is (re)written.
#[derive(Clone, Copy, Debug)]
enum DataCut {
    /// The data ends here (inside what we hold, or 0 in an empty store).
    At(u64),
    /// One new segment starting at this offset (Java's `rebuildWithPos`).
    Rebuild(u64),
}

impl FileStore {
    /// Loads and recovers the store of `config` (Java's constructor, `load()` and `recover()`),
    /// reading the current term through `term` (see [`CurrentTerm`]). Services start with
    /// [`FileStore::start`].
    pub fn open(config: &DLedgerConfig, term: CurrentTerm) -> Result<FileStore, StoreError> {
        let data_size = config.mapped_file_size_for_entry_data;
        let index_size = config.mapped_file_size_for_entry_index;
        if data_size <= BODY_OFFSET + MIN_BLANK_LEN || data_size > i32::MAX as usize {
            return Err(StoreError::Config(format!("mappedFileSizeForEntryData {data_size} must be within 57..=2147483647")));
        }
        if index_size == 0 || !index_size.is_multiple_of(INDEX_UNIT_SIZE) || index_size > i32::MAX as usize {
            return Err(StoreError::Config(format!("mappedFileSizeForEntryIndex {index_size} must be a positive multiple of 32 (an int)")));
        }
        if config.data_store_path.contains(',') {
            return Err(StoreError::Config(format!("dataStorePath {:?}: several data paths are not supported", config.data_store_path)));
        }
        let clean = CleanConfig::from_config(config)?;
        let mut data = SegmentList::load(config.data_dir(), data_size)?;
        let mut index = SegmentList::load(config.index_dir(), index_size)?;
        let data_was_empty = data.is_empty();
        let Recovered { begin_index, end_index, end_term } = recovery::recover(&mut data, &mut index)?;
        let mut inner = Inner {
            data,
            index,
            begin_index,
            end_index,
            end_term,
            committed_index: -1,
            committed_pos: -1,
            hooks: Vec::new(),
            commit_listener: None,
            broken: None,
        };
        let node_dir = config.node_dir();
        if !data_was_empty {
            if let Some(committed) = read_checkpoint(&node_dir.join(CHECKPOINT_FILE))? {
                info!(committed, "committed index from the checkpoint");
                let current = term.get();
                inner.update_committed(current, current, committed);
            }
        }
        info!(dir = %node_dir.display(), begin_index, end_index, end_term, committed = inner.committed_index, "dledger store open");
        let shared = Shared {
            node_dir,
            data_dir: config.data_dir(),
            store_base_dir: PathBuf::from(&config.store_base_dir),
            flush_interval: Duration::from_millis(config.flush_file_interval_ms.max(1)),
            checkpoint_interval: Duration::from_millis(config.check_point_interval_ms),
            clean,
            term,
            disk_full: AtomicBool::new(false),
            clean_enabled: AtomicBool::new(true),
            checkpoint_lock: Mutex::new(()),
        };
        Ok(FileStore { inner: Arc::new(Mutex::new(inner)), shared: Arc::new(shared), services: Mutex::new(Vec::new()), shut_down: AtomicBool::new(false) })
    }

    /// Whether [`FileStore::start`] runs the cleaning service (Java's `setEnableCleanSpaceService`).
    pub fn set_clean_space_enabled(&self, enabled: bool) {
        self.shared.clean_enabled.store(enabled, Ordering::Release);
    }

    /// Starts the flush service (data and index every `flushFileInterval`, the checkpoint every
    /// `checkPointInterval`) and, unless disabled, the cleaning service (every 100 ms).
    pub fn start(&self) -> Result<(), StoreError> {
        let mut services = self.services.lock();
        if !services.is_empty() {
            return Ok(());
        }
        let io = |source| StoreError::Io { path: self.shared.node_dir.clone(), source };
        let (inner, shared) = (self.inner.clone(), self.shared.clone());
        let flush = Service::spawn("DLedgerFlushDataService", move |cx| {
            let mut last_checkpoint = Instant::now();
            while cx.wait(shared.flush_interval) {
                let started = Instant::now();
                if let Err(e) = flush(&inner) {
                    error!(error = %e, "flush of dledger data failed");
                }
                if started.elapsed() > Duration::from_millis(500) {
                    info!(cost_ms = started.elapsed().as_millis() as u64, "flush data");
                }
                if last_checkpoint.elapsed() > shared.checkpoint_interval {
                    if let Err(e) = persist_checkpoint(&inner, &shared) {
                        error!(error = %e, "persist checkpoint failed");
                    }
                    last_checkpoint = Instant::now();
                }
            }
        })
        .map_err(io)?;
        services.push(flush);
        if self.shared.clean_enabled.load(Ordering::Acquire) {
            let (inner, shared) = (self.inner.clone(), self.shared.clone());
            let clean = Service::every("DLedgerCleanSpaceService", Duration::from_millis(100), false, move || {
                clean_pass(&inner, &shared, SystemTime::now(), local_hour());
            })
            .map_err(io)?;
            services.push(clean);
        }
        Ok(())
    }

    /// Stops the services, then flushes and writes the checkpoint (Java's `shutdown`). Idempotent;
    /// also run on drop.
    pub fn shutdown(&self) -> Result<(), StoreError> {
        if self.shut_down.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        for service in self.services.lock().drain(..).rev() {
            service.stop();
        }
        flush(&self.inner).map_err(|source| StoreError::Io { path: self.shared.data_dir.clone(), source })?;
        persist_checkpoint(&self.inner, &self.shared)
    }

    /// Stops the services and drops the store without the final flush and checkpoint, leaving the
    /// files as a killed process leaves them (the written bytes are in the page cache). For tests.
    pub fn abandon(self) {
        self.shut_down.store(true, Ordering::Release);
        for service in self.services.lock().drain(..).rev() {
            service.stop();
        }
    }

    pub fn add_append_hook(&self, hook: AppendHook) {
        self.inner.lock().hooks.push(hook);
    }

    pub fn set_commit_listener(&self, listener: CommitListener) {
        self.inner.lock().commit_listener = Some(listener);
    }

    /// Read access to the data that outlives handing the store to the engine (the broker reads
    /// its commit log through it).
    pub fn reader(&self) -> DataReader {
        DataReader { inner: self.inner.clone() }
    }

    /// Starts an empty store's data at `offset` (see [`DataReader::start_data_at`]).
    pub fn start_data_at(&self, offset: u64) -> Result<(), StoreError> {
        self.reader().start_data_at(offset)
    }

    /// Forces data and index to disk now.
    pub fn flush(&self) -> std::io::Result<()> {
        flush(&self.inner)
    }

    /// Writes `checkpoint` now.
    pub fn persist_checkpoint(&self) -> Result<(), StoreError> {
        persist_checkpoint(&self.inner, &self.shared)
    }

    /// The end of the committed entry's bytes (-1 before any commit): what a reader may see.
    pub fn committed_pos(&self) -> i64 {
        self.inner.lock().committed_pos
    }

    /// The end of the written data (Java `getWritePos`).
    pub fn write_pos(&self) -> u64 {
        self.inner.lock().data.max_wrote()
    }

    /// Bytes written to the data or index segments and not yet flushed.
    pub fn unflushed_bytes(&self) -> u64 {
        let inner = self.inner.lock();
        inner.data.unflushed() + inner.index.unflushed()
    }

    /// The first data offset held.
    pub fn data_min_offset(&self) -> u64 {
        self.inner.lock().data.min_offset()
    }

    /// Up to `max_len` written data bytes from `offset`, never across a segment.
    pub fn read_data(&self, offset: u64, max_len: usize) -> Option<Bytes> {
        let inner = self.inner.lock();
        let (segment, pos) = inner.data.find(offset)?;
        let len = max_len.min(segment.wrote().checked_sub(pos)?);
        if len == 0 {
            return None;
        }
        segment.raw(pos, len).map(Bytes::copy_from_slice)
    }

    /// Whether appends are refused for a full disk (set by the cleaning service).
    pub fn is_disk_full(&self) -> bool {
        self.shared.disk_full.load(Ordering::Acquire)
    }

    /// One pass of the cleaning service at `now` and local `hour` (tests drive it directly).
    /// Returns how many data segments were deleted.
    pub fn clean_once(&self, now: SystemTime, hour: u32) -> usize {
        clean_pass(&self.inner, &self.shared, now, hour)
    }

    fn check_disk(&self) -> Result<(), LogError> {
        if self.is_disk_full() {
            return Err(LogError::DiskFull);
        }
        Ok(())
    }
}

/// A cloneable view of a [`FileStore`]'s data: positions and written bytes.
#[derive(Clone)]
pub struct DataReader {
    inner: Arc<Mutex<Inner>>,
}

impl DataReader {
    /// The end of the committed entry's bytes (-1 before any commit).
    pub fn committed_pos(&self) -> i64 {
        self.inner.lock().committed_pos
    }

    /// The first data offset held (0 when there is no segment).
    pub fn min_offset(&self) -> u64 {
        self.inner.lock().data.min_offset()
    }

    /// The end of the written data (0 when there is no segment).
    pub fn write_pos(&self) -> u64 {
        self.inner.lock().data.max_wrote()
    }

    /// Where the first data segment starts, if there is one.
    pub fn first_segment_start(&self) -> Option<u64> {
        self.inner.lock().data.segments().first().map(Segment::from)
    }

    /// Starts an empty store's data at `offset` (a multiple of the segment size): RocketMQ's
    /// first start in DLedger mode over a plain commit log continues the address space after the
    /// old log's last segment (Java's `getLastMappedFile(dividedCommitlogOffset)`). Only before
    /// the member runs.
    pub fn start_data_at(&self, offset: u64) -> Result<(), StoreError> {
        let mut inner = self.inner.lock();
        let dir = inner.data.dir().to_owned();
        if !inner.data.is_empty() || inner.end_index != -1 {
            return Err(StoreError::Config(format!("the data can start at {offset} only in an empty store")));
        }
        if !offset.is_multiple_of(inner.data.segment_size() as u64) {
            return Err(StoreError::Config(format!("{offset} is not a multiple of the data segment size {}", inner.data.segment_size())));
        }
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::Io { path: dir.clone(), source })?;
        inner.data.rebuild_at(offset).map_err(|source| StoreError::Io { path: dir, source })
    }

    /// Up to `max_len` written bytes from `offset`, inside one segment and below `limit`.
    pub fn read(&self, offset: u64, max_len: usize, limit: u64) -> Option<Vec<u8>> {
        let inner = self.inner.lock();
        let (segment, pos) = inner.data.find(offset)?;
        let len = max_len.min(segment.wrote().checked_sub(pos)?).min(usize::try_from(limit.checked_sub(offset)?).ok()?);
        if len == 0 {
            return None;
        }
        segment.raw(pos, len).map(<[u8]>::to_vec)
    }

    /// Where the segment holding `offset` ends (the next segment's start), if one holds it.
    pub fn segment_end(&self, offset: u64) -> Option<u64> {
        let inner = self.inner.lock();
        let (segment, _) = inner.data.find(offset)?;
        Some(segment.from() + segment.size() as u64)
    }
}

impl Drop for FileStore {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            error!(error = %e, "dledger store shutdown failed");
        }
    }
}

impl RaftLog for FileStore {
    fn begin_index(&self) -> i64 {
        self.inner.lock().begin_index
    }

    fn end_index(&self) -> i64 {
        self.inner.lock().end_index
    }

    fn end_term(&self) -> i64 {
        self.inner.lock().end_term
    }

    fn committed_index(&self) -> i64 {
        self.inner.lock().committed_index
    }

    fn get(&self, index: i64) -> Option<Entry> {
        self.inner.lock().get(index)
    }

    fn append_as_leader(&mut self, term: i64, body: Bytes) -> Result<Entry, LogError> {
        self.check_disk()?;
        self.inner.lock().append_leader(term, body)
    }

    fn append_as_follower(&mut self, entry: &Entry) -> Result<(), LogError> {
        self.check_disk()?;
        self.inner.lock().append_follower(entry)
    }

    fn truncate(&mut self, entry: &Entry) -> Result<(), LogError> {
        self.inner.lock().truncate(entry)
    }

    fn update_committed(&mut self, term: i64, index: i64) {
        let current = self.shared.term.get();
        self.inner.lock().update_committed(term, current, index);
    }
}

fn local_hour() -> u32 {
    use chrono::Timelike;
    chrono::Local::now().hour()
}

/// The committed index of a checkpoint file: `None` when there is none or the value is empty
/// (Java's rules); an unparsable value refuses to start, as Java's `Long.valueOf` throws there.
fn read_checkpoint(path: &std::path::Path) -> Result<Option<i64>, StoreError> {
    let props = props_file::read(path).map_err(|source| StoreError::Io { path: path.to_owned(), source })?;
    let Some(text) = props.as_ref().and_then(|p| p.get(COMMITTED_INDEX_KEY)).map(|v| v.trim().to_owned()) else { return Ok(None) };
    if text.is_empty() {
        return Ok(None);
    }
    text.parse::<i64>().map(Some).map_err(|_| StoreError::Corrupt { path: path.to_owned(), detail: format!("{COMMITTED_INDEX_KEY}={text:?} is not a number") })
}

fn flush(inner: &Mutex<Inner>) -> std::io::Result<()> {
    let (data_jobs, index_jobs) = {
        let inner = inner.lock();
        (inner.data.flush_jobs(), inner.index.flush_jobs())
    };
    let mut first_error = None;
    let mut done = (Vec::new(), Vec::new());
    for (jobs, done) in [(&data_jobs, &mut done.0), (&index_jobs, &mut done.1)] {
        for job in jobs {
            match job.run() {
                Ok(()) => done.push(job),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
    }
    {
        let mut inner = inner.lock();
        for job in done.0 {
            inner.data.flushed(job);
        }
        for job in done.1 {
            inner.index.flushed(job);
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn persist_checkpoint(inner: &Mutex<Inner>, shared: &Shared) -> Result<(), StoreError> {
    let _writer = shared.checkpoint_lock.lock();
    let (end, committed) = {
        let inner = inner.lock();
        (inner.end_index, inner.committed_index)
    };
    let path = shared.node_dir.join(CHECKPOINT_FILE);
    props_file::write(&path, &props_file::checkpoint_text(end, committed)).map_err(|source| StoreError::Io { path, source })
}

fn clean_pass(inner: &Mutex<Inner>, shared: &Shared, now: SystemTime, hour: u32) -> usize {
    let store_ratio = clean::disk_used_ratio(&shared.store_base_dir);
    let data_ratio = clean::disk_used_ratio(&shared.data_dir);
    let decision = clean::decide(&shared.clean, hour, store_ratio, data_ratio);
    if decision.disk_full != shared.disk_full.swap(decision.disk_full, Ordering::AcqRel) {
        warn!(disk_full = decision.disk_full, store_ratio, data_ratio, "dledger disk-full state changed");
    }
    if !decision.delete {
        return 0;
    }
    let mut inner = inner.lock();
    let segments = inner.data.segments();
    let modified: Vec<Option<SystemTime>> = segments.iter().map(|s| s.modified().ok()).collect();
    let committed_pos = inner.committed_pos;
    // A segment may go once everything in it is committed: the next one starts at or below the
    // committed position.
    let committed = |i: usize| segments.get(i + 1).is_some_and(|next| committed_pos >= next.from() as i64);
    let n = clean::expired_prefix(&modified, committed, now, shared.clean.reserved, decision.force);
    if n == 0 {
        return 0;
    }
    let removed: Vec<Segment> = inner.data.take_first(n);
    inner.revise_begin_index();
    // Deleted under the lock: a truncation rebuilding at one of these offsets must not see its new
    // file unlinked.
    let count = removed.len();
    for segment in removed {
        let path = segment.path().to_owned();
        match segment.delete() {
            Ok(()) => info!(path = %path.display(), "deleted expired data segment"),
            Err(e) => warn!(path = %path.display(), error = %e, "cannot delete expired data segment"),
        }
    }
    info!(count, force = decision.force, store_ratio, data_ratio, "clean space");
    count
}
