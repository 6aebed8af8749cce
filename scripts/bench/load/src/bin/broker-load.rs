//! `broker-load`: the lean broker load generator of `scripts/bench.sh` (workloads a' and b'). It
//! sends the frames the Java client 4.9 sends as the Java generator runs it (SEND_MESSAGE_V2,
//! ROCKETMQ header encoding, `-Drocketmq.serialize.type=ROCKETMQ` as bench.sh gives it; the producer's
//! `WAIT` and `UNIQ_KEY` properties) and consumes as its push consumer does (a heartbeat with the
//! subscription, then PULL_MESSAGE per queue, suspended 15 s, offsets committed through the pulls),
//! over one connection, on one thread, so it can load a broker that the Java client on the same
//! core cannot. It reports what `BrokerLoad.java` reports, in the same JSON keys.
//!
//! `--mode rate` is the fixed-rate latency workload: sends start on a schedule of `--rate` per
//! second whatever the answers do (open loop, at most `--inflight` outstanding), and every latency
//! is measured from the send's place in the schedule, not from when it went out, so a stall shows
//! in the percentiles as the user would see it (corrected for coordinated omission). The end-to-end
//! time is the consumer's receipt minus that scheduled time, in microseconds (the sequence number
//! is in the message's `UNIQ_KEY`).
//!
//! The scale options spread the same load: `--connections N` sends over N connections (each its
//! own client, as N producers), `--topics N` over N topics `T_0..T_{N-1}` of `--queues` queues
//! (created by their first send, as the Java producer's auto-creation), and `--groups N` consumes
//! every message once per group (N groups, each pulling every queue).
//!
//! `--backlog-mib N --store-dir DIR` is the catch-up workload: N MiB are sent first with nobody
//! consuming, the broker's commit log is dropped from the page cache (fsync, then
//! `posix_fadvise(DONTNEED)` on every file under `DIR/commitlog`), and the window opens at once
//! with the consumer starting from the backlog's head while the senders go on in `--mode`.
//!
//! `--mode batch` sends as the Java producer's `send(Collection<Message>)`: SEND_BATCH_MESSAGE with
//! the V2 header (`batch` true, the wrapper's `WAIT` property) and a body of `--batch` messages each
//! encoded as `MessageDecoder.encodeMessage` writes them (magic and body CRC 0, its own `UNIQ_KEY`).
//!
//!   broker-load --namesrv ADDR --mode sync|batch|async|rate [--batch N] --threads N --inflight N --rate R --size B
//!               --topic T [--connections N] [--topics N] [--groups N] [--backlog-mib N --store-dir DIR]
//!               --broker-pid PID --warmup S --duration S --drain S --out FILE

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bench_load::procfs::{core_busy, core_ticks, cpu_ticks, status_kb};
use bytes::Bytes;
use clap::Parser;
use futures::stream::{FuturesUnordered, StreamExt};
use hdrhistogram::Histogram;
use remoting::client::{ClientConfig, RemotingClient};
use remoting::clock::now_ms;
use remoting::command::SerializeType;
use remoting::protocol::broker::{
    PullMessageRequestHeader, PullMessageResponseHeader, QueryConsumerOffsetRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2,
};
use remoting::protocol::heartbeat::{ConsumerData, HeartbeatData, ProducerData, SubscriptionData};
use remoting::protocol::name::{GroupName, TopicName};
use remoting::protocol::namesrv::GetRouteInfoRequestHeader;
use remoting::protocol::route::TopicRouteData;
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use serde_json::{json, Map, Value};

#[derive(Parser)]
#[command(about = "scripts/bench.sh's lean broker load generator")]
struct Cli {
    #[arg(long)]
    namesrv: String,
    #[arg(long, default_value = "BenchmarkTest")]
    topic: String,
    /// sync: `threads` senders, one send in flight each; batch: as sync, each send a
    /// SEND_BATCH_MESSAGE of `batch` messages; async: `inflight` sends in flight; rate: `rate`
    /// sends a second on a fixed schedule, at most `inflight` outstanding.
    #[arg(long)]
    mode: String,
    /// Messages a second in `--mode rate`.
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    #[arg(long, default_value_t = 64)]
    threads: usize,
    #[arg(long, default_value_t = 1024)]
    inflight: usize,
    #[arg(long, default_value_t = 128)]
    size: usize,
    /// Messages per send in `--mode batch`.
    #[arg(long, default_value_t = 16)]
    batch: usize,
    /// The queues of an auto-created topic (the producer's defaultTopicQueueNums).
    #[arg(long, default_value_t = 8)]
    queues: i32,
    /// Producer connections the sends are spread over.
    #[arg(long, default_value_t = 1)]
    connections: usize,
    /// Topics the sends are spread over (`topic` itself when 1).
    #[arg(long, default_value_t = 1)]
    topics: usize,
    /// Consumer groups, each consuming every message.
    #[arg(long, default_value_t = 1)]
    groups: usize,
    /// Catch-up: MiB sent before the window with nobody consuming, then evicted from the page cache.
    #[arg(long, default_value_t = 0)]
    backlog_mib: u64,
    /// The broker's store root (catch-up evicts its `commitlog` files from the page cache).
    #[arg(long)]
    store_dir: Option<PathBuf>,
    #[arg(long, default_value_t = -1)]
    broker_pid: i32,
    #[arg(long, default_value_t = 5)]
    warmup: u64,
    #[arg(long, default_value_t = 20)]
    duration: u64,
    #[arg(long, default_value_t = 60)]
    drain: u64,
    #[arg(long, default_value_t = 100)]
    clk_tck: u64,
    #[arg(long, default_value_t = 0)]
    server_cpu: usize,
    #[arg(long, default_value_t = 1)]
    client_cpu: usize,
    #[arg(long)]
    out: PathBuf,
}

