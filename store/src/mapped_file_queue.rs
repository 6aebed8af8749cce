//! A directory of equally sized segment files named by their start offset (Java
//! `MappedFileQueue`): the commit log, or one consume queue.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use tracing::{info, warn};

use crate::mapped_file::{FileSync, MappedFile, Msync};

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot list {dir}: {source}")]
    List { dir: PathBuf, source: io::Error },
    #[error("{path}: file name is not a 20-digit offset")]
    BadName { path: PathBuf },
    #[error("{path} is {actual} bytes; every file here must be {expected} bytes")]
    WrongSize { path: PathBuf, actual: u64, expected: usize },
    #[error("cannot map {path}: {source}")]
    Map { path: PathBuf, source: io::Error },
}

/// Creates the file starting at an offset (the commit log's allocation service).
pub type Allocator = Arc<dyn Fn(u64) -> io::Result<MappedFile> + Send + Sync>;

pub struct MappedFileQueue {
    dir: PathBuf,
    file_size: usize,
    files: RwLock<Vec<Arc<MappedFile>>>,
    allocator: RwLock<Option<Allocator>>,
    /// The file being written takes its page faults one page at a time (see
    /// [`MappedFileQueue::with_small_writes`]).
    small_writes: bool,
}

impl MappedFileQueue {
    pub fn new(dir: impl Into<PathBuf>, file_size: usize) -> Self {
        MappedFileQueue { dir: dir.into(), file_size, files: RwLock::new(Vec::new()), allocator: RwLock::new(None), small_writes: false }
    }

    /// For a writer of small records into many files at once (the consume queues): the file being
    /// written is advised random access, so a write's fault on a page not yet in the page cache
    /// reads that page alone. With the kernel's read-around (the device's read-ahead, megabytes
    /// on some machines) each such fault read and zero-filled most of a sparse file: with 1,000
    /// topics the dispatcher spent three quarters of the core in the kernel's memset and
    /// consumers starved. A file written full is advised normal again, for sequential readers.
    pub fn with_small_writes(mut self) -> Self {
        self.small_writes = true;
        self
    }

