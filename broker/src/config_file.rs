//! Java's `ConfigManager` file discipline for `<storePathRootDir>/config/*.json`.
//!
//! Load: read `<f>`; if it is missing, empty or cannot be decoded, read `<f>.bak`; if that is
//! missing or empty, start empty; if it cannot be decoded either, refuse to start (Java's `load()`
//! returns false and the broker exits).
//!
//! Persist, as Java 4.9 does but without its torn-file window: write `<f>.tmp` (and fsync it),
//! copy the current `<f>` to `<f>.bak`, then rename the tmp over `<f>` (Java deletes `<f>` before
//! renaming). One difference on purpose: a main file that failed to load is not copied over a good
//! backup.
//!
//! Writes happen off the hot path: a change marks the file dirty (and wakes the broker's
//! persister); the persister encodes a snapshot and writes it outside every lock the send and pull
//! paths take, so many changes cost one write. Encoding and writing happen under the file's own
//! lock, so writes land in the order of the snapshots they carry.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use parking_lot::Mutex;
use remoting::clock::now_ms;
use remoting::fastjson::{self, JsonStyle};
use remoting::protocol::topic::DataVersion;
use remoting::service::Waker;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The folder of the metadata files: `<storePathRootDir>/config`.
pub fn config_dir(store_root_dir: &Path) -> PathBuf {
    store_root_dir.join("config")
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path} cannot be decoded ({reason}) and is the last copy; fix or remove it to start")]
    Corrupt { path: PathBuf, reason: String },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

/// One `config/*.json` file and its `.bak`.
pub struct ConfigFile {
    path: PathBuf,
    /// Held while persisting (Java's `persist` is synchronized). True when the main file may be
    /// copied to the backup: it loaded, did not exist, or we wrote it.
    main_is_good: Mutex<bool>,
    /// Changes made (`changes`) and the count the last write covered (`written`).
    changes: AtomicU64,
    written: AtomicU64,
    /// Wakes the persister when a change is marked.
    persister: OnceLock<Waker>,
}

enum Read {
    Content(Vec<u8>),
    Absent,
}

