//! `timerwheel`: Java 5.3.3's `TimerWheel`, a file of `2 × slots` slots of 32 bytes, big-endian:
//! the slot's time divided by the precision (8), the timer-log position of its first and last
//! unit (8 + 8), how many timers it holds (4) and a magic Java does not use (4). A slot is found
//! by `time / precision % (2 × slots)`; it belongs to a time only when its stored time matches, so
//! a slot left from an earlier turn of the wheel reads as empty.
//!
//! The file is mapped and written in place (Java keeps a copy in memory and writes the changed
//! bytes back at each flush); a flush makes it durable. Its size is fixed by the slot count.

// Mapping the wheel file is the one unsafe call here (see `open`).
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::path::Path;

use memmap2::MmapMut;

pub const SLOT_SIZE: usize = 32;

/// One slot. `time_ms == -1` is an empty slot (Java's `new Slot(-1, -1, -1)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub time_ms: i64,
    pub first_pos: i64,
    pub last_pos: i64,
    pub num: i32,
    pub magic: i32,
}

impl Slot {
    pub const EMPTY: Slot = Slot { time_ms: -1, first_pos: -1, last_pos: -1, num: 0, magic: 0 };

    pub fn is_empty(&self) -> bool {
        self.time_ms == -1
    }
}

pub struct TimerWheel {
    map: MmapMut,
    file: File,
    /// Slots per turn (Java's `slotsTotal`); the file holds twice as many.
    slots_total: i64,
    precision_ms: i64,
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(a)
}

impl TimerWheel {
    /// Opens (or creates) the wheel file. A file of another length is refused, as Java refuses it.
    pub fn open(path: &Path, slots_total: i64, precision_ms: i64) -> io::Result<TimerWheel> {
        if slots_total <= 0 || precision_ms <= 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "timer wheel needs slots and a precision"));
        }
        let length = (slots_total * 2) as u64 * SLOT_SIZE as u64;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        match std::fs::metadata(path) {
            Ok(m) if m.len() != 0 && m.len() != length => {
                let actual = m.len();
                return Err(io::Error::new(io::ErrorKind::InvalidData, format!("Timer wheel length:{actual} != expected:{length}")));
            }
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let file = crate::mapped_file::open_reserved(path, length)?;
        // SAFETY: the file is ours for the store's lifetime (the store directory's lock file keeps
        // other brokers out) and its length is fixed above.
        let map = unsafe { MmapMut::map_mut(&file)? };
        Ok(TimerWheel { map, file, slots_total, precision_ms })
    }

    pub fn precision_ms(&self) -> i64 {
        self.precision_ms
    }

    pub fn slots_total(&self) -> i64 {
        self.slots_total
    }

    fn index(&self, time_ms: i64) -> usize {
        (time_ms / self.precision_ms).rem_euclid(self.slots_total * 2) as usize
    }

    fn at(&self, index: usize) -> Slot {
        let b = &self.map[index * SLOT_SIZE..(index + 1) * SLOT_SIZE];
        Slot { time_ms: be_i64(b, 0) * self.precision_ms, first_pos: be_i64(b, 8), last_pos: be_i64(b, 16), num: be_i32(b, 24), magic: be_i32(b, 28) }
    }

    /// The slot as stored, whatever time it belongs to.
    pub fn raw_slot(&self, time_ms: i64) -> Slot {
        self.at(self.index(time_ms))
    }

    /// The slot of `time_ms`, or [`Slot::EMPTY`] when it holds another time (or none).
    pub fn slot(&self, time_ms: i64) -> Slot {
        let slot = self.raw_slot(time_ms);
        if slot.time_ms != time_ms / self.precision_ms * self.precision_ms {
            return Slot::EMPTY;
        }
        slot
    }

    /// Writes the whole slot of `time_ms`.
    pub fn put_slot(&mut self, time_ms: i64, first_pos: i64, last_pos: i64, num: i32, magic: i32) {
        let at = self.index(time_ms) * SLOT_SIZE;
        let b = &mut self.map[at..at + SLOT_SIZE];
        b[0..8].copy_from_slice(&(time_ms / self.precision_ms).to_be_bytes());
        b[8..16].copy_from_slice(&first_pos.to_be_bytes());
        b[16..24].copy_from_slice(&last_pos.to_be_bytes());
        b[24..28].copy_from_slice(&num.to_be_bytes());
        b[28..32].copy_from_slice(&magic.to_be_bytes());
    }

    /// Recovery's repair of a slot (Java `reviseSlot`): when the slot holds `time_ms`, sets the
    /// positions given; when it holds another time and `force`, claims it for `time_ms` with
    /// both positions (the first from `last_pos` when not given), leaving its count as it was.
    pub fn revise_slot(&mut self, time_ms: i64, first_pos: Option<i64>, last_pos: Option<i64>, force: bool) {
        let at = self.index(time_ms) * SLOT_SIZE;
        let stored = be_i64(&self.map[at..], 0);
        let b = &mut self.map[at..at + SLOT_SIZE];
        if stored != time_ms / self.precision_ms {
            if force {
                let last = last_pos.unwrap_or(-1);
                b[0..8].copy_from_slice(&(time_ms / self.precision_ms).to_be_bytes());
                b[8..16].copy_from_slice(&first_pos.unwrap_or(last).to_be_bytes());
                b[16..24].copy_from_slice(&last.to_be_bytes());
            }
            return;
        }
        if let Some(first) = first_pos {
            b[8..16].copy_from_slice(&first.to_be_bytes());
        }
        if let Some(last) = last_pos {
            b[16..24].copy_from_slice(&last.to_be_bytes());
        }
    }

    /// The slots of one turn from `start_ms` on that hold their own time, in time order.
    fn live_slots(&self, start_ms: i64) -> impl Iterator<Item = Slot> + '_ {
        let first = self.index(start_ms);
        let count = (self.slots_total * 2) as usize;
        (0..count).filter_map(move |i| {
            let slot = self.at((first + i) % count);
            let time = (start_ms + i as i64 * self.precision_ms) / self.precision_ms * self.precision_ms;
            (slot.time_ms == time).then_some(slot)
        })
    }

    /// The smallest first position of the slots from `start_ms` whose last position lies beyond
    /// `max_offset` (a wheel ahead of a damaged timer log), or `i64::MAX` (Java `checkPhyPos`).
    pub fn check_phy_pos(&self, start_ms: i64, max_offset: i64) -> i64 {
        self.live_slots(start_ms).filter(|s| s.last_pos > max_offset).map(|s| s.first_pos).min().unwrap_or(i64::MAX)
    }

    /// Timers held by the slots from `start_ms` on (Java `getAllNum`).
    pub fn all_num(&self, start_ms: i64) -> i64 {
        self.live_slots(start_ms).map(|s| s.num as i64).sum()
    }

    /// Makes the wheel durable.
    pub fn flush(&self) -> io::Result<()> {
        self.map.flush()
    }

    /// A handle that makes the wheel durable without the wheel itself, so the timer can sync it
    /// while its loops go on writing slots: on Linux an fsync of the file writes back the pages
    /// dirtied through a shared mapping as msync does (msync is an fsync of the mapped range).
    pub fn syncer(&self) -> io::Result<WheelSyncer> {
        Ok(WheelSyncer(self.file.try_clone()?))
    }
}

