//! The two header serializations a frame may carry: JSON (type 0) and ROCKETMQ binary (type 1).
//! Both turn a header region into the command's fields and back; the body is the codec's business.

mod binary;
mod json;

use bytes::BytesMut;

use crate::command::{RemotingCommand, SerializeType};

pub use json::write_json_string;

#[derive(Debug, thiserror::Error)]
pub enum HeaderDecodeError {
    #[error("header is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("binary header is truncated: {what} needs {need} bytes, {left} left")]
    Truncated { what: &'static str, need: usize, left: usize },
    #[error("binary header field {what} has a negative length {len}")]
    NegativeLength { what: &'static str, len: i64 },
}

/// Decodes a header region into a command without body.
pub fn decode_header(serialize_type: SerializeType, header: &[u8]) -> Result<RemotingCommand, HeaderDecodeError> {
    let mut cmd = match serialize_type {
        SerializeType::Json => json::decode(header)?,
        SerializeType::RocketMq => binary::decode(header)?,
    };
    cmd.serialize_type = serialize_type;
    Ok(cmd)
}

#[derive(Debug, thiserror::Error)]
pub enum HeaderEncodeError {
    #[error("ext field key of {key_bytes} bytes does not fit the binary header's 16-bit key length")]
    KeyTooLong { key_bytes: usize },
}

/// Appends the header of `cmd`, in its serialize type, to `out`.
pub fn encode_header(cmd: &RemotingCommand, out: &mut BytesMut) -> Result<(), HeaderEncodeError> {
    match cmd.serialize_type {
        SerializeType::Json => json::encode(cmd, out),
        SerializeType::RocketMq => {
            if let Some(key_bytes) = binary::longest_unencodable_key(cmd) {
                return Err(HeaderEncodeError::KeyTooLong { key_bytes });
            }
            binary::encode(cmd, out)
        }
    }
    Ok(())
}
