//! Start-up recovery of the data and index segments (Java `DLedgerMmapFileStore.recover`).
//!
//! 1. Both directories must be adjacent segments.
//! 2. The walk starts at the third-to-last data segment, or further back: the first segment
//!    (going towards the first) whose entry at file offset 0 is valid and matches its index unit.
//! 3. The walk: a blank (-1) moves to the next segment, size 0 ends it; an entry must have
//!    `pos` = its offset, `bodySize + 48 = size`, magic 1, the index after the last one, a term no
//!    lower than the last one, and fit its segment. The first entry whose index unit does not
//!    match starts a rebuild of the index from there.
//! 4. If the walk stopped more than a segment before the last segment, refuse to start (Java
//!    exits). Otherwise the data and the index are cut after the last good entry.
//!
//! Where we do better than Java (each is a case where Java loses or resurrects entries):
//! - bytes after the cut are zeroed (Java keeps them), so a later crash cannot revive them;
//! - the last entry is dropped when it is the first one whose index unit is missing (zeros, or
//!   beyond the index files) while the entries before it matched theirs: the leader writes data, then index, and answers only after
//!   both, so that entry was never acknowledged, and it may be torn (no CRC would tell);
//! - a first segment rebuilt at an entry's offset (a follower truncated into an empty log) keeps
//!   its entries: its first entry is found after the zeros (Java treats the segment as empty, or
//!   exits when more than one segment follows it).

use tracing::{info, warn};

use super::segments::{Segment, SegmentList};
use super::{unit_offset, Header, IndexUnit, StoreError, INDEX_UNIT_SIZE};
use crate::entry::{Entry, BLANK_MAGIC, BODY_OFFSET, CURRENT_MAGIC, HEADER_SIZE};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recovered {
    pub begin_index: i64,
    pub end_index: i64,
    pub end_term: i64,
}

impl Recovered {
    pub const EMPTY: Recovered = Recovered { begin_index: -1, end_index: -1, end_term: -1 };
}

/// A valid header at `rel` of `segment` (the start-of-segment checks).
fn header_at(segment: &Segment, rel: usize) -> Option<Header> {
    let h = Header::decode(segment.raw(rel, BODY_OFFSET)?)?;
    let valid = h.magic == CURRENT_MAGIC
        && h.size > HEADER_SIZE as i32
        && h.body_size >= 0
        && i64::from(h.body_size) + BODY_OFFSET as i64 == i64::from(h.size)
        && h.pos == (segment.from() + rel as u64) as i64
        && rel + h.size as usize <= segment.size();
    valid.then_some(h)
}

/// Where the first entry of `segment` is: at 0, or (only after zeros, as a segment rebuilt at an
/// entry's offset has) at the first non-zero bytes.
pub fn first_entry_pos(segment: &Segment) -> Option<usize> {
    if header_at(segment, 0).is_some() {
        return Some(0);
    }
    if segment.raw(0, 8)?.iter().any(|b| *b != 0) {
        return None;
    }
    // The magic 1 is 00 00 00 01: its first non-zero byte is its fourth.
    let mut pos = 8;
    let chunk = 64 * 1024;
    while pos < segment.size() {
        let len = chunk.min(segment.size() - pos);
        let bytes = segment.raw(pos, len)?;
        if let Some(i) = bytes.iter().position(|b| *b != 0) {
            let at = (pos + i).checked_sub(3)?;
            return header_at(segment, at).map(|_| at);
        }
        pos += len;
    }
    None
}

fn unit_matches(index: &SegmentList, h: &Header, abs: u64) -> bool {
    let Some(off) = unit_offset(h.index) else { return false };
    let Some(unit) = index.read(off, INDEX_UNIT_SIZE).and_then(IndexUnit::decode) else { return false };
    unit == IndexUnit { magic: h.magic, pos: abs as i64, size: h.size, index: h.index, term: h.term }
}

/// Java's pre-check of a segment's first entry: valid at `rel` and matching its index unit.
fn start_matches(data: &SegmentList, index: &SegmentList, i: usize, rel: usize) -> bool {
    let segment = &data.segments()[i];
    header_at(segment, rel).is_some_and(|h| unit_matches(index, &h, segment.from() + rel as u64))
}

/// Makes the index end at `off` (cut, or rebuilt there when it does not reach it).
fn cut_index_at(index: &mut SegmentList, off: u64) -> bool {
    if off >= index.min_offset() && off <= index.max_wrote() {
        index.truncate(off);
    }
    if index.max_wrote() != off || index.min_offset() > off {
        warn!(dir = %index.dir().display(), offset = off, "rebuilding the index");
        if let Err(e) = index.rebuild_at(off) {
            warn!(dir = %index.dir().display(), error = %e, "cannot rebuild the index");
            return false;
        }
    }
    index.max_wrote() == off
}

fn append_unit(index: &mut SegmentList, unit: &IndexUnit) -> bool {
    let Some(off) = unit_offset(unit.index) else { return false };
    match index.pre_append(INDEX_UNIT_SIZE, false) {
        Ok(at) if at == off => index.append(&unit.encode()).is_ok_and(|at| at == off),
        Ok(_) => false,
        Err(e) => {
            warn!(dir = %index.dir().display(), error = %e, "cannot write an index unit");
            false
        }
    }
}

/// Reads entry `index` through its index unit (Java `get`): the recheck of the last entry.
pub fn read_entry(data: &SegmentList, index_list: &SegmentList, index: i64) -> Option<Entry> {
    let unit = IndexUnit::decode(index_list.read(unit_offset(index)?, INDEX_UNIT_SIZE)?)?;
    let bytes = data.read(u64::try_from(unit.pos).ok()?, usize::try_from(unit.size).ok()?)?;
    let entry = Entry::decode(bytes).ok()?;
    (entry.pos == unit.pos && entry.index == index).then_some(entry)
}

