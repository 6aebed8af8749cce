//! A directory of equally sized segment files named by the 20-digit offset of their first byte
//! (Java `MmapFileList`): the data segments, or the index segments.
//!
//! Each segment has a write position (`wrote`), a start position (`start`: where its first entry
//! is, 0 except in a segment rebuilt at an entry's offset) and a flushed position. The list's
//! offsets are absolute: segment `from + pos`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::{info, warn};

use super::mmap::{Mapping, Syncer};
use super::StoreError;
use crate::entry::{BLANK_MAGIC, MIN_BLANK_LEN};

/// Gives every segment object an identity, so the flush thread never credits a flush to a segment
/// that was deleted and re-created at the same offset meanwhile.
static NEXT_SEGMENT_ID: AtomicU64 = AtomicU64::new(1);

pub struct Segment {
    id: u64,
    from: u64,
    map: Mapping,
    wrote: usize,
    start: usize,
    flushed: usize,
}

impl Segment {
    fn new(from: u64, map: Mapping, pos: usize) -> Segment {
        Segment { id: NEXT_SEGMENT_ID.fetch_add(1, Ordering::Relaxed), from, map, wrote: pos, start: 0, flushed: pos }
    }

    pub fn from(&self) -> u64 {
        self.from
    }

    pub fn size(&self) -> usize {
        self.map.len()
    }

    pub fn wrote(&self) -> usize {
        self.wrote
    }

    pub fn start(&self) -> usize {
        self.start
    }

    pub fn is_full(&self) -> bool {
        self.wrote == self.map.len()
    }

    pub fn path(&self) -> &Path {
        self.map.path()
    }

    /// Bytes regardless of the write position (recovery reads what the files hold).
    pub fn raw(&self, pos: usize, len: usize) -> Option<&[u8]> {
        self.map.bytes(pos, len)
    }

    /// Sets the positions (recovery, truncation), dropping the flushed position with them.
    fn set_wrote(&mut self, pos: usize) {
        self.wrote = pos.min(self.size());
        self.flushed = self.flushed.min(self.wrote);
    }

    /// The file's last modification time (Java's `File.lastModified`, the age for expiry).
    pub fn modified(&self) -> io::Result<std::time::SystemTime> {
        std::fs::metadata(self.path())?.modified()
    }

