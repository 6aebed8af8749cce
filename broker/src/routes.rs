//! The route table: every request code the broker serves, declared once with the processor that
//! serves it, the bounded pool it runs on and what ACL 1.0 checks for it. Registration (both
//! ports), the ACL check and the tests all read this table; a code's name (metrics, logs) is
//! its Java constant name in `remoting::RequestCode`. A route cannot be written without an
//! access rule, and a code that is not here is answered REQUEST_CODE_NOT_SUPPORTED.

use remoting::{RemotingCommand, RequestCode};

use crate::acl::config::perm;
pub use crate::acl::{Access, Resources};
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
}

impl Pool {
    pub const ALL: [Pool; 9] =
        [Pool::Send, Pool::Pull, Pool::Query, Pool::Heartbeat, Pool::ClientManage, Pool::ConsumerManage, Pool::Admin, Pool::EndTransaction, Pool::Reply];

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
        }
    }

    /// The `processor` label of Java's `rocketmq_processor_watermark`.
    pub fn metric_label(self) -> &'static str {
        match self {
            Pool::Send => "send",
            Pool::Pull => "pull",
            Pool::Query => "query_message",
            Pool::Heartbeat => "heartbeat",
            Pool::ClientManage => "client_manager",
            Pool::ConsumerManage => "consumer_manager",
            Pool::Admin => "admin",
            Pool::EndTransaction => "transaction",
            Pool::Reply => "reply",
        }
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

use Access::{Admin as A, Signed as S, Touches as T};
use RequestCode as R;

