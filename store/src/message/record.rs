//! The commit-log record ("stored message"), magic v1 or v2, IPv4 or IPv6 hosts:
//!
//! ```text
//! TOTALSIZE i32 | MAGIC i32 | BODYCRC i32 | QUEUEID i32 | FLAG i32 | QUEUEOFFSET i64 |
//! PHYSICALOFFSET i64 | SYSFLAG i32 | BORNTIMESTAMP i64 | BORNHOST 8/20 | STORETIMESTAMP i64 |
//! STOREHOST 8/20 | RECONSUMETIMES i32 | PREPARED_TX_OFFSET i64 | BODYLEN i32 + body |
//! TOPICLEN i8 (v1) / i16 (v2) + topic | PROPLEN i16 + properties
//! ```
//!
//! Writing is split as Java 5.x splits it: [`encode_record`] builds the whole record outside the
//! append lock; inside it, [`StampedFields::stamp`] fills the three fields only the store knows.

use std::net::{IpAddr, SocketAddr};

use bytes::Bytes;

pub const MAGIC_V1: i32 = 0xDAA3_20A7_u32 as i32;
pub const MAGIC_V2: i32 = 0xDAA3_20AB_u32 as i32;
/// The magic of the marker that ends a full commit-log file.
pub const MAGIC_BLANK: i32 = 0xCBD4_3194_u32 as i32;

pub const SYSFLAG_COMPRESSED: i32 = 0x1;
pub const SYSFLAG_BORN_HOST_V6: i32 = 0x10;
pub const SYSFLAG_STORE_HOST_V6: i32 = 0x20;
pub const SYSFLAG_TRANSACTION_MASK: i32 = 0xC;
pub const TRANSACTION_NOT_TYPE: i32 = 0x0;
pub const TRANSACTION_PREPARED_TYPE: i32 = 0x4;
pub const TRANSACTION_COMMIT_TYPE: i32 = 0x8;
pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0xC;

/// Properties are prefixed by an i16 length.
pub const MAX_PROPERTIES_BYTES: usize = i16::MAX as usize;
/// A v1 topic length is a signed byte.
pub const MAX_V1_TOPIC_BYTES: usize = i8::MAX as usize;

const QUEUE_OFFSET_POS: usize = 20;
const PHYSICAL_OFFSET_POS: usize = 28;
const BORN_HOST_POS: usize = 48;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("properties of {bytes} bytes exceed the limit of {max} bytes", max = MAX_PROPERTIES_BYTES)]
    PropertiesTooLong { bytes: usize },
    #[error("topic of {bytes} bytes exceeds the limit of {max} bytes", max = i16::MAX)]
    TopicTooLong { bytes: usize },
    #[error("record truncated: needs {need} bytes, {have} available")]
    Truncated { need: usize, have: usize },
    #[error("unknown magic code {magic:#x}")]
    BadMagic { magic: i32 },
    #[error("record size field {declared} does not match the computed size {computed}")]
    SizeMismatch { declared: i32, computed: usize },
    #[error("body CRC {stored} does not match the computed {computed}")]
    CrcMismatch { stored: i32, computed: i32 },
    #[error("negative length in field {field}")]
    NegativeLength { field: &'static str },
    #[error("text field {field} is not UTF-8")]
    NotUtf8 { field: &'static str },
}

/// What the broker hands the store to append (Java `MessageExtBrokerInner`, less what the store
/// assigns).
#[derive(Clone, Debug, PartialEq)]
pub struct MessageToStore {
    pub topic: String,
    pub queue_id: i32,
    pub flag: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body: Bytes,
    pub properties: String,
}

/// The fields the store fills in under the append lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StampedFields {
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub store_timestamp: i64,
}

fn host_len(addr: &SocketAddr) -> usize {
    match addr.ip() {
        IpAddr::V4(_) => 8,
        IpAddr::V6(_) => 20,
    }
}

fn put_host(out: &mut Vec<u8>, addr: &SocketAddr) {
    match addr.ip() {
        IpAddr::V4(ip) => out.extend_from_slice(&ip.octets()),
        IpAddr::V6(ip) => out.extend_from_slice(&ip.octets()),
    }
    out.extend_from_slice(&(addr.port() as i32).to_be_bytes());
}

/// Java `UtilAll.crc32`: CRC32 masked to a non-negative int.
pub fn body_crc(body: &[u8]) -> i32 {
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}

/// An encoded record waiting for its stamped fields.
#[derive(Clone, Debug)]
pub struct EncodedRecord {
    pub bytes: Vec<u8>,
    store_timestamp_pos: usize,
}