pub fn recover(data: &mut SegmentList, index: &mut SegmentList) -> Result<Recovered, StoreError> {
    data.check_adjacent().map_err(|path| StoreError::NotAdjacent { path })?;
    index.check_adjacent().map_err(|path| StoreError::NotAdjacent { path })?;
    if data.is_empty() {
        index.truncate(0);
        return Ok(Recovered::EMPTY);
    }
    let n = data.segments().len();
    let last_from = data.segments()[n - 1].from();
    let segment_size = data.segment_size() as u64;

    // Where the first segment's first entry is (0 unless it was rebuilt mid-segment).
    let first_start = first_entry_pos(&data.segments()[0]);
    let mut start = (0, first_start.unwrap_or(0));
    for i in (0..=n.saturating_sub(3)).rev() {
        let rel = if i == 0 { first_start.unwrap_or(0) } else { 0 };
        if start_matches(data, index, i, rel) {
            start = (i, rel);
            break;
        }
        warn!(segment = %data.segments()[i].path().display(), "first entry of the segment does not match the index");
    }
    let (mut seg_i, mut rel) = start;
    info!(dir = %data.dir().display(), segment = seg_i, pos = rel, segments = n, "recovering data");

    let mut process = data.segments()[seg_i].from() + rel as u64;
    let mut last_index = -1i64;
    let mut last_term = -1i64;
    let mut prev_term = -1i64;
    let mut last_pos = 0u64;
    let mut need_write_index = false;
    let mut matched_in_walk = false;
    let mut rebuilt_from: Option<i64> = None;
    let mut rebuilt_unit_missing = false;
    // Every step moves forward by at least 45 bytes or a segment, so this bounds the loop.
    let max_steps = (n as u64).saturating_mul(segment_size / (HEADER_SIZE as u64 + 1) + 2);
    for _ in 0..max_steps {
        let segment = &data.segments()[seg_i];
        let abs = segment.from() + rel as u64;
        let Some(magic) = segment.raw(rel, 4).and_then(|b| super::be_i32(b, 0)) else { break };
        if magic == BLANK_MAGIC {
            process = segment.from() + segment.size() as u64;
            seg_i += 1;
            if seg_i >= n {
                break;
            }
            rel = 0;
            process = data.segments()[seg_i].from();
            continue;
        }
        let Some(size) = segment.raw(rel + 4, 4).and_then(|b| super::be_i32(b, 0)) else { break };
        if size == 0 {
            break;
        }
        let Some(h) = segment.raw(rel, BODY_OFFSET).and_then(Header::decode) else { break };
        let good = h.pos == abs as i64
            && h.body_size >= 0
            && i64::from(h.body_size) + BODY_OFFSET as i64 == i64::from(size)
            && size > HEADER_SIZE as i32
            && rel + size as usize <= segment.size()
            && magic == CURRENT_MAGIC
            && (last_index == -1 || h.index == last_index + 1)
            && h.term >= last_term;
        if !good {
            info!(offset = abs, "recovery stops at an invalid entry");
            break;
        }
        if !need_write_index {
            if unit_matches(index, &h, abs) {
                matched_in_walk = true;
            } else {
                warn!(index = h.index, offset = abs, "data and index differ; rebuilding the index from here");
                let Some(off) = unit_offset(h.index) else { break };
                rebuilt_unit_missing = index.read(off, INDEX_UNIT_SIZE).is_none_or(|unit| unit.iter().all(|b| *b == 0));
                if !cut_index_at(index, off) {
                    break;
                }
                need_write_index = true;
                rebuilt_from = Some(h.index);
            }
        }
        if need_write_index {
            let unit = IndexUnit { magic, pos: abs as i64, size, index: h.index, term: h.term };
            if !append_unit(index, &unit) {
                break;
            }
        }
        prev_term = last_term;
        last_index = h.index;
        last_term = h.term;
        last_pos = abs;
        rel += size as usize;
        process += size as u64;
    }

    if rebuilt_from == Some(last_index) && rebuilt_unit_missing && matched_in_walk {
        info!(index = last_index, offset = last_pos, "dropping the last entry: written without its index unit");
        process = last_pos;
        last_index -= 1;
        last_term = prev_term;
    }
    info!(end_index = last_index, process_offset = process, last_segment = last_from, "recovered data");
    if last_from > process && last_from - process > segment_size {
        return Err(StoreError::RecoveryStoppedEarly { dir: data.dir().to_owned(), process_offset: process, last_segment: last_from });
    }

    let mut begin_index = -1;
    if last_index != -1 {
        if read_entry(data, index, last_index).is_none() {
            return Err(StoreError::Corrupt { path: data.dir().to_owned(), detail: format!("cannot read back entry {last_index} after recovery") });
        }
        let first = &data.segments()[0];
        let Some(h) = first_start.and_then(|pos| header_at(first, pos)) else {
            return Err(StoreError::Corrupt { path: first.path().to_owned(), detail: "the first data segment holds no entry at its start".into() });
        };
        data.set_first_start(first_start.unwrap_or(0));
        begin_index = h.index;
        if let Some(off) = unit_offset(begin_index) {
            index.reset_start(off);
        }
    }
    data.truncate(process);
    index.truncate(unit_offset(last_index + 1).unwrap_or(0));
    data.check_adjacent().map_err(|path| StoreError::NotAdjacent { path })?;
    index.check_adjacent().map_err(|path| StoreError::NotAdjacent { path })?;
    Ok(Recovered { begin_index, end_index: last_index, end_term: last_term })
}