/// Every code the broker serves. Admin-only beyond Java's `Permission.ADMIN_CODE` (ours): the ACL
/// codes (GET_BROKER_CLUSTER_ACL_CONFIG hands out every secret key), the offset reset, 5.x's batch
/// creates, the clean-ups that delete data, and 5.x's codes that change how the store reads or
/// what its checkpoint says.
pub const ROUTES: &[Route] = &[
    // Sends (batch sends are checked as single sends; 4.9.7 does not look at their topic).
    route(R::SEND_MESSAGE, Handler::Send, Pool::Send, T(touches::send_v1)),
    route(R::SEND_MESSAGE_V2, Handler::Send, Pool::Send, T(touches::send_v2)),
    route(R::SEND_BATCH_MESSAGE, Handler::Send, Pool::Send, T(touches::send_v2)),
    route(R::CONSUMER_SEND_MSG_BACK, Handler::Send, Pool::Send, T(touches::group)),
    // Pulls (lite pulls are checked as pulls; 4.9.7 does not check them).
    route(R::PULL_MESSAGE, Handler::Pull, Pool::Pull, T(touches::pull)),
    route(R::LITE_PULL_MESSAGE, Handler::Pull, Pool::Pull, T(touches::pull)),
    // 5.x pop: a subscription to the topic and the group, as a pull.
    route(R::POP_MESSAGE, Handler::Pop, Pool::Pull, T(touches::pull)),
    route(R::ACK_MESSAGE, Handler::Pop, Pool::Pull, T(touches::pull)),
    // Its groups and topics are in the body, which ACL 1.0 does not read.
    route(R::BATCH_ACK_MESSAGE, Handler::Pop, Pool::Pull, S),
    route(R::CHANGE_MESSAGE_INVISIBLETIME, Handler::Pop, Pool::Pull, T(touches::pull)),
    // Clients.
    route(R::HEART_BEAT, Handler::ClientManage, Pool::Heartbeat, T(touches::heartbeat)),
    route(R::UNREGISTER_CLIENT, Handler::ClientManage, Pool::ClientManage, T(touches::group)),
    route(R::CHECK_CLIENT_CONFIG, Handler::ClientManage, Pool::ClientManage, S),
    // Consumers' offsets and queue locks.
    route(R::GET_CONSUMER_LIST_BY_GROUP, Handler::ConsumerManage, Pool::ConsumerManage, T(touches::group)),
    route(R::UPDATE_CONSUMER_OFFSET, Handler::ConsumerManage, Pool::ConsumerManage, T(touches::group_and_topic)),
    route(R::QUERY_CONSUMER_OFFSET, Handler::ConsumerManage, Pool::ConsumerManage, S),
    route(R::LOCK_BATCH_MQ, Handler::Lock, Pool::ConsumerManage, S),
    route(R::UNLOCK_BATCH_MQ, Handler::Lock, Pool::ConsumerManage, S),
    // Queries.
    route(R::GET_MAX_OFFSET, Handler::Query, Pool::Query, S),
    route(R::GET_MIN_OFFSET, Handler::Query, Pool::Query, S),
    route(R::GET_EARLIEST_MSG_STORETIME, Handler::Query, Pool::Query, S),
    route(R::SEARCH_OFFSET_BY_TIMESTAMP, Handler::Query, Pool::Query, S),
    route(R::QUERY_MESSAGE, Handler::Query, Pool::Query, T(touches::topic)),
    route(R::VIEW_MESSAGE_BY_ID, Handler::Query, Pool::Query, S),
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
    // Relays to consumers.
    route(R::INVOKE_BROKER_TO_RESET_OFFSET, Handler::Relay, Pool::Admin, A),
    route(R::INVOKE_BROKER_TO_GET_CONSUMER_STATUS, Handler::Relay, Pool::Admin, S),
    route(R::GET_CONSUMER_RUNNING_INFO, Handler::Relay, Pool::Admin, S),
    route(R::CONSUME_MESSAGE_DIRECTLY, Handler::Relay, Pool::Admin, S),
    // Maintenance and 5.x's batch creates.
    route(R::GET_SYSTEM_TOPIC_LIST_FROM_BROKER, Handler::Maintenance, Pool::Admin, S),
    route(R::CLEAN_EXPIRED_CONSUMEQUEUE, Handler::Maintenance, Pool::Admin, A),
    route(R::DELETE_EXPIRED_COMMITLOG, Handler::Maintenance, Pool::Admin, A),
    route(R::CLEAN_UNUSED_TOPIC, Handler::Maintenance, Pool::Admin, A),
    route(R::QUERY_CONSUME_QUEUE, Handler::Maintenance, Pool::Admin, S),
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
    route(R::END_TRANSACTION, Handler::EndTransaction, Pool::EndTransaction, S),
    route(R::SEND_REPLY_MESSAGE, Handler::Reply, Pool::Reply, S),
    route(R::SEND_REPLY_MESSAGE_V2, Handler::Reply, Pool::Reply, S),
];

/// The route of `code`, if the broker serves it.
pub fn find(code: i32) -> Option<&'static Route> {
    ROUTES.iter().find(|r| r.code.0 == code)
}

/// What each request touches, read from its header fields (and a heartbeat's body) as Java's
/// `PlainAccessValidator.parse` reads them.
mod touches {
    use remoting::fastjson;
    use remoting::protocol::heartbeat::HeartbeatData;

    use super::*;

    use remoting::protocol::system_topic::RETRY_GROUP_TOPIC_PREFIX as RETRY_PREFIX;

    fn retry(group: &str) -> String {
        format!("{RETRY_PREFIX}{group}")
    }

    fn field(request: &RemotingCommand, key: &str) -> Option<String> {
        request.ext_fields.as_ref().and_then(|ext| ext.get(key).cloned())
    }

    /// A topic to publish to, or, for a retry topic, the group (field `group_field`) to consume.
    fn send(request: &RemotingCommand, topic_field: &str, group_field: &str) -> Resources {
        match field(request, topic_field) {
            // Java reads a group field the V1 header does not have: nothing more is checked then.
            Some(t) if t.starts_with(RETRY_PREFIX) => field(request, group_field).map(|g| (retry(&g), perm::SUB)).into_iter().collect(),
            t => t.map(|t| (t, perm::PUB)).into_iter().collect(),
        }
    }

