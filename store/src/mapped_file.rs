//! One memory-mapped segment file of a commit log or consume queue (Java `MappedFile`).
//!
//! A file has three positions: `wrote` (appended), `committed` (copied from a transient-pool
//! buffer into the mapping; equal to `wrote` when appends go straight into the mapping) and
//! `flushed` (forced to disk). Exactly one writer appends (the owner holds the append lock) and
//! one committer commits; readers may read concurrently, but only below the position published
//! with release ordering, which nobody writes again. That discipline is what makes the
//! raw-pointer accesses below sound.

#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use memmap2::MmapRaw;
use parking_lot::RwLock;

use crate::transient_pool::{PoolBuffer, TransientStorePool};

pub const OS_PAGE_SIZE: usize = 4096;

/// How far beyond the write position the active commit-log file is kept pre-faulted (see
/// [`MappedFile::prefault_ahead`]), so appends under the append lock write into pages that are
/// already in the page cache and mapped writable instead of taking a fault per new 4 KiB page.
/// The pre-faulter may wait milliseconds for a CPU on a busy machine, while the writer appends
/// several hundred MB/s: with 4 MiB the store bench's writer still took 3-4 faults per 1000
/// 1 KiB puts on 2 loaded cores, with 16 MiB about 1. The cost is that much page cache ahead.
pub const PREFAULT_WINDOW_BYTES: usize = 16 << 20;

/// The pre-faulter is woken when the writer has used this much of the window: when fewer than
/// `PREFAULT_WINDOW_BYTES - PREFAULT_STEP_BYTES` pre-faulted bytes remain ahead of it.
pub const PREFAULT_STEP_BYTES: usize = 4 << 20;

/// The most one pre-fault step brings in. The kernel fills every new page-cache page of the
/// file (zeros, for blocks reserved but never written) inside the call, and a kernel built
/// without preemption (the common server setting) gives the CPU to no one until the call
/// returns. A fault on a page not in the cache also reads around it, as far as the device's
/// read-ahead (8 MiB on the machine the benchmarks run on): one such fault held the core
/// ~18 ms twice a second at 12 MB/s of appends, the p99 of every send on that core. So each
/// step first asks for exactly its own range (`POSIX_FADV_WILLNEED`), whose pages the fault
/// then finds cached; 256 KiB is well under a millisecond, and between steps the thread
/// returns to user space, where a woken runtime thread gets the core.
const PREFAULT_CHUNK_BYTES: usize = 256 << 10;

/// How a flush forces a range of a file to disk. Production uses [`Msync`]; the commit log takes
/// another implementation only through its test seam
/// ([`crate::commit_log::CommitLog::set_file_sync`]), so tests can make the disk hang or fail.
pub trait FileSync: Send + Sync {
    /// Forces `[start, start + len)` of `file` (page-aligned `start`) to disk.
    fn sync_range(&self, file: &MappedFile, start: usize, len: usize) -> io::Result<()>;
}

/// The real thing: `msync(MS_SYNC)` of the mapping.
pub struct Msync;

impl FileSync for Msync {
    fn sync_range(&self, file: &MappedFile, start: usize, len: usize) -> io::Result<()> {
        file.msync_range(start, len)
    }
}

/// The transient-pool buffer a file writes into until it is fully committed.
struct WriteBuffer {
    buffer: RwLock<Option<PoolBuffer>>,
    pool: std::sync::Arc<TransientStorePool>,
    /// End of the bytes appended into the buffer (the end-of-file marker makes the file full
    /// without writing its tail), so the pool erases only what was used.
    written_end: AtomicUsize,
}

impl WriteBuffer {
    fn give_back(&self) {
        if let Some(buffer) = self.buffer.write().take() {
            self.pool.give_back(buffer, self.written_end.load(Ordering::Acquire));
        }
    }
}

pub struct MappedFile {
    path: PathBuf,
    file: File,
    map: MmapRaw,
    from_offset: u64,
    size: usize,
    wrote: AtomicUsize,
    committed: AtomicUsize,
    flushed: AtomicUsize,
    /// End of the range pre-faulted ahead of the writer (only ever grows).
    prefaulted: AtomicUsize,
    write_buffer: Option<WriteBuffer>,
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MappedFile({}, wrote {}, flushed {})", self.path.display(), self.wrote_position(), self.flushed_position())
    }
}

