//! Property tests of the frame codec: any command we can write reads back as the same command (with
//! the documented ROCKETMQ quirks), however the bytes are split on the way, and no input at all
//! makes the decoder panic or allocate past its limit.

use bytes::{BufMut, BytesMut};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use remoting::codec::{decode_frame, encode_frame, CodecError, RemotingCodec, DEFAULT_MAX_FRAME_BYTES};
use remoting::command::{ExtFields, LanguageCode, RemotingCommand, SerializeType};
use tokio_util::codec::Decoder;

const CASES: u32 = 256;

/// Modest case counts keep the file at well under a second; failures print their minimal input
/// (no regression file: integration tests have no `lib.rs` beside them to anchor one).
fn config() -> ProptestConfig {
    ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() }
}

/// Arbitrary text: any Unicode scalar, control characters and the property separators included.
fn text(max_chars: usize) -> impl Strategy<Value = String> {
    vec(any::<char>(), 0..max_chars).prop_map(String::from_iter)
}

fn ext_fields() -> impl Strategy<Value = ExtFields> {
    // Keys stay well below the 32767 bytes an i16 key length can carry in ROCKETMQ.
    vec((text(16), text(48)), 0..8).prop_map(|pairs| pairs.into_iter().collect())
}

/// A command as a peer could send it in `serialize_type`; ROCKETMQ carries code and version as i16.
fn command_in(serialize_type: SerializeType) -> impl Strategy<Value = RemotingCommand> {
    (any::<i32>(), 0u8..=13, any::<i32>(), any::<i32>(), any::<i32>(), option::of(text(64)), option::of(ext_fields()), option::of(vec(any::<u8>(), 1..512)))
        .prop_map(move |(code, language, version, opaque, flag, remark, ext_fields, body)| {
            let narrow = |v: i32| if serialize_type == SerializeType::RocketMq { i32::from(v as i16) } else { v };
            RemotingCommand {
                code: narrow(code),
                language: LanguageCode(language),
                version: narrow(version),
                opaque,
                flag,
                remark,
                ext_fields,
                body: body.map(Into::into),
                body_tail: Vec::new(),
                serialize_type,
            }
        })
}

fn any_command() -> impl Strategy<Value = RemotingCommand> {
    prop_oneof![command_in(SerializeType::Json), command_in(SerializeType::RocketMq)]
}

/// What a receiver sees: ROCKETMQ writes an empty remark and an empty ext map as length 0, which
/// reads back as absent.
fn as_read_back(mut cmd: RemotingCommand) -> RemotingCommand {
    if cmd.serialize_type == SerializeType::RocketMq {
        cmd.remark = cmd.remark.filter(|r| !r.is_empty());
        cmd.ext_fields = cmd.ext_fields.filter(|e| !e.is_empty());
    }
    cmd
}

/// Feeds `bytes` to a fresh decoder the way a connection does, `chunk_sizes` bytes at a time (cycled),
/// decoding after every chunk until it asks for more.
fn decode_stream(bytes: &[u8], chunk_sizes: &[usize]) -> Result<(Vec<RemotingCommand>, usize), CodecError> {
    let mut codec = RemotingCodec::default();
    let mut buf = BytesMut::new();
    let mut decoded = Vec::new();
    let mut rest = bytes;
    for size in chunk_sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (chunk, tail) = rest.split_at((*size).min(rest.len()));
        rest = tail;
        buf.extend_from_slice(chunk);
        while let Some(cmd) = codec.decode(&mut buf)? {
            decoded.push(cmd);
        }
    }
    Ok((decoded, buf.len()))
}

/// Decodes everything in `bytes` until the decoder wants more or refuses; panics are the only failure.
fn decode_all(codec: &mut RemotingCodec, bytes: &[u8]) {
    let mut buf = BytesMut::from(bytes);
    // Every decoded frame consumes at least 8 bytes, so this ends; the bound only keeps it obvious.
    for _ in 0..=bytes.len() {
        match codec.decode(&mut buf) {
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => return,
        }
    }
}

/// Bytes that pass the length checks often enough to reach the header decoders.
fn frame_like_bytes() -> impl Strategy<Value = Vec<u8>> {
    (0u32..600, prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0u32..600, vec(any::<u8>(), 0..600)).prop_map(|(length, type_byte, header_bytes, rest)| {
        let mut bytes = Vec::with_capacity(8 + rest.len());
        bytes.put_u32(length);
        bytes.put_u32(u32::from(type_byte) << 24 | header_bytes);
        bytes.extend(rest);
        bytes
    })
}

