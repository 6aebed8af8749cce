//! Consumption: pulls (Java `PullMessageProcessor`'s logic), with long polling; pop will join.
//! The service holds narrow handles to what a pull reads and records, so it can be built over a
//! temporary store in a test; `processor::pull` adapts requests to it.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use remoting::header::HeaderError;
use remoting::protocol::broker::{PullMessageRequestHeader, PullMessageResponseHeader};
use remoting::protocol::heartbeat::SubscriptionData;
use remoting::protocol::perm;
use remoting::server::Channel;
use remoting::{RemotingCommand, ResponseCode};
use store::message::java_string_hash;
use store::store::GetMessageStatus;

use crate::broker::FAQ_SUFFIX;
use crate::client::consumer_manager::ConsumerManager;
use crate::config::LiveConfig;
use crate::consumer_offset::ConsumerOffsetManager;
use crate::long_polling::HeldPull;
use crate::long_polling::PullRequestHoldService;
use crate::metrics::BrokerMetrics;
use crate::parking::QueueKey;
use crate::stats::StoreStats;
use crate::stats_manager::BrokerStatsManager;
use crate::subscription_group::SubscriptionGroupManager;
use crate::topic_config::TopicConfigManager;

/// Java `PullSysFlag` bits.
const FLAG_COMMIT_OFFSET: i32 = 0x1;
const FLAG_SUSPEND: i32 = 0x2;
const FLAG_SUBSCRIPTION: i32 = 0x4;

/// Java's `MixAll.MASTER_ID`.
const MASTER_ID: i64 = 0;

/// The longest a pull is held, whatever it asks (Java clients ask 15-30 s).
const MAX_SUSPEND: Duration = Duration::from_secs(120);

/// What a pull reads (config, store, topics, groups, the consumers' subscriptions), commits
/// (offsets), records (stats, metrics) and parks on.
pub struct PullService {
    pub config: LiveConfig,
    pub store: Arc<store::store::MessageStore>,
    pub topics: Arc<TopicConfigManager>,
    pub groups: Arc<SubscriptionGroupManager>,
    pub offsets: Arc<ConsumerOffsetManager>,
    pub consumers: Arc<ConsumerManager>,
    pub stats: Arc<StoreStats>,
    pub broker_stats: Arc<BrokerStatsManager>,
    pub metrics: Arc<BrokerMetrics>,
    /// Where pulls park; set once the lot (whose wake action runs this service) is built. Until
    /// then, and in a broker without one, a pull that finds nothing is answered at once.
    pub parking: OnceLock<Arc<PullRequestHoldService>>,
}

impl PullService {
    fn is_slave(&self) -> bool {
        self.store.role() == store::config::BrokerRole::Slave
    }