    /// Deletes the file; the mapping goes with the object.
    pub fn delete(self) -> io::Result<()> {
        let path = self.path().to_owned();
        drop(self);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// What the flush thread forces, taken under the store's lock and run outside it.
pub struct FlushJob {
    id: u64,
    syncer: Syncer,
    start: usize,
    end: usize,
}

impl FlushJob {
    pub fn run(&self) -> io::Result<()> {
        self.syncer.sync(self.start, self.end)
    }
}

/// The 20-digit zero-padded decimal name of the segment starting at `offset` (Java's
/// `offset2FileName`).
pub fn file_name(offset: u64) -> String {
    format!("{offset:020}")
}

pub struct SegmentList {
    dir: PathBuf,
    segment_size: usize,
    segments: Vec<Segment>,
}

impl SegmentList {
    pub fn new(dir: impl Into<PathBuf>, segment_size: usize) -> SegmentList {
        SegmentList { dir: dir.into(), segment_size, segments: Vec::new() }
    }

    /// Maps every file of the directory, in name order, each with its positions at its end
    /// (recovery moves them back). Java's rules: every entry must be a file of exactly the segment
    /// size (Java exits otherwise) named by a decimal offset (Java throws otherwise); we also want
    /// the 20-digit form Java writes, since Java sorts by name.
    pub fn load(dir: impl Into<PathBuf>, segment_size: usize) -> Result<SegmentList, StoreError> {
        let mut list = SegmentList::new(dir, segment_size);
        let entries = match std::fs::read_dir(&list.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(list),
            Err(source) => return Err(StoreError::Io { path: list.dir.clone(), source }),
        };
        let mut found: Vec<(String, PathBuf)> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| StoreError::Io { path: list.dir.clone(), source })?;
            found.push((entry.file_name().to_string_lossy().into_owned(), entry.path()));
        }
        found.sort();
        for (name, path) in found {
            let meta = std::fs::metadata(&path).map_err(|source| StoreError::Io { path: path.clone(), source })?;
            if !meta.is_file() || meta.len() != segment_size as u64 {
                return Err(StoreError::WrongSegmentSize { path, actual: meta.len(), expected: segment_size });
            }
            let from = match name.parse::<u64>() {
                Ok(from) if name.len() == 20 && name.bytes().all(|b| b.is_ascii_digit()) => from,
                _ => return Err(StoreError::BadSegmentName { path }),
            };
            let map = Mapping::open(&path, segment_size).map_err(|source| StoreError::Io { path: path.clone(), source })?;
            info!(path = %path.display(), "loaded segment");
            list.segments.push(Segment::new(from, map, segment_size));
        }
        Ok(list)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn segment_size(&self) -> usize {
        self.segment_size
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// Java's `checkSelf`: each segment starts where the one before ends. The name of the first
    /// offending segment otherwise.
    pub fn check_adjacent(&self) -> Result<(), PathBuf> {
        for pair in self.segments.windows(2) {
            if pair[1].from.checked_sub(pair[0].from) != Some(self.segment_size as u64) {
                return Err(pair[1].path().to_owned());
            }
        }
        Ok(())
    }

    /// End of the written bytes (Java `getMaxWrotePosition`); 0 when empty.
    pub fn max_wrote(&self) -> u64 {
        self.segments.last().map_or(0, |s| s.from + s.wrote as u64)
    }

    /// Offset of the first held byte (Java `getMinOffset`); 0 when empty.
    pub fn min_offset(&self) -> u64 {
        self.segments.first().map_or(0, |s| s.from + s.start as u64)
    }

    fn position_of(&self, offset: u64) -> Option<(usize, usize)> {
        let first = self.segments.first()?;
        let rel = offset.checked_sub(first.from)?;
        let i = usize::try_from(rel / self.segment_size as u64).ok()?;
        let segment = self.segments.get(i)?;
        let pos = usize::try_from(offset - segment.from).ok()?;
        (pos < self.segment_size).then_some((i, pos))
    }

    /// The segment holding `offset` and the position in it.
    pub fn find(&self, offset: u64) -> Option<(&Segment, usize)> {
        let (i, pos) = self.position_of(offset)?;
        Some((&self.segments[i], pos))
    }

    /// Written bytes `[offset, offset + len)`, inside one segment (Java `getData(offset, size)`).
    pub fn read(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let (segment, pos) = self.find(offset)?;
        if pos.checked_add(len)? > segment.wrote {
            return None;
        }
        segment.raw(pos, len)
    }

    /// Where an append of `len` bytes would land, without writing (after a blank and roll when
    /// `len + 8` does not fit the last segment's rest; `use_blank = false` for the index).
    pub fn landing(&self, len: usize, use_blank: bool) -> u64 {
        match self.segments.last() {
            None => 0,
            Some(last) if last.is_full() => last.from + self.segment_size as u64,
            Some(last) => {
                let blank = if use_blank { MIN_BLANK_LEN } else { 0 };
                if len + blank > last.size() - last.wrote {
                    last.from + self.segment_size as u64
                } else {
                    last.from + last.wrote as u64
                }
            }
        }
    }

    /// The next segment file, created at `from`.
    fn create(&mut self, from: u64) -> io::Result<()> {
        let path = self.dir.join(file_name(from));
        let map = Mapping::create(&path, self.segment_size)?;
        info!(path = %path.display(), "created segment");
        self.segments.push(Segment::new(from, map, 0));
        Ok(())
    }

    /// Java `preAppend`: makes room for `len` bytes and returns where they will land. A data
    /// segment whose rest cannot hold `len + 8` gets a blank (i32 -1, i32 rest, zeros to the end);
    /// the next segment is created first, so a failure leaves the list as it was.
    pub fn pre_append(&mut self, len: usize, use_blank: bool) -> io::Result<u64> {
        let blank = if use_blank { MIN_BLANK_LEN } else { 0 };
        if len + blank > self.segment_size {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{len} bytes do not fit a {}-byte segment", self.segment_size)));
        }
        let next = match self.segments.last() {
            None => Some(0),
            Some(last) if last.is_full() => Some(last.from + self.segment_size as u64),
            Some(last) if len + blank > last.size() - last.wrote => {
                if !use_blank {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, "index segment size is not a multiple of the unit"));
                }
                let from = last.from + self.segment_size as u64;
                self.create(from)?;
                let n = self.segments.len();
                let last = &mut self.segments[n - 2];
                let rest = last.size() - last.wrote;
                let mut blank_bytes = vec![0u8; rest];
                blank_bytes[..4].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
                blank_bytes[4..8].copy_from_slice(&(rest as i32).to_be_bytes());
                let pos = last.wrote;
                if !last.map.write(pos, &blank_bytes) {
                    return Err(io::Error::other("blank does not fit"));
                }
                last.wrote = last.size();
                None
            }
            Some(_) => None,
        };
        if let Some(from) = next {
            self.create(from)?;
        }
        Ok(self.max_wrote())
    }