impl EncodedRecord {
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Writes the stamped fields into the record.
    pub fn stamp(&mut self, fields: StampedFields) {
        fields.stamp(&mut self.bytes, self.store_timestamp_pos);
    }
}

impl StampedFields {
    pub fn stamp(&self, record: &mut [u8], store_timestamp_pos: usize) {
        record[QUEUE_OFFSET_POS..QUEUE_OFFSET_POS + 8].copy_from_slice(&self.queue_offset.to_be_bytes());
        record[PHYSICAL_OFFSET_POS..PHYSICAL_OFFSET_POS + 8].copy_from_slice(&self.physical_offset.to_be_bytes());
        record[store_timestamp_pos..store_timestamp_pos + 8].copy_from_slice(&self.store_timestamp.to_be_bytes());
    }
}

/// Writes the stamped fields into an encoded record in place (the DLedger append hook, which
/// sees the record only as bytes). False when `record` is too short to be one.
pub fn restamp(record: &mut [u8], fields: StampedFields) -> bool {
    let Some(flag) = record.get(36..40) else { return false };
    let sys_flag = i32::from_be_bytes([flag[0], flag[1], flag[2], flag[3]]);
    let store_timestamp_pos = 48 + if sys_flag & SYSFLAG_BORN_HOST_V6 != 0 { 20 } else { 8 };
    if record.len() < store_timestamp_pos + 8 {
        return false;
    }
    fields.stamp(record, store_timestamp_pos);
    true
}

/// Builds the record with zeros where the stamped fields go. Sets the IPv6 host bits of the
/// sys flag from the addresses, and picks magic v2 only for topics longer than a v1 length byte.
pub fn encode_record(msg: &MessageToStore) -> Result<EncodedRecord, RecordError> {
    let topic = msg.topic.as_bytes();
    let props = msg.properties.as_bytes();
    if props.len() > MAX_PROPERTIES_BYTES {
        return Err(RecordError::PropertiesTooLong { bytes: props.len() });
    }
    if topic.len() > i16::MAX as usize {
        return Err(RecordError::TopicTooLong { bytes: topic.len() });
    }
    let v2 = topic.len() > MAX_V1_TOPIC_BYTES;
    let mut sys_flag = msg.sys_flag & !(SYSFLAG_BORN_HOST_V6 | SYSFLAG_STORE_HOST_V6);
    if msg.born_host.is_ipv6() {
        sys_flag |= SYSFLAG_BORN_HOST_V6;
    }
    if msg.store_host.is_ipv6() {
        sys_flag |= SYSFLAG_STORE_HOST_V6;
    }
    let size = 4
        + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + host_len(&msg.born_host)
        + 8
        + host_len(&msg.store_host)
        + 4
        + 8
        + 4
        + msg.body.len()
        + if v2 { 2 } else { 1 }
        + topic.len()
        + 2
        + props.len();
    let mut b = Vec::with_capacity(size);
    b.extend_from_slice(&(size as i32).to_be_bytes());
    b.extend_from_slice(&(if v2 { MAGIC_V2 } else { MAGIC_V1 }).to_be_bytes());
    b.extend_from_slice(&body_crc(&msg.body).to_be_bytes());
    b.extend_from_slice(&msg.queue_id.to_be_bytes());
    b.extend_from_slice(&msg.flag.to_be_bytes());
    b.extend_from_slice(&0i64.to_be_bytes()); // queue offset, stamped later
    b.extend_from_slice(&0i64.to_be_bytes()); // physical offset, stamped later
    b.extend_from_slice(&sys_flag.to_be_bytes());
    b.extend_from_slice(&msg.born_timestamp.to_be_bytes());
    put_host(&mut b, &msg.born_host);
    let store_timestamp_pos = b.len();
    b.extend_from_slice(&0i64.to_be_bytes()); // store timestamp, stamped later
    put_host(&mut b, &msg.store_host);
    b.extend_from_slice(&msg.reconsume_times.to_be_bytes());
    b.extend_from_slice(&msg.prepared_transaction_offset.to_be_bytes());
    b.extend_from_slice(&(msg.body.len() as i32).to_be_bytes());
    b.extend_from_slice(&msg.body);
    if v2 {
        b.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    } else {
        b.push(topic.len() as u8);
    }
    b.extend_from_slice(topic);
    b.extend_from_slice(&(props.len() as i16).to_be_bytes());
    b.extend_from_slice(props);
    debug_assert_eq!(b.len(), size);
    Ok(EncodedRecord { bytes: b, store_timestamp_pos })
}

/// A record read back, borrowing its variable parts from the buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodedRecord<'a> {
    pub store_size: i32,
    pub magic: i32,
    pub body_crc: i32,
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_timestamp: i64,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body: &'a [u8],
    pub topic: &'a str,
    pub properties: &'a str,
}