    /// New files come from `allocator` instead of being created in place.
    pub fn set_allocator(&self, allocator: Option<Allocator>) {
        *self.allocator.write() = allocator;
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn file_size(&self) -> usize {
        self.file_size
    }

    /// Maps every file of the directory, each with its positions at the file end (recovery moves
    /// them back). Java's rules: names must be offsets, sizes must all be `file_size`; Java 5.x
    /// skips sub-directories and deletes an empty last file.
    pub fn load(&self) -> Result<(), LoadError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(source) => return Err(LoadError::List { dir: self.dir.clone(), source }),
        };
        let mut found: Vec<(u64, PathBuf, u64)> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| LoadError::List { dir: self.dir.clone(), source })?;
            let path = entry.path();
            let meta = entry.metadata().map_err(|source| LoadError::List { dir: self.dir.clone(), source })?;
            if meta.is_dir() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(offset) = name.parse::<u64>().ok().filter(|_| name.len() == 20) else {
                if name.ends_with(".tmp") || name.ends_with(".bak") {
                    continue;
                }
                return Err(LoadError::BadName { path });
            };
            found.push((offset, path, meta.len()));
        }
        found.sort();
        if let Some((_, path, 0)) = found.last() {
            warn!(path = %path.display(), "deleting empty last file");
            let _ = std::fs::remove_file(path);
            found.pop();
        }
        let mut files = Vec::with_capacity(found.len());
        for (offset, path, len) in found {
            if len != self.file_size as u64 {
                return Err(LoadError::WrongSize { path, actual: len, expected: self.file_size });
            }
            let file = MappedFile::open(&path, offset, self.file_size).map_err(|source| LoadError::Map { path: path.clone(), source })?;
            file.set_positions(self.file_size);
            files.push(Arc::new(file));
        }
        if let Some(last) = files.last().filter(|_| self.small_writes) {
            let _ = last.set_read_ahead(true);
        }
        *self.files.write() = files;
        Ok(())
    }

    pub fn files(&self) -> Vec<Arc<MappedFile>> {
        self.files.read().clone()
    }

    pub fn first(&self) -> Option<Arc<MappedFile>> {
        self.files.read().first().cloned()
    }

    pub fn last(&self) -> Option<Arc<MappedFile>> {
        self.files.read().last().cloned()
    }

    pub fn is_empty(&self) -> bool {
        self.files.read().is_empty()
    }

    /// The last file if it has room, else a new file after it (or at `start_offset` when the
    /// queue is empty). Writer only.
    pub fn last_or_create(&self, start_offset: u64) -> io::Result<Arc<MappedFile>> {
        let previous = self.last();
        let next_offset = match &previous {
            Some(last) if !last.is_full() => return Ok(last.clone()),
            Some(last) => last.from_offset() + self.file_size as u64,
            None => start_offset - start_offset % self.file_size as u64,
        };
        let allocator = self.allocator.read().clone();
        let file = match allocator {
            Some(allocate) => allocate(next_offset)?,
            None => MappedFile::create(&self.dir, next_offset, self.file_size)?,
        };
        if self.small_writes {
            let _ = file.set_read_ahead(true);
            if let Some(full) = previous {
                let _ = full.set_read_ahead(false);
            }
        }
        let file = Arc::new(file);
        self.files.write().push(file.clone());
        Ok(file)
    }

    /// The file holding byte `offset` of the address space.
    pub fn find(&self, offset: u64) -> Option<Arc<MappedFile>> {
        let files = self.files.read();
        let first = files.first()?.from_offset();
        if offset < first {
            return None;
        }
        let index = ((offset - first) / self.file_size as u64) as usize;
        let file = files.get(index)?;
        (file.from_offset() <= offset && offset < file.from_offset() + self.file_size as u64).then(|| file.clone())
    }

    pub fn min_offset(&self) -> u64 {
        self.first().map_or(0, |f| f.from_offset())
    }

    /// The end of what readers may see.
    pub fn max_offset(&self) -> u64 {
        self.last().map_or(0, |f| f.from_offset() + f.read_position() as u64)
    }

    /// The flushed end: the first file not completely flushed, plus its flushed position.
    pub fn flushed_offset(&self) -> u64 {
        let files = self.files.read();
        for f in files.iter() {
            if f.flushed_position() < f.size() {
                return f.from_offset() + f.flushed_position() as u64;
            }
        }
        files.last().map_or(0, |f| f.from_offset() + f.size() as u64)
    }

    /// Bytes written into transient-pool buffers but not yet committed to their files.
    pub fn uncommitted_bytes(&self) -> u64 {
        self.files().iter().map(|f| f.wrote_position().saturating_sub(f.committed_position()) as u64).sum()
    }

    /// Commits transient-pool buffers into their files (see [`MappedFile::commit`]); returns
    /// whether any bytes moved.
    pub fn commit(&self, least_pages: usize) -> bool {
        let mut moved = false;
        for f in self.files() {
            if f.committed_position() < f.wrote_position() || f.uses_write_buffer() {
                let before = f.committed_position();
                moved |= f.commit(least_pages) > before;
            }
        }
        moved
    }

    /// Flushes the files that hold unflushed bytes. Returns the new flushed offset.
    pub fn flush(&self, least_pages: usize) -> io::Result<u64> {
        self.flush_with(least_pages, &Msync)
    }

    /// As [`MappedFileQueue::flush`], forcing bytes through `sync`; stops at the first error.
    pub fn flush_with(&self, least_pages: usize, sync: &dyn FileSync) -> io::Result<u64> {
        for f in self.files() {
            if f.flushed_position() < f.committed_position() {
                f.flush_with(if f.is_full() { 0 } else { least_pages }, sync)?;
            }
        }
        Ok(self.flushed_offset())
    }

    /// Sets the end of the queue to `offset`: the file holding it gets its positions there (and,
    /// with `erase_tail`, its stale tail erased), later files are deleted (Java
    /// `truncateDirtyFiles`, plus the erasing). Erasing reads the whole rest of the file, so a
    /// caller asks for it only where a torn write may have left records behind the end.
    pub fn truncate_to(&self, offset: u64, erase_tail: bool) {
        let mut files = self.files.write();
        files.retain(|f| {
            let end = f.from_offset() + f.size() as u64;
            if end <= offset {
                return true;
            }
            if f.from_offset() <= offset {
                let pos = (offset - f.from_offset()) as usize;
                f.set_positions(pos);
                if !erase_tail {
                    return true;
                }
                if let Err(e) = f.zero_tail(pos) {
                    warn!(path = %f.path().display(), error = %e, "cannot erase the stale tail");
                }
                return true;
            }
            info!(path = %f.path().display(), "deleting file past the recovered end");
            f.release_write_buffer();
            if let Err(e) = f.delete_file() {
                warn!(path = %f.path().display(), error = %e, "cannot delete file");
            }
            false
        });
    }

    /// Deletes the oldest files that [`crate::cleanup::expired_prefix`] picks; returns how many.
    pub fn delete_expired(&self, now: std::time::SystemTime, reserved: std::time::Duration, force: bool, batch_max: usize) -> usize {
        let modified: Vec<std::time::SystemTime> = self.files().iter().map(|f| std::fs::metadata(f.path()).and_then(|m| m.modified()).unwrap_or(now)).collect();
        let count = crate::cleanup::expired_prefix(&modified, now, reserved, force, batch_max);
        self.remove_first(count);
        count
    }

    /// Drops the first files (cleanup), deleting them from disk.
    pub fn remove_first(&self, count: usize) -> Vec<Arc<MappedFile>> {
        let mut files = self.files.write();
        let count = count.min(files.len());
        let removed: Vec<_> = files.drain(..count).collect();
        for f in &removed {
            f.release_write_buffer();
            if let Err(e) = f.delete_file() {
                warn!(path = %f.path().display(), error = %e, "cannot delete file");
            }
        }
        removed
    }

    /// Deletes every file.
    pub fn destroy(&self) {
        let n = self.files.read().len();
        self.remove_first(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_roll_and_offsets_resolve_to_them() {
        let dir = tempfile::tempdir().unwrap();
        let q = MappedFileQueue::new(dir.path(), 100);
        let f = q.last_or_create(0).unwrap();
        assert!(f.append(&[7u8; 100]));
        let g = q.last_or_create(0).unwrap();
        assert_eq!(g.from_offset(), 100);
        assert!(g.append(&[8u8; 10]));
        assert_eq!((q.min_offset(), q.max_offset()), (0, 110));
        assert_eq!(q.find(99).unwrap().from_offset(), 0);
        assert_eq!(q.find(100).unwrap().from_offset(), 100);
        assert!(q.find(200).is_none());
        assert_eq!(q.flush(0).unwrap(), 110);
    }

    #[test]
    fn load_refuses_wrong_sizes_and_bad_names_like_java() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("00000000000000000000"), [0u8; 100]).unwrap();
        std::fs::write(dir.path().join("00000000000000000100"), [0u8; 50]).unwrap();
        assert!(matches!(MappedFileQueue::new(dir.path(), 100).load(), Err(LoadError::WrongSize { .. })));
        std::fs::remove_file(dir.path().join("00000000000000000100")).unwrap();
        std::fs::write(dir.path().join("garbage"), b"x").unwrap();
        assert!(matches!(MappedFileQueue::new(dir.path(), 100).load(), Err(LoadError::BadName { .. })));
    }

    #[test]
    fn truncation_keeps_the_file_holding_the_offset_and_deletes_later_ones() {
        let dir = tempfile::tempdir().unwrap();
        let q = MappedFileQueue::new(dir.path(), 100);
        for _ in 0..3 {
            q.last_or_create(0).unwrap().append(&[1u8; 100]);
        }
        q.truncate_to(150, true);
        assert_eq!(q.files().len(), 2);
        assert_eq!(q.max_offset(), 150);
        assert!(!dir.path().join("00000000000000000200").exists());
    }
}