    /// Appends `data` at the end of the last segment, which [`SegmentList::pre_append`] made
    /// room in. Returns the offset it landed at.
    pub fn append(&mut self, data: &[u8]) -> io::Result<u64> {
        let Some(last) = self.segments.last_mut() else { return Err(io::Error::other("no segment to append to")) };
        let pos = last.wrote;
        if !last.map.write(pos, data) {
            return Err(io::Error::other("append does not fit the segment"));
        }
        last.wrote = pos + data.len();
        Ok(last.from + pos as u64)
    }

    /// Java `truncateOffset`: the segment holding `offset` ends there, later ones are deleted.
    /// Unlike Java, the cut-off bytes are zeroed (only pages holding data are touched), so a
    /// later recovery never finds an old entry behind new ones.
    pub fn truncate(&mut self, offset: u64) {
        let mut keep = self.segments.len();
        for (i, s) in self.segments.iter_mut().enumerate() {
            let tail = s.from + s.size() as u64;
            if tail <= offset {
                continue;
            }
            if offset >= s.from {
                let pos = (offset - s.from) as usize;
                // Forced at once: the flush thread only forces what lies below the write position.
                if s.map.zero_range(pos, s.size()) {
                    if let Err(e) = s.map.syncer().sync(pos, s.size()) {
                        warn!(path = %s.path().display(), error = %e, "cannot force the zeroed tail");
                    }
                }
                s.set_wrote(pos);
            } else {
                keep = keep.min(i);
            }
        }
        self.delete_from(keep);
    }

    fn delete_from(&mut self, keep: usize) {
        if keep >= self.segments.len() {
            return;
        }
        for s in self.segments.drain(keep..).rev() {
            let path = s.path().to_owned();
            match s.delete() {
                Ok(()) => info!(path = %path.display(), "deleted segment"),
                Err(e) => warn!(path = %path.display(), error = %e, "cannot delete segment"),
            }
        }
    }

    /// Java `resetOffset`: segments wholly below `offset` go, the one holding it starts there.
    pub fn reset_start(&mut self, offset: u64) {
        let mut drop_below = 0;
        for (i, s) in self.segments.iter_mut().enumerate() {
            if s.from > offset {
                break;
            }
            if offset < s.from + s.size() as u64 {
                s.start = (offset - s.from) as usize;
            } else {
                drop_below = i + 1;
            }
        }
        for s in self.segments.drain(..drop_below) {
            let path = s.path().to_owned();
            if let Err(e) = s.delete() {
                warn!(path = %path.display(), error = %e, "cannot delete segment");
            }
        }
    }

    /// Java `rebuildWithPos`: everything goes and one new segment holds `offset` as its start and
    /// write position.
    pub fn rebuild_at(&mut self, offset: u64) -> io::Result<()> {
        self.delete_from(0);
        let size = self.segment_size as u64;
        self.create(offset - offset % size)?;
        if let Some(s) = self.segments.last_mut() {
            let pos = (offset % size) as usize;
            s.set_wrote(pos);
            s.start = pos;
        }
        Ok(())
    }

    /// Sets the start position of the first segment (recovery found its first entry there).
    pub fn set_first_start(&mut self, pos: usize) {
        if let Some(first) = self.segments.first_mut() {
            first.start = pos.min(first.size());
        }
    }

    /// Takes the first `n` segments out of the list (expiry deletes them outside the lock).
    pub fn take_first(&mut self, n: usize) -> Vec<Segment> {
        let n = n.min(self.segments.len());
        self.segments.drain(..n).collect()
    }

    /// The ranges written since the last flush.
    pub fn flush_jobs(&self) -> Vec<FlushJob> {
        self.segments.iter().filter(|s| s.wrote > s.flushed).map(|s| FlushJob { id: s.id, syncer: s.map.syncer(), start: s.flushed, end: s.wrote }).collect()
    }

    /// Credits a job that ran, if its segment is still there and not cut below it meanwhile.
    pub fn flushed(&mut self, job: &FlushJob) {
        if let Some(s) = self.segments.iter_mut().find(|s| s.id == job.id) {
            if job.end <= s.wrote && job.end > s.flushed {
                s.flushed = job.end;
            }
        }
    }

