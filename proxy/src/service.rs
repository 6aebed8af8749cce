//! The RPCs of `MessagingService`, answered as Java's proxy 5.3.3 answers them (codes and
//! messages), over a [`Backend`].

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use parking_lot::Mutex;
use remoting::code::{RequestCode, ResponseCode};
use remoting::RemotingCommand;
use tokio::sync::mpsc;
use tonic::{Request, Response, Status, Streaming};

use crate::backend::{Backend, BackendError, ClientRequests, TopicRoute};
use crate::config::ProxyConfig;
use crate::convert::{self, names, ok_status, status, ReceiptHandle, Refusal};
use crate::pb;
use crate::pb::messaging_service_server::MessagingService;
use crate::pb::Code;
use crate::validate;

const CLIENT_ID: &str = "x-mq-client-id";
/// How long a broker call may take, past any long polling it asks for, when the client gave no
/// deadline (`grpc-timeout`).
const CALL_TIMEOUT: Duration = Duration::from_secs(3);
/// A broker call ends this long before the client's deadline, so the answer can reach it.
const DEADLINE_RESERVE: Duration = Duration::from_millis(100);
/// Transactions remembered for EndTransaction at most (oldest forgotten first).
const MAX_TRANSACTIONS: usize = 100_000;
/// How long Java's proxy waits for a broker's RECALL_MESSAGE answer.
const RECALL_TIMEOUT: Duration = Duration::from_secs(2);
/// Telemetry commands queued to one client at most.
const TELEMETRY_QUEUE: usize = 64;

fn now_ms() -> i64 {
    remoting::clock::now_ms()
}

/// What EndTransaction needs of a half message: where the broker stored it.
#[derive(Clone, Debug)]
struct HalfMessage {
    broker_name: String,
    producer_group: String,
    queue_offset: i64,
    commit_log_offset: i64,
    offset_msg_id: String,
}

/// A received message whose invisible time the proxy renews.
#[derive(Clone, Debug)]
struct Renewing {
    handle: String,
    topic: String,
    since_ms: i64,
}

/// Renewed handles held at most (new ones are not tracked past it; they become visible again).
const MAX_RENEWING: usize = 100_000;
/// Renew a handle when it becomes visible within this (Java's `renewAheadTimeMillis`).
const RENEW_AHEAD_MS: i64 = 10_000;
/// Stop renewing after this (Java's `renewMaxTimeMillis`).
const RENEW_MAX_MS: i64 = 3 * 3600 * 1000;
/// How often handles are checked (Java's `renewSchedulePeriodMillis`).
const RENEW_PERIOD: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Clients {
    settings: Mutex<HashMap<String, pb::Settings>>,
    telemetry: Mutex<HashMap<String, mpsc::Sender<Result<pb::TelemetryCommand, Status>>>>,
    receiving: Mutex<HashMap<String, usize>>,
    /// Handles of `auto_renew` receives not yet acked, by (client, group, message id): their
    /// invisible time is renewed until acked (Java's `enableProxyAutoRenew`).
    renewing: Mutex<HashMap<(String, String, String), Renewing>>,
    transactions: Mutex<(HashMap<String, HalfMessage>, std::collections::VecDeque<String>)>,
    /// The console's requests waiting for their client's answer.
    relays: crate::relay::Relays,
}

impl Clients {
    fn remember(&self, transaction_id: String, half: HalfMessage) {
        let mut t = self.transactions.lock();
        if t.0.insert(transaction_id.clone(), half).is_none() {
            t.1.push_back(transaction_id);
        }
        while t.1.len() > MAX_TRANSACTIONS {
            if let Some(old) = t.1.pop_front() {
                t.0.remove(&old);
            }
        }
    }
}

/// The service. Cheap to clone (shared state behind `Arc`s).
#[derive(Clone)]
pub struct Messaging {
    config: Arc<ProxyConfig>,
    backend: Arc<dyn Backend>,
    clients: Arc<Clients>,
    receives: Arc<AtomicUsize>,
    round_robin: Arc<AtomicUsize>,
}

struct CheckRequests(std::sync::Weak<Clients>);

impl ClientRequests for CheckRequests {
    /// CHECK_TRANSACTION_STATE: a RecoverOrphanedTransactionCommand on the client's Telemetry; the
    /// console's requests: the commands of [`crate::relay`].
    fn on_request(&self, client_id: &str, request: RemotingCommand, reply: crate::backend::Reply) {
        let Some(clients) = self.0.upgrade() else { return };
        let record = request.body.as_ref().and_then(|body| match store::message::decode_record(body, false) {
            Ok(store::message::RecordAt::Record(r)) => Some(r),
            _ => None,
        });
        if request.code != RequestCode::CHECK_TRANSACTION_STATE.0 {
            let message = record.as_ref().map(|r| convert::incoming(r, now_ms()));
            let command = clients.relays.command_for(&request, message, reply);
            let tx = clients.telemetry.lock().get(client_id).cloned();
            if let (Some(command), Some(tx)) = (command, tx) {
                let _ = tx.try_send(Ok(pb::TelemetryCommand { status: None, command: Some(command) }));
            }
            return;
        }
        let Some(r) = record.as_ref() else { return };
        let message = convert::incoming(r, now_ms());
        let transaction_id =
            request.ext("transactionId").map(str::to_owned).or_else(|| r.property(names::TRANSACTION_ID).map(str::to_owned)).unwrap_or_default();
        let offset = |k: &str| request.ext(k).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
        let half = HalfMessage {
            broker_name: request.ext(crate::backend::BROKER_NAME_EXT).unwrap_or_default().to_owned(),
            producer_group: r.property(names::PGROUP).unwrap_or_default().to_owned(),
            queue_offset: offset("tranStateTableOffset"),
            commit_log_offset: offset("commitLogOffset"),
            offset_msg_id: request.ext("offsetMsgId").or(request.ext("msgId")).unwrap_or_default().to_owned(),
        };
        clients.remember(transaction_id.clone(), half);
        let command = pb::TelemetryCommand {
            status: None,
            command: Some(pb::telemetry_command::Command::RecoverOrphanedTransactionCommand(pb::RecoverOrphanedTransactionCommand {
                message: Some(message),
                transaction_id,
            })),
        };
        let tx = clients.telemetry.lock().get(client_id).cloned();
        if let Some(tx) = tx {
            // A full queue drops the check; the broker checks again later.
            let _ = tx.try_send(Ok(command));
        }
    }
}

type Answer<T> = Result<Response<T>, Status>;

impl Messaging {
    /// Java's authentication step, before anything else of a request: its credentials checked by
    /// the backend (when the brokers check who sends), UNAUTHORIZED with the reason otherwise.
    fn authorize<T>(&self, request: &Request<T>) -> Result<(), Refusal> {
        let client = request.metadata().get(CLIENT_ID).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let credentials = crate::auth::credentials(request.metadata());
        self.backend.authenticate(client, credentials.as_ref()).map_err(|why| Refusal::new(Code::Unauthorized, why))
    }
}

fn client_id<T>(request: &Request<T>) -> Result<String, Refusal> {
    match request.metadata().get(CLIENT_ID).and_then(|v| v.to_str().ok()).filter(|s| !s.is_empty()) {
        Some(id) => Ok(id.to_owned()),
        None => Err(Refusal::new(Code::ClientIdRequired, "client id cannot be empty")),
    }
}

/// Java's answer when no broker has the topic: the client's `MQClientException` text (code 17
/// and the FAQ link).
fn topic_not_found(topic: &str) -> Refusal {
    Refusal::new(
        Code::TopicNotFound,
        format!(
            "CODE: 17  DESC: No topic route info in name server for the topic: {topic}\nFor more information, please visit the url, https://rocketmq.apache.org/docs/bestPractice/06FAQ"
        ),
    )
}