const PRODUCER_GROUP: &str = "benchmark_producer";
const CONSUMER_GROUP: &str = "benchmark_consumer";
const TIMEOUT: Duration = Duration::from_secs(3);
/// The Java push consumer's `brokerSuspendMaxTimeMillis` and pull timeout.
const SUSPEND_MS: i64 = 15_000;
const PULL_TIMEOUT: Duration = Duration::from_secs(30);
const PULL_BATCH: i32 = 32;

fn log(msg: impl AsRef<str>) {
    eprintln!("[loadgen] {}", msg.as_ref());
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(tokio::task::LocalSet::new().run_until(run(cli)))
}

/// Counters the senders and pullers share (one thread: plain cells would do, but the watchdog
/// and the sampler read them too).
#[derive(Default)]
struct Counters {
    ok: AtomicU64,
    not_ok: AtomicU64,
    failed: AtomicU64,
    received: AtomicU64,
    sending: AtomicBool,
    stop: AtomicBool,
}

struct Histograms {
    /// Send latency, µs, while measuring: from the scheduled time in `--mode rate`, else from the
    /// request's start.
    send: Histogram<u64>,
    /// Send latency from the request's start, µs, while measuring (`--mode rate`: what the
    /// uncorrected figure would have been).
    service: Histogram<u64>,
    /// Consume time minus scheduled time (`--mode rate`) or born time (ms), µs, while measuring.
    e2e: Histogram<u64>,
    measuring: bool,
    errors: BTreeMap<String, u64>,
    /// The current schedule in `--mode rate`.
    schedule: Option<Schedule>,
}

/// A phase of fixed-rate sending: message `seq0 + k` is due `floor(k * 1000 / rate)` ms after
/// `t0` (the timer wakes at millisecond ticks, so a tick's messages are due together).
#[derive(Clone, Copy)]
struct Schedule {
    t0: Instant,
    seq0: u64,
    rate: f64,
}

impl Schedule {
    fn due(&self, seq: u64) -> Option<Instant> {
        let k = seq.checked_sub(self.seq0)?;
        Some(self.t0 + Duration::from_millis((k as f64 * 1000.0 / self.rate) as u64))
    }
}

type Shared = Rc<RefCell<Histograms>>;

