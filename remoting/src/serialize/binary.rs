//! The ROCKETMQ binary header: code i16, language u8, version i16, opaque i32, flag i32,
//! remark (i32 length + bytes), ext block (i32 length + entries of i16 key length, key, i32 value
//! length, value). All big-endian. A zero length means absent (null) in Java.

use bytes::{BufMut, Bytes, BytesMut};

use super::HeaderDecodeError;
use crate::command::{ExtFields, LanguageCode, RemotingCommand};
use crate::ext::MAX_BLOCK_FIELDS;

/// Whether `cmd` fits the binary layout: ext keys carry an i16 length. Java truncates the length
/// silently and sends a corrupt frame; we refuse to encode instead.
pub fn longest_unencodable_key(cmd: &RemotingCommand) -> Option<usize> {
    cmd.ext_fields.iter().flatten().map(|(k, _)| k.len()).find(|len| *len > i16::MAX as usize)
}

pub fn encode(cmd: &RemotingCommand, out: &mut BytesMut) {
    // Java writes code and version as shorts: larger values are truncated, as on the Java side.
    out.put_i16(cmd.code as i16);
    out.put_u8(cmd.language.0);
    out.put_i16(cmd.version as i16);
    out.put_i32(cmd.opaque);
    out.put_i32(cmd.flag);
    match cmd.remark.as_deref() {
        Some(remark) if !remark.is_empty() => {
            out.put_i32(remark.len() as i32);
            out.put_slice(remark.as_bytes());
        }
        _ => out.put_i32(0),
    }
    let ext_len: usize = cmd.ext_fields.iter().flatten().map(|(k, v)| 2 + k.len() + 4 + v.len()).sum();
    out.put_i32(ext_len as i32);
    for (k, v) in cmd.ext_fields.iter().flatten() {
        out.put_i16(k.len() as i16);
        out.put_slice(k.as_bytes());
        out.put_i32(v.len() as i32);
        out.put_slice(v.as_bytes());
    }
}

/// A bounds-checked reader over the header region.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], HeaderDecodeError> {
        if self.buf.len() < n {
            return Err(HeaderDecodeError::Truncated { what, need: n, left: self.buf.len() });
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], HeaderDecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    /// A length field of 2 (`i16`) or 4 (`i32`) bytes; negative lengths are errors.
    fn length<const N: usize>(&mut self, what: &'static str) -> Result<usize, HeaderDecodeError> {
        let raw = self.array::<N>(what)?;
        let len = match N {
            2 => i16::from_be_bytes([raw[0], raw[1]]) as i64,
            _ => i32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]) as i64,
        };
        usize::try_from(len).map_err(|_| HeaderDecodeError::NegativeLength { what, len })
    }

    /// Text as Java reads it (`new String(bytes, UTF_8)`): invalid sequences become U+FFFD, so a
    /// bad byte in a header value gets an answer instead of closing the connection.
    fn text(&mut self, n: usize, what: &'static str) -> Result<String, HeaderDecodeError> {
        let bytes = self.take(n, what)?;
        // Valid text (every real client's) is checked by the fast validator and copied once;
        // the lossy walk, chunk by chunk, only for the rare bad byte.
        Ok(match std::str::from_utf8(bytes) {
            Ok(text) => text.to_owned(),
            Err(_) => String::from_utf8_lossy(bytes).into_owned(),
        })
    }
}

/// How many entries the ext block holds, by their lengths alone (a malformed block counts what
/// it can; the decode then reports it). At most one per 6 bytes, so the count is bounded by the
/// block, which the frame limit bounds.
fn count_entries(mut block: &[u8]) -> usize {
    let mut n = 0;
    while block.len() >= 2 {
        let key_len = i16::from_be_bytes([block[0], block[1]]).max(0) as usize;
        let Some(rest) = block.get(2 + key_len..) else { break };
        let Some(len) = rest.get(..4) else { break };
        let value_len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]).max(0) as usize;
        n += 1;
        block = rest.get(4 + value_len..).unwrap_or_default();
    }
    n
}

/// The ext block's fields: kept as the block itself (copied out of the frame, so a request held
/// long, a parked pull, holds no read buffer) when it reads as one, else a map.
fn ext_fields(block: &[u8]) -> Result<ExtFields, HeaderDecodeError> {
    let entries = count_entries(block);
    if entries <= MAX_BLOCK_FIELDS {
        let mut spans = Vec::with_capacity(entries);
        let mut r = Reader { buf: block };
        while !r.buf.is_empty() {
            let key_len = r.length::<2>("ext key length")?;
            let key_start = block.len() - r.buf.len();
            r.take(key_len, "ext key")?;
            let value_len = r.length::<4>("ext value length")?;
            let value_start = block.len() - r.buf.len();
            r.take(value_len, "ext value")?;
            // The block is at most a frame, 16 MiB by default and below 4 GiB by the length word.
            spans.push([key_start as u32, (key_start + key_len) as u32, value_start as u32, (value_start + value_len) as u32]);
        }
        if let Some(ext) = ExtFields::from_block(Bytes::copy_from_slice(block), spans) {
            return Ok(ext);
        }
    }
    // Sized once for its entries: growing it by doubling rehashed it three or four times.
    let mut ext = ExtFields::with_capacity(entries);
    let mut r = Reader { buf: block };
    while !r.buf.is_empty() {
        let key_len = r.length::<2>("ext key length")?;
        let key = r.text(key_len, "ext key")?;
        let value_len = r.length::<4>("ext value length")?;
        let value = r.text(value_len, "ext value")?;
        ext.insert(key, value);
    }
    Ok(ext)
}

pub fn decode(header: &[u8]) -> Result<RemotingCommand, HeaderDecodeError> {
    let mut r = Reader { buf: header };
    let code = i16::from_be_bytes(r.array("code")?) as i32;
    let language = LanguageCode(r.array::<1>("language")?[0]);
    let version = i16::from_be_bytes(r.array("version")?) as i32;
    let opaque = i32::from_be_bytes(r.array("opaque")?);
    let flag = i32::from_be_bytes(r.array("flag")?);

    let remark_len = r.length::<4>("remark length")?;
    let remark = if remark_len > 0 { Some(r.text(remark_len, "remark")?) } else { None };

    let ext_len = r.length::<4>("ext length")?;
    let ext_fields = if ext_len > 0 { Some(ext_fields(r.take(ext_len, "ext fields")?)?) } else { None };

    Ok(RemotingCommand { code, language, version, opaque, flag, remark, ext_fields, body: None, body_tail: Vec::new(), serialize_type: Default::default() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_utf8_in_a_value_reads_as_replacement_characters() {
        let cmd = RemotingCommand::request(crate::RequestCode(9001)).with_ext("k", "aXb").with_remark("rYr");
        let mut out = BytesMut::new();
        encode(&cmd, &mut out);
        let mut bytes = out.to_vec();
        for b in bytes.iter_mut().filter(|b| **b == b'X' || **b == b'Y') {
            *b = 0xff;
        }
        let decoded = decode(&bytes).unwrap();
        assert_eq!(decoded.ext("k"), Some("a\u{FFFD}b"));
        assert_eq!(decoded.remark.as_deref(), Some("r\u{FFFD}r"));
    }
}
