//! The HA wire format (Java `HAConnection` / `HAClient`), big-endian, no handshake:
//! - slave -> master: a stream of 8-byte reports, each the slave's max physical offset;
//! - master -> slave: frames of `i64 offset | i32 size | size raw commit-log bytes`; size 0 is a
//!   heartbeat.

use bytes::{Buf, BufMut, BytesMut};

pub const REPORT_BYTES: usize = 8;
pub const FRAME_HEADER_BYTES: usize = 12;

/// The largest frame body a slave accepts. A master sends at most `haTransferBatchSize` (32 KiB
/// by default); Java's slave reads into a 4 MiB buffer, so a larger batch cannot work with it.
pub const MAX_FRAME_BODY_BYTES: usize = 4 * 1024 * 1024;

pub fn encode_report(offset: i64) -> [u8; REPORT_BYTES] {
    offset.to_be_bytes()
}

pub fn encode_frame_header(offset: i64, size: usize) -> [u8; FRAME_HEADER_BYTES] {
    let mut header = [0u8; FRAME_HEADER_BYTES];
    header[..8].copy_from_slice(&offset.to_be_bytes());
    header[8..].copy_from_slice(&(size as i32).to_be_bytes());
    header
}

/// One master -> slave frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub offset: i64,
    pub body: bytes::Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame body size {0} is negative")]
    NegativeSize(i32),
    #[error("frame body of {size} bytes exceeds the {max} bytes a slave accepts")]
    TooLarge { size: usize, max: usize },
}

/// Splits the master's stream into frames, across reads, before allocating a body.
#[derive(Default)]
pub struct FrameDecoder;

impl tokio_util::codec::Decoder for FrameDecoder {
    type Item = Frame;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, std::io::Error> {
        if src.len() < FRAME_HEADER_BYTES {
            return Ok(None);
        }
        let offset = i64::from_be_bytes(src[..8].try_into().unwrap_or_default());
        let size = i32::from_be_bytes(src[8..12].try_into().unwrap_or_default());
        let size = usize::try_from(size).map_err(|_| invalid(FrameError::NegativeSize(size)))?;
        if size > MAX_FRAME_BODY_BYTES {
            return Err(invalid(FrameError::TooLarge { size, max: MAX_FRAME_BODY_BYTES }));
        }
        if src.len() < FRAME_HEADER_BYTES + size {
            src.reserve(FRAME_HEADER_BYTES + size - src.len());
            return Ok(None);
        }
        src.advance(FRAME_HEADER_BYTES);
        Ok(Some(Frame { offset, body: src.split_to(size).freeze() }))
    }
}

impl tokio_util::codec::Encoder<Frame> for FrameDecoder {
    type Error = std::io::Error;

    fn encode(&mut self, frame: Frame, dst: &mut BytesMut) -> Result<(), std::io::Error> {
        dst.put_slice(&encode_frame_header(frame.offset, frame.body.len()));
        dst.put_slice(&frame.body);
        Ok(())
    }
}

/// Reads the slave's reports: whole 8-byte values, as Java's master aligns them from the start
/// of the connection.
#[derive(Default)]
pub struct ReportDecoder;

impl tokio_util::codec::Decoder for ReportDecoder {
    type Item = i64;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<i64>, std::io::Error> {
        if src.len() < REPORT_BYTES {
            return Ok(None);
        }
        Ok(Some(src.get_i64()))
    }
}

fn invalid(e: FrameError) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e)
}

#[cfg(test)]
mod tests {
    use tokio_util::codec::{Decoder, Encoder};

    use super::*;

    #[test]
    fn frames_split_across_reads_and_heartbeats_have_no_body() {
        let mut stream = BytesMut::new();
        FrameDecoder.encode(Frame { offset: 1 << 30, body: bytes::Bytes::from_static(b"abc") }, &mut stream).unwrap();
        stream.put_slice(&encode_frame_header(7, 0));
        let mut d = FrameDecoder;
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for byte in stream {
            buf.put_u8(byte);
            while let Some(frame) = d.decode(&mut buf).unwrap() {
                got.push(frame);
            }
        }
        assert_eq!(got, vec![Frame { offset: 1 << 30, body: bytes::Bytes::from_static(b"abc") }, Frame { offset: 7, body: bytes::Bytes::new() }]);
    }

    #[test]
    fn a_negative_or_huge_size_is_refused_before_anything_is_allocated() {
        for size in [-1i32, (MAX_FRAME_BODY_BYTES + 1) as i32] {
            let mut buf = BytesMut::from(&encode_frame_header(0, 0)[..]);
            buf[8..12].copy_from_slice(&size.to_be_bytes());
            assert!(FrameDecoder.decode(&mut buf).is_err());
        }
    }

    #[test]
    fn reports_are_whole_eight_byte_values() {
        let mut buf = BytesMut::from(&encode_report(42)[..]);
        buf.put_slice(&encode_report(43)[..5]);
        let mut d = ReportDecoder;
        assert_eq!(d.decode(&mut buf).unwrap(), Some(42));
        assert_eq!(d.decode(&mut buf).unwrap(), None);
    }
}
