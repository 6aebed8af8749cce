//! A DLedger log entry (0.3.1.2 `DLedgerEntry`) and its 48-byte header, as Java writes it into the
//! data segments (big-endian):
//!
//! | off | size | field |
//! |---|---|---|
//! | 0 | 4 | magic (1) |
//! | 4 | 4 | size: 48 + body length |
//! | 8 | 8 | index |
//! | 16 | 8 | term |
//! | 24 | 8 | pos: absolute data offset of the entry's first byte |
//! | 32 | 4 | channel (0) |
//! | 36 | 4 | chain CRC (0: Java never computes it) |
//! | 40 | 4 | body CRC (0: Java never computes it) |
//! | 44 | 4 | body size |
//! | 48 | n | body |

use bytes::{Buf, BufMut, Bytes, BytesMut};

pub const CURRENT_MAGIC: i32 = 1;
pub const POS_OFFSET: usize = 24;
pub const HEADER_SIZE: usize = 44;
pub const BODY_OFFSET: usize = 48;
/// A data segment's tail that cannot hold the next entry (+8) is filled with a blank: i32 -1,
/// i32 remaining, zeros to the segment's end.
pub const BLANK_MAGIC: i32 = -1;
pub const MIN_BLANK_LEN: usize = 8;

#[derive(Clone, Debug, Default)]
pub struct Entry {
    pub magic: i32,
    pub index: i64,
    pub term: i64,
    pub pos: i64,
    pub channel: i32,
    pub chain_crc: i32,
    pub body_crc: i32,
    pub body: Bytes,
}

/// Java's `DLedgerEntry.equals`: every field but the CRCs (the size follows from the body).
impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.magic == other.magic
            && self.index == other.index
            && self.term == other.term
            && self.pos == other.pos
            && self.channel == other.channel
            && self.body == other.body
    }
}

impl Eq for Entry {}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("entry of {available} bytes is shorter than its {needed}-byte header")]
    Truncated { needed: usize, available: usize },
    #[error("entry size {size} does not match its body size {body_size} + 48")]
    SizeMismatch { size: i32, body_size: i32 },
}

impl Entry {
    /// A new entry's bytes: 48 + body.
    pub fn size(&self) -> usize {
        BODY_OFFSET + self.body.len()
    }

    /// The entry as Java writes it (`DLedgerEntryCoder.encode`).
    pub fn encode(&self) -> BytesMut {
        let mut out = BytesMut::with_capacity(self.size());
        out.put_i32(self.magic);
        out.put_i32(self.size() as i32);
        out.put_i64(self.index);
        out.put_i64(self.term);
        out.put_i64(self.pos);
        out.put_i32(self.channel);
        out.put_i32(self.chain_crc);
        out.put_i32(self.body_crc);
        out.put_i32(self.body.len() as i32);
        out.put_slice(&self.body);
        out
    }

    /// Reads an entry from its bytes (at least its header; the body must be whole).
    pub fn decode(mut bytes: &[u8]) -> Result<Entry, EntryError> {
        if bytes.len() < BODY_OFFSET {
            return Err(EntryError::Truncated { needed: BODY_OFFSET, available: bytes.len() });
        }
        let magic = bytes.get_i32();
        let size = bytes.get_i32();
        let index = bytes.get_i64();
        let term = bytes.get_i64();
        let pos = bytes.get_i64();
        let channel = bytes.get_i32();
        let chain_crc = bytes.get_i32();
        let body_crc = bytes.get_i32();
        let body_size = bytes.get_i32();
        if body_size < 0 || i64::from(size) != BODY_OFFSET as i64 + i64::from(body_size) {
            return Err(EntryError::SizeMismatch { size, body_size });
        }
        let body_len = body_size as usize;
        if bytes.len() < body_len {
            return Err(EntryError::Truncated { needed: BODY_OFFSET + body_len, available: BODY_OFFSET + bytes.len() });
        }
        Ok(Entry { magic, index, term, pos, channel, chain_crc, body_crc, body: Bytes::copy_from_slice(&bytes[..body_len]) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_round_trips_and_equality_ignores_the_crcs() {
        let e = Entry { magic: CURRENT_MAGIC, index: 7, term: 3, pos: 4096, channel: 0, chain_crc: 0, body_crc: 0, body: Bytes::from_static(b"hello") };
        let bytes = e.encode();
        assert_eq!(bytes.len(), 53);
        assert_eq!(&bytes[4..8], &53i32.to_be_bytes());
        assert_eq!(&bytes[POS_OFFSET..POS_OFFSET + 8], &4096i64.to_be_bytes());
        let back = Entry::decode(&bytes).unwrap();
        assert_eq!(back, e);
        assert_eq!(Entry { body_crc: 99, ..e.clone() }, e);
        assert_ne!(Entry { channel: 1, ..e.clone() }, e);
        assert!(Entry::decode(&bytes[..40]).is_err());
        assert!(Entry::decode(&bytes[..50]).is_err());
    }
}