    /// Runs a pull. `first_time`: the request may be parked and its offset commit applies; a
    /// woken pull runs again with neither.
    pub fn pull(&self, channel: &Channel, request: RemotingCommand, first_time: bool) -> Option<RemotingCommand> {
        let b = self;
        let config = self.config.load();
        let err = |code, remark: String| Some(RemotingCommand::error_response(&request, code, remark));
        let h: PullMessageRequestHeader = match request.decode_header() {
            Ok(h) => h,
            // Java finds no group by an illegal name (and will not create one).
            Err(e @ HeaderError::Rejected { field: "consumerGroup", .. }) => {
                return err(ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, format!("subscription group [{e}] does not exist,{FAQ_SUFFIX}"))
            }
            Err(e) => return err(ResponseCode::SYSTEM_ERROR, e.to_string()),
        };
        if !perm::is_readable(config.broker_permission) {
            return err(ResponseCode::NO_PERMISSION, format!("the broker[{}] pulling message is forbidden", config.broker_ip1));
        }
        let Some(group) = b.groups.find_or_create(&h.consumer_group, config.auto_create_subscription_group) else {
            return err(ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, format!("subscription group [{}] does not exist,{FAQ_SUFFIX}", h.consumer_group));
        };
        if !group.consume_enable {
            return err(ResponseCode::NO_PERMISSION, format!("subscription group no permission, {}", h.consumer_group));
        }
        let Some(topic) = b.topics.select(&h.topic) else {
            return err(ResponseCode::TOPIC_NOT_EXIST, format!("topic[{}] not exist, apply first please!{FAQ_SUFFIX}", h.topic));
        };
        if !perm::is_readable(topic.perm) {
            return err(ResponseCode::NO_PERMISSION, format!("the topic[{}] pulling message is forbidden", h.topic));
        }
        if h.queue_id < 0 || h.queue_id >= topic.read_queue_nums {
            return err(
                ResponseCode::SYSTEM_ERROR,
                format!(
                    "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}] consumer:[{}]",
                    h.queue_id,
                    h.topic,
                    topic.read_queue_nums,
                    channel.remote_addr()
                ),
            );
        }
        if h.queue_offset < 0 {
            return err(ResponseCode::SYSTEM_ERROR, format!("queueOffset[{}] is illegal", h.queue_offset));
        }
        let subscription = match self.subscription(&h) {
            Ok(s) => s,
            Err((code, remark)) => return err(code, remark),
        };

        // 5.x: a server-side reset is this queue's answer, once (Java's OFFSET_RESET).
        if config.use_server_side_reset_offset {
            if let Some(reset) = b.offsets.take_reset_offset(&h.consumer_group, &h.topic, h.queue_id) {
                let header = PullMessageResponseHeader {
                    suggest_which_broker_id: MASTER_ID,
                    next_begin_offset: reset,
                    min_offset: b.store.min_offset_in_queue(&h.topic, h.queue_id),
                    max_offset: b.store.max_offset_in_queue(&h.topic, h.queue_id),
                };
                return Some(RemotingCommand::response_to(&request, ResponseCode::PULL_OFFSET_MOVED).with_remark("OFFSET_RESET").with_header(&header));
            }
        }
        let sql = match crate::filter::pull_filter_shared(config.enable_property_filter, &subscription) {
            Ok(sql) => sql,
            Err((code, remark)) => return err(code, remark),
        };
        let max = usize::try_from(h.max_msg_nums).unwrap_or(0).max(1);
        let read_started = std::time::Instant::now();
        let mut result = match &sql {
            // Without Java's bloom-filter bitmap every consume-queue entry is a candidate; the
            // record's properties decide.
            Some(expr) => b.store.get_message_filtered(&h.topic, h.queue_id, h.queue_offset, max, |_| true, |r| crate::filter::record_matches(expr, r)),
            None => b.store.get_message(&h.topic, h.queue_id, h.queue_offset, max, |code| subscription.matches_tags_code(code)),
        };
        b.stats.on_get_done(read_started.elapsed());
        // A slave may lag its master: it never corrects the consumer's offset (Java's
        // `nextOffsetCorrection` without `offsetCheckInSlave`). Corrected, an offset past the
        // slave's end would send the client back to 0, or forward past messages still coming.
        if b.is_slave()
            && matches!(
                result.status,
                GetMessageStatus::NoMessageInQueue
                    | GetMessageStatus::OffsetTooSmall
                    | GetMessageStatus::OffsetOverflowOne
                    | GetMessageStatus::OffsetOverflowBadly
                    | GetMessageStatus::OffsetFoundNull
                    | GetMessageStatus::NoMatchedLogicQueue
            )
        {
            result.next_begin_offset = h.queue_offset;
        }
        let code = match result.status {
            GetMessageStatus::Found => ResponseCode::SUCCESS,
            GetMessageStatus::MessageWasRemoving | GetMessageStatus::NoMatchedMessage => ResponseCode::PULL_RETRY_IMMEDIATELY,
            GetMessageStatus::NoMatchedLogicQueue | GetMessageStatus::NoMessageInQueue if h.queue_offset != 0 => ResponseCode::PULL_OFFSET_MOVED,
            GetMessageStatus::NoMatchedLogicQueue | GetMessageStatus::NoMessageInQueue => ResponseCode::PULL_NOT_FOUND,
            GetMessageStatus::OffsetFoundNull | GetMessageStatus::OffsetOverflowOne => ResponseCode::PULL_NOT_FOUND,
            GetMessageStatus::OffsetOverflowBadly | GetMessageStatus::OffsetTooSmall => ResponseCode::PULL_OFFSET_MOVED,
        };
        // Java 4.9: with slave reads on, a consumer that falls behind (its messages no longer in
        // memory) is sent to the group's slow-consumer broker, else to the group's broker; off,
        // always to the master.
        let mut suggest = if !config.slave_read_enable {
            MASTER_ID
        } else if result.suggest_pulling_from_slave {
            group.which_broker_when_consume_slowly
        } else {
            group.broker_id
        };
        // A slave does not correct offsets (it may only lag its master): "offset moved" becomes
        // "try again", pointed at the group's broker (Java without `offsetCheckInSlave`).
        let code = if code == ResponseCode::PULL_OFFSET_MOVED && b.is_slave() {
            suggest = group.broker_id;
            ResponseCode::PULL_RETRY_IMMEDIATELY
        } else {
            code
        };

        if first_time && h.sys_flag & FLAG_COMMIT_OFFSET != 0 && !b.is_slave() {
            b.offsets.commit_offset(&channel.remote_addr().to_string(), &h.consumer_group, &h.topic, h.queue_id, h.commit_offset);
        }

        if code == ResponseCode::PULL_NOT_FOUND && first_time && h.sys_flag & FLAG_SUSPEND != 0 {
            if let Some(hold) = b.parking.get() {
                let timeout = if config.long_polling_enable {
                    // The client's wish, up to the idle time after which its connection closes.
                    Duration::from_millis(u64::try_from(h.suspend_timeout_millis).unwrap_or(0)).min(MAX_SUSPEND)
                } else {
                    Duration::from_millis(config.short_polling_time_ms)
                };
                let parked = hold.park(
                    QueueKey::new(&h.topic, h.queue_id),
                    HeldPull {
                        request,
                        channel: channel.clone(),
                        deadline: Instant::now() + timeout,
                        parked_at: Instant::now(),
                        pull_from_offset: h.queue_offset,
                        subscription: Some(subscription),
                    },
                );
                return match parked {
                    Ok(()) => None,
                    Err(refused) => Some(RemotingCommand::error_response(&refused.1.request, ResponseCode::SYSTEM_BUSY, refused.0.to_string())),
                };
            }
        }

        let mut response = RemotingCommand::response_to(&request, code).with_remark(result.status.name()).with_header(&PullMessageResponseHeader {
            suggest_which_broker_id: suggest,
            next_begin_offset: result.next_begin_offset,
            min_offset: result.min_offset,
            max_offset: result.max_offset,
        });
        let got = if code == ResponseCode::SUCCESS { (result.messages.len(), result.buffer_total_size) } else { (0, 0) };
        b.stats.on_get(got.0);
        if code == ResponseCode::SUCCESS {
            b.broker_stats.on_get(&h.consumer_group, &h.topic, got.0, got.1);
        }
        b.metrics.on_get(&h.topic, &h.consumer_group, h.queue_id, result.next_begin_offset, got.0, got.1);
        if code == ResponseCode::SUCCESS {
            // Each message a slice of the mapping, written to the socket as it is (see body_tail).
            response = response.with_body_parts(result.messages);
        }
        Some(response)
    }

