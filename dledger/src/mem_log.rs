//! An in-memory [`RaftLog`] with the file store's position rules, and a page cache / disk split
//! for power-loss crashes; an in-memory [`TermStore`].
//!
//! Positions: data segments of `segment_size` bytes; an entry of `L = 48 + body` bytes goes at the
//! write position unless `L + 8` exceeds what is left of the segment, in which case the rest of the
//! segment is a blank and the entry starts the next segment (`MmapFileList.preAppend`). A follower
//! must land every entry at the leader's `pos`; a truncate into a log that does not hold the entry
//! before it starts over at the entry's `pos` (Java's `rebuildWithPos`).
//!
//! Durability: writes land in the "page cache" (the live log); [`MemLog::flush`] copies it to the
//! "disk" (Java's flush every 10 ms, here whenever the driver says). [`MemLog::power_loss`] puts the
//! disk's contents back, including entries a truncate had removed since the last flush (the file
//! store cuts the mapped pages and the disk still has the old bytes). The committed index comes
//! back as it was at the last flush (the checkpoint), clamped to the log. A process crash keeps
//! everything: drop the engine, keep the `MemLog`.

use bytes::Bytes;

use crate::entry::{Entry, CURRENT_MAGIC, MIN_BLANK_LEN};
use crate::log::{LogError, RaftLog, TermStore};
use crate::store::MAX_ENTRY_SIZE;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Image {
    /// Index of `entries[0]`; meaningless while empty.
    begin: i64,
    entries: Vec<Entry>,
    /// Where the next entry would be placed (before the blank rule).
    write_pos: i64,
    committed: i64,
}

impl Image {
    fn empty() -> Image {
        Image { begin: 0, entries: Vec::new(), write_pos: 0, committed: -1 }
    }

    fn end(&self) -> i64 {
        if self.entries.is_empty() {
            -1
        } else {
            self.begin + self.entries.len() as i64 - 1
        }
    }

    fn slot(&self, index: i64) -> Option<usize> {
        if self.entries.is_empty() || index < self.begin || index > self.end() {
            None
        } else {
            Some((index - self.begin) as usize)
        }
    }
}

#[derive(Clone, Debug)]
pub struct MemLog {
    segment_size: i64,
    live: Image,
    disk: Image,
    /// Leading entries equal in `live` and `disk` (what a flush need not copy).
    synced: usize,
    /// The lowest index changed since [`MemLog::take_changed`] (for the oracle's incremental checks).
    changed_from: i64,
    /// Entries at or below the committed index that a truncate removed (an oracle alarm).
    cut_committed: Vec<Entry>,
    /// Fault injection: appends fail DISK_FULL.
    pub disk_full: bool,
}

impl MemLog {
    pub fn new(segment_size: usize) -> MemLog {
        MemLog {
            segment_size: segment_size as i64,
            live: Image::empty(),
            disk: Image::empty(),
            synced: 0,
            changed_from: i64::MAX,
            cut_committed: Vec::new(),
            disk_full: false,
        }
    }

    pub fn segment_size(&self) -> usize {
        self.segment_size as usize
    }

    /// `preAppend`: where an entry of `len` bytes goes.
    fn place(&self, len: i64) -> Result<i64, LogError> {
        self.check_size(len)?;
        Ok(self.landing_after(self.live.write_pos, len))
    }

    /// Where an entry of `len` bytes lands when the data ends at `end`: there, or at the next
    /// segment when it does not fit with a blank's 8 bytes after it.
    fn landing_after(&self, end: i64, len: i64) -> i64 {
        let left = self.segment_size - end % self.segment_size;
        if len + MIN_BLANK_LEN as i64 > left {
            end + left
        } else {
            end
        }
    }

    /// The file store's limit: an entry must fit a segment with a blank's 8 bytes, and Java's
    /// 4 MiB encode buffer.
    fn check_size(&self, len: i64) -> Result<(), LogError> {
        if len > MAX_ENTRY_SIZE as i64 || len + MIN_BLANK_LEN as i64 > self.segment_size {
            return Err(LogError::Inconsistent(format!("an entry of {len} bytes does not fit a {}-byte segment", self.segment_size)));
        }
        Ok(())
    }

