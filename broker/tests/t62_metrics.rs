//! `metricsExporterType=PROM`: the broker serves Java 5.3.3's metric families over HTTP, and
//! they count what was sent, pulled and committed through the broker's socket.

mod common;

use std::time::{Duration, Instant};

use common::*;
use remoting::client::{ClientConfig, RemotingClient};
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn scrape(port: u16) -> String {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response
}

/// The value of the one sample of `name` whose labels include every `key="value"` of `labels`.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = text.lines().filter(|line| line.starts_with(&format!("{name}{{")) || line.starts_with(&format!("{name} "))).filter(|line| {
        let set = line.split_once('{').and_then(|(_, rest)| rest.rsplit_once('}')).map_or("", |(set, _)| set);
        labels.iter().all(|(k, v)| set.split(',').any(|pair| pair == format!("{k}=\"{v}\"")))
    });
    let line = found.next()?;
    assert!(found.next().is_none(), "more than one {name} sample with {labels:?}:\n{text}");
    // `name{labels} value timestamp`, as Java's exporter writes a sample.
    let after = line.rsplit_once('}').map_or(line, |(_, rest)| rest);
    after.split_whitespace().next()?.parse().ok()
}

fn heartbeat(consumer_group: &str, topic: &str) -> RemotingCommand {
    let body = format!(
        r#"{{"clientID":"127.0.0.1@metrics","consumerDataSet":[{{"groupName":"{consumer_group}","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{{"topic":"{topic}","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1,"expressionType":"TAG"}}],"unitMode":false}}],"producerDataSet":[{{"groupName":"pg"}}]}}"#
    );
    RemotingCommand::request(RequestCode::HEART_BEAT).with_body(body.into_bytes())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_prometheus_endpoint_counts_sends_pulls_lag_and_connections_under_javas_names() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let port_text = port.to_string();
    let extra = [
        ("metricsExporterType", "PROM"),
        ("metricsPromExporterHost", "127.0.0.1"),
        ("metricsPromExporterPort", port_text.as_str()),
        ("metricsLabel", "instance_id:i1"),
    ];
    let broker = start(dir.path(), &extra).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    assert_eq!(c.invoke(&addr, heartbeat("mg", "MetricsTopic"), TIMEOUT).await.unwrap().response_code(), ResponseCode::SUCCESS);
    for i in 0..5 {
        let r = c.invoke(&addr, send("MetricsTopic", 0, &format!("message {i}"), ""), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    }
    let mut got = 0;
    let deadline = Instant::now() + TIMEOUT;
    while got < 5 {
        let r = c.invoke(&addr, pull_as("mg", "MetricsTopic", 0, got as i64, 0), TIMEOUT).await.unwrap();
        got += bodies(&r).len();
        assert!(Instant::now() < deadline, "only {got} of 5 pulled");
    }
    let commit = raw(RequestCode::UPDATE_CONSUMER_OFFSET, &[("consumerGroup", "mg"), ("topic", "MetricsTopic"), ("queueId", "0"), ("commitOffset", "3")]);
    assert_eq!(c.invoke(&addr, commit, TIMEOUT).await.unwrap().response_code(), ResponseCode::SUCCESS);
    // A long-polling pull that times out is recorded as such.
    let parked = c.invoke(&addr, pull_as("mg", "MetricsTopic", 0, 5, 300), TIMEOUT).await.unwrap();
    assert_eq!(parked.response_code(), ResponseCode::PULL_NOT_FOUND);

    let text = scrape(port).await;
    let topic = [("topic", "MetricsTopic")];
    // Every series carries the constant labels, metricsLabel's pair among them.
    assert_eq!(
        sample(
            &text,
            "rocketmq_broker_permission",
            &[("cluster", "DefaultCluster"), ("node_type", "broker"), ("instance_id", "i1"), ("otel_scope_name", "broker-meter")]
        ),
        Some(6.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "rocketmq_messages_in_total", &[("topic", "MetricsTopic"), ("message_type", "normal"), ("is_system", "false")]),
        Some(5.0),
        "{text}"
    );
    assert!(sample(&text, "rocketmq_throughput_in_total", &topic).unwrap_or(0.0) > 5.0 * 50.0, "{text}");
    assert_eq!(sample(&text, "rocketmq_message_size_count", &topic), Some(5.0), "{text}");
    assert_eq!(sample(&text, "rocketmq_message_size_bucket", &[("topic", "MetricsTopic"), ("le", "1024.0")]), Some(5.0), "{text}");
    assert_eq!(sample(&text, "rocketmq_messages_out_total", &[("topic", "MetricsTopic"), ("consumer_group", "mg")]), Some(5.0), "{text}");
    assert!(sample(&text, "rocketmq_throughput_out_total", &[("topic", "MetricsTopic"), ("consumer_group", "mg")]).unwrap_or(0.0) > 0.0, "{text}");
    // Lag: 5 stored, 3 committed; in flight: pulled up to 5, committed 3; nothing left to pull.
    let lag = [("consumer_group", "mg"), ("topic", "MetricsTopic"), ("is_retry", "false"), ("is_system", "false")];
    assert_eq!(sample(&text, "rocketmq_consumer_lag_messages", &lag), Some(2.0), "{text}");
    assert_eq!(sample(&text, "rocketmq_consumer_inflight_messages", &lag), Some(2.0), "{text}");
    assert_eq!(sample(&text, "rocketmq_consumer_ready_messages", &lag), Some(0.0), "{text}");
    assert!(sample(&text, "rocketmq_consumer_lag_latency_milliseconds", &lag).is_some(), "{text}");
    assert!(sample(&text, "rocketmq_consumer_queueing_latency_milliseconds", &lag).is_some(), "{text}");
    // The heartbeat's client: a Java client of our own version, pushing.
    let consumer = [
        ("consumer_group", "mg"),
        ("language", "java"),
        ("version", "v5_3_3"),
        ("consume_mode", "push"),
        ("protocol_type", "remoting"),
        ("is_system", "false"),
    ];
    assert_eq!(sample(&text, "rocketmq_consumer_connections", &consumer), Some(1.0), "{text}");
    assert_eq!(sample(&text, "rocketmq_producer_connections", &[("language", "java"), ("version", "v5_3_3")]), Some(1.0), "{text}");
    // Request latency, by Java's code names.
    let sends =
        [("request_code", "send_message_v2"), ("response_code", "success"), ("result", "success"), ("is_long_polling", "false"), ("protocol_type", "remoting")];
    assert_eq!(sample(&text, "rocketmq_rpc_latency_milliseconds_count", &sends), Some(5.0), "{text}");
    let long_polled = [("request_code", "pull_message"), ("response_code", "pull_not_found"), ("is_long_polling", "true")];
    assert_eq!(sample(&text, "rocketmq_rpc_latency_milliseconds_count", &long_polled), Some(1.0), "{text}");
    // Gauges of the broker and its store.
    assert!(sample(&text, "rocketmq_topic_number", &[]).unwrap_or(0.0) >= 1.0, "{text}");
    assert!(sample(&text, "rocketmq_consumer_group_number", &[]).is_some(), "{text}");
    for processor in
        ["send", "async_put", "pull", "ack", "query_message", "client_manager", "heartbeat", "lite_pull", "transaction", "consumer_manager", "admin", "reply"]
    {
        assert_eq!(sample(&text, "rocketmq_processor_watermark", &[("processor", processor)]), Some(0.0), "{processor}: {text}");
    }
    let storage = [("storage_type", "local"), ("storage_medium", "disk")];
    assert!(sample(&text, "rocketmq_storage_size_bytes", &storage).unwrap_or(0.0) > 0.0, "{text}");
    assert!(sample(&text, "rocketmq_storage_flush_behind_bytes", &storage).is_some(), "{text}");
    assert!(sample(&text, "rocketmq_storage_dispatch_behind_bytes", &storage).is_some(), "{text}");
    assert!(sample(&text, "rocketmq_storage_message_reserve_time_milliseconds", &storage).is_some(), "{text}");

    // Gauges are computed at a scrape (at most once a second, `RENDERED_FOR`): the group's lag
    // follows its commits.
    let commit = raw(RequestCode::UPDATE_CONSUMER_OFFSET, &[("consumerGroup", "mg"), ("topic", "MetricsTopic"), ("queueId", "0"), ("commitOffset", "5")]);
    assert_eq!(c.invoke(&addr, commit, TIMEOUT).await.unwrap().response_code(), ResponseCode::SUCCESS);
    let deadline = Instant::now() + remoting::metrics::exporter::RENDERED_FOR * 3;
    loop {
        let text = scrape(port).await;
        if sample(&text, "rocketmq_consumer_lag_messages", &lag) == Some(0.0) {
            break;
        }
        assert!(Instant::now() < deadline, "the lag never followed the commit:\n{text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    broker.shutdown().await;
    // The endpoint goes with the broker.
    let closed = tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(("127.0.0.1", port))).await;
    assert!(!matches!(closed, Ok(Ok(_))), "the metrics port still accepts after shutdown");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_metrics_port_in_use_stops_the_start_as_in_java() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let extra = [("metricsExporterType", "PROM"), ("metricsPromExporterHost", "127.0.0.1"), ("metricsPromExporterPort", port.as_str())];
    let started = try_start(dir.path(), &extra).await;
    let Err(e) = started else { panic!("started with its metrics port taken") };
    assert!(e.to_string().contains("metricsExporterType=PROM"), "{e}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delayed_message_counts_into_the_schedule_topic_then_out_of_it_into_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let port_text = port.to_string();
    let extra = [("metricsExporterType", "PROM"), ("metricsPromExporterHost", "127.0.0.1"), ("metricsPromExporterPort", port_text.as_str())];
    let broker = start(dir.path(), &extra).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let r = c.invoke(&addr, send("MetricsDelayed", 0, "later", "DELAY\u{1}1\u{2}"), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    let scheduled = [("topic", "SCHEDULE_TOPIC_XXXX"), ("message_type", "delay"), ("is_system", "true")];
    let delivered = [("topic", "MetricsDelayed"), ("message_type", "delay"), ("is_system", "false")];
    // Level 1 is one second.
    let deadline = Instant::now() + Duration::from_secs(15);
    let text = loop {
        let text = scrape(port).await;
        if sample(&text, "rocketmq_messages_in_total", &delivered).is_some() {
            break text;
        }
        assert!(Instant::now() < deadline, "the delayed message was never delivered:\n{text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(sample(&text, "rocketmq_messages_in_total", &scheduled), Some(1.0), "{text}");
    assert_eq!(sample(&text, "rocketmq_messages_in_total", &delivered), Some(1.0), "{text}");
    let schedule_out = [("topic", "SCHEDULE_TOPIC_XXXX"), ("consumer_group", "SCHEDULE_CONSUMER"), ("is_system", "true")];
    assert_eq!(sample(&text, "rocketmq_messages_out_total", &schedule_out), Some(1.0), "{text}");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timer_message_counts_in_and_out_of_the_timer_under_javas_families() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let port_text = port.to_string();
    let extra = [("metricsExporterType", "PROM"), ("metricsPromExporterHost", "127.0.0.1"), ("metricsPromExporterPort", port_text.as_str())];
    let broker = start(dir.path(), &extra).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    // One due in 2 s, one in 100 s (still pending when the test ends).
    for (body, delay, uniq) in [("soon", "2", "TM1"), ("later", "100", "TM2")] {
        let props = format!("TIMER_DELAY_SEC\u{1}{delay}\u{2}UNIQ_KEY\u{1}{uniq}\u{2}WAIT\u{1}true\u{2}");
        let mut h = send_header("MetricsTimer", 0, &props);
        h.born_timestamp = remoting::clock::now_ms();
        let r = c.invoke(&addr, send_request(h, body), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    }
    let storage = [("storage_type", "local"), ("storage_medium", "disk")];
    let topic = [("storage_type", "local"), ("storage_medium", "disk"), ("topic", "MetricsTimer")];
    let deadline = Instant::now() + Duration::from_secs(15);
    let text = loop {
        let text = scrape(port).await;
        if sample(&text, "rocketmq_timer_dequeue_total", &topic) == Some(1.0) && sample(&text, "rocketmq_timer_dequeue_lag", &storage) == Some(1.0) {
            break text;
        }
        assert!(Instant::now() < deadline, "the timer message was never released:\n{text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Counters and the set-latency histogram (seconds from birth to due time, Java's buckets).
    assert_eq!(sample(&text, "rocketmq_timer_enqueue_total", &topic), Some(2.0), "{text}");
    assert_eq!(sample(&text, "rocketmq_delay_message_latency_seconds_count", &topic), Some(2.0), "{text}");
    let bucket = |le: &'static str| [("topic", "MetricsTimer"), ("le", le)];
    assert_eq!(sample(&text, "rocketmq_delay_message_latency_seconds_bucket", &bucket("60.0")), Some(1.0), "{text}");
    assert_eq!(sample(&text, "rocketmq_delay_message_latency_seconds_bucket", &bucket("600.0")), Some(2.0), "{text}");
    assert_eq!(sample(&text, "rocketmq_delay_message_latency_seconds_bucket", &bucket("259200.0")), Some(2.0), "{text}");
    // Gauges: the one still pending, by topic and in the snapshot's 5-minute bound; nothing behind.
    assert_eq!(sample(&text, "rocketmq_timing_messages", &topic), Some(1.0), "{text}");
    assert_eq!(sample(&text, "rocketmq_timer_message_snapshot", &[("timer_bound_s", "5")]), Some(0.0), "{text}");
    assert_eq!(sample(&text, "rocketmq_timer_message_snapshot", &[("timer_bound_s", "300")]), Some(1.0), "{text}");
    assert_eq!(sample(&text, "rocketmq_timer_message_snapshot", &[("timer_bound_s", "86400")]), Some(0.0), "{text}");
    assert_eq!(sample(&text, "rocketmq_timer_enqueue_lag", &storage), Some(0.0), "{text}");
    let behind_s = sample(&text, "rocketmq_timer_dequeue_latency_milliseconds", &storage).unwrap_or(f64::NAN);
    assert!((0.0..=2.0).contains(&behind_s), "dequeue latency (Java reports seconds) {behind_s}:\n{text}");
    assert!(sample(&text, "rocketmq_timer_enqueue_latency_milliseconds", &storage).is_some(), "{text}");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_timer_no_timer_family_shows() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let port_text = port.to_string();
    let extra = [
        ("metricsExporterType", "PROM"),
        ("metricsPromExporterHost", "127.0.0.1"),
        ("metricsPromExporterPort", port_text.as_str()),
        ("timerWheelEnable", "false"),
    ];
    let broker = start(dir.path(), &extra).await;
    let text = scrape(port).await;
    assert!(text.contains("rocketmq_storage_flush_behind_bytes"), "{text}");
    assert!(!text.contains("rocketmq_timer") && !text.contains("rocketmq_timing"), "{text}");
    broker.shutdown().await;
}

/// Pop's families (Java 5.3.3's `PopMetricsManager`): the check point and ack put into the
/// revive topic, both read back by the revive service from their revive queue, the unacked
/// message revived into the retry topic, and the revive lag and latency of every revive queue.
#[tokio::test(flavor = "multi_thread")]
async fn pop_counts_its_revive_records_and_reports_each_revive_queue() {
    use broker::pop::headers::{AckMessageRequestHeader, PopMessageRequestHeader, PopMessageResponseHeader};
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let port_text = port.to_string();
    let extra = [
        ("brokerName", "broker-a"),
        ("metricsExporterType", "PROM"),
        ("metricsPromExporterHost", "127.0.0.1"),
        ("metricsPromExporterPort", port_text.as_str()),
    ];
    let broker = start(dir.path(), &extra).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    for body in ["acked", "revived"] {
        let r = c.invoke(&addr, send("PopMetrics", 0, body, ""), TIMEOUT).await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    }
    pull_found(&c, &addr, "PopMetrics", 0, 1).await;
    let h = PopMessageRequestHeader {
        consumer_group: group("pmg"),
        topic: topic("PopMetrics"),
        queue_id: 0,
        max_msg_nums: 1,
        invisible_time: 1000,
        poll_time: 0,
        born_time: remoting::clock::now_ms(),
        init_mode: 0,
        exp_type: None,
        exp: None,
        order: None,
        attempt_id: None,
    };
    let r = c.invoke(&addr, RemotingCommand::request_with_header(RequestCode::POP_MESSAGE, &h), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    let popped: PopMessageResponseHeader = r.decode_header().unwrap();
    let start = popped.start_offset_info.unwrap_or_default();
    let start_offset: i64 = start.rsplit(' ').next().unwrap().parse().unwrap();
    let handle = broker::pop::extra_info::ExtraInfo::new(
        start_offset,
        popped.pop_time,
        popped.invisible_time,
        popped.revive_qid,
        "PopMetrics",
        "broker-a",
        0,
        Some(start_offset),
    );
    let ack =
        AckMessageRequestHeader { consumer_group: group("pmg"), topic: topic("PopMetrics"), queue_id: 0, extra_info: handle.to_string(), offset: start_offset };
    let r = c.invoke(&addr, RemotingCommand::request_with_header(RequestCode::ACK_MESSAGE, &ack), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    let h = PopMessageRequestHeader { born_time: remoting::clock::now_ms(), ..h };
    let r = c.invoke(&addr, RemotingCommand::request_with_header(RequestCode::POP_MESSAGE, &h), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);

    let (in_ck, in_ack) = (
        [("consumer_group", "pmg"), ("topic", "PopMetrics"), ("revive_message_type", "CK"), ("put_status", "PUT_OK")],
        [("consumer_group", "pmg"), ("topic", "PopMetrics"), ("revive_message_type", "ACK"), ("put_status", "PUT_OK")],
    );
    let retry = [("consumer_group", "pmg"), ("topic", "PopMetrics"), ("put_status", "PUT_OK")];
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        let text = scrape(port).await;
        if sample(&text, "rocketmq_pop_revive_retry_messages_total", &retry).is_some() {
            break text;
        }
        assert!(Instant::now() < deadline, "nothing revived:\n{text}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(sample(&text, "rocketmq_pop_revive_in_message_total", &in_ck), Some(2.0), "{text}");
    assert_eq!(sample(&text, "rocketmq_pop_revive_in_message_total", &in_ack), Some(1.0), "{text}");
    assert_eq!(sample(&text, "rocketmq_pop_revive_retry_messages_total", &retry), Some(1.0), "{text}");
    // Read back from the revive queues the pops chose (each pass reads what is not revived yet).
    let out = |kind: &str| {
        (0..8)
            .filter_map(|q| {
                let q = q.to_string();
                sample(&text, "rocketmq_pop_revive_out_message_total", &[("consumer_group", "pmg"), ("queue_id", &q), ("revive_message_type", kind)])
            })
            .sum::<f64>()
    };
    assert!(out("CK") >= 2.0 && out("ACK") >= 1.0, "{text}");
    assert!(text.contains("queue_id=\""), "{text}");
    for q in 0..8 {
        let q = q.to_string();
        assert!(sample(&text, "rocketmq_pop_revive_lag_milliseconds", &[("queue_id", &q)]).is_some(), "{text}");
        assert!(sample(&text, "rocketmq_pop_revive_latency_milliseconds", &[("queue_id", &q)]).is_some(), "{text}");
    }
    assert_eq!(sample(&text, "rocketmq_pop_offset_buffer_size", &[]), Some(0.0));
    assert_eq!(sample(&text, "rocketmq_pop_checkpoint_buffer_size", &[]), Some(0.0));
    assert!(text.contains("# TYPE rocketmq_pop_revive_lag gauge"), "{text}");
    assert!(text.contains("# TYPE rocketmq_pop_revive_in_message counter"), "{text}");
    broker.shutdown().await;
}

/// `enablePopBufferMerge=true`: the buffer gauges report the check points held and the offsets
/// pending, the passes fill `rocketmq_pop_buffer_scan_time_consume` (Java's buckets), and a
/// check point acked in time counts no revive record.
#[tokio::test(flavor = "multi_thread")]
async fn the_pop_buffer_merge_reports_its_sizes_and_its_passes() {
    use common::pop::{ack_request, pop_request, popped};
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let port_text = port.to_string();
    let extra = [
        ("brokerName", "broker-a"),
        ("enablePopBufferMerge", "true"),
        ("metricsExporterType", "PROM"),
        ("metricsPromExporterHost", "127.0.0.1"),
        ("metricsPromExporterPort", port_text.as_str()),
    ];
    let broker = start(dir.path(), &extra).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let r = c.invoke(&addr, send("PopMerge", 0, "held", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    pull_found(&c, &addr, "PopMerge", 0, 0).await;
    let r = c.invoke(&addr, pop_request("PopMerge", 0, 30_000, 0, false), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    let got = popped(&r, "PopMerge");
    let text = scrape(port).await;
    assert_eq!(sample(&text, "rocketmq_pop_checkpoint_buffer_size", &[]), Some(1.0), "{text}");
    assert_eq!(sample(&text, "rocketmq_pop_offset_buffer_size", &[]), Some(1.0), "{text}");
    let r = c.invoke(&addr, ack_request("PopMerge", &got[0]), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    let deadline = Instant::now() + Duration::from_secs(5);
    let text = loop {
        let text = scrape(port).await;
        if sample(&text, "rocketmq_pop_checkpoint_buffer_size", &[]) == Some(0.0) && sample(&text, "rocketmq_pop_offset_buffer_size", &[]) == Some(0.0) {
            break text;
        }
        assert!(Instant::now() < deadline, "still held:\n{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let passes = sample(&text, "rocketmq_pop_buffer_scan_time_consume_milliseconds_count", &[]).unwrap_or(0.0);
    assert!(passes >= 1.0, "{text}");
    assert!(text.contains("rocketmq_pop_buffer_scan_time_consume_milliseconds_bucket{") && text.contains("le=\"3000.0\""), "{text}");
    assert!(!text.contains("revive_message_type=\"CK\""), "nothing written:\n{text}");
    broker.shutdown().await;
}

/// `--enable-proxy` with the proxy's `metricsExporterType` on: `rocketmq_proxy_up` is one more
/// family of the broker's exposition, with the broker's labels under the proxy's (node_type,
/// cluster, node_id, proxy_mode), as Java's local mode registers it on the broker's meter; with
/// the proxy's exporter off (Java's default) it is not there.
#[tokio::test(flavor = "multi_thread")]
async fn the_local_proxy_reports_itself_up_in_the_brokers_exposition_when_its_metrics_are_on() {
    for on in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let port_text = port.to_string();
        let extra = [
            ("metricsExporterType", "PROM"),
            ("metricsPromExporterHost", "127.0.0.1"),
            ("metricsPromExporterPort", port_text.as_str()),
            ("metricsLabel", "region:r1"),
            ("brokerClusterName", "MetricsCluster"),
        ];
        let mut broker = start(dir.path(), &extra).await;
        let config = proxy::config::ProxyConfig {
            grpc_server_port: free_port(),
            remoting_listen_port: 0,
            metrics_exporter_type: if on { "PROM" } else { "DISABLE" }.to_owned(),
            proxy_cluster_name: "ProxyCluster".to_owned(),
            proxy_name: "proxy-1".to_owned(),
            ..Default::default()
        };
        broker.enable_proxy(config).await.unwrap();
        let text = scrape(port).await;
        let labels = [
            ("node_type", "proxy"),
            ("cluster", "ProxyCluster"),
            ("node_id", "proxy-1"),
            ("proxy_mode", "local"),
            ("region", "r1"),
            ("otel_scope_name", "broker-meter"),
        ];
        assert_eq!(sample(&text, "rocketmq_proxy_up", &labels), on.then_some(1.0), "{text}");
        assert!(text.contains("rocketmq_storage_flush_behind_bytes"), "the broker's families are there too: {text}");
        broker.shutdown().await;
    }
}
