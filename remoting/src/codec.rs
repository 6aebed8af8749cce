//! The frame codec (Java's NettyDecoder/NettyEncoder): `i32 frameLength | u8 serializeType |
//! u24 headerLength | header | body`, where frameLength counts everything after itself.
//!
//! Decoding follows the tokio-util contract: `Ok(None)` means "wait for more bytes"; `Err` means the
//! stream is corrupt and the connection must close (Java closes it too; no response is sent).
//! The length is checked against the limit before a single byte is reserved.

use bytes::{Buf, BufMut, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use crate::command::{RemotingCommand, SerializeType};
use crate::serialize::{self, HeaderDecodeError, HeaderEncodeError};

/// Java's default `com.rocketmq.remoting.frameMaxLength`: the largest frame, length prefix included.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

const MAX_HEADER_BYTES: usize = 0x00FF_FFFF;

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("frame of {frame_bytes} bytes exceeds the limit of {max_bytes} bytes")]
    FrameTooLarge { frame_bytes: u64, max_bytes: usize },
    #[error("frame length {length} is too small to hold the header-length word")]
    FrameTooSmall { length: u64 },
    #[error("header length {header_bytes} exceeds the {available_bytes} bytes left in the frame")]
    HeaderTooLong { header_bytes: usize, available_bytes: usize },
    #[error("{bytes} bytes follow the frame")]
    TrailingBytes { bytes: usize },
    #[error("the {bytes} bytes given are not a whole frame")]
    Incomplete { bytes: usize },
    #[error("unknown serialize type {0}")]
    UnknownSerializeType(u8),
    #[error("header of {header_bytes} bytes does not fit the 24-bit length field")]
    HeaderTooLarge { header_bytes: usize },
    #[error(transparent)]
    Header(#[from] HeaderDecodeError),
    #[error(transparent)]
    Encode(#[from] HeaderEncodeError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

#[derive(Debug, Clone)]
pub struct RemotingCodec {
    max_frame_bytes: usize,
}

impl Default for RemotingCodec {
    fn default() -> Self {
        RemotingCodec::new(DEFAULT_MAX_FRAME_BYTES)
    }
}

impl RemotingCodec {
    pub fn new(max_frame_bytes: usize) -> Self {
        RemotingCodec { max_frame_bytes }
    }
}

/// Decodes one complete frame (length prefix included) into a command. Useful for tests and tools
/// that hold whole frames; the streaming path is the `Decoder` impl.
pub fn decode_frame(frame: &[u8]) -> Result<RemotingCommand, CodecError> {
    let mut buf = BytesMut::from(frame);
    match RemotingCodec::new(usize::MAX).decode(&mut buf)? {
        Some(cmd) if buf.is_empty() => Ok(cmd),
        Some(_) => Err(CodecError::TrailingBytes { bytes: buf.len() }),
        None => Err(CodecError::Incomplete { bytes: frame.len() }),
    }
}

/// Encodes one command into a complete frame.
pub fn encode_frame(cmd: &RemotingCommand) -> Result<BytesMut, CodecError> {
    let mut out = BytesMut::new();
    RemotingCodec::new(usize::MAX).encode(cmd, &mut out)?;
    Ok(out)
}

/// What `cmd` will take on the wire, roughly, without encoding it: the body exactly, the header
/// from the lengths of its texts plus the fixed JSON members (escapes are not counted). Used to
/// account queued frames, where a cheap estimate matters more than the last byte.
pub fn frame_size_estimate(cmd: &RemotingCommand) -> usize {
    const FIXED_BYTES: usize = 8 + 160;
    let remark = cmd.remark.as_ref().map_or(0, |r| r.len() + 12);
    let ext: usize = cmd.ext_fields.iter().flatten().map(|(k, v)| k.len() + v.len() + 6).sum();
    FIXED_BYTES + remark + ext + cmd.body_len()
}

impl Decoder for RemotingCodec {
    type Item = RemotingCommand;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<RemotingCommand>, CodecError> {
        if src.len() < 4 {
            return Ok(None);
        }
        // Read unsigned so that a "negative" length such as 2 GiB reads as the oversize frame it is.
        let length = u64::from(u32::from_be_bytes([src[0], src[1], src[2], src[3]]));
        if length + 4 > self.max_frame_bytes as u64 {
            return Err(CodecError::FrameTooLarge { frame_bytes: length + 4, max_bytes: self.max_frame_bytes });
        }
        if length < 4 {
            return Err(CodecError::FrameTooSmall { length });
        }
        let length = length as usize;
        if src.len() < 4 + length {
            src.reserve(4 + length - src.len());
            return Ok(None);
        }
        src.advance(4);
        let mut frame = src.split_to(length);
        let word = frame.get_u32();
        let type_byte = (word >> 24) as u8;
        let header_bytes = (word & 0x00FF_FFFF) as usize;
        let serialize_type = SerializeType::from_byte(type_byte).ok_or(CodecError::UnknownSerializeType(type_byte))?;
        if header_bytes > frame.len() {
            return Err(CodecError::HeaderTooLong { header_bytes, available_bytes: frame.len() });
        }
        let header = frame.split_to(header_bytes);
        let mut cmd = serialize::decode_header(serialize_type, &header)?;
        // Java reads zero body bytes as null: "no body" and "empty body" are the same on the wire.
        cmd.body = if frame.is_empty() { None } else { Some(frame.freeze()) };
        Ok(Some(cmd))
    }
}

impl Encoder<RemotingCommand> for RemotingCodec {
    type Error = CodecError;

    fn encode(&mut self, cmd: RemotingCommand, dst: &mut BytesMut) -> Result<(), CodecError> {
        Encoder::<&RemotingCommand>::encode(self, &cmd, dst)
    }
}

impl Encoder<&RemotingCommand> for RemotingCodec {
    type Error = CodecError;

    fn encode(&mut self, cmd: &RemotingCommand, dst: &mut BytesMut) -> Result<(), CodecError> {
        self.encode_head(cmd, dst)?;
        for part in cmd.body_parts() {
            dst.put_slice(part);
        }
        Ok(())
    }
}

impl RemotingCodec {
    /// Appends the frame of `cmd` up to its body (length prefix, header-length word, header),
    /// with the lengths counting the body, which the caller writes next: from `dst` or, as
    /// [`crate::writer::FrameWriter`] does with large bodies, from the body's own buffer.
    pub fn encode_head(&self, cmd: &RemotingCommand, dst: &mut BytesMut) -> Result<(), CodecError> {
        let start = dst.len();
        dst.put_u64(0); // length and header-length word, filled in below
        if let Err(e) = serialize::encode_header(cmd, dst) {
            dst.truncate(start);
            return Err(e.into());
        }
        let header_bytes = dst.len() - start - 8;
        if header_bytes > MAX_HEADER_BYTES {
            dst.truncate(start);
            return Err(CodecError::HeaderTooLarge { header_bytes });
        }
        let length = 4 + header_bytes + cmd.body_len();
        if length + 4 > self.max_frame_bytes {
            dst.truncate(start);
            return Err(CodecError::FrameTooLarge { frame_bytes: length as u64 + 4, max_bytes: self.max_frame_bytes });
        }
        let word = (u32::from(cmd.serialize_type.as_byte()) << 24) | header_bytes as u32;
        dst[start..start + 4].copy_from_slice(&(length as u32).to_be_bytes());
        dst[start + 4..start + 8].copy_from_slice(&word.to_be_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::RequestCode;

    fn route_request(serialize_type: SerializeType) -> RemotingCommand {
        RemotingCommand::request(RequestCode::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", "TopicTest").with_opaque(1).with_serialize_type(serialize_type)
    }

    #[test]
    fn json_route_request_matches_the_reference_bytes() {
        let frame = encode_frame(&route_request(SerializeType::Json)).unwrap();
        let header = br#"{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":479}"#;
        assert_eq!(&frame[..8], &[0, 0, 0, 0x87, 0, 0, 0, 0x83]);
        assert_eq!(&frame[8..], &header[..]);
    }

    #[test]
    fn binary_route_request_matches_the_reference_bytes() {
        let frame = encode_frame(&route_request(SerializeType::RocketMq)).unwrap();
        let expected: &[u8] = &[
            0, 0, 0, 0x2d, 1, 0, 0, 0x29, 0, 0x69, 0, 0x01, 0xdf, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x14, 0, 5, b't', b'o', b'p', b'i', b'c', 0, 0,
            0, 9, b'T', b'o', b'p', b'i', b'c', b'T', b'e', b's', b't',
        ];
        assert_eq!(&frame[..], expected);
    }

    #[test]
    fn decode_waits_until_the_body_arrives() {
        let frame = encode_frame(&route_request(SerializeType::Json).with_body(&b"hello"[..])).unwrap();
        let mut codec = RemotingCodec::default();
        let mut buf = BytesMut::new();
        for (i, byte) in frame.iter().enumerate() {
            buf.put_u8(*byte);
            let decoded = codec.decode(&mut buf).unwrap();
            if i + 1 < frame.len() {
                assert!(decoded.is_none(), "decoded early at byte {i}");
            } else {
                assert_eq!(decoded.unwrap().body.as_deref(), Some(&b"hello"[..]));
            }
        }
    }

    #[test]
    fn oversize_length_is_refused_before_allocation() {
        let mut codec = RemotingCodec::new(1024);
        let mut buf = BytesMut::from(&[0x7f, 0xff, 0xff, 0xff][..]);
        let capacity = buf.capacity();
        assert!(matches!(codec.decode(&mut buf), Err(CodecError::FrameTooLarge { .. })));
        assert_eq!(buf.capacity(), capacity);
        let mut negative = BytesMut::from(&[0x80, 0, 0, 0][..]);
        assert!(codec.decode(&mut negative).is_err());
    }

    #[test]
    fn header_longer_than_frame_is_an_error() {
        let mut buf = BytesMut::from(&[0, 0, 0, 8, 0, 0, 0, 9, b'{', b'}', 0, 0][..]);
        assert!(matches!(RemotingCodec::default().decode(&mut buf), Err(CodecError::HeaderTooLong { .. })));
    }

    #[test]
    fn binary_encoding_refuses_keys_its_length_field_cannot_hold() {
        let cmd = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2).with_ext("k".repeat(40_000), "v").with_serialize_type(SerializeType::RocketMq);
        assert!(matches!(encode_frame(&cmd), Err(CodecError::Encode(_))));
        assert!(encode_frame(&cmd.with_serialize_type(SerializeType::Json)).is_ok());
    }

    #[test]
    fn the_size_estimate_is_close_to_the_encoded_size() {
        let cmd = route_request(SerializeType::Json).with_remark("some remark").with_body(vec![7u8; 1000]);
        let (estimate, actual) = (frame_size_estimate(&cmd), encode_frame(&cmd).unwrap().len());
        assert!(estimate >= actual && estimate < actual + 100, "estimate {estimate}, actual {actual}");
    }

    #[test]
    fn json_header_that_is_not_json_is_an_error() {
        let mut buf = BytesMut::from(&[0, 0, 0, 7, 0, 0, 0, 3, b'n', b'o', b'!'][..]);
        assert!(matches!(RemotingCodec::default().decode(&mut buf), Err(CodecError::Header(_))));
    }
}