    /// What the file store refuses of a leader's entry before writing it anywhere.
    fn check_follower_entry(&self, entry: &Entry) -> Result<(), LogError> {
        if entry.magic != CURRENT_MAGIC || entry.index < 0 || entry.pos < 0 {
            return Err(LogError::Inconsistent(format!("entry {} at pos {} with magic {}", entry.index, entry.pos, entry.magic)));
        }
        self.check_size(entry.size() as i64)
    }

    fn push(&mut self, entry: Entry) {
        if self.live.entries.is_empty() {
            self.live.begin = entry.index;
        }
        self.live.write_pos = entry.pos + entry.size() as i64;
        self.changed_from = self.changed_from.min(entry.index);
        self.live.entries.push(entry);
    }

    /// Cuts the live log so that it ends before `index`.
    fn cut_before(&mut self, index: i64) {
        let keep = (index - self.live.begin).clamp(0, self.live.entries.len() as i64) as usize;
        let committed = self.live.committed;
        self.cut_committed.extend(self.live.entries[keep..].iter().filter(|e| e.index <= committed).cloned());
        self.live.entries.truncate(keep);
        self.synced = self.synced.min(keep);
        self.changed_from = self.changed_from.min(index);
        self.live.write_pos = self.live.entries.last().map_or(self.live.write_pos, |e| e.pos + e.size() as i64);
    }

    /// Java's flush: the disk gets what the page cache holds.
    pub fn flush(&mut self) {
        if self.disk.begin != self.live.begin {
            self.synced = 0;
        }
        self.disk.entries.truncate(self.synced);
        self.disk.entries.extend_from_slice(&self.live.entries[self.synced..]);
        self.disk.begin = self.live.begin;
        self.disk.write_pos = self.live.write_pos;
        self.disk.committed = self.live.committed;
        self.synced = self.live.entries.len();
    }

    /// The process starts again over this log, as the file store opens: the committed index is
    /// read back through [`RaftLog::update_committed`]'s rules (Java's `recover` hands the
    /// checkpoint's index to `updateCommittedIndex`), so one below the begin index (left behind
    /// by a truncation that started the log over) is forgotten.
    pub fn reopen(&mut self) {
        let committed = std::mem::replace(&mut self.live.committed, -1);
        self.update_committed(0, committed);
    }

    /// The machine lost power: back to what the disk holds.
    pub fn power_loss(&mut self) {
        let keep = self.synced.min(self.disk.entries.len());
        if self.disk.begin != self.live.begin {
            self.live.entries.clear();
        } else {
            self.live.entries.truncate(keep);
        }
        let start = self.live.entries.len();
        self.live.entries.extend_from_slice(&self.disk.entries[start..]);
        self.live.begin = self.disk.begin;
        self.live.write_pos = self.disk.write_pos;
        self.live.committed = self.disk.committed.min(self.live.end());
        self.synced = self.live.entries.len();
        self.changed_from = i64::MIN;
    }

    /// What survives a power loss now: the disk's entries.
    pub fn durable_entries(&self) -> &[Entry] {
        &self.disk.entries
    }

    pub fn durable_begin(&self) -> i64 {
        self.disk.begin
    }

    /// Whether the page cache holds anything the disk does not.
    pub fn is_dirty(&self) -> bool {
        self.live != self.disk
    }

    /// The lowest index changed since the last call (`i64::MAX`: nothing; `i64::MIN`: everything).
    pub fn take_changed(&mut self) -> i64 {
        std::mem::replace(&mut self.changed_from, i64::MAX)
    }

    /// Committed entries a truncate removed since the last call.
    pub fn take_cut_committed(&mut self) -> Vec<Entry> {
        std::mem::take(&mut self.cut_committed)
    }

    /// The live entry at `index`, borrowed (`RaftLog::get` clones it).
    pub fn entry(&self, index: i64) -> Option<&Entry> {
        self.live.slot(index).map(|i| &self.live.entries[i])
    }

    pub fn entries(&self) -> &[Entry] {
        &self.live.entries
    }
}

