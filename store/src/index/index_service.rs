//! The index directory (Java `IndexService`): files ordered by name (= creation time), the last
//! one written, all of them queried newest to oldest.
//!
//! Writing is one thread's job (the dispatcher); `build_index` also takes a lock so a second
//! caller can only wait, never interleave. Queries take a snapshot of the file list and walk it
//! without locks; a file deleted meanwhile stays mapped until the last snapshot drops it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration as Pause;

use chrono::{Duration, Local, NaiveDate, NaiveDateTime};
use parking_lot::{Mutex, RwLock};
use tracing::{error, info, warn};

use super::{build_key, IndexConfig, IndexError, IndexFile};
use crate::message::record::TRANSACTION_ROLLBACK_TYPE;

/// Index files live in `<storePathRootDir>/index`.
pub const INDEX_DIR_NAME: &str = "index";

/// What the index needs of one dispatched record (Java's `DispatchRequest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexRecord<'a> {
    pub topic: &'a str,
    pub physical_offset: i64,
    pub store_timestamp: i64,
    /// `sysFlag & 0xC`.
    pub transaction_type: i32,
    /// The `KEYS` property: keys separated by single spaces.
    pub keys: Option<&'a str>,
    /// The `UNIQ_KEY` property.
    pub uniq_key: Option<&'a str>,
}

/// Java's `QueryOffsetResult`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryResult {
    /// Newest first within a file, files newest first.
    pub phy_offsets: Vec<i64>,
    /// The newest file's endTimestamp (0 without files).
    pub index_last_update_timestamp: i64,
    /// The newest file's endPhyOffset (0 without files).
    pub index_last_update_phyoffset: i64,
}

/// Tries at creating an index file, a pause apart, before the index is marked failed (Java's
/// `MAX_TRY_IDX_CREATE` and its one-second sleep in `retryGetAndCreateIndexFile`).
const CREATE_TRIES: u32 = 3;
const CREATE_PAUSE: Pause = Pause::from_secs(1);

pub struct IndexService {
    dir: PathBuf,
    config: IndexConfig,
    files: RwLock<Vec<Arc<IndexFile>>>,
    writer: Mutex<()>,
    index_msg_timestamp: AtomicI64,
    /// Set when no index file could be created after [`CREATE_TRIES`] tries (Java's
    /// `WRITE_INDEX_FILE_ERROR_BIT`): the store refuses puts while it is set.
    failed: AtomicBool,
    /// Records left unindexed since the index failed.
    unindexed: AtomicU64,
}

impl std::fmt::Debug for IndexService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IndexService({}, {} files)", self.dir.display(), self.files.read().len())
    }
}

/// `yyyyMMddHHmmssSSS`, the local time an index file is created at (Java
/// `UtilAll.timeMillisToHumanString` in the JVM's default time zone).
pub fn file_name_at(time: NaiveDateTime) -> String {
    time.format("%Y%m%d%H%M%S%3f").to_string()
}

/// Whether `name` looks like an index file: 17 ASCII digits.
pub fn is_index_file_name(name: &str) -> bool {
    name.len() == 17 && name.bytes().all(|b| b.is_ascii_digit())
}

fn parse_file_name(name: &str) -> Option<NaiveDateTime> {
    if !is_index_file_name(name) {
        return None;
    }
    let num = |from: usize, to: usize| name.get(from..to)?.parse::<u32>().ok();
    NaiveDate::from_ymd_opt(num(0, 4)? as i32, num(4, 6)?, num(6, 8)?)?.and_hms_milli_opt(num(8, 10)?, num(10, 12)?, num(12, 14)?, num(14, 17)?)
}

/// The name for a file created now: the local time, or, if that does not sort after `last`
/// (same millisecond, or the clock went back), one millisecond after `last`, so names stay in
/// creation order (Java would reuse the existing file of the same name instead).
fn next_file_name(now: NaiveDateTime, last: Option<&str>) -> String {
    let name = file_name_at(now);
    let Some(last) = last.filter(|last| name.as_str() <= *last) else { return name };
    match parse_file_name(last) {
        Some(t) => file_name_at(t + Duration::milliseconds(1)),
        None => last.parse::<u64>().map_or(name, |n| format!("{:017}", n.saturating_add(1))),
    }
}