    pub(super) fn send_v1(request: &RemotingCommand) -> Result<Resources, String> {
        Ok(send(request, "topic", "group"))
    }

    pub(super) fn send_v2(request: &RemotingCommand) -> Result<Resources, String> {
        Ok(send(request, "b", "a"))
    }

    /// CONSUMER_SEND_MSG_BACK's `group`, or a consumer's `consumerGroup`.
    pub(super) fn group(request: &RemotingCommand) -> Result<Resources, String> {
        let key = if request.code == RequestCode::CONSUMER_SEND_MSG_BACK.0 { "group" } else { "consumerGroup" };
        Ok(field(request, key).map(|g| (retry(&g), perm::SUB)).into_iter().collect())
    }

    /// A topic published to (RECALL_MESSAGE's `@RocketMQAction(PUB)`).
    pub(super) fn publish(request: &RemotingCommand) -> Result<Resources, String> {
        Ok(field(request, "topic").map(|t| (t, perm::PUB)).into_iter().collect())
    }

    pub(super) fn topic(request: &RemotingCommand) -> Result<Resources, String> {
        Ok(field(request, "topic").map(|t| (t, perm::SUB)).into_iter().collect())
    }

    pub(super) fn pull(request: &RemotingCommand) -> Result<Resources, String> {
        let mut resources = topic(request)?;
        resources.extend(group(request)?);
        Ok(resources)
    }

    pub(super) fn group_and_topic(request: &RemotingCommand) -> Result<Resources, String> {
        let mut resources = group(request)?;
        resources.extend(topic(request)?);
        Ok(resources)
    }