/// A `ProxyException` of Java's proxy: its message is the exception's `toString`.
fn proxy_exception(code: Code, message: &str) -> Refusal {
    Refusal::new(code, format!("org.apache.rocketmq.proxy.common.ProxyException: {message}"))
}

/// Java's `DefaultTopicMessageTypeValidator`, refusing as a `ProxyException`.
fn check_message_type(expected: &str, actual: &str) -> Result<(), Refusal> {
    convert::check_message_type(expected, actual).map_err(|m| proxy_exception(Code::MessagePropertyConflictWithType, &m))
}

/// What grpc-java answers for a method its service does not override (PullMessage, UpdateOffset,
/// GetOffset, QueryOffset in Java's proxy 5.3.3).
fn unimplemented(method: &str) -> Status {
    Status::unimplemented(format!("Method apache.rocketmq.v2.MessagingService/{method} is unimplemented"))
}

/// The time left before the client's deadline (`grpc-timeout`: digits and a unit), if it sent one.
fn deadline<T>(request: &Request<T>) -> Option<Duration> {
    let text = request.metadata().get("grpc-timeout").and_then(|v| v.to_str().ok())?;
    let (digits, unit) = text.split_at(text.len().saturating_sub(1));
    let n = digits.parse::<u64>().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The client's deadline less a reserve, between 100 ms and 60 s; [`CALL_TIMEOUT`] without one.
/// A call to a broker may take this long.
fn call_timeout<T>(request: &Request<T>) -> Duration {
    deadline(request).map_or(CALL_TIMEOUT, |d| d.saturating_sub(DEADLINE_RESERVE).clamp(Duration::from_millis(100), Duration::from_secs(60)))
}

/// Java's proxy's long-polling time of a receive: the request's `long_polling_timeout`, else the
/// time left less half the client's request timeout; within the proxy's bounds; never past the
/// client's deadline (a deadline too close for the shortest polling is refused, as Java refuses it:
/// BAD_REQUEST for clients before 5.0.3, ILLEGAL_POLLING_TIME from them on).
fn polling_time(
    asked: Option<i64>,
    remaining: Option<i64>,
    request_timeout: Option<i64>,
    (min, max): (i64, i64),
    client_version: &str,
) -> Result<i64, Refusal> {
    let remaining = remaining.unwrap_or(i64::MAX / 2);
    let polling = asked.unwrap_or_else(|| remaining - request_timeout.unwrap_or(0) / 2).clamp(min, max);
    if polling <= remaining {
        return Ok(polling);
    }
    if remaining >= min {
        return Ok(remaining);
    }
    let code = if client_version.is_empty() || "5.0.3" > client_version { Code::BadRequest } else { Code::IllegalPollingTime };
    Err(Refusal::new(code, "The deadline time remaining is not enough for polling, please check network condition"))
}

fn remote_addr<T>(request: &Request<T>) -> String {
    request.remote_addr().map(|a| a.to_string()).unwrap_or_default()
}

/// Java's `ResponseBuilder.buildStatus` for a broker's answer.
fn broker_status(response: &RemotingCommand) -> pb::Status {
    let remark = response.remark.clone().unwrap_or_default();
    match response.code {
        0 => ok_status(),
        2 => status(Code::TooManyRequests, remark),
        3 => status(Code::NotImplemented, remark),
        17 => status(Code::TopicNotFound, remark),
        26 => status(Code::ConsumerGroupNotFound, remark),
        _ => status(Code::InternalServerError, remark),
    }
}

fn backend_status(e: &BackendError) -> pb::Status {
    match e {
        BackendError::Timeout => status(Code::ProxyTimeout, e.to_string()),
        BackendError::Unauthorized(why) => status(Code::Unauthorized, why.clone()),
        _ => status(Code::InternalServerError, e.to_string()),
    }
}

fn resource_name(r: &Option<pb::Resource>) -> String {
    r.as_ref().map(|r| r.name.clone()).unwrap_or_default()
}

/// Java's `MessageQueue`s of a route: read-only, write-only, then read-write ids per broker.
fn message_queues(topic: &str, route: &TopicRoute, endpoints: &pb::Endpoints) -> Vec<pb::MessageQueue> {
    let accept = match route.message_type.as_str() {
        "FIFO" => vec![pb::MessageType::Fifo],
        "DELAY" => vec![pb::MessageType::Delay],
        "TRANSACTION" => vec![pb::MessageType::Transaction],
        "MIXED" => vec![pb::MessageType::Normal, pb::MessageType::Fifo, pb::MessageType::Delay, pb::MessageType::Transaction],
        _ => vec![pb::MessageType::Normal],
    };
    let mut out = Vec::new();
    for b in &route.brokers {
        let (readable, writable) = (b.perm & 4 != 0, b.perm & 2 != 0);
        let (mut r, mut w, mut rw) = (0, 0, 0);
        if readable && writable {
            rw = b.read_queue_nums.min(b.write_queue_nums);
            r = b.read_queue_nums - rw;
            w = b.write_queue_nums - rw;
        } else if writable {
            w = b.write_queue_nums;
        } else if readable {
            r = b.read_queue_nums;
        }
        let broker = pb::Broker { name: b.broker_name.clone(), id: 0, endpoints: Some(endpoints.clone()) };
        let mut id = 0;
        for (n, perm) in [(r, pb::Permission::Read), (w, pb::Permission::Write), (rw, pb::Permission::ReadWrite)] {
            for _ in 0..n.max(0) {
                out.push(pb::MessageQueue {
                    topic: Some(pb::Resource { resource_namespace: String::new(), name: topic.to_owned() }),
                    id,
                    permission: perm as i32,
                    broker: Some(broker.clone()),
                    accept_message_types: accept.iter().map(|t| *t as i32).collect(),
                });
                id += 1;
            }
        }
    }
    out
}

/// Java's `convertToPermission` of a queue's `PermName` bits (4 read, 2 write).
fn permission_of(perm: i32) -> pb::Permission {
    match (perm & 4 != 0, perm & 2 != 0) {
        (true, true) => pb::Permission::ReadWrite,
        (true, false) => pb::Permission::Read,
        (false, true) => pb::Permission::Write,
        (false, false) => pb::Permission::None,
    }
}

/// Java's default group retry policy (`CustomizedRetryPolicy`'s levels).
const RETRY_LEVELS_MS: [i64; 18] = [
    1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000, 420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000,
    7_200_000,
];

impl Messaging {
    pub fn new(config: ProxyConfig, backend: Arc<dyn Backend>) -> Messaging {
        let clients = Arc::new(Clients::default());
        backend.set_client_requests(Arc::new(CheckRequests(Arc::downgrade(&clients))));
        let me = Messaging { config: Arc::new(config), backend, clients, receives: Arc::new(AtomicUsize::new(0)), round_robin: Arc::new(AtomicUsize::new(0)) };
        if tokio::runtime::Handle::try_current().is_ok() {
            tokio::spawn(renew_loop(Arc::downgrade(&me.clients), me.backend.clone(), me.config.default_invisible_time_mills));
        }
        me
    }

    /// The handle to act on for a message: the renewed one when the proxy renews it (forgotten
    /// now), else the client's.
    fn current_handle(&self, client_id: &str, group: &str, message_id: &str, given: &str) -> String {
        let key = (client_id.to_owned(), group.to_owned(), message_id.to_owned());
        self.clients.renewing.lock().remove(&key).map_or_else(|| given.to_owned(), |r| r.handle)
    }

    /// Java's `convertToAddressList`: the request's hosts (none if it named none: Java does not
    /// refuse that) with this front's gRPC port.
    fn own_endpoints(&self, asked: Option<pb::Endpoints>) -> pb::Endpoints {
        let mut endpoints = asked.unwrap_or_default();
        for a in &mut endpoints.addresses {
            a.port = i32::from(self.config.grpc_server_port);
        }
        endpoints
    }

    pub fn config(&self) -> &ProxyConfig {
        &self.config
    }

    /// Java's `GrpcClientSettingsManager`: the client's settings merged with the proxy's.
    fn merged_settings(&self, mut s: pb::Settings) -> pb::Settings {
        let c = &self.config;
        match &mut s.pub_sub {
            Some(pb::settings::PubSub::Publishing(p)) => {
                p.validate_message_type = c.enable_topic_message_type_check;
                p.max_body_size = i32::try_from(c.max_message_size).unwrap_or(i32::MAX);
                s.backoff_policy = Some(pb::RetryPolicy {
                    max_attempts: c.grpc_client_producer_max_attempts,
                    strategy: Some(pb::retry_policy::Strategy::ExponentialBackoff(pb::ExponentialBackoff {
                        initial: Some(convert::duration(c.grpc_client_producer_backoff_initial_millis)),
                        max: Some(convert::duration(c.grpc_client_producer_backoff_max_millis)),
                        multiplier: c.grpc_client_producer_backoff_multiplier as f32,
                    })),
                });
            }
            Some(pb::settings::PubSub::Subscription(sub)) => {
                let group = resource_name(&sub.group);
                let g = self.backend.group(&group);
                sub.receive_batch_size = Some(c.grpc_client_consumer_long_polling_batch_size);
                sub.long_polling_timeout = Some(convert::duration(c.grpc_client_consumer_max_long_polling_timeout_millis));
                sub.fifo = Some(g.as_ref().is_some_and(|g| g.consume_orderly));
                s.backoff_policy = Some(pb::RetryPolicy {
                    max_attempts: g.as_ref().map_or(16, |g| g.retry_max_times) + 1,
                    strategy: Some(pb::retry_policy::Strategy::CustomizedBackoff(pb::CustomizedBackoff {
                        next: RETRY_LEVELS_MS.iter().map(|ms| convert::duration(*ms)).collect(),
                    })),
                });
            }
            None => {}
        }
        s.metric = Some(pb::Metric { on: false, endpoints: None });
        s
    }

    /// Registers the client with every broker as its settings say (HEART_BEAT on its connection).
    async fn heartbeat_brokers(&self, client_id: &str) -> pb::Status {
        let Some(settings) = self.clients.settings.lock().get(client_id).cloned() else {
            return status(Code::UnrecognizedClientType, "cannot find client settings for this client");
        };
        let mut data = serde_json::json!({"clientID": client_id, "consumerDataSet": [], "producerDataSet": []});
        match &settings.pub_sub {
            Some(pb::settings::PubSub::Publishing(p)) => {
                data["producerDataSet"] = p.topics.iter().map(|t| serde_json::json!({"groupName": t.name})).collect();
            }
            Some(pb::settings::PubSub::Subscription(s)) => {
                let subs: Vec<serde_json::Value> = s
                    .subscriptions
                    .iter()
                    .map(|e| {
                        let (kind, exp) = match &e.expression {
                            Some(f) if f.r#type == pb::FilterType::Sql as i32 => ("SQL92", f.expression.clone()),
                            Some(f) if !f.expression.is_empty() => ("TAG", f.expression.clone()),
                            _ => ("TAG", "*".to_owned()),
                        };
                        serde_json::json!({"topic": resource_name(&e.topic), "subString": exp, "expressionType": kind,
                            "tagsSet": [], "codeSet": [], "subVersion": now_ms(), "classFilterMode": false})
                    })
                    .collect();
                data["consumerDataSet"] = serde_json::json!([{
                    "groupName": resource_name(&s.group), "consumeType": "CONSUME_POP", "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": subs, "unitMode": false}]);
            }
            None => return status(Code::UnrecognizedClientType, "cannot find client settings for this client"),
        }
        let body = data.to_string();
        let mut result = ok_status();
        for broker in self.backend.brokers() {
            let request = RemotingCommand::request(RequestCode::HEART_BEAT).with_body(body.clone().into_bytes());
            match self.backend.invoke(client_id, &broker, request, CALL_TIMEOUT).await {
                Ok(r) if r.code == 0 => {}
                Ok(r) => result = broker_status(&r),
                Err(e) => result = backend_status(&e),
            }
        }
        result
    }

    async fn send_one(&self, client_id: &str, o: convert::Outgoing, route: &TopicRoute, single: bool, timeout: Duration) -> pb::SendResultEntry {
        let refused = |s: pb::Status| pb::SendResultEntry { status: Some(s), ..Default::default() };
        let queues: Vec<(&str, i32)> =
            route.brokers.iter().filter(|b| b.perm & 2 != 0).flat_map(|b| (0..b.write_queue_nums.max(0)).map(move |q| (b.broker_name.as_str(), q))).collect();
        if queues.is_empty() {
            return refused(status(Code::TopicNotFound, format!("no writable queue of topic {}", o.topic)));
        }
        let n = queues.len();
        let pick = match (&o.message_group, single) {
            (Some(g), true) => convert::consistent_hash(i64::from(convert::java_hash(g)), n as i32) as usize,
            _ => self.round_robin.fetch_add(1, Ordering::Relaxed) % n,
        };
        let (broker, queue_id) = queues[pick.min(n - 1)];
        let request = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2)
            .with_ext("a", o.topic.clone())
            .with_ext("b", o.topic.clone())
            .with_ext("c", "TBW102")
            .with_ext("d", "4")
            .with_ext("e", queue_id.to_string())
            .with_ext("f", o.sys_flag.to_string())
            .with_ext("g", o.born_timestamp.to_string())
            .with_ext("h", "0")
            .with_ext("i", o.properties.clone())
            .with_ext("j", o.reconsume_times.to_string())
            .with_ext("k", "false")
            .with_ext("m", "false")
            .with_ext("n", broker)
            .with_body(o.body.clone());
        let response = match self.backend.invoke(client_id, broker, request, timeout).await {
            Ok(r) => r,
            Err(e) => return refused(backend_status(&e)),
        };
        let sent = |code: Code| {
            refused(status(
                code,
                format!(
                    "send message failed, sendStatus={}",
                    match code {
                        Code::MasterPersistenceTimeout => "FLUSH_DISK_TIMEOUT",
                        Code::SlavePersistenceTimeout => "FLUSH_SLAVE_TIMEOUT",
                        _ => "SLAVE_NOT_AVAILABLE",
                    }
                ),
            ))
        };
        match response.code {
            0 => {}
            10 => return sent(Code::MasterPersistenceTimeout),
            12 => return sent(Code::SlavePersistenceTimeout),
            11 => return sent(Code::HaNotAvailable),
            _ => return refused(broker_status(&response)),
        }
        let offset_msg_id = response.ext("msgId").unwrap_or_default().to_owned();
        let queue_offset = response.ext("queueOffset").and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
        let transaction_id = response.ext("transactionId").filter(|t| !t.is_empty()).map(str::to_owned).unwrap_or_else(|| o.message_id.clone());
        if o.sys_flag & convert::TRANSACTION_PREPARED_TYPE != 0 {
            let commit_log_offset = store::message::decode_offset_message_id(&offset_msg_id).map_or(0, |(_, off)| off);
            self.clients.remember(
                transaction_id.clone(),
                HalfMessage {
                    broker_name: broker.to_owned(),
                    producer_group: o.topic.clone(),
                    queue_offset,
                    commit_log_offset,
                    offset_msg_id: offset_msg_id.clone(),
                },
            );
        }
        pb::SendResultEntry {
            status: Some(status(Code::Ok, "OK")),
            message_id: o.message_id.clone(),
            transaction_id,
            offset: queue_offset,
            recall_handle: response.ext("recallHandle").unwrap_or_default().to_owned(),
        }
    }

    async fn send(&self, request: Request<pb::SendMessageRequest>) -> Result<pb::SendMessageResponse, Refusal> {
        self.authorize(&request)?;
        let client_id = client_id(&request)?;
        let remote = remote_addr(&request);
        let timeout = call_timeout(&request);
        let req = request.into_inner();
        let Some(first) = req.messages.first() else {
            return Err(Refusal::new(Code::MessageCorrupted, "no message to send"));
        };
        let topic = resource_name(&first.topic);
        validate::topic(&topic)?;
        let mut outgoing = Vec::with_capacity(req.messages.len());
        for m in &req.messages {
            if m.topic != first.topic {
                return Err(Refusal::new(Code::MessageCorrupted, "topic in message is not same"));
            }
            outgoing.push(convert::outgoing(m, &self.config, &remote, now_ms())?);
        }
        let route = self.backend.route(&topic);
        // Java checks the first message only, and not on retry or DLQ topics.
        if self.config.enable_topic_message_type_check && !topic.starts_with("%RETRY%") && !topic.starts_with("%DLQ%") {
            if let Some(first) = outgoing.first() {
                check_message_type(route.as_ref().map_or("UNSPECIFIED", |r| r.message_type.as_str()), convert::type_of(first))?;
            }
        }
        let Some(route) = route else {
            return Err(topic_not_found(&topic));
        };
        let single = outgoing.len() == 1;
        let mut entries = Vec::with_capacity(outgoing.len());
        for o in outgoing {
            entries.push(self.send_one(&client_id, o, &route, single, timeout).await);
        }
        let mut codes: Vec<i32> = entries.iter().filter_map(|e| e.status.as_ref().map(|s| s.code)).collect();
        codes.sort_unstable();
        codes.dedup();
        let overall = match codes.as_slice() {
            [] => status(Code::InternalServerError, "send status is empty"),
            [one] => {
                let code = Code::try_from(*one).unwrap_or(Code::InternalServerError);
                match entries.iter().find_map(|e| e.status.clone()) {
                    Some(s) if code != Code::Ok => s,
                    _ => status(code, code.as_str_name()),
                }
            }
            _ => status(Code::MultipleResults, "MULTIPLE_RESULTS"),
        };
        Ok(pb::SendMessageResponse { status: Some(overall), entries })
    }

    fn receive_slot(&self, client_id: &str) -> Option<ReceiveSlot> {
        let mut per = self.clients.receiving.lock();
        let mine = per.entry(client_id.to_owned()).or_insert(0);
        if *mine >= self.config.max_receives_per_client || self.receives.load(Ordering::Relaxed) >= self.config.max_receives {
            return None;
        }
        *mine += 1;
        self.receives.fetch_add(1, Ordering::Relaxed);
        Some(ReceiveSlot { service: self.clone(), client_id: client_id.to_owned() })
    }

    async fn receive(&self, request: Request<pb::ReceiveMessageRequest>) -> Vec<pb::ReceiveMessageResponse> {
        let reply = |s: pb::Status| vec![pb::ReceiveMessageResponse { content: Some(pb::receive_message_response::Content::Status(s)) }];
        if let Err(r) = self.authorize(&request) {
            return reply(r.status());
        }
        let client_id = match client_id(&request) {
            Ok(id) => id,
            Err(r) => return reply(r.status()),
        };
        let Some(_slot) = self.receive_slot(&client_id) else {
            return reply(status(Code::TooManyRequests, "too many receive requests in flight"));
        };
        let remaining = deadline(&request).map(|d| d.as_millis().min(i64::MAX as u128) as i64);
        let client_version = request.metadata().get("x-mq-client-version").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        let req = request.into_inner();
        // Java's proxy fails on the missing settings (a NullPointerException): INTERNAL_SERVER_ERROR.
        let Some(settings) = self.clients.settings.lock().get(&client_id).cloned() else {
            return reply(status(Code::InternalServerError, "cannot find client settings for this client"));
        };
        let max_attempts = self.merged_settings(settings.clone()).backoff_policy.map_or(0, |b| b.max_attempts);
        let fifo = matches!(&settings.pub_sub, Some(pb::settings::PubSub::Subscription(s)) if s.fifo == Some(true))
            || req.group.as_ref().and_then(|g| self.backend.group(&g.name)).is_some_and(|g| g.consume_orderly);
        let c = &self.config;
        let polling = match polling_time(
            req.long_polling_timeout.as_ref().map(convert::duration_ms),
            remaining,
            settings.request_timeout.as_ref().map(convert::duration_ms),
            (c.grpc_client_consumer_min_long_polling_timeout_millis, c.grpc_client_consumer_max_long_polling_timeout_millis),
            &client_version,
        ) {
            Ok(p) => p,
            Err(r) => return reply(r.status()),
        };
        let topic = req.message_queue.as_ref().map(|q| resource_name(&q.topic)).unwrap_or_default();
        let group = resource_name(&req.group);
        if let Err(r) = validate::topic_and_group(&topic, &group) {
            return reply(r.status());
        }
        let invisible = if req.auto_renew {
            c.default_invisible_time_mills
        } else {
            let ms = req.invisible_duration.as_ref().map_or(0, convert::duration_ms);
            if let Err(r) = validate::invisible_time(ms, c.min_invisible_time_mills_for_recv, c.max_invisible_time_mills) {
                return reply(r.status());
            }
            ms
        };
        let (exp_type, exp) = match &req.filter_expression {
            Some(f) if f.r#type == pb::FilterType::Sql as i32 => ("SQL92", f.expression.clone()),
            Some(f) if !f.expression.is_empty() => ("TAG", f.expression.clone()),
            _ => ("TAG", "*".to_owned()),
        };
        if self.backend.route(&topic).is_none() {
            return reply(topic_not_found(&topic).status());
        }
        // Java's proxy sizes a list by the batch size: a negative one fails (IllegalArgumentException).
        if req.batch_size < 0 {
            return reply(status(Code::InternalServerError, format!("java.lang.IllegalArgumentException: Illegal Capacity: {}", req.batch_size)));
        }
        let broker = req
            .message_queue
            .as_ref()
            .and_then(|q| q.broker.as_ref())
            .map(|b| b.name.clone())
            .filter(|n| !n.is_empty())
            .or_else(|| self.backend.brokers().into_iter().next())
            .unwrap_or_default();
        let poll = (polling - c.long_polling_reserve_time_in_millis).max(0);
        let mut pop = RemotingCommand::request(RequestCode::POP_MESSAGE)
            .with_ext("consumerGroup", group.clone())
            .with_ext("topic", topic.clone())
            .with_ext("queueId", "-1")
            .with_ext("maxMsgNums", req.batch_size.clamp(1, 32).to_string())
            .with_ext("invisibleTime", invisible.to_string())
            .with_ext("pollTime", poll.to_string())
            .with_ext("bornTime", now_ms().to_string())
            .with_ext("initMode", "1")
            .with_ext("expType", exp_type)
            .with_ext("exp", exp)
            .with_ext("order", fifo.to_string());
        if let Some(a) = &req.attempt_id {
            pop = pop.with_ext("attemptId", a.clone());
        }
        let timeout = Duration::from_millis(poll as u64) + CALL_TIMEOUT;
        let response = match self.backend.invoke(&client_id, &broker, pop, timeout).await {
            Ok(r) => r,
            Err(e) => return reply(backend_status(&e)),
        };
        match response.code {
            0 => {}
            c if c == ResponseCode::POLLING_TIMEOUT.0 || c == ResponseCode::NO_MESSAGE.0 || c == 19 || c == 20 => {
                return reply(status(Code::MessageNotFound, "no new message"));
            }
            // POLLING_FULL
            209 => return reply(status(Code::TooManyRequests, "polling full")),
            _ => return reply(broker_status(&response)),
        }
        let answer = convert::PopAnswer::from_response(&broker, &response);
        let mut messages = Vec::new();
        let mut body = response.body_bytes();
        let now = now_ms();
        while !body.is_empty() {
            match store::message::decode_record(body, false) {
                Ok(store::message::RecordAt::Record(r)) => {
                    let mut m = convert::incoming(&r, now);
                    let mut reconsume_times = r.reconsume_times;
                    if let Some(s) = m.system_properties.as_mut() {
                        s.invisible_duration = Some(convert::duration(invisible));
                        let handle = match s.receipt_handle.take() {
                            Some(h) => h,
                            None => {
                                let (handle, order_count) = answer.handle(r.topic, r.queue_id, r.queue_offset);
                                if let Some(count) = order_count {
                                    reconsume_times = count;
                                    s.delivery_attempt = Some(count.saturating_add(1));
                                }
                                handle
                            }
                        };
                        // Java's proxy appends the commit-log offset (ForwardMessageToDeadLetterQueue needs it).
                        s.receipt_handle = Some(format!("{handle} {}", r.physical_offset));
                    }
                    // Java's `PopMessageResultFilterImpl`: past the attempts, to the DLQ instead.
                    if max_attempts > 0 && reconsume_times >= max_attempts {
                        let handle = m.system_properties.as_ref().and_then(|s| s.receipt_handle.clone()).unwrap_or_default();
                        let id = m.system_properties.as_ref().map(|s| s.message_id.clone()).unwrap_or_default();
                        if let Ok(h) = ReceiptHandle::parse(&handle) {
                            let dlq = self.forward_to_dlq(&client_id, &h, &id, &group, &topic).await;
                            if dlq.code != Code::Ok as i32 {
                                tracing::warn!(message_id = id, status = ?dlq, "cannot forward a message past its attempts to the DLQ");
                            }
                        }
                    } else {
                        if req.auto_renew {
                            if let Some(s) = m.system_properties.as_ref() {
                                let mut renewing = self.clients.renewing.lock();
                                if renewing.len() < MAX_RENEWING {
                                    let key = (client_id.clone(), group.clone(), s.message_id.clone());
                                    let handle = s.receipt_handle.clone().unwrap_or_default();
                                    renewing.insert(key, Renewing { handle, topic: topic.clone(), since_ms: now });
                                }
                            }
                        }
                        messages.push(pb::ReceiveMessageResponse { content: Some(pb::receive_message_response::Content::Message(m)) });
                    }
                    body = body.get(r.store_size.max(1) as usize..).unwrap_or_default();
                }
                Ok(store::message::RecordAt::Blank) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "undecodable message in a pop answer");
                    break;
                }
            }
        }
        if messages.is_empty() {
            return reply(status(Code::MessageNotFound, "no match message"));
        }
        let mut out = reply(ok_status());
        out.extend(messages);
        out
    }

    /// Java's `forwardMessageToDeadLetterQueue`: CONSUMER_SEND_MSG_BACK to the DLQ by commit-log
    /// offset, then the ack.
    async fn forward_to_dlq(&self, client_id: &str, h: &ReceiptHandle, message_id: &str, group: &str, topic: &str) -> pb::Status {
        let Some(commit_log_offset) = h.commit_log_offset.filter(|o| *o >= 0) else {
            return status(Code::InvalidReceiptHandle, "commit log offset is empty");
        };
        let back = RemotingCommand::request(RequestCode::CONSUMER_SEND_MSG_BACK)
            .with_ext("offset", commit_log_offset.to_string())
            .with_ext("group", group)
            .with_ext("delayLevel", "-1")
            .with_ext("originMsgId", message_id)
            .with_ext("originTopic", h.real_topic(topic, group))
            .with_ext("maxReconsumeTimes", "0");
        match self.backend.invoke(client_id, &h.broker_name, back, CALL_TIMEOUT).await {
            Ok(r) if r.code == 0 => {
                let ack = RemotingCommand::request(RequestCode::ACK_MESSAGE)
                    .with_ext("consumerGroup", group)
                    .with_ext("topic", h.real_topic(topic, group))
                    .with_ext("queueId", h.queue_id.to_string())
                    .with_ext("extraInfo", h.text.clone())
                    .with_ext("offset", h.offset.to_string());
                if let Ok(a) = self.backend.invoke(client_id, &h.broker_name, ack, CALL_TIMEOUT).await {
                    if a.code != 0 {
                        tracing::debug!(code = a.code, remark = ?a.remark, "ack after the DLQ forward refused");
                    }
                }
                ok_status()
            }
            Ok(r) => broker_status(&r),
            Err(e) => backend_status(&e),
        }
    }

    async fn ack(&self, request: Request<pb::AckMessageRequest>) -> Result<pb::AckMessageResponse, Refusal> {
        self.authorize(&request)?;
        let client_id = client_id(&request)?;
        let timeout = call_timeout(&request);
        let req = request.into_inner();
        let (group, topic) = (resource_name(&req.group), resource_name(&req.topic));
        validate::topic(&topic)?;
        validate::group(&group)?;
        let mut entries = Vec::with_capacity(req.entries.len());
        for e in req.entries {
            let current = self.current_handle(&client_id, &group, &e.message_id, &e.receipt_handle);
            let s = match ReceiptHandle::parse(&current) {
                Err(r) => r.status(),
                Ok(h) if h.is_expired(now_ms()) => proxy_exception(Code::InvalidReceiptHandle, "receipt handle is expired").status(),
                Ok(h) => {
                    let ack = RemotingCommand::request(RequestCode::ACK_MESSAGE)
                        .with_ext("consumerGroup", group.clone())
                        .with_ext("topic", h.real_topic(&topic, &group))
                        .with_ext("queueId", h.queue_id.to_string())
                        .with_ext("extraInfo", h.text.clone())
                        .with_ext("offset", h.offset.to_string());
                    match self.backend.invoke(&client_id, &h.broker_name, ack, timeout).await {
                        Ok(r) if r.code == 0 => ok_status(),
                        Ok(r) => broker_status(&r),
                        Err(e) => backend_status(&e),
                    }
                }
            };
            entries.push(pb::AckMessageResultEntry { message_id: e.message_id, receipt_handle: e.receipt_handle, status: Some(s) });
        }
        let mut codes: Vec<i32> = entries.iter().filter_map(|e| e.status.as_ref().map(|s| s.code)).collect();
        codes.sort_unstable();
        codes.dedup();
        // Java's `setAckResponseStatus`: the one code with its name, else MULTIPLE_RESULTS.
        let overall = match codes.as_slice() {
            [one] => {
                let code = Code::try_from(*one).unwrap_or(Code::InternalServerError);
                status(code, code.as_str_name())
            }
            [] => status(Code::InternalServerError, "ack message result is empty"),
            _ => status(Code::MultipleResults, "MULTIPLE_RESULTS"),
        };
        Ok(pb::AckMessageResponse { status: Some(overall), entries })
    }

    async fn change_invisible(&self, request: Request<pb::ChangeInvisibleDurationRequest>) -> Result<pb::ChangeInvisibleDurationResponse, Refusal> {
        self.authorize(&request)?;
        let client_id = client_id(&request)?;
        let timeout = call_timeout(&request);
        let req = request.into_inner();
        let (group, topic) = (resource_name(&req.group), resource_name(&req.topic));
        validate::topic(&topic)?;
        validate::group(&group)?;
        let invisible = req.invisible_duration.as_ref().map_or(0, convert::duration_ms);
        validate::invisible_time(invisible, 0, self.config.max_invisible_time_mills)?;
        ReceiptHandle::parse(&req.receipt_handle)?;
        let h = ReceiptHandle::parse(&self.current_handle(&client_id, &group, &req.message_id, &req.receipt_handle))?;
        if h.is_expired(now_ms()) {
            return Err(proxy_exception(Code::InvalidReceiptHandle, "receipt handle is expired"));
        }
        let change = change_invisible_command(&h, &group, &topic, invisible);
        let r = match self.backend.invoke(&client_id, &h.broker_name, change, timeout).await {
            Ok(r) => r,
            Err(e) => return Ok(pb::ChangeInvisibleDurationResponse { status: Some(backend_status(&e)), receipt_handle: String::new() }),
        };
        if r.code != 0 {
            return Ok(pb::ChangeInvisibleDurationResponse { status: Some(broker_status(&r)), receipt_handle: String::new() });
        }
        let num = |k: &str| r.ext(k).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
        let handle = h.renewed(num("popTime"), num("invisibleTime"), num("reviveQid") as i32);
        Ok(pb::ChangeInvisibleDurationResponse { status: Some(ok_status()), receipt_handle: handle })
    }

    /// Java's `RecallMessageActivity`: the topic must be a DELAY one (with the type check on), the
    /// handle names the broker, which cancels the timer message (RECALL_MESSAGE) and answers its id.
    async fn recall(&self, request: Request<pb::RecallMessageRequest>) -> Result<pb::RecallMessageResponse, Refusal> {
        let client_id = client_id(&request)?;
        let timeout = call_timeout(&request).min(RECALL_TIMEOUT);
        let req = request.into_inner();
        let topic = resource_name(&req.topic);
        validate::topic(&topic)?;
        if self.config.enable_topic_message_type_check {
            let route = self.backend.route(&topic);
            check_message_type(route.as_ref().map_or("UNSPECIFIED", |r| r.message_type.as_str()), "DELAY")?;
        }
        let Some(broker) = convert::recall_handle_broker(&req.recall_handle) else {
            return Err(proxy_exception(Code::InternalServerError, "recall handle is invalid"));
        };
        let recall = RemotingCommand::request(RequestCode::RECALL_MESSAGE)
            .with_ext("topic", topic)
            .with_ext("recallHandle", req.recall_handle)
            .with_ext("bname", broker.clone());
        let answer = |s: pb::Status, id: String| pb::RecallMessageResponse { status: Some(s), message_id: id };
        Ok(match self.backend.invoke(&client_id, &broker, recall, timeout).await {
            Ok(r) if r.code == 0 => answer(ok_status(), r.ext("msgId").unwrap_or_default().to_owned()),
            Ok(r) => answer(broker_status(&r), String::new()),
            Err(e) => answer(backend_status(&e), String::new()),
        })
    }

    async fn end_transaction(&self, request: Request<pb::EndTransactionRequest>) -> Result<pb::EndTransactionResponse, Refusal> {
        self.authorize(&request)?;
        let client_id = client_id(&request)?;
        let req = request.into_inner();
        let topic = resource_name(&req.topic);
        validate::topic(&topic)?;
        if req.transaction_id.is_empty() {
            return Err(Refusal::new(Code::InvalidTransactionId, "transaction id cannot be empty"));
        }
        let half = self.clients.transactions.lock().0.get(&req.transaction_id).cloned();
        let Some(half) = half else {
            // Java's wording.
            return Err(proxy_exception(Code::InternalServerError, "cannot found transaction data"));
        };
        let commit_or_rollback = match pb::TransactionResolution::try_from(req.resolution) {
            Ok(pb::TransactionResolution::Commit) => 8,
            Ok(pb::TransactionResolution::Rollback) => 12,
            _ => 0,
        };
        let from_check = req.source == pb::TransactionSource::SourceServerCheck as i32;
        let broker = if half.broker_name.is_empty() { self.backend.brokers().into_iter().next().unwrap_or_default() } else { half.broker_name.clone() };
        let group = if half.producer_group.is_empty() { topic.clone() } else { half.producer_group.clone() };
        let end = RemotingCommand::request(RequestCode::END_TRANSACTION)
            .with_ext("producerGroup", group)
            .with_ext("tranStateTableOffset", half.queue_offset.to_string())
            .with_ext("commitLogOffset", half.commit_log_offset.to_string())
            .with_ext("commitOrRollback", commit_or_rollback.to_string())
            .with_ext("fromTransactionCheck", from_check.to_string())
            .with_ext("msgId", half.offset_msg_id.clone())
            .with_ext("transactionId", req.transaction_id.clone());
        let s = match self.backend.invoke(&client_id, &broker, end.mark_oneway(), CALL_TIMEOUT).await {
            Ok(_) => ok_status(),
            Err(e) => backend_status(&e),
        };
        self.clients.transactions.lock().0.remove(&req.transaction_id);
        Ok(pb::EndTransactionResponse { status: Some(s) })
    }
}

