//! The route table: every request code the broker serves, declared once with the processor that
//! serves it, the bounded pool it runs on and what ACL 1.0 checks for it. Registration (both
//! ports), the ACL check and the tests all read this table; a code's name (metrics, logs) is
//! its Java constant name in `remoting::RequestCode`. A route cannot be written without an
//! access rule, and a code that is not here is answered REQUEST_CODE_NOT_SUPPORTED.

use remoting::{RemotingCommand, RequestCode};

use crate::acl::config::perm;
pub use crate::acl::{Access, Resources, StoredRef};
use crate::config::BrokerConfig;

/// The bounded pools, one per family of codes, as Java's broker executors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pool {
    Send,
    Pull,
    Query,
    Heartbeat,
    ClientManage,
    ConsumerManage,
    Admin,
    EndTransaction,
    Reply,
    LoadBalance,
}

impl Pool {
    pub const ALL: [Pool; 10] = [
        Pool::Send,
        Pool::Pull,
        Pool::Query,
        Pool::Heartbeat,
        Pool::ClientManage,
        Pool::ConsumerManage,
        Pool::Admin,
        Pool::EndTransaction,
        Pool::Reply,
        Pool::LoadBalance,
    ];

    /// The thread name Java gives the executor's threads.
    pub fn thread_name(self) -> &'static str {
        match self {
            Pool::Send => "SendMessageThread",
            Pool::Pull => "PullMessageThread",
            Pool::Query => "QueryMessageThread",
            Pool::Heartbeat => "HeartbeatThread",
            Pool::ClientManage => "ClientManageThread",
            Pool::ConsumerManage => "ConsumerManageThread",
            Pool::Admin => "AdminBrokerThread",
            Pool::EndTransaction => "EndTransactionThread",
            Pool::Reply => "ProcessReplyMessageThread",
            Pool::LoadBalance => "LoadBalanceProcessorThread",
        }
    }

    /// The `processor` label of Java's `rocketmq_processor_watermark` (Java reports no
    /// watermark of its load-balance executor).
    pub fn metric_label(self) -> Option<&'static str> {
        Some(match self {
            Pool::Send => "send",
            Pool::Pull => "pull",
            Pool::Query => "query_message",
            Pool::Heartbeat => "heartbeat",
            Pool::ClientManage => "client_manager",
            Pool::ConsumerManage => "consumer_manager",
            Pool::Admin => "admin",
            Pool::EndTransaction => "transaction",
            Pool::Reply => "reply",
            Pool::LoadBalance => return None,
        })
    }

    /// Whether the pool's jobs run on the async runtime's threads, those that read the requests
    /// ([`remoting::pool::BusinessPool::on_runtime`]), instead of threads of its own. The send
    /// pool's: a send appends to the commit log's mapping and is answered, or is answered later
    /// by the flush or replication service (SYNC_FLUSH, SYNC_MASTER, DLedger), so it never waits
    /// and gains nothing from a thread but two hand-offs per message. (Its other codes are rare:
    /// a send back reads one message by its offset, a recall appends a marker.)
    pub fn on_runtime(self) -> bool {
        self == Pool::Send
    }

    /// Threads and queue capacity from the config's keys (Java's admin queue is fixed at 10,000).
    pub fn size(self, c: &BrokerConfig) -> (usize, usize) {
        match self {
            Pool::Send => (c.send_message_thread_pool_nums, c.send_thread_pool_queue_capacity),
            Pool::Pull => (c.pull_message_thread_pool_nums, c.pull_thread_pool_queue_capacity),
            Pool::Query => (c.query_message_thread_pool_nums, c.query_thread_pool_queue_capacity),
            Pool::Heartbeat => (c.heartbeat_thread_pool_nums, c.heartbeat_thread_pool_queue_capacity),
            Pool::ClientManage => (c.client_manage_thread_pool_nums, c.client_manager_thread_pool_queue_capacity),
            Pool::ConsumerManage => (c.consumer_manage_thread_pool_nums, c.consumer_manager_thread_pool_queue_capacity),
            Pool::Admin => (c.admin_broker_thread_pool_nums, 10_000),
            Pool::EndTransaction => (c.end_transaction_thread_pool_nums, c.end_transaction_pool_queue_capacity),
            Pool::Reply => (c.process_reply_message_thread_pool_nums, c.reply_thread_pool_queue_capacity),
            Pool::LoadBalance => (c.load_balance_processor_thread_pool_nums, c.load_balance_thread_pool_queue_capacity),
        }
    }
}

/// The processors, one per family of codes (one file each under `processor/`, `acl/admin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Handler {
    Send,
    Pull,
    ClientManage,
    ConsumerManage,
    Lock,
    Query,
    BrokerStats,
    AclAdmin,
    Admin,
    Relay,
    Maintenance,
    StoreAdmin,
    EndTransaction,
    Reply,
    Timer,
    Pop,
    QueryAssignment,
}

/// One request code the broker serves.
#[derive(Clone, Copy, Debug)]
pub struct Route {
    pub code: RequestCode,
    pub handler: Handler,
    pub pool: Pool,
    pub access: Access,
}

impl Route {
    /// The code's Java constant name (every routed code has one: see the tests).
    pub fn name(&self) -> &'static str {
        self.code.name().unwrap_or("UNNAMED")
    }

    /// Whether the fast (VIP) port, `listenPort - 2`, serves this code: everything but pulls.
    pub fn on_fast_port(&self) -> bool {
        self.handler != Handler::Pull
    }
}

const fn route(code: RequestCode, handler: Handler, pool: Pool, access: Access) -> Route {
    Route { code, handler, pool, access }
}

use Access::{Admin as A, Signed as S, Touches as T, TouchesStored as TS};
use RequestCode as R;