    pub(super) fn heartbeat(request: &RemotingCommand) -> Result<Resources, String> {
        let data: HeartbeatData = fastjson::from_slice(request.body_bytes()).map_err(|e| format!("heartbeat body is not valid HeartbeatData: {e}"))?;
        let mut resources = Vec::new();
        for consumer in &data.consumer_data_set {
            resources.push((retry(&consumer.group_name), perm::SUB));
            resources.extend(consumer.subscription_data_set.iter().map(|sub| (sub.topic.clone(), perm::SUB)));
        }
        Ok(resources)
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
        ] {
            assert!(admin.contains(&code), "{code:?} is not admin-only");
        }
    }

    #[test]
    fn sends_pulls_and_heartbeats_say_what_they_touch() {
        let request = |code: RequestCode, fields: &[(&str, &str)]| {
            let mut ext = remoting::command::ExtFields::new();
            fields.iter().for_each(|(k, v)| {
                ext.insert(k.to_string(), v.to_string());
            });
            RemotingCommand { ext_fields: Some(ext), ..RemotingCommand::request(code) }
        };
        let touched = |r: &RemotingCommand| match find(r.code).map(|route| route.access) {
            Some(Access::Touches(f)) => f(r),
            other => panic!("{other:?}"),
        };
        assert_eq!(touched(&request(R::SEND_MESSAGE_V2, &[("a", "pg"), ("b", "T")])), Ok(vec![("T".to_owned(), perm::PUB)]));
        assert_eq!(touched(&request(R::SEND_MESSAGE_V2, &[("a", "cg"), ("b", "%RETRY%cg")])), Ok(vec![("%RETRY%cg".to_owned(), perm::SUB)]));
        assert_eq!(touched(&request(R::SEND_MESSAGE, &[("topic", "%RETRY%cg")])), Ok(vec![]));
        assert_eq!(
            touched(&request(R::PULL_MESSAGE, &[("topic", "T"), ("consumerGroup", "cg")])),
            Ok(vec![("T".to_owned(), perm::SUB), ("%RETRY%cg".to_owned(), perm::SUB)])
        );
        assert_eq!(touched(&request(R::CONSUMER_SEND_MSG_BACK, &[("group", "cg")])), Ok(vec![("%RETRY%cg".to_owned(), perm::SUB)]));
        assert!(touched(&request(R::HEART_BEAT, &[]).with_body(b"not json".to_vec())).is_err());
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
        let mut ext = ExtFields::new();
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
        let send = |topic: &str, ak: &str, sk: &str| signed(RequestCode::SEND_MESSAGE_V2, &[("a", "pg"), ("b", topic)], b"body", ak, sk);
        assert_eq!(check(&acl, client, &send("AclTopic", "RocketMQUser", "12345678")), Ok(()));
        assert_eq!(check(&acl, client, &send("AclTopic", "RocketMQUser", "wrong")), Err("Check signature failed for accessKey=RocketMQUser".into()));
        assert_eq!(check(&acl, client, &send("ReadOnly", "RocketMQUser", "12345678")), Err("No default permission for topic:ReadOnly".into()));
        assert_eq!(check(&acl, client, &send("Unlisted", "RocketMQUser", "12345678")), Err("No default permission for topic:Unlisted".into()));
        assert_eq!(check(&acl, client, &send("AclTopic", "Nobody", "12345678")), Err("No acl config for Nobody".into()));
        assert_eq!(check(&acl, client, &RemotingCommand::request(RequestCode::SEND_MESSAGE_V2)), Err("No accessKey is configured".into()));
        // Batches are checked as sends (4.9.7 does not look at their topic).
        let batch = signed(RequestCode::SEND_BATCH_MESSAGE, &[("a", "pg"), ("b", "ReadOnly")], b"", "RocketMQUser", "12345678");
        assert!(check(&acl, client, &batch).is_err());
        // Trace records may go to the trace topic with any signed account.
        assert_eq!(check(&acl, client, &send("RMQ_SYS_TRACE_TOPIC", "RocketMQUser", "12345678")), Ok(()));
        // A pull needs SUB on the topic and on the group (its retry topic; groups default to SUB).
        let pull = signed(RequestCode::PULL_MESSAGE, &[("topic", "ReadOnly"), ("consumerGroup", "cg")], b"", "RocketMQUser", "12345678");
        assert_eq!(check(&acl, client, &pull), Ok(()));
        // Admin codes need an admin account.
        let create = signed(RequestCode::UPDATE_AND_CREATE_TOPIC, &[("topic", "New")], b"", "RocketMQUser", "12345678");
        assert_eq!(check(&acl, client, &create), Err("Need admin permission for request code=17, but accessKey=RocketMQUser is not".into()));
        let create = signed(RequestCode::UPDATE_AND_CREATE_TOPIC, &[("topic", "New")], b"", "RocketMQAdmin", "87654321");
        assert_eq!(check(&acl, client, &create), Ok(()));
        // White addresses pass without a signature: globally, and for their own account.
        assert_eq!(check(&acl, ip("10.10.103.5"), &RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_TOPIC)), Ok(()));
        assert_eq!(check(&acl, ip("192.168.9.1"), &send("Unlisted", "WhiteListed", "no-signature-needed")), Ok(()));
        assert!(check(&acl, ip("192.168.8.1"), &send("Unlisted", "WhiteListed", "no-signature-needed")).is_err());
    }

    #[test]
    fn a_changed_file_is_loaded_again_and_a_bad_one_keeps_the_last_good_config() {
        let (home, acl) = acl();
        assert!(!acl.reload_if_changed());
        std::fs::write(config::default_file(home.path()), FILE.replace("ReadOnly=SUB", "ReadOnly=PUB")).unwrap();
        assert!(acl.reload_if_changed());
        let send = signed(RequestCode::SEND_MESSAGE_V2, &[("a", "pg"), ("b", "ReadOnly")], b"", "RocketMQUser", "12345678");
        assert_eq!(check(&acl, ip("127.0.0.1"), &send), Ok(()));
        std::fs::write(config::default_file(home.path()), "accounts: [\n").unwrap();
        assert!(!acl.reload_if_changed());
        assert_eq!(check(&acl, ip("127.0.0.1"), &send), Ok(()));
    }
}
