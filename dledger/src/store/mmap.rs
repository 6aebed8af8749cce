//! One memory-mapped segment file (Java `DefaultMmapFile`), the only `unsafe` code of the crate.
//!
//! A [`Mapping`] is the single owner of its bytes: reading takes `&self`, writing `&mut self`,
//! and a `Mapping` is neither `Clone` nor constructed twice for one file, so the borrow checker
//! keeps every read apart from every write. The flush thread gets a [`Syncer`] instead, which
//! shares the mapping's lifetime (so the pages stay mapped while it runs) but can only call
//! `msync`, which touches no byte through a Rust reference. The store owns its directory: no other
//! process may write these files while it runs (Java DLedger takes no lock either).

#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::MmapRaw;

pub const OS_PAGE_SIZE: usize = 4096;

struct Mapped {
    file: File,
    map: MmapRaw,
}

/// The bytes of one file of exactly `len` bytes.
pub struct Mapping {
    path: PathBuf,
    len: usize,
    inner: Arc<Mapped>,
}

/// `msync` of a mapping from another thread; keeps the mapping alive while held.
#[derive(Clone)]
pub struct Syncer {
    inner: Arc<Mapped>,
    len: usize,
}

impl Syncer {
    /// Forces `[start, end)` (clamped to the file) to disk; `start` is rounded down to a page.
    pub fn sync(&self, start: usize, end: usize) -> io::Result<()> {
        let end = end.min(self.len);
        let start = start / OS_PAGE_SIZE * OS_PAGE_SIZE;
        if start >= end {
            return Ok(());
        }
        self.inner.map.flush_range(start, end - start)
    }
}

/// Reserves the blocks of a new file, so that a full disk is an error here and not a SIGBUS on a
/// later page write; filesystems without fallocate get a sparse file, as Java's.
fn reserve_blocks(file: &File, len: usize) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let len_i64 = i64::try_from(len).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "segment too large"))?;
    match nix::fcntl::posix_fallocate(file.as_raw_fd(), 0, len_i64) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EOPNOTSUPP) => file.set_len(len as u64),
        Err(e) => Err(io::Error::from(e)),
    }
}