impl IndexService {
    /// The index of the store rooted at `store_root_dir`. Nothing is read until [`Self::load`].
    pub fn new(store_root_dir: &Path, config: IndexConfig) -> Result<IndexService, IndexError> {
        config.validate()?;
        Ok(IndexService {
            dir: store_root_dir.join(INDEX_DIR_NAME),
            config,
            files: RwLock::new(Vec::new()),
            writer: Mutex::new(()),
            index_msg_timestamp: AtomicI64::new(0),
            failed: AtomicBool::new(false),
            unindexed: AtomicU64::new(0),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &IndexConfig {
        &self.config
    }

    /// Opens every index file, oldest first. After an abnormal exit (`abort` was present), files
    /// whose endTimestamp is newer than the checkpoint's indexMsgTimestamp may be incomplete on
    /// disk and are deleted, as Java does (usually that is the file being written). Names that
    /// are not 17 digits and directories are skipped.
    pub fn load(&self, last_exit_ok: bool, checkpoint_index_timestamp: i64) -> Result<(), IndexError> {
        let io_err = |source| IndexError::Io { path: self.dir.clone(), source };
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err(e)),
        };
        let mut paths = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_err)?;
            let path = entry.path();
            let is_dir = entry.file_type().map_err(io_err)?.is_dir();
            match path.file_name().and_then(|n| n.to_str()) {
                Some(name) if !is_dir && is_index_file_name(name) => paths.push(path),
                _ => warn!(path = %path.display(), "not an index file, skipped"),
            }
        }
        paths.sort();