impl DecodedRecord<'_> {
    /// The record as a message to store again (retries, delayed delivery, transactions), with
    /// every field as stored; callers change what differs.
    pub fn to_message(&self) -> MessageToStore {
        MessageToStore {
            topic: self.topic.to_owned(),
            queue_id: self.queue_id,
            flag: self.flag,
            sys_flag: self.sys_flag,
            born_timestamp: self.born_timestamp,
            born_host: self.born_host,
            store_host: self.store_host,
            reconsume_times: self.reconsume_times,
            prepared_transaction_offset: self.prepared_transaction_offset,
            body: Bytes::copy_from_slice(self.body),
            properties: self.properties.to_owned(),
        }
    }

    pub fn transaction_type(&self) -> i32 {
        self.sys_flag & SYSFLAG_TRANSACTION_MASK
    }

    pub fn property(&self, name: &str) -> Option<&str> {
        super::properties::get(self.properties, name)
    }
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        let end = self.pos.checked_add(n).filter(|end| *end <= self.buf.len());
        let end = end.ok_or(RecordError::Truncated { need: self.pos.saturating_add(n), have: self.buf.len() })?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn i16(&mut self) -> Result<i16, RecordError> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().unwrap_or_default()))
    }
    fn i32(&mut self) -> Result<i32, RecordError> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().unwrap_or_default()))
    }
    fn i64(&mut self) -> Result<i64, RecordError> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().unwrap_or_default()))
    }
    fn host(&mut self, v6: bool) -> Result<SocketAddr, RecordError> {
        let ip: IpAddr = if v6 {
            let octets: [u8; 16] = self.take(16)?.try_into().unwrap_or_default();
            octets.into()
        } else {
            let octets: [u8; 4] = self.take(4)?.try_into().unwrap_or_default();
            octets.into()
        };
        let port = self.i32()?;
        Ok(SocketAddr::new(ip, port as u16))
    }
    fn len(&mut self, raw: i64, field: &'static str) -> Result<usize, RecordError> {
        usize::try_from(raw).map_err(|_| RecordError::NegativeLength { field })
    }
    fn text(&mut self, n: usize, field: &'static str) -> Result<&'a str, RecordError> {
        std::str::from_utf8(self.take(n)?).map_err(|_| RecordError::NotUtf8 { field })
    }
}

/// What a buffer position holds, as recovery and readers see it.
#[derive(Debug, PartialEq)]
pub enum RecordAt<'a> {
    Record(DecodedRecord<'a>),
    /// The end-of-file marker: the rest of this file holds no records.
    Blank,
}

