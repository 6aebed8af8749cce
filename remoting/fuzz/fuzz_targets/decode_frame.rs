//! Feeds arbitrary bytes to the streaming frame decoder the way a connection does, a chunk at a
//! time, and checks that every command it yields survives encode -> decode unchanged.
//!
//! The first input byte picks the chunk size, so the fuzzer also explores how frames are split.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use remoting::codec::{decode_frame, encode_frame, RemotingCodec};
use remoting::command::{LanguageCode, RemotingCommand, SerializeType};
use tokio_util::codec::Decoder;

fuzz_target!(|data: &[u8]| {
    let Some((&chunk_seed, stream)) = data.split_first() else {
        return;
    };
    let chunk_bytes = usize::from(chunk_seed % 64) + 1;
    let mut codec = RemotingCodec::default();
    let mut buf = BytesMut::new();
    for chunk in stream.chunks(chunk_bytes) {
        buf.extend_from_slice(chunk);
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(cmd)) => assert_round_trip(cmd),
                Ok(None) => break,
                // A corrupt stream closes the connection: nothing more is read from it.
                Err(_) => return,
            }
        }
    }
});

/// A decoded command must encode, and read back as itself up to what its header type cannot carry.
fn assert_round_trip(cmd: RemotingCommand) {
    let frame = encode_frame(&cmd).expect("a decoded command encodes");
    let again = decode_frame(&frame).expect("an encoded command decodes");
    assert_eq!(again, as_read_back(cmd), "re-encoded frame: {:02x?}", &frame[..]);
    let frame_again = encode_frame(&again).expect("re-encodes");
    assert_eq!(&frame_again[..], &frame[..], "encoding is stable");
}

/// What survives a trip: JSON writes unknown language codes (a numeric `language` may carry any byte)
/// as `OTHER`; ROCKETMQ writes an empty remark or ext map as length 0, read back as absent.
fn as_read_back(mut cmd: RemotingCommand) -> RemotingCommand {
    match cmd.serialize_type {
        SerializeType::Json => {
            cmd.language = LanguageCode::from_name(cmd.language.name()).unwrap_or(LanguageCode::OTHER);
        }
        SerializeType::RocketMq => {
            cmd.remark = cmd.remark.filter(|r| !r.is_empty());
            cmd.ext_fields = cmd.ext_fields.filter(|e| !e.is_empty());
        }
    }
    cmd
}