/// A valid frame with some bytes overwritten and possibly cut short: near-valid JSON and binary headers.
fn corrupted_frame() -> impl Strategy<Value = Vec<u8>> {
    (any_command(), vec((any::<prop::sample::Index>(), any::<u8>()), 1..6), any::<prop::sample::Index>()).prop_map(|(cmd, edits, cut)| {
        let mut bytes = encode_frame(&cmd).expect("generated commands encode").to_vec();
        for (at, byte) in edits {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        let keep = bytes.len() - cut.index(bytes.len() / 4 + 1);
        bytes.truncate(keep);
        bytes
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn json_commands_read_back_exactly_as_written(cmd in command_in(SerializeType::Json)) {
        let frame = encode_frame(&cmd).expect("encodes");
        prop_assert_eq!(decode_frame(&frame).expect("decodes"), cmd);
    }

    #[test]
    fn rocketmq_commands_read_back_with_empty_remark_and_ext_as_absent(cmd in command_in(SerializeType::RocketMq)) {
        let frame = encode_frame(&cmd).expect("encodes");
        prop_assert_eq!(decode_frame(&frame).expect("decodes"), as_read_back(cmd));
    }

    #[test]
    fn a_decoded_command_reencodes_to_the_same_frame(cmd in any_command()) {
        let frame = encode_frame(&cmd).expect("encodes");
        let again = encode_frame(&decode_frame(&frame).expect("decodes")).expect("re-encodes");
        prop_assert_eq!(&again[..], &frame[..]);
    }

    #[test]
    fn the_streaming_decoder_yields_the_same_commands_whatever_the_chunk_splits(
        cmds in vec(any_command(), 1..4),
        chunk_sizes in vec(1usize..80, 1..16),
    ) {
        let mut stream = BytesMut::new();
        for cmd in &cmds {
            stream.extend_from_slice(&encode_frame(cmd).expect("encodes"));
        }
        let (decoded, left_over) = decode_stream(&stream, &chunk_sizes).expect("a valid stream decodes");
        prop_assert_eq!(left_over, 0);
        prop_assert_eq!(decoded, cmds.into_iter().map(as_read_back).collect::<Vec<_>>());
    }

    #[test]
    fn decoding_random_bytes_never_panics(bytes in vec(any::<u8>(), 0..600)) {
        decode_all(&mut RemotingCodec::default(), &bytes);
        decode_all(&mut RemotingCodec::new(256), &bytes);
        let _ = decode_frame(&bytes);
    }

    #[test]
    fn decoding_frame_like_bytes_never_panics(bytes in frame_like_bytes()) {
        decode_all(&mut RemotingCodec::default(), &bytes);
        let _ = decode_frame(&bytes);
    }

    #[test]
    fn decoding_a_corrupted_frame_never_panics(bytes in corrupted_frame()) {
        decode_all(&mut RemotingCodec::default(), &bytes);
        let _ = decode_frame(&bytes);
    }

    #[test]
    fn a_length_prefix_beyond_the_limit_is_refused_without_growing_the_buffer(
        max_frame_bytes in 8usize..=DEFAULT_MAX_FRAME_BYTES,
        excess in any::<u32>(),
        trailing in vec(any::<u8>(), 0..32),
    ) {
        // The smallest refused length is the one whose frame, prefix included, is one byte too big.
        let smallest_refused = (max_frame_bytes - 3) as u32;
        let length = smallest_refused + excess % (u32::MAX - smallest_refused + 1);
        let mut buf = BytesMut::with_capacity(4 + trailing.len());
        buf.put_u32(length);
        buf.extend_from_slice(&trailing);
        let capacity = buf.capacity();

        let refused = RemotingCodec::new(max_frame_bytes).decode(&mut buf);

        prop_assert!(matches!(refused, Err(CodecError::FrameTooLarge { .. })), "length {} got {:?}", length, refused);
        prop_assert_eq!(buf.capacity(), capacity);
    }
}

#[test]
fn a_length_prefix_one_byte_over_the_limit_is_refused_and_one_at_it_waits() {
    let mut codec = RemotingCodec::new(64);
    let mut over = BytesMut::from(&61u32.to_be_bytes()[..]);
    assert!(matches!(codec.decode(&mut over), Err(CodecError::FrameTooLarge { frame_bytes: 65, max_bytes: 64 })));
    let mut at = BytesMut::from(&60u32.to_be_bytes()[..]);
    assert!(matches!(codec.decode(&mut at), Ok(None)));
}