/// Every code the broker serves. Admin-only beyond Java's `Permission.ADMIN_CODE` (ours): the ACL
/// codes (GET_BROKER_CLUSTER_ACL_CONFIG hands out every secret key), the offset reset, 5.x's batch
/// creates, the clean-ups that delete data, and 5.x's codes that change how the store reads or
/// what its checkpoint says; an admin code needs an admin's signature from a white address too.
/// The topics and groups of the other codes are those Java 5.3's ACL 2.0 checks
/// (`DefaultAuthorizationContextBuilder`, the headers' `@RocketMQResource`), read from the typed
/// header (and body), its GET and SUB as ACL 1.0's SUB; beyond it (ours), a retry topic is always
/// its own group's, replies are checked as sends, and a message named by its offset (viewed, sent
/// back, consumed directly, committed) has its own topic checked.
pub const ROUTES: &[Route] = &[
    // Sends (batch sends are checked as single sends; 4.9.7 does not look at their topic).
    route(R::SEND_MESSAGE, Handler::Send, Pool::Send, T(touches::send_v1)),
    route(R::SEND_MESSAGE_V2, Handler::Send, Pool::Send, T(touches::send_v2)),
    route(R::SEND_BATCH_MESSAGE, Handler::Send, Pool::Send, T(touches::send_v2)),
    route(R::CONSUMER_SEND_MSG_BACK, Handler::Send, Pool::Send, TS(touches::send_back, touches::stored::send_back)),
    // Pulls (lite pulls are checked as pulls; 4.9.7 does not check them).
    route(R::PULL_MESSAGE, Handler::Pull, Pool::Pull, T(touches::pull)),
    route(R::LITE_PULL_MESSAGE, Handler::Pull, Pool::Pull, T(touches::pull)),
    // 5.x pop: a subscription to the topic and the group, as a pull.
    route(R::POP_MESSAGE, Handler::Pop, Pool::Pull, T(touches::pop)),
    route(R::ACK_MESSAGE, Handler::Pop, Pool::Pull, T(touches::ack)),
    // Its groups and topics are in the body (5.3 does not check them; ours does, as ACK_MESSAGE).
    route(R::BATCH_ACK_MESSAGE, Handler::Pop, Pool::Pull, T(touches::batch_ack)),
    route(R::CHANGE_MESSAGE_INVISIBLETIME, Handler::Pop, Pool::Pull, T(touches::change_invisible_time)),
    // Pop's reads without a pop: a peek and a notification SUB, polling info GET (as SUB).
    route(R::PEEK_MESSAGE, Handler::Pop, Pool::Pull, T(touches::group_and_topic)),
    route(R::NOTIFICATION, Handler::Pop, Pool::Pull, T(touches::group_and_topic)),
    route(R::POLLING_INFO, Handler::Pop, Pool::Pull, T(touches::group_and_topic)),
    // mqadmin exportPopRecord: 5.3's admin processor moves pop records from its RocksDB store
    // (`popConsumerKVServiceInit`) to the revive topic, where ours always keeps them. It changes
    // a broker's data on Java: an admin's.
    route(R::POP_ROLLBACK, Handler::Admin, Pool::Admin, A),
    // Clients.
    route(R::HEART_BEAT, Handler::ClientManage, Pool::Heartbeat, T(touches::heartbeat)),
    route(R::UNREGISTER_CLIENT, Handler::ClientManage, Pool::ClientManage, T(touches::unregister)),
    route(R::CHECK_CLIENT_CONFIG, Handler::ClientManage, Pool::ClientManage, S),
    // Consumers' offsets and queue locks.
    route(R::GET_CONSUMER_LIST_BY_GROUP, Handler::ConsumerManage, Pool::ConsumerManage, T(touches::consumer_group)),
    route(R::UPDATE_CONSUMER_OFFSET, Handler::ConsumerManage, Pool::ConsumerManage, T(touches::update_offset)),
    route(R::QUERY_CONSUMER_OFFSET, Handler::ConsumerManage, Pool::ConsumerManage, T(touches::query_offset)),
    route(R::LOCK_BATCH_MQ, Handler::Lock, Pool::ConsumerManage, T(touches::lock)),
    route(R::UNLOCK_BATCH_MQ, Handler::Lock, Pool::ConsumerManage, T(touches::lock)),
    // Queries.
    route(R::GET_MAX_OFFSET, Handler::Query, Pool::Query, S),
    route(R::GET_MIN_OFFSET, Handler::Query, Pool::Query, S),
    route(R::GET_EARLIEST_MSG_STORETIME, Handler::Query, Pool::Query, S),
    route(R::SEARCH_OFFSET_BY_TIMESTAMP, Handler::Query, Pool::Query, S),
    route(R::QUERY_MESSAGE, Handler::Query, Pool::Query, T(touches::query_message)),
    route(R::VIEW_MESSAGE_BY_ID, Handler::Query, Pool::Query, TS(touches::header_topic_sub, touches::stored::view)),
    // Stats.
    route(R::VIEW_BROKER_STATS_DATA, Handler::BrokerStats, Pool::Admin, S),
    route(R::GET_BROKER_CONSUME_STATS, Handler::BrokerStats, Pool::Admin, S),
    // ACL 1.0's admin codes.
    route(R::UPDATE_AND_CREATE_ACL_CONFIG, Handler::AclAdmin, Pool::Admin, A),
    route(R::DELETE_ACL_CONFIG, Handler::AclAdmin, Pool::Admin, A),
    route(R::GET_BROKER_CLUSTER_ACL_INFO, Handler::AclAdmin, Pool::Admin, S),
    route(R::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, Handler::AclAdmin, Pool::Admin, A),
    route(R::GET_BROKER_CLUSTER_ACL_CONFIG, Handler::AclAdmin, Pool::Admin, A),
    // Topics, groups, config and status.
    route(R::GET_BROKER_RUNTIME_INFO, Handler::Admin, Pool::Admin, S),
    route(R::UPDATE_AND_CREATE_TOPIC, Handler::Admin, Pool::Admin, A),
    route(R::DELETE_TOPIC_IN_BROKER, Handler::Admin, Pool::Admin, A),
    route(R::GET_ALL_TOPIC_CONFIG, Handler::Admin, Pool::Admin, S),
    route(R::GET_TOPIC_CONFIG, Handler::Admin, Pool::Admin, S),
    route(R::GET_SUBSCRIPTIONGROUP_CONFIG, Handler::Admin, Pool::Admin, S),
    route(R::GET_TOPIC_STATS_INFO, Handler::Admin, Pool::Admin, S),
    route(R::GET_CONSUMER_CONNECTION_LIST, Handler::Admin, Pool::Admin, S),
    route(R::GET_PRODUCER_CONNECTION_LIST, Handler::Admin, Pool::Admin, S),
    route(R::GET_CONSUME_STATS, Handler::Admin, Pool::Admin, S),
    route(R::QUERY_TOPIC_CONSUME_BY_WHO, Handler::Admin, Pool::Admin, S),
    route(R::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, Handler::Admin, Pool::Admin, A),
    route(R::GET_ALL_SUBSCRIPTIONGROUP_CONFIG, Handler::Admin, Pool::Admin, S),
    route(R::DELETE_SUBSCRIPTIONGROUP, Handler::Admin, Pool::Admin, A),
    route(R::GET_BROKER_CONFIG, Handler::Admin, Pool::Admin, S),
    route(R::UPDATE_BROKER_CONFIG, Handler::Admin, Pool::Admin, A),
    route(R::GET_ALL_CONSUMER_OFFSET, Handler::Admin, Pool::Admin, S),
    route(R::GET_ALL_DELAY_OFFSET, Handler::Admin, Pool::Admin, S),
    route(R::GET_BROKER_HA_STATUS, Handler::Admin, Pool::Admin, S),
    route(R::GET_ALL_MESSAGE_REQUEST_MODE, Handler::Admin, Pool::Admin, S),
    // 5.x server-side load balancing (SET_MESSAGE_REQUEST_MODE changes a persisted table: admin).
    route(R::QUERY_ASSIGNMENT, Handler::QueryAssignment, Pool::LoadBalance, S),
    route(R::SET_MESSAGE_REQUEST_MODE, Handler::QueryAssignment, Pool::LoadBalance, A),
    // Relays to consumers.
    route(R::INVOKE_BROKER_TO_RESET_OFFSET, Handler::Relay, Pool::Admin, A),
    route(R::INVOKE_BROKER_TO_GET_CONSUMER_STATUS, Handler::Relay, Pool::Admin, S),
    route(R::GET_CONSUMER_RUNNING_INFO, Handler::Relay, Pool::Admin, S),
    route(R::CONSUME_MESSAGE_DIRECTLY, Handler::Relay, Pool::Admin, TS(touches::consume_directly, touches::stored::consume_directly)),
    // Maintenance and 5.x's batch creates.
    route(R::GET_SYSTEM_TOPIC_LIST_FROM_BROKER, Handler::Maintenance, Pool::Admin, S),
    route(R::CLEAN_EXPIRED_CONSUMEQUEUE, Handler::Maintenance, Pool::Admin, A),
    route(R::DELETE_EXPIRED_COMMITLOG, Handler::Maintenance, Pool::Admin, A),
    route(R::CLEAN_UNUSED_TOPIC, Handler::Maintenance, Pool::Admin, A),
    route(R::QUERY_CONSUME_QUEUE, Handler::Maintenance, Pool::Admin, T(touches::query_consume_queue)),
    route(R::GET_ALL_PRODUCER_INFO, Handler::Maintenance, Pool::Admin, S),
    route(R::UPDATE_AND_CREATE_TOPIC_LIST, Handler::Maintenance, Pool::Admin, A),
    route(R::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, Handler::Maintenance, Pool::Admin, A),
    // 5.x's store and flow-control codes.
    route(R::UPDATE_COLD_DATA_FLOW_CTR_CONFIG, Handler::StoreAdmin, Pool::Admin, A),
    route(R::REMOVE_COLD_DATA_FLOW_CTR_CONFIG, Handler::StoreAdmin, Pool::Admin, A),
    route(R::GET_COLD_DATA_FLOW_CTR_INFO, Handler::StoreAdmin, Pool::Admin, S),
    route(R::SET_COMMITLOG_READ_MODE, Handler::StoreAdmin, Pool::Admin, A),
    route(R::RESET_MASTER_FLUSH_OFFSET, Handler::StoreAdmin, Pool::Admin, A),
    route(R::CHECK_ROCKSDB_CQ_WRITE_PROGRESS, Handler::StoreAdmin, Pool::Admin, S),
    route(R::EXPORT_ROCKSDB_CONFIG_TO_JSON, Handler::StoreAdmin, Pool::Admin, S),
    route(R::GET_BROKER_EPOCH_CACHE, Handler::StoreAdmin, Pool::Admin, S),
    // 5.x timer: its checkpoint and counts, and recalling a timer message (a publish to its topic).
    route(R::GET_TIMER_CHECK_POINT, Handler::Timer, Pool::Admin, S),
    route(R::GET_TIMER_METRICS, Handler::Timer, Pool::Admin, S),
    route(R::RECALL_MESSAGE, Handler::Timer, Pool::Send, T(touches::publish)),
    // Transactions and replies.
    route(R::END_TRANSACTION, Handler::EndTransaction, Pool::EndTransaction, TS(touches::header_topic_pub, touches::stored::end_transaction)),
    route(R::SEND_REPLY_MESSAGE, Handler::Reply, Pool::Reply, T(touches::send_v1)),
    route(R::SEND_REPLY_MESSAGE_V2, Handler::Reply, Pool::Reply, T(touches::send_v2)),
];