impl Mapping {
    /// Creates `path` afresh (any old content is discarded) with `len` zero bytes and maps it.
    pub fn create(path: &Path, len: usize) -> io::Result<Mapping> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)?;
        if let Err(e) = reserve_blocks(&file, len) {
            drop(file);
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        Self::map(path, file, len)
    }

    /// Maps an existing file, which must be exactly `len` bytes.
    pub fn open(path: &Path, len: usize) -> io::Result<Mapping> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let actual = file.metadata()?.len();
        if actual != len as u64 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{} is {actual} bytes, expected {len}", path.display())));
        }
        Self::map(path, file, len)
    }

    fn map(path: &Path, file: File, len: usize) -> io::Result<Mapping> {
        let map = MmapRaw::map_raw(&file)?;
        if map.len() < len {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{} mapped short", path.display())));
        }
        Ok(Mapping { path: path.to_owned(), len, inner: Arc::new(Mapped { file, map }) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn syncer(&self) -> Syncer {
        Syncer { inner: self.inner.clone(), len: self.len }
    }

    /// Bytes `[pos, pos + len)`, if inside the file.
    pub fn bytes(&self, pos: usize, len: usize) -> Option<&[u8]> {
        let end = pos.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // SAFETY: [pos, end) lies inside the mapping (checked above), which lives as long as
        // `self.inner` and so at least as long as the returned borrow of `self`. Writes need
        // `&mut self` of this, the only `Mapping` of the file, so none can happen while the slice
        // is borrowed; `Syncer` only calls msync, which writes no byte.
        Some(unsafe { std::slice::from_raw_parts(self.inner.map.as_ptr().add(pos), len) })
    }

    /// Writes `data` at `pos`; false (nothing written) if it does not fit the file.
    pub fn write(&mut self, pos: usize, data: &[u8]) -> bool {
        let Some(end) = pos.checked_add(data.len()) else { return false };
        if end > self.len {
            return false;
        }
        // SAFETY: the destination lies inside the mapping (checked above); `&mut self` on the only
        // `Mapping` of the file means no slice from `bytes` is alive; `data` is a separate Rust
        // allocation (a borrow of the mapping cannot be passed while we hold `&mut self`).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.inner.map.as_mut_ptr().add(pos), data.len()) };
        true
    }

    /// Zeroes `[from, to)` (clamped to the file), but only the pages that hold a non-zero byte,
    /// and only inside the file's data regions (`SEEK_DATA`/`SEEK_HOLE`; the whole range where the
    /// filesystem cannot tell), so holes and never-written reserved blocks are neither read nor
    /// dirtied. Returns whether anything was zeroed.
    pub fn zero_range(&mut self, from: usize, to: usize) -> bool {
        let to = to.min(self.len);
        let mut pos = from.min(to);
        let mut changed = false;
        while pos < to {
            let (data_start, data_end) = self.next_data(pos, to);
            let mut start = data_start;
            while start < data_end {
                let end = ((start / OS_PAGE_SIZE + 1) * OS_PAGE_SIZE).min(data_end);
                let dirty = self.bytes(start, end - start).is_some_and(|page| page.iter().any(|b| *b != 0));
                if dirty {
                    // SAFETY: [start, end) lies inside the mapping (end <= to <= len); `&mut self`
                    // as in `write`, and the slice from `bytes` above is no longer alive.
                    unsafe { std::ptr::write_bytes(self.inner.map.as_mut_ptr().add(start), 0, end - start) };
                    changed = true;
                }
                start = end;
            }
            pos = data_end.max(pos + 1);
        }
        changed
    }

    /// The next data region of the file at or after `pos`, clamped to `[pos, to)`; `(to, to)`
    /// when only holes follow.
    fn next_data(&self, pos: usize, to: usize) -> (usize, usize) {
        use nix::unistd::{lseek, Whence};
        use std::os::fd::AsRawFd;
        let fd = self.inner.file.as_raw_fd();
        let Ok(offset) = i64::try_from(pos) else { return (pos, to) };
        match lseek(fd, offset, Whence::SeekData) {
            Ok(start) => {
                let start = usize::try_from(start).unwrap_or(to).clamp(pos, to);
                match lseek(fd, start as i64, Whence::SeekHole) {
                    Ok(end) => {
                        let end = usize::try_from(end).unwrap_or(to).min(to);
                        if end > start {
                            (start, end)
                        } else {
                            (start, to)
                        }
                    }
                    Err(_) => (start, to),
                }
            }
            Err(nix::errno::Errno::ENXIO) => (to, to),
            Err(_) => (pos, to),
        }
    }
}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mapping({})", self.path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_read_back_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("f");
        let mut m = Mapping::create(&path, 8192).unwrap();
        assert!(m.write(4090, b"hello"));
        assert!(!m.write(8190, b"abc"), "past the end");
        assert_eq!(m.bytes(4090, 5), Some(&b"hello"[..]));
        assert_eq!(m.bytes(8190, 3), None);
        m.syncer().sync(4090, 4095).unwrap();
        drop(m);
        let mut again = Mapping::open(&path, 8192).unwrap();
        assert_eq!(again.bytes(4090, 5), Some(&b"hello"[..]));
        assert!(Mapping::open(&path, 4096).is_err(), "a file of another size is refused");
        assert!(again.zero_range(4092, 9000));
        assert_eq!(again.bytes(4090, 5), Some(&b"he\0\0\0"[..]));
        assert!(!again.zero_range(0, 4092 - 2), "nothing but zeros and the kept bytes there");
        assert_eq!(again.bytes(4090, 2), Some(&b"he"[..]));
        let recreated = Mapping::create(&path, 8192).unwrap();
        assert!(recreated.bytes(0, 8192).unwrap().iter().all(|b| *b == 0), "create discards old content");
    }
}