/// Decodes the record at the start of `buf` (which may extend past it). With `check_crc` the
/// body CRC is verified, as Java's recovery does by default.
pub fn decode_record(buf: &[u8], check_crc: bool) -> Result<RecordAt<'_>, RecordError> {
    let mut c = Cursor { buf, pos: 0 };
    let store_size = c.i32()?;
    let magic = c.i32()?;
    if magic == MAGIC_BLANK {
        return Ok(RecordAt::Blank);
    }
    if magic != MAGIC_V1 && magic != MAGIC_V2 {
        return Err(RecordError::BadMagic { magic });
    }
    let declared = usize::try_from(store_size).map_err(|_| RecordError::NegativeLength { field: "TOTALSIZE" })?;
    if declared > buf.len() {
        return Err(RecordError::Truncated { need: declared, have: buf.len() });
    }
    let body_crc = c.i32()?;
    let queue_id = c.i32()?;
    let flag = c.i32()?;
    let queue_offset = c.i64()?;
    let physical_offset = c.i64()?;
    let sys_flag = c.i32()?;
    let born_timestamp = c.i64()?;
    debug_assert_eq!(c.pos, BORN_HOST_POS);
    let born_host = c.host(sys_flag & SYSFLAG_BORN_HOST_V6 != 0)?;
    let store_timestamp = c.i64()?;
    let store_host = c.host(sys_flag & SYSFLAG_STORE_HOST_V6 != 0)?;
    let reconsume_times = c.i32()?;
    let prepared_transaction_offset = c.i64()?;
    let body_len = c.i32()?;
    let body_len = c.len(body_len as i64, "BODYLEN")?;
    let body = c.take(body_len)?;
    let topic_len = if magic == MAGIC_V2 { c.i16()? as i64 } else { c.take(1)?[0] as i8 as i64 };
    let topic_len = c.len(topic_len, "TOPICLEN")?;
    let topic = c.text(topic_len, "topic")?;
    let props_len = c.i16()?;
    let props_len = if props_len > 0 { props_len as usize } else { 0 };
    let properties = c.text(props_len, "properties")?;
    if c.pos != declared {
        return Err(RecordError::SizeMismatch { declared: store_size, computed: c.pos });
    }
    if check_crc {
        let computed = self::body_crc(body);
        if computed != body_crc {
            return Err(RecordError::CrcMismatch { stored: body_crc, computed });
        }
    }
    Ok(RecordAt::Record(DecodedRecord {
        store_size,
        magic,
        body_crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp,
        born_host,
        store_timestamp,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        body,
        topic,
        properties,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(topic: &str, born: &str, store: &str) -> MessageToStore {
        MessageToStore {
            topic: topic.into(),
            queue_id: 3,
            flag: 7,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            born_host: born.parse().unwrap(),
            store_host: store.parse().unwrap(),
            reconsume_times: 1,
            prepared_transaction_offset: 0,
            body: Bytes::from_static(b"hello"),
            properties: "TAGS\u{1}TagA\u{2}KEYS\u{1}k1 k2\u{2}".into(),
        }
    }

    fn stamped(msg: &MessageToStore) -> Vec<u8> {
        let mut rec = encode_record(msg).unwrap();
        rec.stamp(StampedFields { queue_offset: 17, physical_offset: 4096, store_timestamp: 1_700_000_000_123 });
        rec.bytes
    }

    #[test]
    fn v1_ipv4_record_has_the_reference_size_and_field_positions() {
        let msg = message("TopicTest", "10.0.0.2:50000", "10.0.0.1:10911");
        let bytes = stamped(&msg);
        assert_eq!(bytes.len(), 91 + 5 + 9 + msg.properties.len());
        assert_eq!(&bytes[4..8], &MAGIC_V1.to_be_bytes());
        assert_eq!(&bytes[20..28], &17i64.to_be_bytes());
        assert_eq!(&bytes[28..36], &4096i64.to_be_bytes());
        assert_eq!(&bytes[56..64], &1_700_000_000_123i64.to_be_bytes());
    }

    #[test]
    fn every_host_and_magic_variant_round_trips() {
        let long_topic = "t".repeat(200);
        for (topic, born, store, expected_flag) in [
            ("T", "10.0.0.2:1", "10.0.0.1:10911", 0),
            ("T", "[::1]:1", "10.0.0.1:10911", SYSFLAG_BORN_HOST_V6),
            ("T", "10.0.0.2:1", "[fe80::1]:10911", SYSFLAG_STORE_HOST_V6),
            (long_topic.as_str(), "[::1]:1", "[::2]:2", SYSFLAG_BORN_HOST_V6 | SYSFLAG_STORE_HOST_V6),
        ] {
            let msg = message(topic, born, store);
            let bytes = stamped(&msg);
            let RecordAt::Record(r) = decode_record(&bytes, true).unwrap() else { panic!("blank") };
            assert_eq!((r.topic, r.sys_flag, r.queue_offset, r.physical_offset), (topic, expected_flag, 17, 4096));
            assert_eq!((r.born_host, r.store_host), (msg.born_host, msg.store_host));
            assert_eq!((r.body, r.property("KEYS")), (&b"hello"[..], Some("k1 k2")));
            assert_eq!(r.magic, if topic.len() > 127 { MAGIC_V2 } else { MAGIC_V1 });
            assert_eq!(r.store_size as usize, bytes.len());
        }
    }

    #[test]
    fn corrupt_records_are_errors_not_panics() {
        let bytes = stamped(&message("T", "10.0.0.2:1", "10.0.0.1:10911"));
        for cut in 0..bytes.len() {
            assert!(decode_record(&bytes[..cut], true).is_err(), "cut at {cut}");
        }
        let mut bad_crc = bytes.clone();
        bad_crc[88] ^= 1; // first body byte of a v1 record with IPv4 hosts
        assert!(matches!(decode_record(&bad_crc, true), Err(RecordError::CrcMismatch { .. })));
        assert!(decode_record(&bad_crc, false).is_ok());
        let mut blank = vec![0u8; 8];
        blank[4..8].copy_from_slice(&MAGIC_BLANK.to_be_bytes());
        assert_eq!(decode_record(&blank, true), Ok(RecordAt::Blank));
    }

    #[test]
    fn oversize_properties_are_refused() {
        let mut msg = message("T", "10.0.0.2:1", "10.0.0.1:10911");
        msg.properties = "x".repeat(MAX_PROPERTIES_BYTES + 1);
        assert_eq!(encode_record(&msg).unwrap_err(), RecordError::PropertiesTooLong { bytes: MAX_PROPERTIES_BYTES + 1 });
    }
}
