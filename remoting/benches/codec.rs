//! Frame codec throughput on the two hot paths of a broker: a SEND_MESSAGE_V2 request as the Java
//! 4.9 client sends it, and a PULL_MESSAGE success response carrying 32 stored messages. Each is
//! measured in both header serializations, encoding into a reused buffer and decoding one frame.
//!
//! Run: `cargo bench -p remoting --bench codec -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use bytes::{BufMut, Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use remoting::code::{RequestCode, ResponseCode};
use remoting::codec::{encode_frame, RemotingCodec};
use remoting::command::{RemotingCommand, SerializeType};
use tokio_util::codec::{Decoder, Encoder};

const MESSAGE_BODY_BYTES: usize = 1024;
const PULLED_MESSAGES: usize = 32;
const PULLED_RECORD_BYTES: usize = 1024;

/// The property string a 4.9.8 producer writes: `name 0x01 value 0x02`, without the final 0x02.
const PROPERTIES: &str = "TAGS\u{1}TagA\u{2}KEYS\u{1}order-20240611-000042 user-7781\u{2}WAIT\u{1}true\u{2}\
                          UNIQ_KEY\u{1}7F0000010B3A18B4AAC27E1C2F6B0000";

/// A single-message send exactly as `DefaultMQProducer.send` puts it on the wire (code 310).
fn send_message_v2(serialize_type: SerializeType) -> RemotingCommand {
    let body: Vec<u8> = (0..MESSAGE_BODY_BYTES).map(|i| b'a' + (i % 26) as u8).collect();
    RemotingCommand::request(RequestCode::SEND_MESSAGE_V2)
        .with_ext("a", "please_rename_unique_group_name")
        .with_ext("b", "TopicTest")
        .with_ext("c", "TBW102")
        .with_ext("d", "4")
        .with_ext("e", "3")
        .with_ext("f", "0")
        .with_ext("g", "1718092800123")
        .with_ext("h", "0")
        .with_ext("i", PROPERTIES)
        .with_ext("j", "0")
        .with_ext("k", "false")
        .with_ext("m", "false")
        .with_ext("n", "broker-a")
        .with_opaque(4242)
        .with_body(body)
        .with_serialize_type(serialize_type)
}

/// One commit-log record (magic v1, IPv4 born and store hosts) of exactly `record_bytes` bytes.
/// The content only has to look plausible: the codec carries it as an opaque body.
fn stored_message(queue_offset: i64, physical_offset: i64, record_bytes: usize) -> Vec<u8> {
    const MAGIC_V1: i32 = 0xDAA3_20A7_u32 as i32;
    const FIXED_BYTES: usize = 91;
    let topic = b"TopicTest";
    let properties = format!("{PROPERTIES}\u{2}CLUSTER\u{1}DefaultCluster");
    let body_bytes = record_bytes - FIXED_BYTES - topic.len() - properties.len();

    let mut record = Vec::with_capacity(record_bytes);
    record.put_i32(record_bytes as i32); // TOTALSIZE
    record.put_i32(MAGIC_V1);
    record.put_i32(0x1234_5678); // BODYCRC
    record.put_i32(3); // QUEUEID
    record.put_i32(0); // FLAG
    record.put_i64(queue_offset);
    record.put_i64(physical_offset);
    record.put_i32(0); // SYSFLAG
    record.put_i64(1_718_092_800_123); // BORNTIMESTAMP
    record.put_slice(&[192, 168, 0, 15]); // BORNHOST
    record.put_i32(53_412);
    record.put_i64(1_718_092_800_130); // STORETIMESTAMP
    record.put_slice(&[192, 168, 0, 2]); // STOREHOST
    record.put_i32(10_911);
    record.put_i32(0); // RECONSUMETIMES
    record.put_i64(0); // PREPARED TRANSACTION OFFSET
    record.put_i32(body_bytes as i32);
    record.extend((0..body_bytes).map(|i| b'a' + (i % 26) as u8));
    record.put_u8(topic.len() as u8);
    record.put_slice(topic);
    record.put_i16(properties.len() as i16);
    record.put_slice(properties.as_bytes());
    assert_eq!(record.len(), record_bytes, "record layout adds up");
    record
}

/// A PULL_MESSAGE answer with status FOUND and 32 messages, as a Java broker writes it.
fn pull_message_found(serialize_type: SerializeType) -> RemotingCommand {
    let request = RemotingCommand::request(RequestCode::PULL_MESSAGE).with_opaque(777).with_serialize_type(serialize_type);
    let mut body = Vec::with_capacity(PULLED_MESSAGES * PULLED_RECORD_BYTES);
    for i in 0..PULLED_MESSAGES {
        let physical_offset = (i * PULLED_RECORD_BYTES) as i64;
        body.extend(stored_message(1000 + i as i64, physical_offset, PULLED_RECORD_BYTES));
    }
    let next = 1000 + PULLED_MESSAGES as i64;
    RemotingCommand::response_to(&request, ResponseCode::SUCCESS)
        .with_ext("suggestWhichBrokerId", "0")
        .with_ext("nextBeginOffset", next.to_string())
        .with_ext("minOffset", "0")
        .with_ext("maxOffset", next.to_string())
        .with_remark("FOUND")
        .with_body(Bytes::from(body))
}

fn type_name(serialize_type: SerializeType) -> &'static str {
    match serialize_type {
        SerializeType::Json => "json",
        SerializeType::RocketMq => "rocketmq",
    }
}

fn bench_command(c: &mut Criterion, name: &str, cmd: &RemotingCommand) {
    let frame = encode_frame(cmd).expect("benchmark command encodes");
    let mut group = c.benchmark_group(format!("{name}/{}", type_name(cmd.serialize_type)));
    group.throughput(Throughput::Bytes(frame.len() as u64));

    let mut codec = RemotingCodec::default();
    let mut out = BytesMut::with_capacity(frame.len());
    group.bench_function("encode", |b| {
        b.iter(|| {
            out.clear();
            codec.encode(black_box(cmd), &mut out).expect("encodes");
            black_box(out.len())
        })
    });

    group.bench_function("decode", |b| {
        b.iter_batched(|| frame.clone(), |mut buf| codec.decode(&mut buf).expect("decodes").expect("a whole frame"), BatchSize::SmallInput)
    });
    group.finish();
}

fn codec_benches(c: &mut Criterion) {
    for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
        bench_command(c, "send_message_v2", &send_message_v2(serialize_type));
        bench_command(c, "pull_found_32", &pull_message_found(serialize_type));
    }
}

criterion_group!(benches, codec_benches);
criterion_main!(benches);