impl RaftLog for MemLog {
    fn begin_index(&self) -> i64 {
        if self.live.entries.is_empty() {
            -1
        } else {
            self.live.begin
        }
    }

    fn end_index(&self) -> i64 {
        self.live.end()
    }

    fn end_term(&self) -> i64 {
        self.live.entries.last().map_or(-1, |e| e.term)
    }

    fn committed_index(&self) -> i64 {
        self.live.committed
    }

    fn get(&self, index: i64) -> Option<Entry> {
        self.live.slot(index).map(|i| self.live.entries[i].clone())
    }

    fn append_as_leader(&mut self, term: i64, body: Bytes) -> Result<Entry, LogError> {
        if self.disk_full {
            return Err(LogError::DiskFull);
        }
        if term < self.end_term() {
            return Err(LogError::Inconsistent(format!("term {term} is older than the last entry's {}", self.end_term())));
        }
        let mut entry = Entry { magic: CURRENT_MAGIC, index: self.end_index() + 1, term, body, ..Entry::default() };
        entry.pos = self.place(entry.size() as i64)?;
        self.push(entry.clone());
        Ok(entry)
    }

    fn append_as_follower(&mut self, entry: &Entry) -> Result<(), LogError> {
        if self.disk_full {
            return Err(LogError::DiskFull);
        }
        if entry.index != self.end_index() + 1 {
            return Err(LogError::Inconsistent(format!("index {} after end {}", entry.index, self.end_index())));
        }
        if entry.term < self.end_term() {
            return Err(LogError::Inconsistent(format!("entry {} of term {} after one of term {}", entry.index, entry.term, self.end_term())));
        }
        self.check_follower_entry(entry)?;
        let pos = self.place(entry.size() as i64)?;
        if pos != entry.pos {
            return Err(LogError::Inconsistent(format!("entry {} lands at {pos}, not at its pos {}", entry.index, entry.pos)));
        }
        self.push(entry.clone());
        Ok(())
    }

    /// As the file store: an equal entry is kept and everything after it cut; otherwise the entry
    /// goes right after our entry before it when it lands there by the roll rule (refused when its
    /// term is lower: recovery would stop at it), and in every
    /// other case the log starts over at the entry (Java's `rebuildWithPos`; the file store
    /// rebuilds rather than cut inside an entry of ours). A commit index past the new end comes
    /// down to it (0.3.1.2 keeps it, and readers of the committed bytes would see them rewritten).
    fn truncate(&mut self, entry: &Entry) -> Result<(), LogError> {
        if self.get(entry.index).as_ref() == Some(entry) {
            self.cut_before(entry.index + 1);
        } else {
            self.check_follower_entry(entry)?;
            let size = entry.size() as i64;
            if self.landing_after(entry.pos, size) != entry.pos {
                return Err(LogError::Inconsistent(format!("entry {} of {size} bytes cannot start at {}", entry.index, entry.pos)));
            }
            let follows = self.entry(entry.index - 1).filter(|p| {
                let end = p.pos + p.size() as i64;
                end <= entry.pos && self.landing_after(end, size) == entry.pos
            });
            if let Some(p) = follows {
                if p.term > entry.term {
                    return Err(LogError::Inconsistent(format!("entry {} of term {} after our entry of term {}", entry.index, entry.term, p.term)));
                }
                self.cut_before(entry.index);
            } else {
                self.cut_before(self.live.begin);
                self.live.begin = entry.index;
                self.synced = 0;
            }
            self.push(entry.clone());
        }
        self.live.committed = self.live.committed.min(self.live.end());
        Ok(())
    }

    /// The file store's rules, but for the term: this log does not know the member's current term
    /// (the engine never passes an older one: the follower drops those first).
    fn update_committed(&mut self, _term: i64, index: i64) {
        if index == -1 || self.live.entries.is_empty() || index < self.live.begin {
            return;
        }
        let index = index.min(self.end_index());
        if index > self.live.committed {
            self.live.committed = index;
        }
    }
}