async fn run(cli: Cli) -> Result<()> {
    let client = Arc::new(RemotingClient::new(ClientConfig::default()));
    let counters = Arc::new(Counters::default());
    let hist: Shared = Rc::new(RefCell::new(Histograms {
        send: Histogram::new(3)?,
        service: Histogram::new(3)?,
        e2e: Histogram::new(3)?,
        measuring: false,
        errors: BTreeMap::new(),
        schedule: None,
    }));
    if !matches!(cli.mode.as_str(), "sync" | "batch" | "async" | "rate") {
        bail!("--mode must be sync, batch, async or rate");
    }
    if cli.mode == "rate" && (cli.rate.is_nan() || cli.rate <= 0.0) {
        bail!("--mode rate needs --rate above 0");
    }
    let catch_up = cli.backlog_mib > 0;
    if catch_up && cli.store_dir.is_none() {
        bail!("--backlog-mib needs --store-dir");
    }
    let body = Bytes::from(alnum_body(cli.size));

    let topics: Vec<String> = match cli.topics {
        0 | 1 => vec![cli.topic.clone()],
        n => (0..n).map(|i| format!("{}_{i}", cli.topic)).collect(),
    };
    let route = prime(&client, &cli.namesrv, &topics[0], cli.queues, &body).await?;
    let broker_addr = route.broker_datas.first().and_then(|b| b.broker_addrs.get(&0)).cloned().context("the route names no master")?;
    let queue_data = route.queue_datas.first().context("the route has no queues")?;
    let (write_queues, read_queues) = (queue_data.write_queue_nums, queue_data.read_queue_nums);
    // The other topics are made by their first send to the broker (as the first has its queues).
    for topic in &topics[1..] {
        send_one(&client, &broker_addr, topic, 0, &body, cli.queues).await.with_context(|| format!("priming send to {topic}"))?;
    }
    log(format!("{} topic(s) {}.. on {broker_addr}: {write_queues} write, {read_queues} read queues each", topics.len(), topics[0]));

    // The consumers: per group a heartbeat with the subscriptions, then one pull loop per queue.
    let sub_version = now_ms();
    let groups: Vec<String> = match cli.groups {
        0 | 1 => vec![CONSUMER_GROUP.to_owned()],
        n => (0..n).map(|g| format!("{CONSUMER_GROUP}_{g}")).collect(),
    };
    for group in &groups {
        heartbeat(&client, &broker_addr, group, &topics, sub_version).await?;
    }
    let spawn_pullers = || {
        for group in &groups {
            for topic in &topics {
                for queue in 0..read_queues {
                    let puller = puller(client.clone(), broker_addr.clone(), group.clone(), topic.clone(), queue, sub_version, counters.clone(), hist.clone());
                    tokio::task::spawn_local(puller);
                }
            }
        }
    };
    {
        let (client, addr, topics, groups) = (client.clone(), broker_addr.clone(), topics.clone(), groups.clone());
        tokio::task::spawn_local(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(20)).await;
                for group in &groups {
                    let _ = heartbeat(&client, &addr, group, &topics, sub_version).await;
                }
            }
        });
    }
    // Every group receives the priming messages (one per topic) before anything is sent.
    let copies = groups.len() as u64;
    let primed = topics.len() as u64;
    if !catch_up {
        spawn_pullers();
        wait_until(Duration::from_secs(60), || counters.received.load(Ordering::Relaxed) >= primed * copies).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // The producers' connections: the consumer's and `connections - 1` more.
    let mut senders_clients = vec![client.clone()];
    for _ in 1..cli.connections.max(1) {
        senders_clients.push(Arc::new(RemotingClient::new(ClientConfig::default())));
    }
    let ctx = Rc::new(SendCtx {
        clients: senders_clients,
        addr: broker_addr.clone(),
        topics: topics.clone(),
        body: body.clone(),
        write_queues,
        default_queues: cli.queues,
        counters: counters.clone(),
        hist: hist.clone(),
        seq: RefCell::new(0),
        batch: if cli.mode == "batch" { cli.batch.max(1) } else { 1 },
    });
    let broker = Sampled::start(cli.broker_pid);
    let mut caught_up = None;
    let senders = if catch_up {
        let backlog = send_backlog(&ctx, cli.backlog_mib << 20, cli.size).await;
        let store_dir = cli.store_dir.clone().unwrap_or_default();
        let evicted = evict_from_page_cache(&store_dir.join("commitlog"));
        log(format!("backlog of {backlog} messages sent; {evicted} commit-log files dropped from the page cache; the consumer starts"));
        spawn_pullers();
        caught_up = Some(CatchUp::watch(counters.clone(), (primed + backlog) * copies, backlog));
        counters.sending.store(true, Ordering::Relaxed);
        start_senders(&cli, ctx)
    } else {
        counters.sending.store(true, Ordering::Relaxed);
        let senders = start_senders(&cli, ctx);
        log(format!("warm-up {} s ({}, {} threads, {} B, window {})", cli.warmup, cli.mode, cli.threads, cli.size, cli.inflight));
        tokio::time::sleep(Duration::from_secs(cli.warmup)).await;
        // As BrokerLoad: the warm-up's backlog is worked off before the window opens.
        counters.sending.store(false, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(200)).await;
        wait_until(Duration::from_secs(cli.drain), || {
            counters.received.load(Ordering::Relaxed) >= (primed + counters.ok.load(Ordering::Relaxed) + counters.not_ok.load(Ordering::Relaxed)) * copies
        })
        .await;
        senders
    };

    let (ok0, not_ok0, failed0, recv0) = snapshot(&counters);
    let t0 = Costs::now(&cli);
    hist.borrow_mut().measuring = true;
    counters.sending.store(true, Ordering::Relaxed);
    log(format!("window {} s", cli.duration));
    tokio::time::sleep(Duration::from_secs(cli.duration)).await;
    hist.borrow_mut().measuring = false;
    let (ok1, not_ok1, failed1, recv1) = snapshot(&counters);
    let t1 = Costs::now(&cli);
    counters.stop.store(true, Ordering::Relaxed);
    for s in senders {
        let _ = s.await;
    }
    let expected = (primed + counters.ok.load(Ordering::Relaxed)) * copies;
    let drain_started = Instant::now();
    wait_until(Duration::from_secs(cli.drain), || counters.received.load(Ordering::Relaxed) >= expected).await;
    let drain_s = drain_started.elapsed().as_secs_f64();

    let secs = t1.at.duration_since(t0.at).as_secs_f64();
    let msgs = (ok1 - ok0) as f64;
    let h = hist.borrow();
    let broker_cpu = ticks_s(t0.broker, t1.broker, cli.clk_tck);
    let me_cpu = ticks_s(t0.me, t1.me, cli.clk_tck);
    let received = counters.received.load(Ordering::Relaxed);
    let mut out = Map::new();
    out.insert("generator".into(), json!("broker-load (lean)"));
    out.insert("mode".into(), json!(cli.mode));
    out.insert("topic".into(), json!(cli.topic));
    out.insert("queues".into(), json!(write_queues));
    out.insert("connections".into(), json!(cli.connections.max(1)));
    out.insert("topics".into(), json!(topics.len()));
    out.insert("groups".into(), json!(groups.len()));
    if let Some(c) = &caught_up {
        out.insert("backlog_mib".into(), json!(cli.backlog_mib));
        out.insert("backlog_messages".into(), json!(c.backlog));
        out.insert("backlog_left_at_window_end".into(), json!(((primed + ok1) * copies).saturating_sub(recv1)));
        out.insert("caught_up_s".into(), json!(c.after_s()));
    }
    out.insert("threads".into(), json!(cli.threads));
    out.insert("size".into(), json!(cli.size));
    let per_send = if cli.mode == "batch" { cli.batch.max(1) } else { 1 };
    out.insert("batch".into(), json!(per_send));
    out.insert("inflight".into(), json!(if matches!(cli.mode.as_str(), "sync" | "batch") { 0 } else { cli.inflight }));
    if cli.mode == "rate" {
        out.insert("rate".into(), json!(cli.rate));
        out.insert("latency_from".into(), json!("the scheduled send time (corrected for coordinated omission)"));
        out.insert("send_service_ms".into(), percentiles_ms(&h.service, 1000.0));
    }
    out.insert("window_s".into(), json!(secs));
    out.insert("send_ok".into(), json!(ok1 - ok0));
    out.insert("send_not_ok".into(), json!(not_ok1 - not_ok0));
    out.insert("send_failed".into(), json!(failed1 - failed0));
    out.insert("send_tps".into(), json!(msgs / secs));
    out.insert("send_calls_tps".into(), json!(msgs / per_send as f64 / secs));
    out.insert("send_latency_ms".into(), percentiles_ms(&h.send, 1000.0));
    out.insert("send_max_ms".into(), json!(h.send.max() as f64 / 1000.0));
    out.insert("consume".into(), json!(true));
    out.insert("consume_tps".into(), json!((recv1 - recv0) as f64 / secs));
    out.insert("e2e_ms".into(), percentiles_ms(&h.e2e, 1000.0));
    out.insert("expected_total".into(), json!(expected));
    out.insert("received_total".into(), json!(received));
    out.insert("missing_after_drain".into(), json!(expected.saturating_sub(received)));
    out.insert("drain_s".into(), json!(drain_s));
    out.insert("broker_cpu_s".into(), json!(broker_cpu));
    out.insert("broker_cpu_util".into(), json!(broker_cpu.map(|c| c / secs)));
    out.insert("broker_cpu_s_per_million".into(), json!(broker_cpu.filter(|_| msgs > 0.0).map(|c| c / msgs * 1e6)));
    out.insert("loadgen_cpu_util".into(), json!(me_cpu.map(|c| c / secs)));
    out.insert("server_core_busy".into(), core_busy(t0.server_core, t1.server_core));
    out.insert("client_core_busy".into(), core_busy(t0.client_core, t1.client_core));
    out.insert("broker_vmhwm_kb".into(), json!(status_kb(cli.broker_pid, "VmHWM:")));
    out.insert("broker_peak_rss_sampled_kb".into(), json!(broker.peak_rss.load(Ordering::Relaxed)));
    out.insert("broker_peak_anon_kb".into(), json!(broker.peak_anon.load(Ordering::Relaxed)));
    out.insert("send_errors_whole_run".into(), json!(h.errors));
    out.insert("send_not_ok_whole_run".into(), json!(counters.not_ok.load(Ordering::Relaxed)));
    out.insert("send_failed_whole_run".into(), json!(counters.failed.load(Ordering::Relaxed)));
    std::fs::write(&cli.out, serde_json::to_string(&Value::Object(out))? + "\n")?;
    log(format!("send {:.0} msg/s, consume {:.0} msg/s, missing {}", msgs / secs, (recv1 - recv0) as f64 / secs, expected.saturating_sub(received)));
    Ok(())
}