/// Java's `ReceiptHandleManager`: every 5 s, the tracked handles that become visible within 10 s
/// get another `default_invisible_ms` (CHANGE_MESSAGE_INVISIBLETIME), for at most 3 h; a refused
/// renewal forgets the handle. Ends when the service is gone.
/// CHANGE_MESSAGE_INVISIBLETIME of the message a receipt handle names, read by `group` of `topic`.
fn change_invisible_command(h: &ReceiptHandle, group: &str, topic: &str, invisible_ms: i64) -> RemotingCommand {
    RemotingCommand::request(RequestCode::CHANGE_MESSAGE_INVISIBLETIME)
        .with_ext("consumerGroup", group.to_owned())
        .with_ext("topic", h.real_topic(topic, group))
        .with_ext("queueId", h.queue_id.to_string())
        .with_ext("extraInfo", h.text.clone())
        .with_ext("offset", h.offset.to_string())
        .with_ext("invisibleTime", invisible_ms.to_string())
}

/// How soon a message received for a client that went away before it was written is visible
/// again (Java's `NACK_INVISIBLE_TIME`).
const NACK_INVISIBLE_MS: i64 = 1_000;

impl Messaging {
    /// The messages of a receive its client did not take (its stream closed first): visible again
    /// in a second, and no longer renewed, as Java's proxy nacks them.
    async fn nack_unwritten(&self, client_id: &str, group: &str, unwritten: impl Iterator<Item = pb::ReceiveMessageResponse>) {
        for item in unwritten {
            let Some(pb::receive_message_response::Content::Message(m)) = item.content else { continue };
            let Some(sys) = m.system_properties.as_ref() else { continue };
            let Some(h) = sys.receipt_handle.as_deref().and_then(|h| ReceiptHandle::parse(h).ok()) else { continue };
            self.clients.renewing.lock().remove(&(client_id.to_owned(), group.to_owned(), sys.message_id.clone()));
            let topic = resource_name(&m.topic);
            let change = change_invisible_command(&h, group, &topic, NACK_INVISIBLE_MS);
            let _ = self.backend.invoke(client_id, &h.broker_name, change, CALL_TIMEOUT).await;
        }
    }
}

