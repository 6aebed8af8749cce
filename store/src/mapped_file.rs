//! One memory-mapped segment file of a commit log or consume queue (Java `MappedFile`).
//!
//! A file has three positions: `wrote` (appended), `committed` (equal to `wrote` when writing
//! straight into the mapping) and `flushed` (forced to disk). Exactly one writer appends (the
//! owner holds the append lock); readers may read concurrently, but only below the position the
//! writer published with release ordering, which the writer never touches again. That discipline
//! is what makes the raw-pointer accesses below sound.

#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use memmap2::MmapRaw;

pub const OS_PAGE_SIZE: usize = 4096;

pub struct MappedFile {
    path: PathBuf,
    _file: File,
    map: MmapRaw,
    from_offset: u64,
    size: usize,
    wrote: AtomicUsize,
    flushed: AtomicUsize,
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MappedFile({}, wrote {}, flushed {})", self.path.display(), self.wrote_position(), self.flushed_position())
    }
}

/// The 20-digit zero-padded decimal name of the file starting at `offset`.
pub fn file_name(offset: u64) -> String {
    format!("{offset:020}")
}

impl MappedFile {
    /// Creates (or opens) `dir/<20-digit offset>` with exactly `size` bytes and maps it.
    pub fn create(dir: &Path, from_offset: u64, size: usize) -> io::Result<MappedFile> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(file_name(from_offset));
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path)?;
        let len = file.metadata()?.len();
        if len != size as u64 {
            file.set_len(size as u64)?;
        }
        Self::map(path, file, from_offset, size)
    }

    /// Opens an existing file, which must be exactly `size` bytes (Java refuses other sizes too).
    pub fn open(path: &Path, from_offset: u64, size: usize) -> io::Result<MappedFile> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let len = file.metadata()?.len();
        if len != size as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is {len} bytes, expected {size}", path.display()),
            ));
        }
        Self::map(path.to_owned(), file, from_offset, size)
    }

    fn map(path: PathBuf, file: File, from_offset: u64, size: usize) -> io::Result<MappedFile> {
        let map = MmapRaw::map_raw(&file)?;
        if map.len() < size {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{} mapped short", path.display())));
        }
        Ok(MappedFile { path, _file: file, map, from_offset, size, wrote: AtomicUsize::new(0), flushed: AtomicUsize::new(0) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn from_offset(&self) -> u64 {
        self.from_offset
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn wrote_position(&self) -> usize {
        self.wrote.load(Ordering::Acquire)
    }

    pub fn flushed_position(&self) -> usize {
        self.flushed.load(Ordering::Acquire)
    }

    /// What readers may see.
    pub fn read_position(&self) -> usize {
        self.wrote_position()
    }

    pub fn is_full(&self) -> bool {
        self.wrote_position() == self.size
    }

    pub fn remaining(&self) -> usize {
        self.size - self.wrote_position()
    }

    /// Sets all positions (load and recovery; no reader or writer may be active).
    pub fn set_positions(&self, pos: usize) {
        let pos = pos.min(self.size);
        self.wrote.store(pos, Ordering::Release);
        self.flushed.store(pos, Ordering::Release);
    }

    /// Appends `data` at the write position and publishes it. Single writer only. Returns false
    /// (writing nothing) when it does not fit.
    pub fn append(&self, data: &[u8]) -> bool {
        let pos = self.wrote.load(Ordering::Relaxed);
        if data.len() > self.size - pos {
            return false;
        }
        // SAFETY: [pos, pos + len) lies inside the mapping (checked above) and beyond the published
        // read position, so no reader looks at it; the single writer is the only one writing.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.map.as_mut_ptr().add(pos), data.len()) };
        self.wrote.store(pos + data.len(), Ordering::Release);
        true
    }

    /// Fills `data` via `fill` directly in the mapping, then publishes it. Single writer only.
    pub fn append_with(&self, len: usize, fill: impl FnOnce(&mut [u8])) -> bool {
        let pos = self.wrote.load(Ordering::Relaxed);
        if len > self.size - pos {
            return false;
        }
        // SAFETY: as in `append`: the region is inside the mapping, unpublished, and ours alone.
        let region = unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().add(pos), len) };
        fill(region);
        self.wrote.store(pos + len, Ordering::Release);
        true
    }

    /// Marks the file full without writing (after the end-of-file marker, whose bytes beyond the
    /// marker stay as they are).
    pub fn mark_full(&self) {
        self.wrote.store(self.size, Ordering::Release);
    }

    /// Bytes `[pos, pos + len)` if they are all readable.
    pub fn read(&self, pos: usize, len: usize) -> Option<&[u8]> {
        let end = pos.checked_add(len)?;
        if end > self.read_position() {
            return None;
        }
        // SAFETY: the range is below the published read position: fully written, never written
        // again while this file is alive, and inside the mapping, which lives as long as `self`.
        Some(unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(pos), len) })
    }

    /// Everything readable from `pos`.
    pub fn read_from(&self, pos: usize) -> Option<&[u8]> {
        let end = self.read_position();
        self.read(pos, end.checked_sub(pos)?)
    }

    /// Raw bytes `[pos, pos + len)` regardless of positions, for recovery scans before any writer
    /// or reader runs.
    pub fn raw(&self, pos: usize, len: usize) -> Option<&[u8]> {
        let end = pos.checked_add(len)?;
        if end > self.size {
            return None;
        }
        // SAFETY: inside the mapping; recovery runs before the store has writers or readers.
        Some(unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(pos), len) })
    }

    /// Forces written bytes to disk when at least `least_pages` dirty pages accumulated (0 = any),
    /// or the file is full. Returns the new flushed position.
    pub fn flush(&self, least_pages: usize) -> io::Result<usize> {
        let wrote = self.wrote_position();
        let flushed = self.flushed_position();
        if wrote <= flushed {
            return Ok(flushed);
        }
        let dirty_pages = wrote / OS_PAGE_SIZE - flushed / OS_PAGE_SIZE;
        if !(self.is_full() || least_pages == 0 || dirty_pages >= least_pages) {
            return Ok(flushed);
        }
        // msync needs a page-aligned start.
        let start = flushed / OS_PAGE_SIZE * OS_PAGE_SIZE;
        self.map.flush_range(start, wrote - start)?;
        self.flushed.store(wrote, Ordering::Release);
        Ok(wrote)
    }

    /// Removes the file from disk. The mapping stays valid for readers still holding it.
    pub fn delete_file(&self) -> io::Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Touches every page (Java's warm-up) so the file is backed by real blocks, then locks the
    /// mapping in memory and advises the kernel we will need it.
    pub fn warm_up(&self, flush_every_pages: Option<usize>) -> io::Result<()> {
        let mut page = 0;
        while page * OS_PAGE_SIZE < self.size {
            // SAFETY: warm-up runs on a fresh file before it is handed to the writer; the byte is
            // inside the mapping.
            unsafe { self.map.as_mut_ptr().add(page * OS_PAGE_SIZE).write_volatile(0) };
            page += 1;
            if let Some(every) = flush_every_pages.filter(|n| *n > 0) {
                if page % every == 0 {
                    self.map.flush_range(0, (page * OS_PAGE_SIZE).min(self.size))?;
                }
            }
        }
        if flush_every_pages.is_some() {
            self.map.flush()?;
        }
        // Locking may fail without CAP_IPC_LOCK or over RLIMIT_MEMLOCK; Java ignores that too.
        let _ = self.map.lock();
        let _ = self.map.advise(memmap2::Advice::WillNeed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_become_readable_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let f = MappedFile::create(dir.path(), 1024, 64).unwrap();
        assert_eq!(f.path().file_name().unwrap(), "00000000000000001024");
        assert!(f.append(b"hello"));
        assert_eq!(f.read(0, 5), Some(&b"hello"[..]));
        assert_eq!(f.read(0, 6), None);
        assert!(!f.append(&[0u8; 60]));
        assert!(f.append_with(3, |buf| buf.copy_from_slice(b"abc")));
        assert_eq!(f.flush(0).unwrap(), 8);
        drop(f);
        let again = MappedFile::open(&dir.path().join(file_name(1024)), 1024, 64).unwrap();
        assert_eq!(again.raw(0, 8), Some(&b"helloabc"[..]));
        assert!(MappedFile::open(&dir.path().join(file_name(1024)), 1024, 128).is_err());
    }

    #[test]
    fn flush_waits_for_enough_dirty_pages() {
        let dir = tempfile::tempdir().unwrap();
        let f = MappedFile::create(dir.path(), 0, OS_PAGE_SIZE * 8).unwrap();
        assert!(f.append(&[1u8; OS_PAGE_SIZE]));
        assert_eq!(f.flush(4).unwrap(), 0);
        assert!(f.append(&[1u8; OS_PAGE_SIZE * 3]));
        assert_eq!(f.flush(4).unwrap(), OS_PAGE_SIZE * 4);
    }
}