/// `currterm` in memory. Persisting is durable at once: the engine's safety needs the vote on
/// disk before it is given (Java writes `currterm` without fsync; under power loss that lets a
/// member vote twice in a term, so the file store must sync it).
#[derive(Clone, Debug, Default)]
pub struct MemTerms {
    pub term: i64,
    pub vote: Option<String>,
    /// Fault injection: the next persist fails.
    pub fail_next: bool,
    pub persists: u64,
}

impl TermStore for MemTerms {
    fn load(&self) -> (i64, Option<String>) {
        (self.term, self.vote.clone())
    }

    fn persist(&mut self, term: i64, vote: Option<&str>) -> Result<(), LogError> {
        if std::mem::take(&mut self.fail_next) {
            return Err(LogError::Io("injected".into()));
        }
        self.term = term;
        self.vote = vote.map(str::to_owned);
        self.persists += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(n: usize) -> Bytes {
        Bytes::from(vec![7u8; n])
    }

    #[test]
    fn entries_roll_to_the_next_segment_when_the_blank_would_not_fit() {
        let mut log = MemLog::new(256);
        let a = log.append_as_leader(1, body(100)).unwrap(); // 148 bytes at 0
        assert_eq!(a.pos, 0);
        let b = log.append_as_leader(1, body(52)).unwrap(); // 100 bytes: 248 + 8 = 256 fits
        assert_eq!(b.pos, 148);
        let c = log.append_as_leader(1, body(0)).unwrap(); // 48 bytes: 8 left, goes to 256
        assert_eq!(c.pos, 256);
        let d = log.append_as_leader(1, body(200)).unwrap(); // 248 + 8 > 208 left: 512
        assert_eq!(d.pos, 512);
        // What no segment holds with a blank after it is refused, as the file store does.
        assert!(matches!(log.append_as_leader(1, body(201)), Err(LogError::Inconsistent(_))));
        let mut f = MemLog::new(256);
        for e in [&a, &b, &c, &d] {
            f.append_as_follower(e).unwrap();
        }
        assert_eq!(f.entries(), log.entries());
        let moved = Entry { pos: 300, ..d.clone() };
        let mut g = MemLog::new(256);
        for e in [&a, &b, &c] {
            g.append_as_follower(e).unwrap();
        }
        assert!(g.append_as_follower(&moved).is_err());
    }

    #[test]
    fn truncate_keeps_an_equal_entry_and_rebuilds_an_empty_log_at_the_entry() {
        let mut leader = MemLog::new(1024);
        let es: Vec<Entry> = (0..4).map(|_| leader.append_as_leader(2, body(10)).unwrap()).collect();
        let mut f = MemLog::new(1024);
        f.truncate(&es[2]).unwrap();
        assert_eq!((f.begin_index(), f.end_index()), (2, 2));
        f.append_as_follower(&es[3]).unwrap();
        f.truncate(&es[2]).unwrap();
        assert_eq!(f.end_index(), 2);
        let other = Entry { term: 3, ..es[3].clone() };
        f.append_as_follower(&other).unwrap();
        f.truncate(&es[3]).unwrap();
        assert_eq!(f.get(3), Some(es[3].clone()));
        // An entry of a lower term than the one before it (recovery would stop there) is refused.
        let older = Entry { term: 1, index: 4, pos: es[3].pos + es[3].size() as i64, ..es[3].clone() };
        assert!(matches!(f.append_as_follower(&older), Err(LogError::Inconsistent(_))));
    }

    #[test]
    fn power_loss_returns_to_the_last_flush_even_across_a_truncate() {
        let mut log = MemLog::new(1024);
        let a = log.append_as_leader(1, body(1)).unwrap();
        let b = log.append_as_leader(1, body(2)).unwrap();
        log.update_committed(1, 0);
        log.flush();
        log.update_committed(1, 1);
        let b2 = Entry { term: 2, ..b.clone() };
        log.truncate(&b2).unwrap();
        log.append_as_leader(2, body(3)).unwrap();
        log.power_loss();
        assert_eq!(log.entries(), &[a, b][..]);
        assert_eq!(log.committed_index(), 0);
        assert!(!log.is_dirty());
    }
}
