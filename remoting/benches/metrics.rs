//! What recording costs on the request path: one counter add into a labelled family (a send's
//! `rocketmq_messages_in_total`), one histogram observation, and one request-latency record, with
//! the family already holding many series (topics).

use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use prometheus::Registry;
use remoting::metrics::family::{Counters, Histograms};
use remoting::metrics::rpc::{RpcLatency, RpcObserver, RpcRecord, RpcResult};

fn recording(c: &mut Criterion) {
    let registry = Registry::new();
    let labels = ["topic", "message_type", "is_system"];
    let counters = Counters::counters(&registry, "bench_total", "b", &labels, 50_000);
    let histograms = Histograms::histograms(&registry, "bench_size", "b", &labels, &[1024.0, 4096.0, 524_288.0], 50_000);
    let topics: Vec<String> = (0..1000).map(|i| format!("BenchTopic_{i}")).collect();
    for topic in &topics {
        counters.add(&[topic, "normal", "false"], 1);
    }
    let mut i = 0usize;
    c.bench_function("counter add, 1000 series", |b| {
        b.iter(|| {
            i = (i + 1) % topics.len();
            counters.add(black_box(&[topics[i].as_str(), "normal", "false"]), 1);
        })
    });
    c.bench_function("histogram observe, 1000 series", |b| {
        b.iter(|| {
            i = (i + 1) % topics.len();
            histograms.observe(black_box(&[topics[i].as_str(), "normal", "false"]), 300.0);
        })
    });
    let rpc = RpcLatency::new(&registry, 50_000);
    let record = RpcRecord { request_code: 310, response_code: 0, long_polling: false, result: RpcResult::Success, elapsed: Duration::from_micros(800) };
    c.bench_function("rpc latency record", |b| b.iter(|| rpc.on_rpc(black_box(&record))));
}

criterion_group!(benches, recording);
criterion_main!(benches);