async fn renew_loop(clients: std::sync::Weak<Clients>, backend: Arc<dyn Backend>, default_invisible_ms: i64) {
    loop {
        tokio::time::sleep(RENEW_PERIOD).await;
        let Some(clients) = clients.upgrade() else { return };
        let now = now_ms();
        let due: Vec<((String, String, String), Renewing)> = {
            let mut renewing = clients.renewing.lock();
            renewing.retain(|_, r| now - r.since_ms < RENEW_MAX_MS);
            renewing
                .iter()
                .filter(|(_, r)| ReceiptHandle::parse(&r.handle).is_ok_and(|h| h.pop_time.saturating_add(h.invisible_time) - now <= RENEW_AHEAD_MS))
                .map(|(k, r)| (k.clone(), r.clone()))
                .collect()
        };
        for ((client_id, group, message_id), r) in due {
            let Ok(h) = ReceiptHandle::parse(&r.handle) else { continue };
            let change = change_invisible_command(&h, &group, &r.topic, default_invisible_ms);
            let renewed = match backend.invoke(&client_id, &h.broker_name, change, CALL_TIMEOUT).await {
                Ok(a) if a.code == 0 => {
                    let num = |k: &str| a.ext(k).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
                    Some(h.renewed(num("popTime"), num("invisibleTime"), num("reviveQid") as i32))
                }
                _ => None,
            };
            let key = (client_id, group, message_id);
            let mut renewing = clients.renewing.lock();
            match renewed {
                // Still tracked (not acked meanwhile): the new handle.
                Some(handle) => {
                    if let Some(entry) = renewing.get_mut(&key).filter(|e| e.handle == r.handle) {
                        entry.handle = handle;
                    }
                }
                None => {
                    renewing.remove(&key);
                }
            }
        }
    }
}