    /// The subscription this pull filters with: from the request, or from the group's heartbeat.
    fn subscription(&self, h: &PullMessageRequestHeader) -> Result<SubscriptionData, (ResponseCode, String)> {
        if h.sys_flag & FLAG_SUBSCRIPTION != 0 {
            let expression_type = h.expression_type.as_deref().unwrap_or("TAG");
            if !crate::filter::is_tag_type(expression_type) {
                return crate::filter::subscription_of_pull(&h.topic, expression_type, h.subscription.as_deref().unwrap_or(""), h.sub_version);
            }
            return Ok(SubscriptionData::from_expression(&h.topic, h.subscription.as_deref().unwrap_or("*"), java_string_hash));
        }
        let Some(sub) = self.consumers.group_subscription(&h.consumer_group, &h.topic) else {
            return Err((ResponseCode::SUBSCRIPTION_NOT_EXIST, format!("the consumer's group info not exist{FAQ_SUFFIX}")));
        };
        let Some(sub) = sub else {
            return Err((ResponseCode::SUBSCRIPTION_NOT_EXIST, format!("the consumer's subscription not exist{FAQ_SUFFIX}")));
        };
        if sub.sub_version < h.sub_version {
            return Err((ResponseCode::SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest".into()));
        }
        Ok(sub)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use bytes::Bytes;
    use remoting::protocol::name::{GroupName, TopicName};
    use remoting::protocol::topic::TopicConfig;
    use remoting::RequestCode;
    use store::config::MessageStoreConfig;
    use store::message::MessageToStore;
    use store::store::MessageStore;

    use super::*;
    use crate::config::BrokerConfig;
    use crate::long_polling::HeldPull;
    use crate::parking::{ParkingBudget, ParkingLot};

    /// A pull service over a temporary store with topic `T` (Java's default queue count), and a
    /// connection for the requests to come from (in process, over `tokio::io::duplex`).
    struct Fixture {
        _dir: tempfile::TempDir,
        _peer: tokio::io::DuplexStream,
        store: Arc<MessageStore>,
        service: Arc<PullService>,
        channel: Channel,
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            self.store.shutdown();
        }
    }

    async fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store_config =
            MessageStoreConfig { store_path_root_dir: dir.path().to_string_lossy().into_owned(), mapped_file_size_commit_log: 1 << 20, ..Default::default() };
        let store = MessageStore::open(store_config.clone()).unwrap();
        store.start().unwrap();
        let config = BrokerConfig::default();
        let root = store_config.root_dir();
        let topics = Arc::new(TopicConfigManager::open(&config, true, &root).unwrap());
        topics.update(&TopicName::new("T").unwrap(), TopicConfig::new("T")).unwrap();
        let service = Arc::new(PullService {
            config: Arc::new(arc_swap::ArcSwap::from_pointee(config)),
            store: store.clone(),
            topics,
            groups: Arc::new(SubscriptionGroupManager::open(&root).unwrap()),
            offsets: Arc::new(ConsumerOffsetManager::open(&root).unwrap()),
            consumers: Default::default(),
            stats: Default::default(),
            broker_stats: Arc::new(BrokerStatsManager::new("c")),
            metrics: Default::default(),
            parking: Default::default(),
        });
        let (ours, peer) = tokio::io::duplex(1 << 16);
        let endpoints = remoting::connection::Endpoints { remote: "127.0.0.1:50001".parse().unwrap(), local: "127.0.0.1:10911".parse().unwrap() };
        let channel = remoting::client::client_channel(ours, endpoints, &Default::default());
        Fixture { _dir: dir, _peer: peer, store, service, channel }
    }

    fn put(store: &MessageStore, body: &str) {
        let message = MessageToStore {
            topic: "T".into(),
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: "127.0.0.1:40000".parse().unwrap(),
            store_host: "127.0.0.1:10911".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Bytes::from(body.as_bytes().to_vec()),
            properties: "TAGS\u{1}a\u{2}".into(),
        };
        assert!(store.put_message(&message).is_ok());
    }

    fn pull_request(offset: i64, sys_flag: i32) -> RemotingCommand {
        let header = PullMessageRequestHeader {
            consumer_group: GroupName::new("cg").unwrap(),
            topic: TopicName::new("T").unwrap(),
            queue_id: 0,
            queue_offset: offset,
            max_msg_nums: 32,
            sys_flag: sys_flag | FLAG_SUBSCRIPTION,
            commit_offset: 0,
            suspend_timeout_millis: 15_000,
            subscription: Some("*".into()),
            sub_version: 0,
            expression_type: Some("TAG".into()),
            max_msg_bytes: None,
            broker_name: None,
        };
        RemotingCommand::request_with_header(RequestCode::PULL_MESSAGE, &header)
    }

    fn wait_dispatched(store: &MessageStore) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.max_offset_in_queue("T", 0) < 1 {
            assert!(Instant::now() < deadline, "dispatch never caught up");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pull_answers_the_stored_messages() {
        let f = fixture().await;
        put(&f.store, "one");
        wait_dispatched(&f.store);
        let response = f.service.pull(&f.channel, pull_request(0, 0), true).unwrap();
        assert_eq!(response.code, ResponseCode::SUCCESS.0, "{:?}", response.remark);
        let header: PullMessageResponseHeader = response.decode_header().unwrap();
        assert_eq!((header.next_begin_offset, header.max_offset), (1, 1));
        assert!(response.body_bytes().ends_with(b"TAGS\x01a\x02"), "the stored record, as Java sends it");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pull_that_finds_nothing_parks_and_the_next_message_wakes_it() {
        let f = fixture().await;
        let (answers, answered) = mpsc::channel();
        let service = Arc::downgrade(&f.service);
        let wake = Box::new(move |held: HeldPull| {
            if let Some(service) = service.upgrade() {
                let _ = answers.send(service.pull(&held.channel, held.request, false));
            }
        });
        let lot = Arc::new(ParkingLot::new(wake, ParkingBudget::new(16, 16)));
        let _ = f.service.parking.set(lot.clone());
        let arrivals = lot.clone();
        f.store.set_arrival_listener(Arc::new(move |topic, queue_id, arrived| {
            arrivals.notify_arrivals(&crate::parking::QueueKey::new(topic, queue_id), arrived, Instant::now());
        }));
        assert!(f.service.pull(&f.channel, pull_request(0, FLAG_SUSPEND), true).is_none(), "parked");
        assert_eq!(lot.held_count(), 1);
        put(&f.store, "late");
        let woken = answered.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
        assert_eq!(woken.code, ResponseCode::SUCCESS.0, "{:?}", woken.remark);
        assert_eq!(lot.held_count(), 0);
        // Run again after waking, a pull is never parked twice: at the end it is answered.
        let at_end = f.service.pull(&f.channel, pull_request(1, FLAG_SUSPEND), false).unwrap();
        assert_eq!(at_end.code, ResponseCode::PULL_NOT_FOUND.0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bad_headers_are_answered_with_javas_codes() {
        let f = fixture().await;
        let missing = RemotingCommand::request(RequestCode::PULL_MESSAGE);
        assert_eq!(f.service.pull(&f.channel, missing, true).unwrap().code, ResponseCode::SYSTEM_ERROR.0);
        let mut illegal_group = pull_request(0, 0);
        illegal_group.ext_fields.as_mut().unwrap().insert("consumerGroup".into(), "../cg".into());
        assert_eq!(f.service.pull(&f.channel, illegal_group, true).unwrap().code, ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST.0);
        let mut no_topic = pull_request(0, 0);
        no_topic.ext_fields.as_mut().unwrap().insert("topic".into(), "Nowhere".into());
        assert_eq!(f.service.pull(&f.channel, no_topic, true).unwrap().code, ResponseCode::TOPIC_NOT_EXIST.0);
        let mut bad_queue = pull_request(0, 0);
        bad_queue.ext_fields.as_mut().unwrap().insert("queueId".into(), "99".into());
        assert_eq!(f.service.pull(&f.channel, bad_queue, true).unwrap().code, ResponseCode::SYSTEM_ERROR.0);
    }
}