/// The route of `code`, if the broker serves it.
pub fn find(code: i32) -> Option<&'static Route> {
    ROUTES.iter().find(|r| r.code.0 == code)
}

/// What each request touches, read from its typed header (and body) as Java 5.3's
/// `DefaultAuthorizationContextBuilder` reads it, in ACL 1.0's terms: a group as its retry topic,
/// 5.3's GET as SUB, and a header that does not decode refused (5.3: "parse authorization context
/// error").
mod touches {
    use remoting::fastjson;
    use remoting::header::CommandHeader;
    use remoting::protocol::broker::{
        ConsumerGroupHeader, ConsumerSendMsgBackRequestHeader, PullMessageRequestHeader, QueryConsumerOffsetRequestHeader, SendMessageRequestHeader,
        SendMessageRequestHeaderV2, UnregisterClientRequestHeader, UpdateConsumerOffsetRequestHeader,
    };
    use remoting::protocol::heartbeat::HeartbeatData;

    use super::*;

    use remoting::protocol::system_topic::RETRY_GROUP_TOPIC_PREFIX as RETRY_PREFIX;

    fn retry(group: &str) -> String {
        format!("{RETRY_PREFIX}{group}")
    }

    fn header<H: CommandHeader>(request: &RemotingCommand) -> Result<H, String> {
        request.decode_header().map_err(|e| format!("parse authorization context error: {e}"))
    }