struct ReceiveSlot {
    service: Messaging,
    client_id: String,
}

impl Drop for ReceiveSlot {
    fn drop(&mut self) {
        self.service.receives.fetch_sub(1, Ordering::Relaxed);
        let mut per = self.service.clients.receiving.lock();
        if let Some(n) = per.get_mut(&self.client_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                per.remove(&self.client_id);
            }
        }
    }
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl MessagingService for Messaging {
    async fn query_route(&self, request: Request<pb::QueryRouteRequest>) -> Answer<pb::QueryRouteResponse> {
        let answer = |s: pb::Status, q| pb::QueryRouteResponse { status: Some(s), message_queues: q };
        if let Err(r) = self.authorize(&request).and_then(|()| client_id(&request).map(drop)) {
            return Ok(Response::new(answer(r.status(), vec![])));
        }
        let req = request.into_inner();
        let topic = resource_name(&req.topic);
        if let Err(r) = validate::topic(&topic) {
            return Ok(Response::new(answer(r.status(), vec![])));
        }
        let endpoints = self.own_endpoints(req.endpoints);
        match self.backend.route(&topic) {
            Some(route) => Ok(Response::new(answer(ok_status(), message_queues(&topic, &route, &endpoints)))),
            None => Ok(Response::new(answer(topic_not_found(&topic).status(), vec![]))),
        }
    }

    async fn heartbeat(&self, request: Request<pb::HeartbeatRequest>) -> Answer<pb::HeartbeatResponse> {
        let s = match self.authorize(&request).and_then(|()| client_id(&request)) {
            Ok(id) => {
                if let Some(addr) = request.remote_addr() {
                    self.backend.client_address(&id, addr);
                }
                self.heartbeat_brokers(&id).await
            }
            Err(r) => r.status(),
        };
        Ok(Response::new(pb::HeartbeatResponse { status: Some(s) }))
    }

    async fn send_message(&self, request: Request<pb::SendMessageRequest>) -> Answer<pb::SendMessageResponse> {
        Ok(Response::new(self.send(request).await.unwrap_or_else(|r| pb::SendMessageResponse { status: Some(r.status()), entries: vec![] })))
    }

    async fn query_assignment(&self, request: Request<pb::QueryAssignmentRequest>) -> Answer<pb::QueryAssignmentResponse> {
        let answer = |s, a| pb::QueryAssignmentResponse { status: Some(s), assignments: a };
        if let Err(r) = self.authorize(&request).and_then(|()| client_id(&request).map(drop)) {
            return Ok(Response::new(answer(r.status(), vec![])));
        }
        let req = request.into_inner();
        let topic = resource_name(&req.topic);
        let group = resource_name(&req.group);
        if let Err(r) = validate::topic_and_group(&topic, &group) {
            return Ok(Response::new(answer(r.status(), vec![])));
        }
        let Some(route) = self.backend.route(&topic) else {
            return Ok(Response::new(answer(topic_not_found(&topic).status(), vec![])));
        };
        let endpoints = self.own_endpoints(req.endpoints);
        // Java: an orderly group gets each readable queue of each broker (one receive loop per
        // queue); any other one assignment per broker, queue id -1. Receives pop queue -1 either way.
        let fifo = self.backend.group(&group).is_some_and(|g| g.consume_orderly);
        let assignments = route
            .brokers
            .iter()
            .filter(|b| b.perm & 4 != 0 && b.read_queue_nums > 0)
            .flat_map(|b| {
                let ids = if fifo { (0..b.read_queue_nums).collect::<Vec<_>>() } else { vec![-1] };
                ids.into_iter().map(|id| pb::Assignment {
                    message_queue: Some(pb::MessageQueue {
                        topic: req.topic.clone(),
                        id,
                        permission: permission_of(b.perm) as i32,
                        broker: Some(pb::Broker { name: b.broker_name.clone(), id: 0, endpoints: Some(endpoints.clone()) }),
                        accept_message_types: vec![],
                    }),
                })
            })
            .collect::<Vec<_>>();
        if assignments.is_empty() {
            return Ok(Response::new(answer(status(Code::Forbidden, "no readable queue"), vec![])));
        }
        Ok(Response::new(answer(ok_status(), assignments)))
    }

    type ReceiveMessageStream = BoxStream<pb::ReceiveMessageResponse>;

    async fn receive_message(&self, request: Request<pb::ReceiveMessageRequest>) -> Answer<Self::ReceiveMessageStream> {
        // The receive runs to its end even if the client goes away meanwhile (its pop is under way
        // at the broker); what cannot be written then is nacked. One item in flight at a time, so
        // an item is not taken from here unless the stream is still there to write it.
        let (client, group) = (client_id(&request).unwrap_or_default(), resource_name(&request.get_ref().group));
        let (tx, rx) = mpsc::channel(1);
        let me = self.clone();
        tokio::spawn(async move {
            let mut items = me.receive(request).await.into_iter();
            while let Some(item) = items.next() {
                if let Err(unsent) = tx.send(Ok(item)).await {
                    if let Ok(item) = unsent.0 {
                        me.nack_unwritten(&client, &group, std::iter::once(item).chain(items)).await;
                    }
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))))
    }

    async fn ack_message(&self, request: Request<pb::AckMessageRequest>) -> Answer<pb::AckMessageResponse> {
        Ok(Response::new(self.ack(request).await.unwrap_or_else(|r| pb::AckMessageResponse { status: Some(r.status()), entries: vec![] })))
    }

    async fn forward_message_to_dead_letter_queue(
        &self,
        request: Request<pb::ForwardMessageToDeadLetterQueueRequest>,
    ) -> Answer<pb::ForwardMessageToDeadLetterQueueResponse> {
        let answer = |s: pb::Status| Response::new(pb::ForwardMessageToDeadLetterQueueResponse { status: Some(s) });
        let client_id = match self.authorize(&request).and_then(|()| client_id(&request)) {
            Ok(id) => id,
            Err(r) => return Ok(answer(r.status())),
        };
        let req = request.into_inner();
        let (group, topic) = (resource_name(&req.group), resource_name(&req.topic));
        if let Err(r) = validate::topic_and_group(&topic, &group) {
            return Ok(answer(r.status()));
        }
        let h = match ReceiptHandle::parse(&req.receipt_handle) {
            Ok(h) => h,
            Err(r) => return Ok(answer(r.status())),
        };
        Ok(answer(self.forward_to_dlq(&client_id, &h, &req.message_id, &group, &topic).await))
    }

    type PullMessageStream = BoxStream<pb::PullMessageResponse>;

    async fn pull_message(&self, _request: Request<pb::PullMessageRequest>) -> Answer<Self::PullMessageStream> {
        Err(unimplemented("PullMessage"))
    }

    async fn update_offset(&self, _request: Request<pb::UpdateOffsetRequest>) -> Answer<pb::UpdateOffsetResponse> {
        Err(unimplemented("UpdateOffset"))
    }

    async fn get_offset(&self, _request: Request<pb::GetOffsetRequest>) -> Answer<pb::GetOffsetResponse> {
        Err(unimplemented("GetOffset"))
    }

    async fn query_offset(&self, _request: Request<pb::QueryOffsetRequest>) -> Answer<pb::QueryOffsetResponse> {
        Err(unimplemented("QueryOffset"))
    }

    async fn end_transaction(&self, request: Request<pb::EndTransactionRequest>) -> Answer<pb::EndTransactionResponse> {
        Ok(Response::new(Messaging::end_transaction(self, request).await.unwrap_or_else(|r| pb::EndTransactionResponse { status: Some(r.status()) })))
    }

    type TelemetryStream = BoxStream<pb::TelemetryCommand>;

    async fn telemetry(&self, request: Request<Streaming<pb::TelemetryCommand>>) -> Answer<Self::TelemetryStream> {
        if let Err(r) = self.authorize(&request) {
            let refused = pb::TelemetryCommand { status: Some(r.status()), command: None };
            return Ok(Response::new(Box::pin(futures::stream::iter([Ok(refused)]))));
        }
        let client_id = client_id(&request).map_err(|r| Status::invalid_argument(r.message))?;
        if let Some(addr) = request.remote_addr() {
            self.backend.client_address(&client_id, addr);
        }
        let mut incoming = request.into_inner();
        let (tx, rx) = mpsc::channel(TELEMETRY_QUEUE);
        self.clients.telemetry.lock().insert(client_id.clone(), tx.clone());
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                let command = match incoming.message().await {
                    Ok(Some(c)) => c,
                    Ok(None) | Err(_) => break,
                };
                // The console's answers (thread stacks, verify results) go to the broker that asked.
                let pb::TelemetryCommand { status: answer_status, command } = command;
                let command = match command {
                    Some(pb::telemetry_command::Command::ThreadStackTrace(t)) => {
                        me.clients.relays.thread_stack(answer_status.as_ref(), t);
                        None
                    }
                    Some(pb::telemetry_command::Command::VerifyMessageResult(v)) => {
                        me.clients.relays.verify_result(answer_status.as_ref(), v);
                        None
                    }
                    other => other,
                };
                if let Some(pb::telemetry_command::Command::Settings(s)) = command {
                    {
                        let ok = matches!(
                            pb::ClientType::try_from(s.client_type.unwrap_or(0)),
                            Ok(pb::ClientType::Producer | pb::ClientType::PushConsumer | pb::ClientType::SimpleConsumer)
                        );
                        if !ok {
                            let refused = status(Code::UnrecognizedClientType, "unrecognized client type");
                            let _ = tx.send(Ok(pb::TelemetryCommand { status: Some(refused), command: None })).await;
                            continue;
                        }
                        me.clients.settings.lock().insert(client_id.clone(), s.clone());
                        let merged = me.merged_settings(s);
                        let _ = me.heartbeat_brokers(&client_id).await;
                        let reply = pb::TelemetryCommand { status: Some(ok_status()), command: Some(pb::telemetry_command::Command::Settings(merged)) };
                        let sent = tx.send(Ok(reply)).await.is_ok();
                        tracing::info!(client_id = %client_id, sent, "client settings answered on its Telemetry stream");
                        if !sent {
                            break;
                        }
                    }
                }
            }
            let mut t = me.clients.telemetry.lock();
            if t.get(&client_id).is_some_and(|mine| mine.same_channel(&tx)) {
                t.remove(&client_id);
            }
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))))
    }

    async fn notify_client_termination(&self, request: Request<pb::NotifyClientTerminationRequest>) -> Answer<pb::NotifyClientTerminationResponse> {
        let s = match self.authorize(&request).and_then(|()| client_id(&request)) {
            Ok(id) => {
                self.clients.settings.lock().remove(&id);
                self.clients.renewing.lock().retain(|(client, _, _), _| *client != id);
                self.backend.client_gone(&id);
                ok_status()
            }
            Err(r) => r.status(),
        };
        Ok(Response::new(pb::NotifyClientTerminationResponse { status: Some(s) }))
    }

    async fn change_invisible_duration(&self, request: Request<pb::ChangeInvisibleDurationRequest>) -> Answer<pb::ChangeInvisibleDurationResponse> {
        Ok(Response::new(
            self.change_invisible(request)
                .await
                .unwrap_or_else(|r| pb::ChangeInvisibleDurationResponse { status: Some(r.status()), receipt_handle: String::new() }),
        ))
    }

    async fn recall_message(&self, request: Request<pb::RecallMessageRequest>) -> Answer<pb::RecallMessageResponse> {
        Ok(Response::new(self.recall(request).await.unwrap_or_else(|r| pb::RecallMessageResponse { status: Some(r.status()), message_id: String::new() })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_timeout(value: &str) -> Request<()> {
        let mut r = Request::new(());
        r.metadata_mut().insert("grpc-timeout", value.parse().expect("ascii"));
        r
    }

    #[test]
    fn the_polling_time_is_javas_and_never_past_the_clients_deadline() {
        let bounds = (5_000, 20_000);
        // Asked: within the bounds.
        assert_eq!(polling_time(Some(30_000), Some(60_000), None, bounds, "5.0.8").ok(), Some(20_000));
        // Not asked (the Go client): the time left less half the request timeout, 8 s - 1.5 s.
        assert_eq!(polling_time(None, Some(8_000), Some(3_000), bounds, "5.1.2").ok(), Some(6_500));
        // Asked past the deadline: up to the deadline.
        assert_eq!(polling_time(Some(20_000), Some(7_000), None, bounds, "5.0.8").ok(), Some(7_000));
        // A deadline too close for the shortest polling.
        let refused = |v| polling_time(Some(20_000), Some(4_000), None, bounds, v).err().map(|r| r.status().code);
        assert_eq!(refused("5.0.8"), Some(Code::IllegalPollingTime as i32));
        assert_eq!(refused("5.0.2"), Some(Code::BadRequest as i32));
        assert_eq!(refused(""), Some(Code::BadRequest as i32));
        // No deadline: the bounds alone.
        assert_eq!(polling_time(None, None, Some(3_000), bounds, "5.0.8").ok(), Some(20_000));
    }

    #[test]
    fn a_broker_call_takes_the_clients_deadline_less_a_reserve() {
        assert_eq!(call_timeout(&with_timeout("10S")), Duration::from_millis(9_900));
        assert_eq!(call_timeout(&with_timeout("2500m")), Duration::from_millis(2_400));
        assert_eq!(call_timeout(&with_timeout("1H")), Duration::from_secs(60));
        assert_eq!(call_timeout(&with_timeout("50m")), Duration::from_millis(100));
        assert_eq!(call_timeout(&with_timeout("x")), CALL_TIMEOUT);
        assert_eq!(call_timeout(&Request::new(())), CALL_TIMEOUT);
    }

    #[test]
    fn routes_list_read_only_then_write_only_then_read_write_queues() {
        let route = TopicRoute {
            brokers: vec![crate::backend::BrokerQueues { broker_name: "b".into(), read_queue_nums: 4, write_queue_nums: 2, perm: 6 }],
            message_type: "FIFO".into(),
        };
        let qs = message_queues("T", &route, &pb::Endpoints::default());
        let perms: Vec<i32> = qs.iter().map(|q| q.permission).collect();
        let rw = pb::Permission::ReadWrite as i32;
        assert_eq!(perms, vec![pb::Permission::Read as i32, pb::Permission::Read as i32, rw, rw]);
        assert_eq!(qs.iter().map(|q| q.id).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        assert_eq!(qs[0].accept_message_types, vec![pb::MessageType::Fifo as i32]);
    }
}