fn snapshot(c: &Counters) -> (u64, u64, u64, u64) {
    (c.ok.load(Ordering::Relaxed), c.not_ok.load(Ordering::Relaxed), c.failed.load(Ordering::Relaxed), c.received.load(Ordering::Relaxed))
}

async fn wait_until(within: Duration, done: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !done() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One random alphanumeric body reused by every message, as BrokerLoad (and RocketMQ's own
/// benchmark) does; a fixed seed, so both systems get the same bytes.
fn alnum_body(size: usize) -> Vec<u8> {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut x: u64 = 42;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ALNUM[(x % ALNUM.len() as u64) as usize]
        })
        .collect()
}

// ---- the route and the priming send --------------------------------------------------------------

async fn route_of(client: &RemotingClient, namesrv: &str, topic: &str) -> Result<Option<TopicRouteData>> {
    let header = GetRouteInfoRequestHeader { topic: topic.to_owned(), accept_standard_json_only: None };
    let r = client.invoke(namesrv, RemotingCommand::request_with_header(RequestCode::GET_ROUTEINFO_BY_TOPIC, &header), TIMEOUT).await?;
    if r.response_code() != ResponseCode::SUCCESS {
        return Ok(None);
    }
    Ok(Some(remoting::fastjson::from_slice(r.body_bytes())?))
}