/// See [`TimerWheel::syncer`].
pub struct WheelSyncer(File);

impl WheelSyncer {
    pub fn sync(&self) -> io::Result<()> {
        self.0.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_belongs_to_its_time_only_and_round_trips_big_endian() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("timerwheel");
        let mut wheel = TimerWheel::open(&path, 10, 1000).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 20 * 32);
        // Its blocks are reserved: a full disk fails the open, not a later write (SIGBUS).
        assert!(crate::mapped_file::allocated_bytes(&path) >= 20 * 32);
        assert!(wheel.slot(5_000).is_empty());
        wheel.put_slot(5_400, 52, 104, 2, 0);
        assert_eq!(wheel.slot(5_999), Slot { time_ms: 5_000, first_pos: 52, last_pos: 104, num: 2, magic: 0 });
        // The same index one turn later (20 slots of 1 s) is another time: empty.
        assert!(wheel.slot(25_000).is_empty());
        assert_eq!(wheel.raw_slot(25_000).time_ms, 5_000);
        assert_eq!(wheel.all_num(0), 2);
        assert_eq!(wheel.check_phy_pos(0, 60), 52);
        assert_eq!(wheel.check_phy_pos(0, 104), i64::MAX);
        wheel.revise_slot(5_000, None, Some(156), true);
        assert_eq!(wheel.slot(5_000).last_pos, 156);
        wheel.revise_slot(25_000, None, Some(208), true);
        assert_eq!(wheel.slot(25_000), Slot { time_ms: 25_000, first_pos: 208, last_pos: 208, num: 2, magic: 0 });
        wheel.flush().unwrap();
        drop(wheel);
        let bytes = std::fs::read(&path).unwrap();
        // Slot 5: time 25 (25 s / 1 s), first 208, last 208, num 2, magic 0.
        assert_eq!(&bytes[5 * 32..5 * 32 + 8], &25i64.to_be_bytes());
        assert_eq!(&bytes[5 * 32 + 24..5 * 32 + 28], &2i32.to_be_bytes());
        assert!(TimerWheel::open(&path, 11, 1000).is_err());
    }
}