    /// An ext field the typed header does not have (5.x's optional `topic`s), blank as absent.
    fn field<'r>(request: &'r RemotingCommand, key: &str) -> Option<&'r str> {
        request.ext(key).filter(|v| !v.trim().is_empty())
    }

    /// A topic with the permission it needs; a retry topic stands for its group, which needs SUB
    /// whatever the topic needed (Java's `Resource.ofGroup` of a retry topic).
    fn topic(name: &str, needed: u8) -> (String, u8) {
        if name.starts_with(RETRY_PREFIX) {
            (name.to_owned(), perm::SUB)
        } else {
            (name.to_owned(), needed)
        }
    }

    fn group(name: &str) -> (String, u8) {
        (retry(name), perm::SUB)
    }

    /// A send publishes to its topic; a send to a retry topic is a consumer's (its group's SUB).
    /// Java reads the group from the header's producer group (`a`), or V1's `group`, which a
    /// client chooses: ours from the topic, so one cannot write another group's retry topic.
    pub(super) fn send_v1(request: &RemotingCommand) -> Result<Resources, String> {
        let h: SendMessageRequestHeader = header(request)?;
        Ok(vec![topic(h.topic.as_str(), perm::PUB)])
    }

    pub(super) fn send_v2(request: &RemotingCommand) -> Result<Resources, String> {
        let h: SendMessageRequestHeaderV2 = header(request)?;
        Ok(vec![topic(h.b.as_str(), perm::PUB)])
    }

    /// CONSUMER_SEND_MSG_BACK: the group, and 5.x's `originTopic` (SUB).
    pub(super) fn send_back(request: &RemotingCommand) -> Result<Resources, String> {
        let h: ConsumerSendMsgBackRequestHeader = header(request)?;
        let mut resources = vec![group(h.group.as_str())];
        resources.extend(h.origin_topic.as_deref().filter(|t| !t.trim().is_empty()).map(|t| topic(t, perm::SUB)));
        Ok(resources)
    }

    /// A publish to the header's topic (RECALL_MESSAGE's `@RocketMQAction(PUB)`).
    pub(super) fn publish(request: &RemotingCommand) -> Result<Resources, String> {
        let h: remoting::protocol::broker::RecallMessageRequestHeader = header(request)?;
        Ok(vec![topic(&h.topic, perm::PUB)])
    }

    /// 5.x's optional header `topic`: SUB (VIEW_MESSAGE_BY_ID's GET) or PUB (END_TRANSACTION).
    pub(super) fn header_topic_sub(request: &RemotingCommand) -> Result<Resources, String> {
        Ok(field(request, "topic").map(|t| topic(t, perm::SUB)).into_iter().collect())
    }

    pub(super) fn header_topic_pub(request: &RemotingCommand) -> Result<Resources, String> {
        Ok(field(request, "topic").map(|t| topic(t, perm::PUB)).into_iter().collect())
    }

    pub(super) fn query_message(request: &RemotingCommand) -> Result<Resources, String> {
        let h: remoting::protocol::broker::QueryMessageRequestHeader = header(request)?;
        Ok(vec![topic(h.topic.as_str(), perm::SUB)])
    }

    pub(super) fn pull(request: &RemotingCommand) -> Result<Resources, String> {
        let h: PullMessageRequestHeader = header(request)?;
        Ok(vec![topic(h.topic.as_str(), perm::SUB), group(h.consumer_group.as_str())])
    }

    /// 5.x's pop codes: the group and the topic, SUB (as pulls).
    pub(super) fn pop(request: &RemotingCommand) -> Result<Resources, String> {
        let h: crate::pop::headers::PopMessageRequestHeader = header(request)?;
        Ok(vec![group(h.consumer_group.as_str()), topic(h.topic.as_str(), perm::SUB)])
    }

    pub(super) fn ack(request: &RemotingCommand) -> Result<Resources, String> {
        let h: crate::pop::headers::AckMessageRequestHeader = header(request)?;
        Ok(vec![group(h.consumer_group.as_str()), topic(h.topic.as_str(), perm::SUB)])
    }

    pub(super) fn change_invisible_time(request: &RemotingCommand) -> Result<Resources, String> {
        let h: crate::pop::headers::ChangeInvisibleTimeRequestHeader = header(request)?;
        Ok(vec![group(h.consumer_group.as_str()), topic(h.topic.as_str(), perm::SUB)])
    }

    /// PEEK_MESSAGE, NOTIFICATION, POLLING_INFO: the group and the topic the header names (Java
    /// 5.3.3 reads these headers leniently, so nothing else in them is refused here).
    pub(super) fn group_and_topic(request: &RemotingCommand) -> Result<Resources, String> {
        let named = [field(request, "consumerGroup").map(group), field(request, "topic").map(|t| topic(t, perm::SUB))];
        Ok(named.into_iter().flatten().collect())
    }

    /// BATCH_ACK_MESSAGE: each ack's group and topic, as ACK_MESSAGE's (no body: nothing).
    pub(super) fn batch_ack(request: &RemotingCommand) -> Result<Resources, String> {
        let Some(bytes) = request.body.as_ref() else { return Ok(Vec::new()) };
        let body = crate::pop::formats::BatchAckRequestBody::decode(bytes).map_err(|e| format!("parse authorization context error: {e}"))?;
        let mut resources = Vec::new();
        for ack in body.acks.iter().flatten() {
            let named = [ack.consumer_group.as_deref().map(group), ack.topic.as_deref().map(|t| topic(t, perm::SUB))];
            for needed in named.into_iter().flatten() {
                if !resources.contains(&needed) {
                    resources.push(needed);
                }
            }
        }
        Ok(resources)
    }

    pub(super) fn consumer_group(request: &RemotingCommand) -> Result<Resources, String> {
        let h: ConsumerGroupHeader = header(request)?;
        Ok(vec![group(h.consumer_group.as_str())])
    }

    pub(super) fn update_offset(request: &RemotingCommand) -> Result<Resources, String> {
        let h: UpdateConsumerOffsetRequestHeader = header(request)?;
        Ok(vec![group(h.consumer_group.as_str()), topic(h.topic.as_str(), perm::SUB)])
    }

    pub(super) fn query_offset(request: &RemotingCommand) -> Result<Resources, String> {
        let h: QueryConsumerOffsetRequestHeader = header(request)?;
        Ok(vec![group(h.consumer_group.as_str()), topic(h.topic.as_str(), perm::SUB)])
    }

    /// UNREGISTER_CLIENT: the consumer group (SUB), and, ours, the producer group (PUB or SUB:
    /// ACL 1.0 has no producer groups of its own, and 5.3 asks PUB or SUB of the group).
    pub(super) fn unregister(request: &RemotingCommand) -> Result<Resources, String> {
        let h: UnregisterClientRequestHeader = header(request)?;
        let mut resources: Resources = h.consumer_group.iter().map(|g| group(g.as_str())).collect();
        resources.extend(h.producer_group.as_deref().filter(|g| !g.trim().is_empty()).map(|g| (retry(g), perm::ANY)));
        Ok(resources)
    }

    /// LOCK_BATCH_MQ and UNLOCK_BATCH_MQ: the body's group, and each queue's topic (SUB).
    pub(super) fn lock(request: &RemotingCommand) -> Result<Resources, String> {
        let body: crate::processor::lock::LockBatchRequestBody =
            fastjson::from_slice(request.body_bytes()).map_err(|e| format!("parse authorization context error: bad lock body: {e}"))?;
        let mut resources = vec![group(body.consumer_group.as_str())];
        for mq in &body.mq_set {
            let needed = topic(&mq.topic, perm::SUB);
            if !resources.contains(&needed) {
                resources.push(needed);
            }
        }
        Ok(resources)
    }

    /// QUERY_CONSUME_QUEUE: the topic, and the group when named (GET as SUB).
    pub(super) fn query_consume_queue(request: &RemotingCommand) -> Result<Resources, String> {
        let h: crate::processor::consume_queue_query::QueryConsumeQueueHeader = header(request)?;
        let mut resources = vec![topic(h.topic.as_str(), perm::SUB)];
        resources.extend(h.consumer_group.as_deref().filter(|g| !g.trim().is_empty()).map(group));
        Ok(resources)
    }

    /// CONSUME_MESSAGE_DIRECTLY: the group, and the topic when named.
    pub(super) fn consume_directly(request: &RemotingCommand) -> Result<Resources, String> {
        let h: crate::processor::relay::CallConsumerHeader = header(request)?;
        let mut resources = vec![group(h.consumer_group.as_str())];
        resources.extend(h.topic.as_deref().filter(|t| !t.trim().is_empty()).map(|t| topic(t, perm::SUB)));
        Ok(resources)
    }

    pub(super) fn heartbeat(request: &RemotingCommand) -> Result<Resources, String> {
        let data: HeartbeatData = fastjson::from_slice(request.body_bytes()).map_err(|e| format!("heartbeat body is not valid HeartbeatData: {e}"))?;
        let mut resources = Vec::new();
        for consumer in &data.consumer_data_set {
            resources.push(group(&consumer.group_name));
            resources.extend(consumer.subscription_data_set.iter().map(|sub| topic(&sub.topic, perm::SUB)));
        }
        Ok(resources)
    }

    /// The stored message a request names, and what it needs on the message's topic.
    pub(super) mod stored {
        use super::*;

        /// VIEW_MESSAGE_BY_ID: reading a message is subscribing to its topic.
        pub(in crate::routes) fn view(request: &RemotingCommand) -> Option<StoredRef> {
            let h: remoting::protocol::broker::ViewMessageRequestHeader = request.decode_header().ok()?;
            Some((h.offset, perm::SUB))
        }

        /// CONSUMER_SEND_MSG_BACK copies the message into the group's retry topic.
        pub(in crate::routes) fn send_back(request: &RemotingCommand) -> Option<StoredRef> {
            let h: ConsumerSendMsgBackRequestHeader = request.decode_header().ok()?;
            Some((h.offset, perm::SUB))
        }

        /// CONSUME_MESSAGE_DIRECTLY hands the message (by its offset message id) to a client.
        pub(in crate::routes) fn consume_directly(request: &RemotingCommand) -> Option<StoredRef> {
            let h: crate::processor::relay::CallConsumerHeader = request.decode_header().ok()?;
            let (_, offset) = store::message::decode_offset_message_id(h.msg_id.as_deref()?)?;
            Some((offset, perm::SUB))
        }

        /// END_TRANSACTION commits or rolls back a half message: a publish to its real topic.
        pub(in crate::routes) fn end_transaction(request: &RemotingCommand) -> Option<StoredRef> {
            let h: crate::transaction::EndTransactionRequestHeader = request.decode_header().ok()?;
            Some((h.commit_log_offset, perm::PUB))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_routed_code_is_routed_once_and_has_a_java_name() {
        let mut seen = HashSet::new();
        for route in ROUTES {
            assert!(seen.insert(route.code), "{:?} is routed twice", route.code);
            assert!(route.code.name().is_some(), "code {} has no name in remoting's code table", route.code.0);
            assert_eq!(find(route.code.0).map(|r| r.handler), Some(route.handler));
        }
    }

    #[test]
    fn every_pool_serves_a_code_and_every_handler_has_codes() {
        for pool in Pool::ALL {
            assert!(ROUTES.iter().any(|r| r.pool == pool), "{pool:?} serves nothing");
            let (threads, capacity) = pool.size(&BrokerConfig::default());
            assert!(threads > 0 && capacity > 0, "{pool:?} has no room with the default config");
        }
    }

    #[test]
    fn pulls_are_the_only_codes_kept_off_the_fast_port() {
        let off: Vec<_> = ROUTES.iter().filter(|r| !r.on_fast_port()).map(|r| r.code).collect();
        assert_eq!(off, [R::PULL_MESSAGE, R::LITE_PULL_MESSAGE]);
    }

    #[test]
    fn codes_that_change_or_delete_data_or_hand_out_secrets_need_an_admin() {
        let admin: HashSet<_> = ROUTES.iter().filter(|r| matches!(r.access, Access::Admin)).map(|r| r.code).collect();
        for code in [
            R::UPDATE_AND_CREATE_TOPIC,
            R::DELETE_TOPIC_IN_BROKER,
            R::UPDATE_BROKER_CONFIG,
            R::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            R::DELETE_SUBSCRIPTIONGROUP,
            R::GET_BROKER_CLUSTER_ACL_CONFIG,
            R::INVOKE_BROKER_TO_RESET_OFFSET,
            R::CLEAN_UNUSED_TOPIC,
            R::DELETE_EXPIRED_COMMITLOG,
            R::SET_COMMITLOG_READ_MODE,
            R::SET_MESSAGE_REQUEST_MODE,
        ] {
            assert!(admin.contains(&code), "{code:?} is not admin-only");
        }
    }

    /// The fields of a SEND_MESSAGE_V2 header a Java producer fills, with its group and topic.
    pub(crate) fn v2_fields<'a>(group: &'a str, topic: &'a str) -> Vec<(&'a str, &'a str)> {
        vec![("a", group), ("b", topic), ("c", "TBW102"), ("d", "4"), ("e", "0"), ("f", "0"), ("g", "1"), ("h", "0")]
    }

    pub(crate) fn request(code: RequestCode, fields: &[(&str, &str)]) -> RemotingCommand {
        let mut ext = remoting::command::ExtFields::default();
        fields.iter().for_each(|(k, v)| {
            ext.insert(k.to_string(), v.to_string());
        });
        RemotingCommand { ext_fields: Some(ext), ..RemotingCommand::request(code) }
    }

    fn touched(r: &RemotingCommand) -> Result<Resources, String> {
        match find(r.code).map(|route| route.access) {
            Some(Access::Touches(f) | Access::TouchesStored(f, _)) => f(r),
            other => panic!("{other:?}"),
        }
    }

    fn stored(r: &RemotingCommand) -> Option<StoredRef> {
        match find(r.code).map(|route| route.access) {
            Some(Access::TouchesStored(_, f)) => f(r),
            other => panic!("{other:?}"),
        }
    }

    fn res(list: &[(&str, u8)]) -> Result<Resources, String> {
        Ok(list.iter().map(|(r, p)| (r.to_string(), *p)).collect())
    }

    #[test]
    fn sends_pulls_and_heartbeats_say_what_they_touch() {
        assert_eq!(touched(&request(R::SEND_MESSAGE_V2, &v2_fields("pg", "T"))), res(&[("T", perm::PUB)]));
        // A retry topic is its own group's, whatever group the header names (Java takes `a`).
        assert_eq!(touched(&request(R::SEND_MESSAGE_V2, &v2_fields("mine", "%RETRY%cg"))), res(&[("%RETRY%cg", perm::SUB)]));
        let v1 = [("producerGroup", "pg"), ("topic", "%RETRY%cg"), ("defaultTopic", "TBW102"), ("defaultTopicQueueNums", "4"), ("queueId", "0")];
        let v1: Vec<_> = v1.iter().copied().chain([("sysFlag", "0"), ("bornTimestamp", "1"), ("flag", "0")]).collect();
        assert_eq!(touched(&request(R::SEND_MESSAGE, &v1)), res(&[("%RETRY%cg", perm::SUB)]));
        assert_eq!(touched(&request(R::SEND_REPLY_MESSAGE, &v1)), res(&[("%RETRY%cg", perm::SUB)]));
        assert_eq!(touched(&request(R::SEND_REPLY_MESSAGE_V2, &v2_fields("pg", "Secret"))), res(&[("Secret", perm::PUB)]));
        // A header that does not decode is refused (5.3: "parse authorization context error").
        assert!(touched(&request(R::SEND_MESSAGE_V2, &[("a", "pg"), ("b", "T")])).is_err());
        let pull = [("topic", "T"), ("consumerGroup", "cg"), ("queueId", "0"), ("queueOffset", "0"), ("maxMsgNums", "1"), ("sysFlag", "0")];
        let pull: Vec<_> = pull.iter().copied().chain([("commitOffset", "0"), ("suspendTimeoutMillis", "0"), ("subVersion", "0")]).collect();
        assert_eq!(touched(&request(R::PULL_MESSAGE, &pull)), res(&[("T", perm::SUB), ("%RETRY%cg", perm::SUB)]));
        let back = [("offset", "100"), ("group", "cg"), ("delayLevel", "0"), ("originTopic", "T")];
        assert_eq!(touched(&request(R::CONSUMER_SEND_MSG_BACK, &back)), res(&[("%RETRY%cg", perm::SUB), ("T", perm::SUB)]));
        assert_eq!(stored(&request(R::CONSUMER_SEND_MSG_BACK, &back)), Some((100, perm::SUB)));
        assert!(touched(&request(R::HEART_BEAT, &[]).with_body(b"not json".to_vec())).is_err());
        let pop = [("consumerGroup", "cg"), ("topic", "T"), ("queueId", "-1"), ("maxMsgNums", "1"), ("invisibleTime", "60000"), ("pollTime", "0")];
        let pop: Vec<_> = pop.iter().copied().chain([("bornTime", "1"), ("initMode", "0")]).collect();
        assert_eq!(touched(&request(R::POP_MESSAGE, &pop)), res(&[("%RETRY%cg", perm::SUB), ("T", perm::SUB)]));
        let peek = [("consumerGroup", "cg"), ("topic", "T"), ("queueId", "-1"), ("maxMsgNums", "1")];
        assert_eq!(touched(&request(R::PEEK_MESSAGE, &peek)), res(&[("%RETRY%cg", perm::SUB), ("T", perm::SUB)]));
        let note = [("consumerGroup", "cg"), ("topic", "T"), ("queueId", "-1"), ("pollTime", "0"), ("bornTime", "1")];
        assert_eq!(touched(&request(R::NOTIFICATION, &note)), res(&[("%RETRY%cg", perm::SUB), ("T", perm::SUB)]));
        assert_eq!(touched(&request(R::POLLING_INFO, &note[..3])), res(&[("%RETRY%cg", perm::SUB), ("T", perm::SUB)]));
        assert_eq!(touched(&request(R::POLLING_INFO, &note[..1])), res(&[("%RETRY%cg", perm::SUB)]), "what is named is checked");
        let batch = br#"{"acks":[{"c":"cg","t":"T","r":"0","so":0,"q":0,"rq":0,"pt":1,"it":1,"b":"AQ=="},{"c":"victimGroup","t":"Secret","so":0,"q":0}]}"#;
        assert_eq!(
            touched(&request(R::BATCH_ACK_MESSAGE, &[]).with_body(batch.to_vec())),
            res(&[("%RETRY%cg", perm::SUB), ("T", perm::SUB), ("%RETRY%victimGroup", perm::SUB), ("Secret", perm::SUB)])
        );
    }

    #[test]
    fn locks_unregisters_queries_and_messages_by_offset_say_what_they_touch() {
        let lock = br#"{"consumerGroup":"victimGroup","clientId":"c","mqSet":[{"topic":"Secret","brokerName":"b","queueId":0},{"topic":"Secret","brokerName":"b","queueId":1}]}"#;
        for code in [R::LOCK_BATCH_MQ, R::UNLOCK_BATCH_MQ] {
            assert_eq!(touched(&request(code, &[]).with_body(lock.to_vec())), res(&[("%RETRY%victimGroup", perm::SUB), ("Secret", perm::SUB)]));
        }
        let unregister = request(R::UNREGISTER_CLIENT, &[("clientID", "c"), ("producerGroup", "pg"), ("consumerGroup", "cg")]);
        assert_eq!(touched(&unregister), res(&[("%RETRY%cg", perm::SUB), ("%RETRY%pg", perm::ANY)]));
        let cq = request(R::QUERY_CONSUME_QUEUE, &[("topic", "Secret"), ("queueId", "0"), ("index", "0"), ("count", "1"), ("consumerGroup", "cg")]);
        assert_eq!(touched(&cq), res(&[("Secret", perm::SUB), ("%RETRY%cg", perm::SUB)]));
        let offset = request(R::QUERY_CONSUMER_OFFSET, &[("consumerGroup", "cg"), ("topic", "T"), ("queueId", "0")]);
        assert_eq!(touched(&offset), res(&[("%RETRY%cg", perm::SUB), ("T", perm::SUB)]));
        // Messages named by offset: a view, a direct consume (offset message id), a commit.
        let view = request(R::VIEW_MESSAGE_BY_ID, &[("offset", "4096")]);
        assert_eq!((touched(&view), stored(&view)), (res(&[]), Some((4096, perm::SUB))));
        let id = store::message::offset_message_id("127.0.0.1:10911".parse().unwrap(), 8192);
        let direct = request(R::CONSUME_MESSAGE_DIRECTLY, &[("consumerGroup", "cg"), ("clientId", "c"), ("msgId", &id)]);
        assert_eq!((touched(&direct), stored(&direct)), (res(&[("%RETRY%cg", perm::SUB)]), Some((8192, perm::SUB))));
        let end = [("producerGroup", "pg"), ("tranStateTableOffset", "0"), ("commitLogOffset", "512"), ("commitOrRollback", "8"), ("msgId", "m")];
        let mut end_5x = end.to_vec();
        end_5x.push(("topic", "Secret"));
        assert_eq!((touched(&request(R::END_TRANSACTION, &end)), stored(&request(R::END_TRANSACTION, &end))), (res(&[]), Some((512, perm::PUB))));
        assert_eq!(touched(&request(R::END_TRANSACTION, &end_5x)), res(&[("Secret", perm::PUB)]));
    }
}