/// Makes the topic exist as the Java producer does (one send through TBW102's route; the broker
/// creates it) and waits until the name server serves its route.
async fn prime(client: &RemotingClient, namesrv: &str, topic: &str, queues: i32, body: &Bytes) -> Result<TopicRouteData> {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut sent = false;
    loop {
        if let Ok(Some(route)) = route_of(client, namesrv, topic).await {
            let master = route.broker_datas.first().and_then(|b| b.broker_addrs.get(&0)).cloned();
            if let (Some(addr), false) = (master.clone(), sent) {
                // A topic that exists already (BenchmarkTest): the priming message goes there.
                send_one(client, &addr, topic, 0, body, queues).await.context("priming send")?;
                sent = true;
            }
            if sent && master.is_some() && !route.queue_datas.is_empty() {
                return Ok(route);
            }
        } else if !sent {
            if let Ok(Some(default)) = route_of(client, namesrv, "TBW102").await {
                if let Some(addr) = default.broker_datas.first().and_then(|b| b.broker_addrs.get(&0)) {
                    sent = send_one(client, addr, topic, 0, body, queues).await.is_ok();
                }
            }
        }
        if Instant::now() > deadline {
            bail!("the topic {topic} has no route after 90 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

// ---- sending -------------------------------------------------------------------------------------

/// The Java producer's message id: 16 hex chars of address and pid, 16 of time and a counter.
fn uniq_key(seq: u64) -> String {
    format!("7F000001{:08X}{:016X}", std::process::id(), seq)
}

/// The properties the Java producer gives a message it sends with `WAIT` (and its id).
fn message_properties(seq: u64) -> String {
    format!("UNIQ_KEY\u{1}{}\u{2}WAIT\u{1}true\u{2}", uniq_key(seq))
}

/// A send request as the Java producer writes it (SendMessageRequestHeaderV2, ROCKETMQ headers).
fn producer_request(code: RequestCode, topic: &str, queue: i32, default_queues: i32, properties: String, batch: bool, body: Bytes) -> Result<RemotingCommand> {
    let header = SendMessageRequestHeader {
        producer_group: PRODUCER_GROUP.into(),
        topic: TopicName::new(topic)?,
        default_topic: "TBW102".into(),
        default_topic_queue_nums: default_queues,
        queue_id: queue,
        sys_flag: 0,
        born_timestamp: now_ms(),
        flag: 0,
        properties: Some(properties),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: Some(batch),
        max_reconsume_times: None,
        broker_name: None,
    };
    Ok(RemotingCommand::request_with_header(code, &SendMessageRequestHeaderV2::from(header)).with_serialize_type(SerializeType::RocketMq).with_body(body))
}

fn send_request(topic: &str, queue: i32, body: &Bytes, default_queues: i32, seq: u64) -> Result<RemotingCommand> {
    producer_request(RequestCode::SEND_MESSAGE_V2, topic, queue, default_queues, message_properties(seq), false, body.clone())
}

/// A SEND_BATCH_MESSAGE of `count` messages as the Java producer's `send(Collection<Message>)`
/// writes it: the wrapper's header (batch, the first message's `WAIT`), and a body of the
/// messages each encoded as `MessageDecoder.encodeMessage` (magic and body CRC 0), each with its own
/// `UNIQ_KEY` (`seq * count + i`).
fn batch_request(topic: &str, queue: i32, body: &Bytes, default_queues: i32, seq: u64, count: usize) -> Result<RemotingCommand> {
    let mut encoded = Vec::with_capacity(count * (body.len() + 80));
    for i in 0..count as u64 {
        let props = message_properties(seq * count as u64 + i);
        let total = 20 + body.len() + 2 + props.len();
        encoded.extend_from_slice(&(total as i32).to_be_bytes());
        encoded.extend_from_slice(&0i32.to_be_bytes()); // magic
        encoded.extend_from_slice(&0i32.to_be_bytes()); // body CRC
        encoded.extend_from_slice(&0i32.to_be_bytes()); // flag
        encoded.extend_from_slice(&(body.len() as i32).to_be_bytes());
        encoded.extend_from_slice(body);
        encoded.extend_from_slice(&(props.len() as i16).to_be_bytes());
        encoded.extend_from_slice(props.as_bytes());
    }
    producer_request(RequestCode::SEND_BATCH_MESSAGE, topic, queue, default_queues, "WAIT\u{1}true\u{2}".into(), true, Bytes::from(encoded))
}

async fn send_one(client: &RemotingClient, addr: &str, topic: &str, queue: i32, body: &Bytes, default_queues: i32) -> Result<()> {
    let r = client.invoke(addr, send_request(topic, queue, body, default_queues, 0)?, TIMEOUT).await?;
    if r.response_code() != ResponseCode::SUCCESS {
        bail!("send answered {:?}: {:?}", r.response_code(), r.remark);
    }
    Ok(())
}

struct SendCtx {
    clients: Vec<Arc<RemotingClient>>,
    addr: String,
    topics: Vec<String>,
    body: Bytes,
    write_queues: i32,
    default_queues: i32,
    counters: Arc<Counters>,
    hist: Shared,
    seq: RefCell<u64>,
    /// Messages per send: 1, or `--batch` in `--mode batch`.
    batch: usize,
}

impl SendCtx {
    fn next(&self) -> u64 {
        let mut seq = self.seq.borrow_mut();
        *seq += 1;
        *seq
    }

    /// Where message `seq` goes: its connection, topic and queue (round robin over each).
    fn place(&self, seq: u64) -> (&RemotingClient, &str, i32) {
        let topics = self.topics.len() as u64;
        let queue = (seq / topics) % self.write_queues.max(1) as u64;
        (&self.clients[(seq % self.clients.len() as u64) as usize], &self.topics[(seq % topics) as usize], queue as i32)
    }

    /// One send: the next in sequence, or `scheduled` (its sequence number and due time).
    async fn send(self: Rc<Self>, scheduled: Option<(u64, Instant)>) {
        let seq = scheduled.map_or_else(|| self.next(), |(seq, _)| seq);
        let (client, topic, queue) = self.place(seq);
        let request = match self.batch {
            1 => send_request(topic, queue, &self.body, self.default_queues, seq),
            n => batch_request(topic, queue, &self.body, self.default_queues, seq, n),
        };
        let request = match request {
            Ok(r) => r,
            Err(e) => return self.error(e.to_string(), false),
        };
        let started = Instant::now();
        let result = client.invoke(&self.addr, request, TIMEOUT).await;
        let took = started.elapsed();
        match result {
            Ok(r) if r.response_code() == ResponseCode::SUCCESS => {
                self.counters.ok.fetch_add(self.batch as u64, Ordering::Relaxed);
                let mut h = self.hist.borrow_mut();
                if h.measuring {
                    let _ = h.service.record(took.as_micros() as u64);
                    let from = scheduled.map_or(started, |(_, due)| due);
                    let _ = h.send.record(from.elapsed().as_micros() as u64);
                }
            }
            Ok(r) => self.error(format!("{:?}: {}", r.response_code(), r.remark.unwrap_or_default()), true),
            Err(e) => self.error(e.to_string(), false),
        }
    }

    fn error(&self, what: String, answered: bool) {
        let c = if answered { &self.counters.not_ok } else { &self.counters.failed };
        c.fetch_add(self.batch as u64, Ordering::Relaxed);
        *self.hist.borrow_mut().errors.entry(what).or_default() += 1;
    }

    async fn paused(&self) -> bool {
        while !self.counters.sending.load(Ordering::Relaxed) {
            if self.counters.stop.load(Ordering::Relaxed) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.counters.stop.load(Ordering::Relaxed)
    }
}

fn start_senders(cli: &Cli, ctx: Rc<SendCtx>) -> Vec<tokio::task::JoinHandle<()>> {
    if cli.mode == "rate" {
        let (rate, inflight) = (cli.rate, cli.inflight.max(1));
        return vec![tokio::task::spawn_local(rate_sender(ctx, rate, inflight))];
    }
    if cli.mode == "async" {
        // One task keeps `inflight` sends going (Java's sendAsync with a semaphore of that size).
        let inflight = cli.inflight.max(1);
        return vec![tokio::task::spawn_local(async move {
            let mut flying = FuturesUnordered::new();
            loop {
                if flying.is_empty() && ctx.paused().await {
                    return;
                }
                let sending = ctx.counters.sending.load(Ordering::Relaxed) && !ctx.counters.stop.load(Ordering::Relaxed);
                if sending && flying.len() < inflight {
                    flying.push(ctx.clone().send(None));
                    continue;
                }
                if flying.next().await.is_none() {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        })];
    }
    (0..cli.threads.max(1))
        .map(|_| {
            let ctx = ctx.clone();
            tokio::task::spawn_local(async move {
                while !ctx.paused().await {
                    ctx.clone().send(None).await;
                }
            })
        })
        .collect()
}

/// Sends on a fixed schedule while sending is on: each pause ends a schedule, each resume starts a
/// new one. A send is never dropped for being late; it goes out as soon as there is room, and its
/// latency still counts from its due time.
async fn rate_sender(ctx: Rc<SendCtx>, rate: f64, inflight: usize) {
    let mut flying = FuturesUnordered::new();
    loop {
        while flying.next().await.is_some() {}
        if ctx.paused().await {
            return;
        }
        let schedule = Schedule { t0: Instant::now(), seq0: *ctx.seq.borrow() + 1, rate };
        ctx.hist.borrow_mut().schedule = Some(schedule);
        let mut k = 0u64;
        while ctx.counters.sending.load(Ordering::Relaxed) && !ctx.counters.stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            while flying.len() < inflight {
                let seq = schedule.seq0 + k;
                let Some(due) = schedule.due(seq).filter(|due| *due <= now) else { break };
                *ctx.seq.borrow_mut() = seq;
                flying.push(ctx.clone().send(Some((seq, due))));
                k += 1;
            }
            if flying.len() >= inflight {
                // At the cap: only an answer makes room (the due times keep counting).
                flying.next().await;
                continue;
            }
            let next = schedule.due(schedule.seq0 + k).unwrap_or(now);
            tokio::select! {
                Some(()) = flying.next(), if !flying.is_empty() => {}
                () = tokio::time::sleep_until(next.into()) => {}
            }
        }
    }
}

/// Sends `bytes` of messages (1,024 in flight) before the catch-up window; the count sent OK.
async fn send_backlog(ctx: &Rc<SendCtx>, bytes: u64, size: usize) -> u64 {
    let want = bytes.div_ceil(size.max(1) as u64);
    let mut flying = FuturesUnordered::new();
    let mut started = 0u64;
    loop {
        let ok = ctx.counters.ok.load(Ordering::Relaxed);
        let refused = ctx.counters.failed.load(Ordering::Relaxed) + ctx.counters.not_ok.load(Ordering::Relaxed);
        if (ok >= want || refused > want) && flying.is_empty() {
            return ok;
        }
        if started < want && flying.len() < 1024 {
            started += 1;
            flying.push(ctx.clone().send(None));
            continue;
        }
        if flying.next().await.is_none() {
            // Sends that failed are made up for.
            started = ctx.counters.ok.load(Ordering::Relaxed);
        }
    }
}

/// Drops every file under `dir` from the page cache (written back first, so the pages are clean
/// and the kernel lets them go); the count of files dropped.
fn evict_from_page_cache(dir: &std::path::Path) -> usize {
    use std::os::fd::AsRawFd;
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut dropped = 0;
    for entry in entries.flatten() {
        let Ok(file) = std::fs::File::open(entry.path()) else { continue };
        let _ = file.sync_all();
        if nix::fcntl::posix_fadvise(file.as_raw_fd(), 0, 0, nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED).is_ok() {
            dropped += 1;
        }
    }
    dropped
}

/// When the consumer first held the whole backlog (sampled every 100 ms from the window's start).
struct CatchUp {
    backlog: u64,
    started: Instant,
    at: Rc<std::cell::Cell<Option<Instant>>>,
}

impl CatchUp {
    fn watch(counters: Arc<Counters>, received_when_caught_up: u64, backlog: u64) -> CatchUp {
        let c = CatchUp { backlog, started: Instant::now(), at: Rc::default() };
        let at = c.at.clone();
        tokio::task::spawn_local(async move {
            while counters.received.load(Ordering::Relaxed) < received_when_caught_up {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            at.set(Some(Instant::now()));
        });
        c
    }

    fn after_s(&self) -> Option<f64> {
        Some(self.at.get()?.duration_since(self.started).as_secs_f64())
    }
}

// ---- consuming -----------------------------------------------------------------------------------

async fn heartbeat(client: &RemotingClient, addr: &str, group: &str, topics: &[String], sub_version: i64) -> Result<()> {
    let data = HeartbeatData {
        client_id: format!("127.0.0.1@lean-{}", std::process::id()),
        producer_data_set: vec![ProducerData { group_name: PRODUCER_GROUP.into() }],
        consumer_data_set: vec![ConsumerData {
            consume_from_where: "CONSUME_FROM_FIRST_OFFSET".into(),
            consume_type: "CONSUME_PASSIVELY".into(),
            group_name: group.into(),
            message_model: "CLUSTERING".into(),
            subscription_data_set: topics
                .iter()
                .map(|topic| SubscriptionData {
                    class_filter_mode: false,
                    code_set: vec![],
                    expression_type: "TAG".into(),
                    sub_string: "*".into(),
                    sub_version,
                    tags_set: vec![],
                    topic: topic.clone(),
                })
                .collect(),
            unit_mode: false,
        }],
    };
    let body = serde_json::to_vec(&data)?;
    let r = client.invoke(addr, RemotingCommand::request(RequestCode::HEART_BEAT).with_body(body), TIMEOUT).await?;
    if r.response_code() != ResponseCode::SUCCESS {
        bail!("heartbeat answered {:?}: {:?}", r.response_code(), r.remark);
    }
    Ok(())
}

/// Each record of a pull body (at least 48 bytes, as far as the born time).
fn records(mut body: &[u8], mut each: impl FnMut(&[u8])) {
    while body.len() >= 48 {
        let size = i32::from_be_bytes([body[0], body[1], body[2], body[3]]);
        let Ok(size) = usize::try_from(size) else { return };
        if size < 48 || size > body.len() {
            return;
        }
        each(&body[..size]);
        body = &body[size..];
    }
}

/// A record's born time (at byte 40 of every record, whatever its hosts).
fn born_time(record: &[u8]) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&record[40..48]);
    i64::from_be_bytes(b)
}

/// The sequence number in a record's `UNIQ_KEY` (the last 16 of its 32 hex digits, see `uniq_key`).
fn uniq_seq(record: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"UNIQ_KEY\x01";
    let at = record.windows(KEY.len()).rposition(|w| w == KEY)? + KEY.len();
    let hex = record.get(at + 16..at + 32)?;
    u64::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
}

#[allow(clippy::too_many_arguments)]
async fn puller(client: Arc<RemotingClient>, addr: String, group: String, topic: String, queue: i32, sub_version: i64, counters: Arc<Counters>, hist: Shared) {
    let (Ok(group), Ok(topic_name)) = (GroupName::new(group.as_str()), TopicName::new(topic.as_str())) else { return };
    // Where the group stands (a rerun against the same broker continues), else the first offset.
    let query = QueryConsumerOffsetRequestHeader { consumer_group: group.clone(), topic: topic_name.clone(), queue_id: queue, set_zero_if_not_found: None };
    let request = RemotingCommand::request_with_header(RequestCode::QUERY_CONSUMER_OFFSET, &query).with_serialize_type(SerializeType::RocketMq);
    let mut offset = match client.invoke(&addr, request, TIMEOUT).await {
        Ok(r) if r.response_code() == ResponseCode::SUCCESS => r.ext("offset").and_then(|o| o.parse().ok()).unwrap_or(0),
        _ => 0,
    };
    loop {
        let header = PullMessageRequestHeader {
            consumer_group: group.clone(),
            topic: topic_name.clone(),
            queue_id: queue,
            queue_offset: offset,
            max_msg_nums: PULL_BATCH,
            // commit offset | suspend, the subscription from the heartbeat (as the push consumer)
            sys_flag: if offset > 0 { 0x01 } else { 0 } | 0x02,
            commit_offset: offset,
            suspend_timeout_millis: SUSPEND_MS,
            subscription: None,
            sub_version,
            expression_type: Some("TAG".into()),
            max_msg_bytes: None,
            broker_name: None,
        };
        let request = RemotingCommand::request_with_header(RequestCode::PULL_MESSAGE, &header).with_serialize_type(SerializeType::RocketMq);
        match client.invoke(&addr, request, PULL_TIMEOUT).await {
            Ok(r) => {
                let next = r.decode_header::<PullMessageResponseHeader>().map(|h| h.next_begin_offset).ok();
                if r.response_code() == ResponseCode::SUCCESS {
                    let (now, at) = (now_ms(), Instant::now());
                    let mut n = 0;
                    let mut h = hist.borrow_mut();
                    let schedule = h.schedule;
                    records(r.body_bytes(), |record| {
                        n += 1;
                        if !h.measuring {
                            return;
                        }
                        let e2e_us = match schedule {
                            Some(s) => match uniq_seq(record).and_then(|seq| s.due(seq)) {
                                Some(due) => at.saturating_duration_since(due).as_micros() as u64,
                                None => return, // sent in an earlier phase
                            },
                            None => (now - born_time(record)).max(0) as u64 * 1000,
                        };
                        let _ = h.e2e.record(e2e_us);
                    });
                    counters.received.fetch_add(n, Ordering::Relaxed);
                }
                match next {
                    Some(next) => offset = next,
                    None => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

// ---- costs ---------------------------------------------------------------------------------------

/// The broker's RSS and anonymous RSS, sampled every 200 ms (peaks).
struct Sampled {
    peak_rss: Arc<AtomicU64>,
    peak_anon: Arc<AtomicU64>,
}

impl Sampled {
    fn start(pid: i32) -> Sampled {
        let s = Sampled { peak_rss: Arc::default(), peak_anon: Arc::default() };
        let (rss, anon) = (s.peak_rss.clone(), s.peak_anon.clone());
        if pid > 0 {
            tokio::task::spawn_local(async move {
                loop {
                    rss.fetch_max(status_kb(pid, "VmRSS:").unwrap_or(0), Ordering::Relaxed);
                    anon.fetch_max(status_kb(pid, "RssAnon:").unwrap_or(0), Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            });
        }
        s
    }
}

struct Costs {
    at: Instant,
    broker: Option<u64>,
    me: Option<u64>,
    server_core: Option<(u64, u64)>,
    client_core: Option<(u64, u64)>,
}

impl Costs {
    fn now(cli: &Cli) -> Costs {
        Costs {
            at: Instant::now(),
            broker: cpu_ticks(cli.broker_pid),
            me: cpu_ticks(std::process::id() as i32),
            server_core: core_ticks(cli.server_cpu),
            client_core: core_ticks(cli.client_cpu),
        }
    }
}

fn ticks_s(a: Option<u64>, b: Option<u64>, clk_tck: u64) -> Option<f64> {
    Some((b? - a?) as f64 / clk_tck as f64)
}

fn percentiles_ms(h: &Histogram<u64>, units_per_ms: f64) -> Value {
    if h.is_empty() {
        return json!({"count": 0});
    }
    json!({
        "count": h.len(),
        "p50": h.value_at_quantile(0.50) as f64 / units_per_ms,
        "p99": h.value_at_quantile(0.99) as f64 / units_per_ms,
        "p999": h.value_at_quantile(0.999) as f64 / units_per_ms,
        "p9999": h.value_at_quantile(0.9999) as f64 / units_per_ms,
        "max": h.max() as f64 / units_per_ms,
        "mean": h.mean() / units_per_ms,
    })
}