        let mut loaded = Vec::with_capacity(paths.len());
        for path in paths {
            let file = IndexFile::open(&path, &self.config)?;
            if !last_exit_ok && file.end_timestamp() > checkpoint_index_timestamp {
                info!(path = %path.display(), end_timestamp = file.end_timestamp(), checkpoint_index_timestamp,
                    "abnormal exit: deleting index file newer than the checkpoint");
                file.delete().map_err(|source| IndexError::Io { path: path.clone(), source })?;
                continue;
            }
            info!(path = %path.display(), "index file loaded");
            loaded.push(Arc::new(file));
        }
        *self.files.write() = loaded;
        Ok(())
    }

    /// Indexes one dispatched record: `topic#UNIQ_KEY` and `topic#k` for every non-empty
    /// space-separated `k` of `KEYS`. Skips rollback records and records below the current
    /// file's endPhyOffset (dispatched again after a restart).
    ///
    /// When a file fills, the next one is created and the full one is forced to disk; the full
    /// file's endTimestamp is then returned (and kept, see [`Self::index_msg_timestamp`]) for the
    /// checkpoint's indexMsgTimestamp. Java forces it on a background thread; here the
    /// dispatcher waits, which keeps "checkpoint never ahead of the forced index" trivially true.
    ///
    /// When no file can be created the index is marked failed ([`Self::has_failed`]; one error
    /// logged) and records go unindexed ([`IndexError::Failed`]), as Java's do, until
    /// [`Self::retry_failed`] creates one.
    pub fn build_index(&self, record: &IndexRecord<'_>) -> Result<Option<i64>, IndexError> {
        let _writer = self.writer.lock();
        if self.has_failed() {
            self.unindexed.fetch_add(1, Ordering::Relaxed);
            return Err(IndexError::Failed);
        }
        let mut full_file_timestamp = None;
        let mut file = self.writable_file(&mut full_file_timestamp)?;
        if record.physical_offset < file.end_phy_offset() || record.transaction_type == TRANSACTION_ROLLBACK_TYPE {
            return Ok(full_file_timestamp);
        }
        if let Some(uniq_key) = record.uniq_key {
            self.put_key(&mut file, &build_key(record.topic, uniq_key), record, &mut full_file_timestamp)?;
        }
        for key in record.keys.unwrap_or("").split(' ').filter(|k| !k.is_empty()) {
            self.put_key(&mut file, &build_key(record.topic, key), record, &mut full_file_timestamp)?;
        }
        Ok(full_file_timestamp)
    }

    /// Whether no index file could be created (see [`Self::build_index`]): the store is then not
    /// writable, as Java's `isWriteable()` is false with its index-file error bit set.
    pub fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// When the index has failed, tries once to create a file (the store's cleaning pass asks,
    /// after it may have freed space) and clears the mark when that works. Java keeps its mark
    /// until a restart; a broker that recovers by itself once the disk has room serves its users
    /// better.
    pub fn retry_failed(&self) {
        let _writer = self.writer.lock();
        if !self.has_failed() {
            return;
        }
        // A full file's end time is not handed to the checkpoint here: it keeps an older
        // indexMsgTimestamp, which only makes a recovery rebuild more of the index.
        if self.writable_file(&mut None).is_ok() {
            self.failed.store(false, Ordering::Release);
            let unindexed = self.unindexed.swap(0, Ordering::Relaxed);
            warn!(unindexed, "an index file could be created again; the store takes writes again");
        }
    }

    fn put_key(&self, file: &mut Arc<IndexFile>, key: &str, record: &IndexRecord<'_>, full_file_timestamp: &mut Option<i64>) -> Result<(), IndexError> {
        if file.put_key(key, record.physical_offset, record.store_timestamp) {
            return Ok(());
        }
        *file = self.writable_file(full_file_timestamp)?;
        if file.put_key(key, record.physical_offset, record.store_timestamp) {
            Ok(())
        } else {
            Err(IndexError::FreshFileFull { path: file.path().to_owned() })
        }
    }

    /// The last file if it has room; otherwise a new one continuing from the last file's end
    /// values, after forcing the full one. Called with the writer lock held.
    fn writable_file(&self, full_file_timestamp: &mut Option<i64>) -> Result<Arc<IndexFile>, IndexError> {
        let last = self.files.read().last().cloned();
        if let Some(last) = last.as_ref().filter(|f| !f.is_full()) {
            return Ok(Arc::clone(last));
        }
        let file = Arc::new(self.create_next(last.as_deref())?);
        self.files.write().push(Arc::clone(&file));
        info!(path = %file.path().display(), end_phy_offset = file.end_phy_offset(), end_timestamp = file.end_timestamp(), "index file created");

        if let Some(full) = last {
            match full.flush() {
                Ok(()) => {
                    let timestamp = full.end_timestamp();
                    self.index_msg_timestamp.fetch_max(timestamp, Ordering::AcqRel);
                    *full_file_timestamp = Some(timestamp);
                }
                // The checkpoint then keeps an older indexMsgTimestamp: after a crash this file is
                // deleted and rebuilt by re-dispatch instead of trusted.
                Err(e) => error!(path = %full.path().display(), error = %e, "cannot force full index file"),
            }
        }
        Ok(file)
    }

    /// A new file after `last`, tried [`CREATE_TRIES`] times a pause apart (once when the index
    /// has failed already); when none works the index is marked failed.
    fn create_next(&self, last: Option<&IndexFile>) -> Result<IndexFile, IndexError> {
        let failed = self.has_failed();
        let (end_phy_offset, end_timestamp) = last.map_or((0, 0), |f| (f.end_phy_offset(), f.end_timestamp()));
        let tries = if failed { 1 } else { CREATE_TRIES };
        let mut tried = 0;
        let error = loop {
            let created = std::fs::create_dir_all(&self.dir).map_err(|source| IndexError::Io { path: self.dir.clone(), source }).and_then(|()| {
                let name = next_file_name(Local::now().naive_local(), last.map(|f| f.file_name()));
                IndexFile::create(&self.dir.join(&name), &self.config, end_phy_offset, end_timestamp)
            });
            match created {
                Ok(file) => return Ok(file),
                Err(e) => {
                    tried += 1;
                    if tried >= tries {
                        break e;
                    }
                    info!(tried, error = %e, "tried to create an index file");
                    std::thread::sleep(CREATE_PAUSE);
                }
            }
        };
        if failed {
            return Err(IndexError::Failed);
        }
        self.unindexed.fetch_add(1, Ordering::Relaxed);
        self.failed.store(true, Ordering::Release);
        error!(
            error = %error,
            tries = CREATE_TRIES,
            "no index file can be created: the store refuses writes until one can (Java's index file error flag), records go unindexed meanwhile"
        );
        Err(IndexError::Failed)
    }

    /// The endTimestamp of the newest file that became full and was forced to disk (0 if none
    /// yet): the value for the checkpoint's indexMsgTimestamp.
    pub fn index_msg_timestamp(&self) -> i64 {
        self.index_msg_timestamp.load(Ordering::Acquire)
    }

    /// Offsets of messages of `topic` with `key` (a UNIQ_KEY or one of the KEYS) stored within
    /// `[begin, end]` (ms), at most `min(max_num, maxMsgsNumBatch)`. Java's walk: files newest to
    /// oldest, skipping files whose time range misses the window, stopping at the first file that
    /// begins before `begin` or once enough offsets are found.
    pub fn query(&self, topic: &str, key: &str, max_num: usize, begin: i64, end: i64) -> QueryResult {
        let max_num = max_num.min(self.config.max_msgs_num_batch);
        let files = self.files();
        let mut result = QueryResult::default();
        if let Some(last) = files.last() {
            result.index_last_update_timestamp = last.end_timestamp();
            result.index_last_update_phyoffset = last.end_phy_offset();
        }
        let key = build_key(topic, key);
        for file in files.iter().rev() {
            if file.is_time_matched(begin, end) {
                file.select_phy_offsets_into(&mut result.phy_offsets, &key, max_num, begin, end);
            }
            if file.begin_timestamp() < begin || result.phy_offsets.len() >= max_num {
                break;
            }
        }
        result
    }

    /// Deletes the files, oldest first, whose endPhyOffset is below `min_phy_offset` (the commit
    /// log's min offset after its expiry), never the newest file. Returns how many went.
    pub fn delete_files_below(&self, min_phy_offset: i64) -> usize {
        let files = self.files();
        let Some((_newest, older)) = files.split_last() else { return 0 };
        let expired: Vec<&Arc<IndexFile>> = older.iter().take_while(|f| f.end_phy_offset() < min_phy_offset).collect();
        let mut deleted = 0;
        for file in expired {
            if let Err(e) = file.delete() {
                error!(path = %file.path().display(), error = %e, "cannot delete expired index file");
                break;
            }
            self.files.write().retain(|f| !Arc::ptr_eq(f, file));
            info!(path = %file.path().display(), end_phy_offset = file.end_phy_offset(), "expired index file deleted");
            deleted += 1;
        }
        deleted
    }

    /// Forces every file (header included) to disk.
    pub fn flush(&self) -> Result<(), IndexError> {
        for file in self.files() {
            file.flush().map_err(|source| IndexError::Io { path: file.path().to_owned(), source })?;
        }
        Ok(())
    }

    /// Forces every file and drops them (Java 5.x; 4.9 leaves them to the page cache).
    pub fn shutdown(&self) -> Result<(), IndexError> {
        let _writer = self.writer.lock();
        let files = std::mem::take(&mut *self.files.write());
        let mut first_error = None;
        for file in &files {
            if let Err(source) = file.flush() {
                error!(path = %file.path().display(), error = %source, "cannot force index file at shutdown");
                first_error.get_or_insert(IndexError::Io { path: file.path().to_owned(), source });
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Deletes every index file (Java `destroy`, used when the whole store is destroyed).
    pub fn destroy(&self) {
        let _writer = self.writer.lock();
        for file in std::mem::take(&mut *self.files.write()) {
            if let Err(e) = file.delete() {
                error!(path = %file.path().display(), error = %e, "cannot delete index file");
            }
        }
    }

    /// A snapshot of the files, oldest first.
    pub fn files(&self) -> Vec<Arc<IndexFile>> {
        self.files.read().clone()
    }

    /// Bytes of all index files (Java 5.x `getTotalSize`).
    pub fn total_size(&self) -> u64 {
        self.files().iter().map(|f| f.file_size() as u64).sum()
    }
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    fn at(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.3f").unwrap()
    }

    #[test]
    fn file_names_are_seventeen_digits_of_local_time() {
        assert_eq!(file_name_at(at("2024-03-05 07:08:09.012")), "20240305070809012");
        assert!(is_index_file_name("20240305070809012"));
        assert!(!is_index_file_name("2024030507080901"));
        assert!(!is_index_file_name("2024030507080901x"));
    }

    #[test]
    fn a_name_that_would_not_sort_after_the_last_one_moves_one_millisecond_past_it() {
        let now = at("2024-03-05 07:08:09.012");
        assert_eq!(next_file_name(now, None), "20240305070809012");
        assert_eq!(next_file_name(now, Some("20240305070809011")), "20240305070809012");
        assert_eq!(next_file_name(now, Some("20240305070809012")), "20240305070809013");
        assert_eq!(next_file_name(now, Some("20240305235959999")), "20240306000000000");
        assert_eq!(next_file_name(now, Some("99999999999999998")), "99999999999999999");
    }
}