/// A readable range of a mapped file, owning a handle on the file: the owner behind
/// [`MappedFile::read_shared`]'s bytes (which take the slice once, when they are made).
struct MappedRange {
    file: Arc<MappedFile>,
    pos: usize,
    len: usize,
}

impl AsRef<[u8]> for MappedRange {
    fn as_ref(&self) -> &[u8] {
        self.file.read(self.pos, self.len).unwrap_or(&[])
    }
}

/// Grows a file that will be mapped writable to `size` bytes with its blocks reserved. Every
/// file the store maps writable is sized here: a write through a mapping into a hole the
/// filesystem cannot fill (a full disk) is a SIGBUS that kills the broker, where a failed
/// reservation is an error the caller reports. Java's `FileChannel.map` grows a file the same
/// way (`fallocate` since JDK 8u162).
pub(crate) fn reserve_blocks(file: &File, size: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let len = i64::try_from(size).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file size past i64"))?;
    match nix::fcntl::posix_fallocate(file.as_raw_fd(), 0, len) {
        Ok(()) => Ok(()),
        // Filesystems without fallocate: fall back to a sparse file, as Java has.
        Err(nix::errno::Errno::EOPNOTSUPP) => file.set_len(size),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// Opens `path` read-write for a writable mapping, creating it when missing, and reserves `size`
/// bytes of blocks when it is shorter ([`reserve_blocks`]). When the reservation fails (a full
/// disk) a file this call created is removed again, so that a later attempt starts clean rather
/// than finding a short or half-reserved file it would refuse.
pub(crate) fn open_reserved(path: &Path, size: u64) -> io::Result<File> {
    let (file, created) = match OpenOptions::new().read(true).write(true).create_new(true).open(path) {
        Ok(file) => (file, true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => (OpenOptions::new().read(true).write(true).open(path)?, false),
        Err(e) => return Err(e),
    };
    if file.metadata()?.len() < size {
        if let Err(e) = reserve_blocks(&file, size) {
            drop(file);
            if created {
                let _ = std::fs::remove_file(path);
            }
            return Err(e);
        }
    }
    Ok(file)
}

/// Bytes the filesystem holds for the file at `path` (a hole holds none): what tests of the
/// reservation above assert.
#[cfg(test)]
pub(crate) fn allocated_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map(|m| m.blocks() * 512).unwrap_or(0)
}

/// Faults `[start, start + len)` of `map` in writable without touching its bytes (see
/// [`MappedFile::prefault_ahead`]).
fn populate_writable(map: &MmapRaw, start: usize, len: usize) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    match map.advise_range(memmap2::Advice::PopulateWrite, start, len) {
        // Before Linux 5.14 the advice is unknown.
        Err(e) if e.raw_os_error() == Some(nix::errno::Errno::EINVAL as i32) => {}
        other => return other,
    }
    map.advise_range(memmap2::Advice::WillNeed, start, len)
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
        let file = open_reserved(&path, size as u64)?;
        Self::map(path, file, from_offset, size)
    }

    /// Opens an existing file, which must be exactly `size` bytes (Java refuses other sizes too).
    pub fn open(path: &Path, from_offset: u64, size: usize) -> io::Result<MappedFile> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let len = file.metadata()?.len();
        if len != size as u64 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{} is {len} bytes, expected {size}", path.display())));
        }
        Self::map(path.to_owned(), file, from_offset, size)
    }

    fn map(path: PathBuf, file: File, from_offset: u64, size: usize) -> io::Result<MappedFile> {
        let map = MmapRaw::map_raw(&file)?;
        if map.len() < size {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{} mapped short", path.display())));
        }
        Ok(MappedFile {
            path,
            file,
            map,
            from_offset,
            size,
            wrote: AtomicUsize::new(0),
            committed: AtomicUsize::new(0),
            flushed: AtomicUsize::new(0),
            prefaulted: AtomicUsize::new(0),
            write_buffer: None,
        })
    }

    /// Creates a file whose appends go into a buffer borrowed from `pool` (when one is free; else
    /// straight into the mapping, as Java does).
    pub fn create_with_pool(dir: &Path, from_offset: u64, size: usize, pool: &std::sync::Arc<TransientStorePool>) -> io::Result<MappedFile> {
        let mut file = Self::create(dir, from_offset, size)?;
        if let Some(buffer) = pool.borrow() {
            if buffer.len() >= size {
                file.write_buffer = Some(WriteBuffer { buffer: RwLock::new(Some(buffer)), pool: pool.clone(), written_end: AtomicUsize::new(0) });
            } else {
                pool.give_back(buffer, 0);
            }
        }
        Ok(file)
    }

    /// Whether appends currently land in a pool buffer.
    pub fn uses_write_buffer(&self) -> bool {
        self.write_buffer.as_ref().is_some_and(|wb| wb.buffer.read().is_some())
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

    pub fn committed_position(&self) -> usize {
        if self.write_buffer.is_some() {
            self.committed.load(Ordering::Acquire)
        } else {
            self.wrote_position()
        }
    }

    /// What readers may see: committed bytes.
    pub fn read_position(&self) -> usize {
        self.committed_position()
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
        self.committed.store(pos, Ordering::Release);
        self.flushed.store(pos, Ordering::Release);
    }

    /// Appends `data` at the write position and publishes it. Single writer only. Returns false
    /// (writing nothing) when it does not fit.
    pub fn append(&self, data: &[u8]) -> bool {
        let pos = self.wrote.load(Ordering::Relaxed);
        if data.len() > self.size - pos {
            return false;
        }
        self.with_write_target(|target| {
            // SAFETY: [pos, pos + len) lies inside the target (buffer or mapping, both at least
            // `size` long; checked above) and beyond every published position, so no reader or
            // committer looks at it; the single writer is the only one writing.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), target.add(pos), data.len()) };
        });
        self.note_written(pos + data.len());
        self.wrote.store(pos + data.len(), Ordering::Release);
        true
    }

    /// Runs `f` with the base pointer appends go to: the pool buffer while the file has one,
    /// else the mapping.
    fn with_write_target(&self, f: impl FnOnce(*mut u8)) {
        if let Some(wb) = &self.write_buffer {
            if let Some(buffer) = wb.buffer.read().as_ref() {
                return f(buffer.as_mut_ptr());
            }
        }
        f(self.map.as_mut_ptr())
    }

    /// Writes appended bytes from the pool buffer into the file when at least `least_pages` pages
    /// accumulated (0 = any), and returns the buffer to the pool once the file is fully committed.
    /// Single committer only. Returns the committed position.
    ///
    /// The bytes go in with pwrite(2), as Java's `FileChannel.write` does, not with a copy through
    /// the mapping: a write through the mapping into pages never touched takes a page fault and a
    /// zero-fill per page (on this project's VMs a fresh file fills at ~0.65 GB/s through a mapping
    /// and ~3.2 GB/s with write(2), store-bench's baselines). Readers still read through the
    /// mapping: both are the one page cache of the file.
    pub fn commit(&self, least_pages: usize) -> usize {
        let Some(wb) = &self.write_buffer else { return self.wrote_position() };
        let wrote = self.wrote_position();
        let committed = self.committed.load(Ordering::Acquire);
        if wrote > committed {
            let pages = wrote / OS_PAGE_SIZE - committed / OS_PAGE_SIZE;
            if !(least_pages == 0 || pages >= least_pages || wrote == self.size) {
                return committed;
            }
            if let Some(buffer) = wb.buffer.read().as_ref() {
                // SAFETY: [committed, wrote) was published by the writer (acquire above) and is
                // not written again while the buffer is lent to this file.
                let bytes = unsafe { std::slice::from_raw_parts(buffer.as_ptr().add(committed), wrote - committed) };
                // The file's range is beyond the published read position, so no reader sees it
                // until `committed` moves below. A failed write moves nothing: the next commit
                // writes the range again.
                if let Err(e) = std::os::unix::fs::FileExt::write_all_at(&self.file, bytes, committed as u64) {
                    tracing::error!(path = %self.path.display(), error = %e, "commit of the pool buffer into the file failed");
                    return committed;
                }
            }
            self.committed.store(wrote, Ordering::Release);
        }
        if self.committed.load(Ordering::Acquire) == self.size {
            wb.give_back();
        }
        self.committed.load(Ordering::Acquire)
    }

    /// Fills `data` via `fill` directly in the mapping, then publishes it. Single writer only.
    pub fn append_with(&self, len: usize, fill: impl FnOnce(&mut [u8])) -> bool {
        let pos = self.wrote.load(Ordering::Relaxed);
        if len > self.size - pos {
            return false;
        }
        let mut fill = Some(fill);
        self.with_write_target(|target| {
            // SAFETY: as in `append`: the region is inside the target, unpublished, and ours alone.
            let region = unsafe { std::slice::from_raw_parts_mut(target.add(pos), len) };
            if let Some(fill) = fill.take() {
                fill(region);
            }
        });
        self.note_written(pos + len);
        self.wrote.store(pos + len, Ordering::Release);
        true
    }

    /// Records how far appends wrote into the pool buffer (published with `wrote` after it).
    fn note_written(&self, end: usize) {
        if let Some(wb) = &self.write_buffer {
            wb.written_end.store(end, Ordering::Relaxed);
        }
    }

    /// Marks the file full without writing (after the end-of-file marker, whose bytes beyond the
    /// marker stay as they are).
    pub fn mark_full(&self) {
        self.wrote.store(self.size, Ordering::Release);
    }

    /// Gives an unused buffer back before the file is dropped (shutdown, truncation).
    pub fn release_write_buffer(&self) {
        if let Some(wb) = &self.write_buffer {
            wb.give_back();
        }
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

    /// As [`MappedFile::read`], as bytes that share the mapping instead of a copy: they keep this
    /// file (and so its mapping) alive until the last of them is dropped, so a pull's messages go
    /// from the page cache to the socket's buffer with one copy, and a file deleted meanwhile is
    /// unmapped only after its readers are done.
    pub fn read_shared(self: &Arc<Self>, pos: usize, len: usize) -> Option<Bytes> {
        self.read(pos, len)?;
        Some(Bytes::from_owner(MappedRange { file: self.clone(), pos, len }))
    }

    /// Whether every page of `[pos, pos + len)` (cut at the end of the file) is in the page
    /// cache, so a read of it takes no disk wait (`mincore`). False when the kernel cannot say.
    pub fn resident(&self, pos: usize, len: usize) -> bool {
        let end = pos.saturating_add(len).min(self.size);
        if pos >= end {
            return false;
        }
        let start = pos / OS_PAGE_SIZE * OS_PAGE_SIZE;
        let pages = (end - start).div_ceil(OS_PAGE_SIZE);
        let mut vec = vec![0u8; pages];
        // SAFETY: `[start, end)` lies inside the mapping (`end` <= its size), which lives as long
        // as `self`, and `start` is page-aligned as mmap's address is; `vec` holds one byte per
        // page of the range, as mincore writes.
        let rc = unsafe { nix::libc::mincore(self.map.as_ptr().add(start) as *mut nix::libc::c_void, end - start, vec.as_mut_ptr()) };
        rc == 0 && vec.iter().all(|v| v & 1 == 1)
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
        self.flush_with(least_pages, &Msync)
    }

    /// As [`MappedFile::flush`], forcing the bytes through `sync` (the commit log's seam for
    /// tests that make the disk hang or fail). The flushed position moves only if `sync` succeeds.
    pub fn flush_with(&self, least_pages: usize, sync: &dyn FileSync) -> io::Result<usize> {
        // Only committed bytes are in the file.
        let wrote = self.committed_position();
        let flushed = self.flushed_position();
        if wrote <= flushed {
            return Ok(flushed);
        }
        let dirty_pages = wrote / OS_PAGE_SIZE - flushed / OS_PAGE_SIZE;
        if !(wrote == self.size || least_pages == 0 || dirty_pages >= least_pages) {
            return Ok(flushed);
        }
        // msync needs a page-aligned start.
        let start = flushed / OS_PAGE_SIZE * OS_PAGE_SIZE;
        sync.sync_range(self, start, wrote - start)?;
        self.flushed.store(wrote, Ordering::Release);
        Ok(wrote)
    }

    /// msync of `[start, start + len)` of the mapping; `start` must be page-aligned.
    pub fn msync_range(&self, start: usize, len: usize) -> io::Result<()> {
        self.map.flush_range(start, len)
    }

    /// Zeroes whatever is not zero from `pos` to the end of the file and forces it to disk.
    /// Recovery only (no reader or writer may be active): pages reach the disk in any order, so
    /// whole records can survive past a torn one; erasing them keeps a later crash from finding
    /// them again behind new data.
    pub fn zero_tail(&self, pos: usize) -> io::Result<()> {
        let mut start = pos.min(self.size);
        let mut dirty: Option<(usize, usize)> = None;
        while start < self.size {
            let end = ((start / OS_PAGE_SIZE + 1) * OS_PAGE_SIZE).min(self.size);
            // SAFETY: [start, end) is inside the mapping; recovery has the file to itself.
            let region = unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().add(start), end - start) };
            if region.iter().any(|b| *b != 0) {
                region.fill(0);
                dirty = Some(dirty.map_or((start, end), |(s, _)| (s, end)));
            }
            start = end;
        }
        if let Some((from, to)) = dirty {
            self.map.flush_range(from, to - from)?;
        }
        Ok(())
    }

    /// Removes the file from disk. The mapping stays valid for readers still holding it.
    pub fn delete_file(&self) -> io::Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Java's `MappedFile.madvise` for SET_COMMITLOG_READ_MODE: `random` turns the kernel's
    /// read-ahead off for this file (MADV_RANDOM), otherwise back to MADV_NORMAL.
    pub fn set_read_ahead(&self, random: bool) -> io::Result<()> {
        self.map.advise(if random { memmap2::Advice::Random } else { memmap2::Advice::Normal })
    }

    /// End of the range pre-faulted ahead of the writer.
    pub fn prefaulted_position(&self) -> usize {
        self.prefaulted.load(Ordering::Acquire)
    }

    /// Whether the writer is about to leave the pre-faulted window: fewer than
    /// `PREFAULT_WINDOW_BYTES - PREFAULT_STEP_BYTES` bytes beyond the write position are
    /// pre-faulted (and the file has room beyond them). Two atomic loads, for the append path.
    /// Always false for a file whose appends go to a transient-pool buffer: the writer does not
    /// touch the mapping then (the buffer is allocated up front and locked in memory).
    pub fn prefault_due(&self) -> bool {
        let wrote = self.wrote.load(Ordering::Relaxed);
        if self.write_buffer.is_some() || wrote >= self.size {
            return false;
        }
        let wanted = (wrote + (PREFAULT_WINDOW_BYTES - PREFAULT_STEP_BYTES)).min(self.size);
        self.prefaulted.load(Ordering::Relaxed) < wanted
    }

    /// Brings `[pos, pos + len)` of the file into the page cache, just that range (a hint: a
    /// failure leaves it to the fault).
    fn read_into_cache(&self, pos: usize, len: usize) {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (i64::try_from(pos), i64::try_from(len)) else { return };
        let _ = nix::fcntl::posix_fadvise(self.file.as_raw_fd(), offset, len, nix::fcntl::PosixFadviseAdvice::POSIX_FADV_WILLNEED);
    }

    /// Pre-faults the pages from the write position up to `window` bytes beyond it (whole pages,
    /// never past the end of the file, never a page twice), so the writer's next appends take no
    /// page fault. Returns how many bytes it pre-faulted. One pre-faulter per file at a time (the
    /// commit log's pre-fault service, or the allocation service before the file is handed out).
    /// Does nothing for a file that appends into a transient-pool buffer.
    ///
    /// Race-free with the writer by construction: this never reads or writes a byte of the
    /// mapping. `MADV_POPULATE_WRITE` (Linux >= 5.14) asks the kernel to fault the range in as a
    /// write would (allocate the page-cache page, let the filesystem prepare it for writing,
    /// install a writable page-table entry) "without the actual memory access": the file's
    /// bytes are left as they are, zero beyond the write position of a new file. The kernel
    /// serialises this against the writer's own faults on the same page under the page-table
    /// lock, so it does not matter that the writer may be appending into the first page of the
    /// range at that moment, or that it passes the position read here. No byte on disk changes
    /// either: the populated pages hold the zeros the file already has, and if the kernel
    /// writes one back before the writer fills it, it writes those zeros.
    /// On older kernels (EINVAL) it falls back to `MADV_WILLNEED`, which reads the pages into
    /// the page cache so the writer's faults are minor ones; again no byte is touched.
    pub fn prefault_ahead(&self, window: usize) -> io::Result<usize> {
        if self.write_buffer.is_some() {
            return Ok(0);
        }
        let wrote = self.wrote_position();
        let start = (wrote / OS_PAGE_SIZE * OS_PAGE_SIZE).max(self.prefaulted.load(Ordering::Acquire));
        let end = wrote.saturating_add(window).div_ceil(OS_PAGE_SIZE).saturating_mul(OS_PAGE_SIZE).min(self.size);
        if start >= end {
            return Ok(0);
        }
        let mut at = start;
        while at < end {
            let chunk_end = (at + PREFAULT_CHUNK_BYTES).min(end);
            self.read_into_cache(at, chunk_end - at);
            populate_writable(&self.map, at, chunk_end - at)?;
            self.prefaulted.fetch_max(chunk_end, Ordering::AcqRel);
            at = chunk_end;
        }
        Ok(end - start)
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
    fn open_reserved_reserves_a_short_file_and_removes_only_a_file_it_created_when_it_cannot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = open_reserved(&path, 64 * 1024).unwrap();
        assert_eq!(file.metadata().unwrap().len(), 64 * 1024);
        assert!(allocated_bytes(&path) >= 64 * 1024);
        // Opened again it keeps its bytes.
        drop(file);
        std::fs::write(&path, b"kept").unwrap();
        assert_eq!(open_reserved(&path, 4).unwrap().metadata().unwrap().len(), 4);
        // A reservation that fails (a size past i64, as a full disk would) leaves no new file
        // behind and does not remove one that was there.
        let fresh = dir.path().join("g");
        assert!(open_reserved(&fresh, u64::MAX).is_err());
        assert!(!fresh.exists());
        assert!(open_reserved(&path, u64::MAX).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"kept");
    }

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
    fn shared_reads_outlive_the_file_and_its_deletion() {
        let dir = tempfile::tempdir().unwrap();
        let f = Arc::new(MappedFile::create(dir.path(), 0, 4096).unwrap());
        assert!(f.append(b"hello world"));
        assert!(f.read_shared(6, 6).is_none(), "past what is readable");
        let shared = f.read_shared(6, 5).unwrap();
        assert_eq!(f.read(6, 5).unwrap().as_ptr(), shared.as_ptr(), "the mapping itself, not a copy");
        f.delete_file().unwrap();
        drop(f);
        assert!(!dir.path().join(file_name(0)).exists());
        assert_eq!(&shared[..], b"world", "still mapped while the bytes live");
    }

    #[test]
    fn pooled_appends_are_invisible_until_committed_and_the_buffer_returns_when_full() {
        let dir = tempfile::tempdir().unwrap();
        let pool = std::sync::Arc::new(TransientStorePool::new(1, 8192).unwrap());
        let f = MappedFile::create_with_pool(dir.path(), 0, 8192, &pool).unwrap();
        assert!(f.uses_write_buffer() && pool.available() == 0);
        assert!(f.append(b"hello"));
        assert_eq!(f.read(0, 5), None);
        assert_eq!(f.commit(4), 0, "below the page threshold nothing moves");
        assert_eq!(f.commit(0), 5);
        assert_eq!(f.read(0, 5), Some(&b"hello"[..]));
        assert!(f.append(&[7u8; 8187]));
        assert_eq!(f.commit(4), 8192);
        assert!(!f.uses_write_buffer());
        assert_eq!(pool.available(), 1);
        assert_eq!(f.flush(0).unwrap(), 8192);
        assert_eq!(f.raw(8191, 1), Some(&[7u8][..]));
    }

    #[test]
    fn a_file_on_a_reused_buffer_has_zeros_past_its_end_marker() {
        let dir = tempfile::tempdir().unwrap();
        let pool = std::sync::Arc::new(TransientStorePool::new(1, 8192).unwrap());
        let old = MappedFile::create_with_pool(dir.path(), 0, 8192, &pool).unwrap();
        assert!(old.append(&[7u8; 8000]));
        old.mark_full();
        assert_eq!(old.commit(0), 8192);
        assert_eq!(pool.available(), 1, "the full file returned its buffer");
        let new = MappedFile::create_with_pool(dir.path(), 8192, 8192, &pool).unwrap();
        assert!(new.uses_write_buffer());
        assert!(new.append(b"record+marker"));
        new.mark_full();
        assert_eq!(new.commit(0), 8192);
        assert_eq!(new.raw(0, 13), Some(&b"record+marker"[..]));
        assert!(new.raw(13, 8192 - 13).unwrap().iter().all(|b| *b == 0), "the old file's bytes leaked into the new one");
    }

    #[test]
    fn zero_tail_erases_stale_bytes_after_the_position_only() {
        let dir = tempfile::tempdir().unwrap();
        let f = MappedFile::create(dir.path(), 0, OS_PAGE_SIZE * 3).unwrap();
        assert!(f.append(&[9u8; OS_PAGE_SIZE * 3]));
        f.zero_tail(100).unwrap();
        assert_eq!(f.raw(0, 100).unwrap(), &[9u8; 100][..]);
        assert!(f.raw(100, OS_PAGE_SIZE * 3 - 100).unwrap().iter().all(|b| *b == 0));
    }

    #[test]
    fn written_pages_are_resident_and_pages_never_touched_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let size = 16 << 20;
        let f = MappedFile::create(dir.path(), 0, size).unwrap();
        assert!(!f.resident(0, OS_PAGE_SIZE), "a new file's pages are not in the page cache");
        assert!(f.append(&[3u8; OS_PAGE_SIZE * 2 + 10]));
        assert!(f.resident(0, OS_PAGE_SIZE * 3), "every page written to");
        assert!(f.resident(100, 10) && f.resident(OS_PAGE_SIZE * 2 + 5, 1), "ranges inside a page");
        // Far past what the kernel reads around a fault.
        assert!(!f.resident(size / 2, OS_PAGE_SIZE), "a page never touched");
        assert!(!f.resident(0, size), "a range that runs into untouched pages");
        assert!(!f.resident(size, 10), "nothing past the end");
    }

    /// Minor page faults of the calling thread so far (`/proc/thread-self/stat`, field 10).
    fn thread_minor_faults() -> u64 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let after_name = stat.rsplit_once(')').unwrap().1;
        after_name.split_whitespace().nth(7).unwrap().parse().unwrap()
    }

    /// Appends `total` bytes in 1 KiB pieces and returns the page faults the appending thread took.
    fn faults_appending(f: &MappedFile, total: usize) -> u64 {
        let piece = [5u8; 1024];
        let before = thread_minor_faults();
        for _ in 0..total / piece.len() {
            assert!(f.append(&piece));
        }
        thread_minor_faults() - before
    }

    #[test]
    fn the_writer_takes_no_page_faults_inside_the_prefaulted_window() {
        let dir = tempfile::tempdir().unwrap();
        let window: usize = 2 << 20;
        let warm = MappedFile::create(dir.path(), 0, 8 << 20).unwrap();
        assert!(warm.append(&[7u8; 100_000]));
        assert!(warm.prefault_due());
        let pages_end = (100_000_usize + window).div_ceil(OS_PAGE_SIZE) * OS_PAGE_SIZE;
        assert_eq!(warm.prefault_ahead(window).unwrap(), pages_end - 100_000 / OS_PAGE_SIZE * OS_PAGE_SIZE);
        assert_eq!(warm.prefaulted_position(), pages_end, "the window reaches `window` bytes past the position");
        assert_eq!(warm.prefault_ahead(window).unwrap(), 0, "no page is pre-faulted twice");
        assert!(warm.raw(100_000, (8 << 20) - 100_000).unwrap().iter().all(|b| *b == 0), "pre-faulting wrote a byte");
        let cold = MappedFile::create(dir.path(), 8 << 20, 8 << 20).unwrap();
        assert!(cold.append(&[7u8; 100_000]));
        let warm_faults = faults_appending(&warm, window - 4096);
        let cold_faults = faults_appending(&cold, window - 4096);
        eprintln!("appending {} KiB: {warm_faults} faults pre-faulted, {cold_faults} cold", (window - 4096) >> 10);
        assert!(warm_faults < 32, "{warm_faults} faults appending into the pre-faulted window");
        assert!(cold_faults > 256, "{cold_faults} faults appending into a cold file: the test measures nothing");
        assert_eq!(warm.raw(0, 8 << 20), cold.raw(0, 8 << 20));
    }

    #[test]
    fn the_window_is_topped_up_a_step_before_the_writer_reaches_its_end_and_stops_at_the_file_end() {
        let dir = tempfile::tempdir().unwrap();
        let size = PREFAULT_WINDOW_BYTES + PREFAULT_STEP_BYTES;
        let f = MappedFile::create(dir.path(), 0, size).unwrap();
        f.prefault_ahead(PREFAULT_WINDOW_BYTES).unwrap();
        assert_eq!(f.prefaulted_position(), PREFAULT_WINDOW_BYTES);
        assert!(!f.prefault_due());
        assert!(f.append(&vec![1u8; PREFAULT_STEP_BYTES]));
        assert!(!f.prefault_due(), "exactly window - step ahead is not due yet");
        assert!(f.append(&[1u8]));
        assert!(f.prefault_due());
        f.prefault_ahead(PREFAULT_WINDOW_BYTES).unwrap();
        assert_eq!(f.prefaulted_position(), size, "never past the end of the file");
        assert!(!f.prefault_due());
    }

    #[test]
    fn a_file_writing_into_a_pool_buffer_is_not_prefaulted() {
        let dir = tempfile::tempdir().unwrap();
        let pool = std::sync::Arc::new(TransientStorePool::new(1, 1 << 20).unwrap());
        let f = MappedFile::create_with_pool(dir.path(), 0, 1 << 20, &pool).unwrap();
        assert!(f.uses_write_buffer());
        assert!(!f.prefault_due());
        assert_eq!(f.prefault_ahead(PREFAULT_WINDOW_BYTES).unwrap(), 0);
        assert_eq!(f.prefaulted_position(), 0);
        f.release_write_buffer();
    }

    /// A pre-faulter racing the writer the whole time leaves the file byte-identical, in memory
    /// and on disk, to one written without it.
    #[test]
    fn prefaulting_while_the_writer_appends_changes_no_byte() {
        let dir = tempfile::tempdir().unwrap();
        let size = 8 << 20;
        let raced = std::sync::Arc::new(MappedFile::create(dir.path(), 0, size).unwrap());
        let plain = MappedFile::create(dir.path(), size as u64, size).unwrap();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let prefaulter = {
            let (file, done) = (raced.clone(), done.clone());
            std::thread::spawn(move || {
                let mut rounds = 0u64;
                while !done.load(Ordering::Acquire) {
                    file.prefault_ahead(64 << 10).unwrap();
                    rounds += 1;
                }
                rounds
            })
        };
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut chunk = vec![0u8; 3000];
        loop {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = 1 + (seed % 2999) as usize;
            chunk[..len].iter_mut().enumerate().for_each(|(i, b)| *b = (seed >> (i % 56)) as u8 | 1);
            if !raced.append(&chunk[..len]) {
                break;
            }
            assert!(plain.append(&chunk[..len]));
        }
        done.store(true, Ordering::Release);
        assert!(prefaulter.join().unwrap() > 0);
        assert_eq!(raced.raw(0, size), plain.raw(0, size));
        assert_eq!(raced.flush(0).unwrap(), plain.flush(0).unwrap());
        let (raced_path, plain_path) = (raced.path().to_owned(), plain.path().to_owned());
        drop(raced);
        drop(plain);
        assert!(std::fs::read(raced_path).unwrap() == std::fs::read(plain_path).unwrap(), "the files differ on disk");
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