/// The ACL check through the route table: each request checked by its route's access rule (here,
/// so that `acl` itself names no route).
#[cfg(test)]
mod acl_tests {
    use std::net::IpAddr;

    use base64::Engine;
    use hmac::{Hmac, KeyInit, Mac};

    use crate::acl::{config, sign, Acl, ACCESS_KEY, SIGNATURE};
    use remoting::command::ExtFields;
    use remoting::RemotingCommand;
    use remoting::RequestCode;

    const FILE: &str = "globalWhiteRemoteAddresses:\n  - 10.10.103.*\naccounts:\n  - accessKey: RocketMQUser\n    secretKey: 12345678\n    defaultTopicPerm: DENY\n    defaultGroupPerm: SUB\n    topicPerms:\n      - AclTopic=PUB|SUB\n      - ReadOnly=SUB\n  - accessKey: RocketMQAdmin\n    secretKey: 87654321\n    admin: true\n  - accessKey: WhiteListed\n    secretKey: 11111111\n    whiteRemoteAddress: 192.168.9.*\n";

    fn acl() -> (tempfile::TempDir, Acl) {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join("conf")).unwrap();
        std::fs::write(config::default_file(home.path()), FILE).unwrap();
        let acl = Acl::open(home.path()).unwrap();
        (home, acl)
    }

    fn signed(code: RequestCode, fields: &[(&str, &str)], body: &[u8], ak: &str, sk: &str) -> RemotingCommand {
        let mut ext = ExtFields::default();
        for (k, v) in fields {
            ext.insert(k.to_string(), v.to_string());
        }
        ext.insert(ACCESS_KEY.into(), ak.into());
        let mut r = RemotingCommand { ext_fields: Some(ext), ..RemotingCommand::request(code) }.with_body(body.to_vec());
        let signature = sign(&r, sk);
        r.ext_fields.as_mut().unwrap().insert(SIGNATURE.into(), signature);
        r
    }

    /// The check a request gets on its route.
    fn check(acl: &Acl, ip: IpAddr, request: &RemotingCommand) -> Result<(), String> {
        let route = crate::routes::find(request.code).expect("a routed code");
        acl.check(ip, request, route.access)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_signature_is_javas_hmac_sha1_of_the_sorted_values_and_the_body() {
        // AclClientRPCHook over {AccessKey=ak, b=T, a=G} and body "hi": values in key order "akGT" then the body.
        let r = signed(RequestCode::SEND_MESSAGE_V2, &[("b", "T"), ("a", "G")], b"hi", "ak", "secret");
        let mut mac = Hmac::<sha1::Sha1>::new_from_slice(b"secret").unwrap();
        mac.update(b"akGThi");
        let expected = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
        assert_eq!(r.ext_fields.as_ref().unwrap()[SIGNATURE], expected);
    }

    #[test]
    fn requests_are_checked_as_javas_plain_access_validator_checks_them() {
        let (_home, acl) = acl();
        let client = ip("127.0.0.1");
        let send = |topic: &str, ak: &str, sk: &str| signed(RequestCode::SEND_MESSAGE_V2, &super::tests::v2_fields("pg", topic), b"body", ak, sk);
        assert_eq!(check(&acl, client, &send("AclTopic", "RocketMQUser", "12345678")), Ok(()));
        assert_eq!(check(&acl, client, &send("AclTopic", "RocketMQUser", "wrong")), Err("Check signature failed for accessKey=RocketMQUser".into()));
        assert_eq!(check(&acl, client, &send("ReadOnly", "RocketMQUser", "12345678")), Err("No default permission for topic:ReadOnly".into()));
        assert_eq!(check(&acl, client, &send("Unlisted", "RocketMQUser", "12345678")), Err("No default permission for topic:Unlisted".into()));
        assert_eq!(check(&acl, client, &send("AclTopic", "Nobody", "12345678")), Err("No acl config for Nobody".into()));
        assert_eq!(check(&acl, client, &RemotingCommand::request(RequestCode::SEND_MESSAGE_V2)), Err("No accessKey is configured".into()));
        // Batches are checked as sends (4.9.7 does not look at their topic).
        let batch = signed(RequestCode::SEND_BATCH_MESSAGE, &super::tests::v2_fields("pg", "ReadOnly"), b"", "RocketMQUser", "12345678");
        assert!(check(&acl, client, &batch).is_err());
        // Trace records may go to the trace topic with any signed account.
        assert_eq!(check(&acl, client, &send("RMQ_SYS_TRACE_TOPIC", "RocketMQUser", "12345678")), Ok(()));
        // A pull needs SUB on the topic and on the group (its retry topic; groups default to SUB).
        let pull = [("topic", "ReadOnly"), ("consumerGroup", "cg"), ("queueId", "0"), ("queueOffset", "0"), ("maxMsgNums", "1"), ("sysFlag", "0")];
        let pull: Vec<_> = pull.iter().copied().chain([("commitOffset", "0"), ("suspendTimeoutMillis", "0"), ("subVersion", "0")]).collect();
        let pull = signed(RequestCode::PULL_MESSAGE, &pull, b"", "RocketMQUser", "12345678");
        assert_eq!(check(&acl, client, &pull), Ok(()));
        // Admin codes need an admin account.
        let create = signed(RequestCode::UPDATE_AND_CREATE_TOPIC, &[("topic", "New")], b"", "RocketMQUser", "12345678");
        assert_eq!(check(&acl, client, &create), Err("Need admin permission for request code=17, but accessKey=RocketMQUser is not".into()));
        let create = signed(RequestCode::UPDATE_AND_CREATE_TOPIC, &[("topic", "New")], b"", "RocketMQAdmin", "87654321");
        assert_eq!(check(&acl, client, &create), Ok(()));
        // White addresses pass without a signature: globally, and for their own account.
        assert_eq!(check(&acl, ip("10.10.103.5"), &send("Unlisted", "Nobody", "no-signature-needed")), Ok(()));
        assert_eq!(check(&acl, ip("192.168.9.1"), &send("Unlisted", "WhiteListed", "no-signature-needed")), Ok(()));
        assert!(check(&acl, ip("192.168.8.1"), &send("Unlisted", "WhiteListed", "no-signature-needed")).is_err());
        // But not for an admin code: that needs an admin's signature from anywhere (ours; Java lets
        // a white address through).
        assert_eq!(check(&acl, ip("10.10.103.5"), &RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_TOPIC)), Err("No accessKey is configured".into()));
        let config = |ak: &str, sk: &str| signed(RequestCode::GET_BROKER_CLUSTER_ACL_CONFIG, &[], b"", ak, sk);
        assert_eq!(check(&acl, ip("192.168.9.1"), &config("WhiteListed", "wrong")), Err("Check signature failed for accessKey=WhiteListed".into()));
        assert_eq!(
            check(&acl, ip("192.168.9.1"), &config("WhiteListed", "11111111")),
            Err("Need admin permission for request code=54, but accessKey=WhiteListed is not".into())
        );
        assert_eq!(check(&acl, ip("10.10.103.5"), &config("RocketMQAdmin", "wrong")), Err("Check signature failed for accessKey=RocketMQAdmin".into()));
        assert_eq!(check(&acl, ip("10.10.103.5"), &config("RocketMQAdmin", "87654321")), Ok(()));
    }

    #[test]
    fn a_changed_file_is_loaded_again_and_a_bad_one_keeps_the_last_good_config() {
        let (home, acl) = acl();
        assert!(!acl.reload_if_changed());
        std::fs::write(config::default_file(home.path()), FILE.replace("ReadOnly=SUB", "ReadOnly=PUB")).unwrap();
        assert!(acl.reload_if_changed());
        let send = signed(RequestCode::SEND_MESSAGE_V2, &super::tests::v2_fields("pg", "ReadOnly"), b"", "RocketMQUser", "12345678");
        assert_eq!(check(&acl, ip("127.0.0.1"), &send), Ok(()));
        std::fs::write(config::default_file(home.path()), "accounts: [\n").unwrap();
        assert!(!acl.reload_if_changed());
        assert_eq!(check(&acl, ip("127.0.0.1"), &send), Ok(()));
    }
}