fn read(path: &Path) -> Result<Read, io::Error> {
    match std::fs::read(path) {
        Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => Ok(Read::Absent),
        Ok(bytes) => Ok(Read::Content(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Read::Absent),
        Err(e) => Err(e),
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

impl ConfigFile {
    pub fn new(path: impl Into<PathBuf>) -> ConfigFile {
        ConfigFile { path: path.into(), main_is_good: Mutex::new(true), changes: AtomicU64::new(0), written: AtomicU64::new(0), persister: OnceLock::new() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn backup_path(&self) -> PathBuf {
        with_suffix(&self.path, ".bak")
    }

    fn tmp_path(&self) -> PathBuf {
        with_suffix(&self.path, ".tmp")
    }

    /// Loads the file (or its backup) with fastjson's reader. `Ok(None)`: neither has content;
    /// the caller starts with its defaults, as Java does.
    pub fn load<T: DeserializeOwned>(&self) -> Result<Option<T>, ConfigFileError> {
        let mut main_is_good = self.main_is_good.lock();
        match read(&self.path) {
            Ok(Read::Content(bytes)) => match fastjson::from_slice(&bytes) {
                Ok(value) => {
                    *main_is_good = true;
                    tracing::info!(path = %self.path.display(), "loaded");
                    return Ok(Some(value));
                }
                Err(e) => {
                    *main_is_good = false;
                    tracing::error!(path = %self.path.display(), error = %e, "cannot decode; trying the backup");
                }
            },
            Ok(Read::Absent) => *main_is_good = !self.path.exists(),
            Err(e) => {
                *main_is_good = false;
                tracing::error!(path = %self.path.display(), error = %e, "cannot read; trying the backup");
            }
        }
        let backup = self.backup_path();
        match read(&backup) {
            Ok(Read::Content(bytes)) => match fastjson::from_slice(&bytes) {
                Ok(value) => {
                    tracing::warn!(path = %backup.display(), "loaded the backup");
                    Ok(Some(value))
                }
                Err(e) => Err(ConfigFileError::Corrupt { path: backup, reason: e.to_string() }),
            },
            Ok(Read::Absent) => {
                if !*main_is_good {
                    tracing::error!(path = %self.path.display(), "no usable file and no backup; starting empty as Java does");
                }
                Ok(None)
            }
            Err(source) => Err(ConfigFileError::Read { path: backup, source }),
        }
    }

    /// Writes `value` in fastjson's pretty format, as Java's `ConfigManager.persist` does.
    pub fn persist<T: Serialize + ?Sized>(&self, value: &T) -> Result<(), ConfigFileError> {
        self.persist_bytes(&fastjson::to_vec(value, JsonStyle::FastjsonPretty))
    }

    /// Who to wake when a change is marked (the broker's persister).
    pub fn set_persister(&self, waker: Waker) {
        let _ = self.persister.set(waker);
    }

    /// Records a change to be written by the next [`ConfigFile::persist_if_dirty`].
    pub fn mark_dirty(&self) {
        self.changes.fetch_add(1, Ordering::AcqRel);
        if let Some(waker) = self.persister.get() {
            waker.wake();
        }
    }

    pub fn is_dirty(&self) -> bool {
        self.changes.load(Ordering::Acquire) != self.written.load(Ordering::Acquire)
    }

    /// Writes what `encode` returns if a change was marked since the last write; true when it
    /// wrote. `encode` runs under the file's lock, after the change count is read, so a change
    /// marked during the write makes the file dirty again rather than being lost.
    pub fn persist_if_dirty(&self, encode: impl FnOnce() -> Vec<u8>) -> Result<bool, ConfigFileError> {
        let mut main_is_good = self.main_is_good.lock();
        let changes = self.changes.load(Ordering::Acquire);
        if changes == self.written.load(Ordering::Acquire) {
            return Ok(false);
        }
        self.write_locked(&mut main_is_good, &encode())?;
        self.written.store(changes, Ordering::Release);
        Ok(true)
    }

    /// Writes now what `encode` returns (an admin change that is answered once it is on disk).
    pub fn persist_now(&self, encode: impl FnOnce() -> Vec<u8>) -> Result<(), ConfigFileError> {
        self.mark_dirty();
        self.persist_if_dirty(encode).map(|_| ())
    }

    /// tmp (fsynced), main -> bak, tmp renamed over main, directory fsynced.
    pub fn persist_bytes(&self, bytes: &[u8]) -> Result<(), ConfigFileError> {
        let mut main_is_good = self.main_is_good.lock();
        self.write_locked(&mut main_is_good, bytes)
    }

    fn write_locked(&self, main_is_good: &mut bool, bytes: &[u8]) -> Result<(), ConfigFileError> {
        let write_err = |path: &Path| {
            let path = path.to_owned();
            move |source| ConfigFileError::Write { path, source }
        };
        let dir = self.path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(write_err(dir))?;
        let tmp = self.tmp_path();
        write_synced(&tmp, bytes).map_err(write_err(&tmp))?;
        if *main_is_good {
            let backup = self.backup_path();
            match std::fs::copy(&self.path, &backup) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => return Err(ConfigFileError::Write { path: backup, source }),
            }
        }
        std::fs::rename(&tmp, &self.path).map_err(write_err(&self.path))?;
        *main_is_good = true;
        // Makes the rename itself durable; a failure here leaves a complete file either way.
        if let Err(e) = File::open(dir).and_then(|d| d.sync_all()) {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot fsync the config directory");
        }
        Ok(())
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Java's `new DataVersion()`: counter 0, stamped now.
pub fn new_data_version() -> DataVersion {
    DataVersion { counter: 0, state_version: 0, timestamp: now_ms() }
}

/// Java's `DataVersion.nextVersion()`: counter + 1, stamped now; 5.x also resets `stateVersion`
/// to the store's state-machine version, which is 0 without a controller.
pub fn next_version(version: &mut DataVersion) {
    version.counter += 1;
    version.state_version = 0;
    version.timestamp = now_ms();
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    type Table = BTreeMap<String, BTreeMap<i32, i64>>;

    fn table(n: i64) -> Table {
        [("T@g".to_owned(), [(0, n)].into())].into()
    }

    fn setup() -> (tempfile::TempDir, ConfigFile) {
        let dir = tempfile::tempdir().unwrap();
        let file = ConfigFile::new(dir.path().join("config").join("consumerOffset.json"));
        (dir, file)
    }

    #[test]
    fn a_missing_file_and_backup_load_as_empty() {
        let (_dir, file) = setup();
        assert_eq!(file.load::<Table>().unwrap(), None);
    }

    #[test]
    fn persist_keeps_the_previous_content_as_backup_and_leaves_no_tmp() {
        let (_dir, file) = setup();
        file.persist(&table(1)).unwrap();
        assert!(!file.backup_path().exists(), "nothing to back up the first time");
        file.persist(&table(2)).unwrap();
        assert_eq!(std::fs::read_to_string(file.path()).unwrap(), "{\n\t\"T@g\":{0:2\n\t}\n}");
        assert_eq!(std::fs::read_to_string(file.backup_path()).unwrap(), "{\n\t\"T@g\":{0:1\n\t}\n}");
        assert!(!file.tmp_path().exists());
        assert_eq!(file.load::<Table>().unwrap(), Some(table(2)));
    }

    #[test]
    fn a_corrupt_or_empty_main_file_falls_back_to_the_backup() {
        let (_dir, file) = setup();
        file.persist(&table(1)).unwrap();
        file.persist(&table(2)).unwrap();
        for broken in [&b"{\"T@g\":{0:"[..], b"", b" \n", b"\xff\xfe"] {
            std::fs::write(file.path(), broken).unwrap();
            assert_eq!(file.load::<Table>().unwrap(), Some(table(1)));
        }
    }

    #[test]
    fn a_main_file_that_did_not_load_is_not_copied_over_the_backup() {
        let (_dir, file) = setup();
        file.persist(&table(1)).unwrap();
        file.persist(&table(2)).unwrap();
        std::fs::write(file.path(), b"garbage").unwrap();
        assert_eq!(file.load::<Table>().unwrap(), Some(table(1)));
        file.persist(&table(3)).unwrap();
        assert_eq!(file.load::<Table>().unwrap(), Some(table(3)));
        assert_eq!(std::fs::read_to_string(file.backup_path()).unwrap(), "{\n\t\"T@g\":{0:1\n\t}\n}");
    }

    #[test]
    fn an_undecodable_backup_refuses_to_start() {
        let (_dir, file) = setup();
        std::fs::create_dir_all(file.path().parent().unwrap()).unwrap();
        std::fs::write(file.path(), b"{broken").unwrap();
        std::fs::write(file.backup_path(), b"{also broken").unwrap();
        let err = file.load::<Table>().unwrap_err();
        assert!(matches!(&err, ConfigFileError::Corrupt { path, .. } if *path == file.backup_path()), "{err}");
    }

    #[test]
    fn an_undecodable_main_file_without_backup_starts_empty_as_java_does() {
        let (_dir, file) = setup();
        std::fs::create_dir_all(file.path().parent().unwrap()).unwrap();
        std::fs::write(file.path(), b"{broken").unwrap();
        assert_eq!(file.load::<Table>().unwrap(), None);
    }

    #[test]
    fn a_leftover_tmp_from_a_crash_is_ignored_and_replaced() {
        let (_dir, file) = setup();
        file.persist(&table(1)).unwrap();
        std::fs::write(file.tmp_path(), b"{half").unwrap();
        assert_eq!(file.load::<Table>().unwrap(), Some(table(1)));
        file.persist(&table(2)).unwrap();
        assert_eq!(file.load::<Table>().unwrap(), Some(table(2)));
    }

    #[test]
    fn next_version_counts_and_stamps() {
        let mut v = DataVersion { counter: 4, state_version: 9, timestamp: 1 };
        next_version(&mut v);
        assert_eq!((v.counter, v.state_version), (5, 0));
        assert!(v.timestamp > 1_600_000_000_000);
    }
}