    /// Bytes written but not flushed.
    pub fn unflushed(&self) -> u64 {
        self.segments.iter().map(|s| (s.wrote - s.flushed.min(s.wrote)) as u64).sum()
    }
}

impl std::fmt::Debug for SegmentList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SegmentList({}, {} segments, end {})", self.dir.display(), self.segments.len(), self.max_wrote())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    #[test]
    fn appends_roll_with_a_blank_of_minus_one_rest_and_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let mut list = SegmentList::new(dir.path(), 100);
        assert_eq!(list.pre_append(60, true).unwrap(), 0);
        assert_eq!(list.append(&[7u8; 60]).unwrap(), 0);
        // 32 + 8 = 40 fits the 40 left exactly.
        assert_eq!(list.landing(32, true), 60);
        assert_eq!(list.landing(33, true), 100);
        assert_eq!(list.pre_append(33, true).unwrap(), 100);
        assert_eq!(list.append(&[9u8; 33]).unwrap(), 100);
        let first = &list.segments()[0];
        assert!(first.is_full());
        let mut blank = [0u8; 40];
        blank[..4].copy_from_slice(&(-1i32).to_be_bytes());
        blank[4..8].copy_from_slice(&40i32.to_be_bytes());
        assert_eq!(first.raw(60, 40).unwrap(), &blank[..]);
        assert_eq!(names(dir.path()), vec![file_name(0), file_name(100)]);
        assert_eq!(list.max_wrote(), 133);
        assert_eq!(list.read(100, 33), Some(&[9u8; 33][..]));
        assert_eq!(list.read(100, 34), None);
        assert!(list.pre_append(93, true).is_err(), "an entry that cannot fit any segment");
    }

    #[test]
    fn truncate_cuts_and_zeroes_and_rebuild_starts_mid_segment() {
        let dir = tempfile::tempdir().unwrap();
        let mut list = SegmentList::new(dir.path(), 64);
        for _ in 0..5 {
            list.pre_append(32, false).unwrap();
            list.append(&[1u8; 32]).unwrap();
        }
        assert_eq!(list.segments().len(), 3);
        list.truncate(80);
        assert_eq!(list.max_wrote(), 80);
        assert_eq!(list.segments().len(), 2);
        assert!(list.segments()[1].raw(16, 48).unwrap().iter().all(|b| *b == 0));
        list.truncate(64);
        assert_eq!(list.max_wrote(), 64);
        assert_eq!(list.segments().len(), 2);
        list.rebuild_at(200).unwrap();
        assert_eq!(names(dir.path()), vec![file_name(192)]);
        assert_eq!((list.min_offset(), list.max_wrote()), (200, 200));
        list.reset_start(300);
        assert!(list.is_empty());
        assert!(names(dir.path()).is_empty());
    }

    #[test]
    fn load_refuses_what_java_refuses() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(file_name(0)), vec![0u8; 64]).unwrap();
        std::fs::write(dir.path().join(file_name(64)), vec![0u8; 64]).unwrap();
        let list = SegmentList::load(dir.path(), 64).unwrap();
        assert_eq!(list.max_wrote(), 128);
        assert!(list.check_adjacent().is_ok());
        std::fs::write(dir.path().join(file_name(192)), vec![0u8; 64]).unwrap();
        assert!(SegmentList::load(dir.path(), 64).unwrap().check_adjacent().is_err());
        std::fs::write(dir.path().join(file_name(256)), vec![0u8; 63]).unwrap();
        assert!(matches!(SegmentList::load(dir.path(), 64), Err(StoreError::WrongSegmentSize { .. })));
        std::fs::remove_file(dir.path().join(file_name(256))).unwrap();
        std::fs::write(dir.path().join("checkpoint"), vec![0u8; 64]).unwrap();
        assert!(matches!(SegmentList::load(dir.path(), 64), Err(StoreError::BadSegmentName { .. })));
        std::fs::remove_file(dir.path().join("checkpoint")).unwrap();
        std::fs::create_dir(dir.path().join(file_name(320))).unwrap();
        assert!(matches!(SegmentList::load(dir.path(), 64), Err(StoreError::WrongSegmentSize { .. })));
        assert!(SegmentList::load(dir.path().join("missing"), 64).unwrap().is_empty());
    }
}
