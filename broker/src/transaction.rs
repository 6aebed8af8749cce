//! Transactions (Java `TransactionalMessageServiceImpl` and friends): a prepared message is stored
//! as a half message in `RMQ_SYS_TRANS_HALF_TOPIC` (its real topic and queue in properties, sys
//! flag cleared) where consumers cannot see it. END_TRANSACTION commits it (a copy goes to the real
//! topic with the COMMIT sys flag) or rolls it back; either way an op record (tag `d`, body = the
//! half's queue offset) in `RMQ_SYS_TRANS_OP_HALF_TOPIC` marks it done. Half messages left open
//! longer than `transactionTimeOut` are checked back with the producer group (CHECK_TRANSACTION_STATE),
//! at most `transactionCheckMax` times.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use remoting::clock::now_ms;
use remoting::protocol::name::{GroupName, TopicName};
use remoting::protocol::perm;
use remoting::{command_header, RemotingCommand, RequestCode};
use store::commit_log::PutMessageResult;
use store::message::record::{decode_record, encode_record, DecodedRecord, RecordAt, StampedFields, SYSFLAG_TRANSACTION_MASK, TRANSACTION_COMMIT_TYPE};
use store::message::{offset_message_id, properties, MessageToStore};
use tracing::{debug, info, warn};

use crate::client::producer_manager::ProducerManager;
use crate::config::LiveConfig;
use crate::consumer_offset::ConsumerOffsetManager;
use crate::metrics::BrokerMetrics;
use crate::put::Origin;
use crate::put::PutPipeline;
use crate::topic_config::system_topic;
use crate::topic_config::TopicConfigManager;

/// The group whose consumer offsets track how far the half and op queues were checked.
pub const CHECK_GROUP: &str = "CID_RMQ_SYS_TRANS";

fn check_group() -> GroupName {
    GroupName::new(CHECK_GROUP).unwrap_or_else(|e| panic!("{CHECK_GROUP}: {e}"))
}
pub(crate) use store::message::properties::{PGROUP, TRAN_MSG};
const CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
const CHECK_IMMUNITY: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
/// Java `TransactionalMessageUtil.REMOVETAG`.
const REMOVE_TAG: &str = "d";

command_header! {
    /// END_TRANSACTION.
    #[derive(Default)]
    pub struct EndTransactionRequestHeader {
        pub producer_group: String => "producerGroup",
        pub tran_state_table_offset: i64 => "tranStateTableOffset",
        pub commit_log_offset: i64 => "commitLogOffset",
        pub commit_or_rollback: i32 => "commitOrRollback",
        pub from_transaction_check: Option<bool> => "fromTransactionCheck",
        pub msg_id: String => "msgId",
        pub transaction_id: Option<String> => "transactionId",
    }
}

command_header! {
    /// CHECK_TRANSACTION_STATE (broker to producer).
    #[derive(Default)]
    pub struct CheckTransactionStateRequestHeader {
        pub tran_state_table_offset: i64 => "tranStateTableOffset",
        pub commit_log_offset: i64 => "commitLogOffset",
        pub msg_id: Option<String> => "msgId",
        pub transaction_id: Option<String> => "transactionId",
        pub offset_msg_id: Option<String> => "offsetMsgId",
    }
}

fn with_properties(msg: &mut MessageToStore, edit: impl FnOnce(&mut indexmap::IndexMap<String, String>)) {
    let mut props = properties::parse(&msg.properties);
    edit(&mut props);
    msg.properties = properties::serialize(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
}

/// What transactions read and write, each by its own handle.
pub struct Transactions {
    pub config: LiveConfig,
    pub store: Arc<store::store::MessageStore>,
    pub put: Arc<PutPipeline>,
    pub offsets: Arc<ConsumerOffsetManager>,
    /// Where a check-back goes: a live producer of the half message's group.
    pub producers: Arc<ProducerManager>,
    pub metrics: Arc<BrokerMetrics>,
    /// `brokerIP1:listenPort`, the op records' hosts.
    pub store_host: std::net::SocketAddr,
}

/// Makes sure the half and op topics exist (Java creates them on first use).
pub fn ensure_topics(topics: &TopicConfigManager) {
    for topic in [system_topic::TRANS_HALF, system_topic::TRANS_OP_HALF] {
        topics.create_topic_in_send_message_back_method(&system_topic::name(topic), 1, perm::READ | perm::WRITE, 0);
    }
}

impl Transactions {
    /// Marks a half message done.
    fn write_op(&self, half_queue_offset: i64) -> PutMessageResult {
        let b = self;
        let op = MessageToStore {
            topic: system_topic::TRANS_OP_HALF.to_owned(),
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: now_ms(),
            born_host: b.store_host,
            store_host: b.store_host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Bytes::from(half_queue_offset.to_string()),
            properties: properties::serialize([(properties::TAGS, REMOVE_TAG), (properties::WAIT, "false")]),
        };
        b.put.put(&op, Origin::TransactionOp)
    }

    /// END_TRANSACTION: commits or rolls back the half message (Java `EndTransactionProcessor`).
    /// Returns the error code and remark, if any.
    pub fn end(&self, h: &EndTransactionRequestHeader) -> Result<(), (remoting::ResponseCode, String)> {
        let b = self;
        use remoting::ResponseCode as C;
        if h.commit_or_rollback != TRANSACTION_COMMIT_TYPE && h.commit_or_rollback != store::message::record::TRANSACTION_ROLLBACK_TYPE {
            return Ok(()); // "unknown": the check-back will ask again
        }
        let bytes = b.store.look_message_by_offset(h.commit_log_offset).ok_or((C::SYSTEM_ERROR, "Find prepared transaction message failed".to_owned()))?;
        let Ok(RecordAt::Record(half)) = decode_record(&bytes, false) else {
            return Err((C::SYSTEM_ERROR, "Find prepared transaction message failed".to_owned()));
        };
        if half.topic != system_topic::TRANS_HALF {
            return Err((C::SYSTEM_ERROR, "Find prepared transaction message failed".to_owned()));
        }
        if half.property(PGROUP) != Some(h.producer_group.as_str()) {
            return Err((C::SYSTEM_ERROR, "The producer group wrong".to_owned()));
        }
        if half.queue_offset != h.tran_state_table_offset {
            return Err((C::SYSTEM_ERROR, "The transaction state table offset wrong".to_owned()));
        }
        if half.physical_offset != h.commit_log_offset {
            return Err((C::SYSTEM_ERROR, "The commit log offset wrong".to_owned()));
        }
        if h.commit_or_rollback == TRANSACTION_COMMIT_TYPE {
            let Some((topic, queue_id)) = real_destination(&half) else {
                return Err((C::SYSTEM_ERROR, "the prepared message names no valid topic and queue".to_owned()));
            };
            let mut msg = half.to_message();
            msg.topic = topic.into_string();
            msg.queue_id = queue_id;
            msg.sys_flag = (msg.sys_flag & !SYSFLAG_TRANSACTION_MASK) | TRANSACTION_COMMIT_TYPE;
            msg.prepared_transaction_offset = h.commit_log_offset;
            with_properties(&mut msg, |p| {
                for key in [TRAN_MSG, properties::REAL_TOPIC, properties::REAL_QID] {
                    p.shift_remove(key);
                }
                p.insert(properties::WAIT.to_owned(), "false".to_owned());
            });
            // Through Java's put hooks: a timer or delay the producer set takes effect now.
            let r = b.put.put_rewritten(msg, Origin::Commit { born_ms: half.born_timestamp });
            if !r.is_ok() {
                return Err((C::SYSTEM_ERROR, format!("{:?}", r.status)));
            }
        } else {
            b.metrics.on_rollback(half.property(properties::REAL_TOPIC).unwrap_or(""));
        }
        b.write_op(half.queue_offset);
        Ok(())
    }
}

/// Where a half message goes once committed: its `REAL_TOPIC` and `REAL_QID`, which must name a
/// topic and queue the store can hold (they are properties, so anything could be in them).
fn real_destination(half: &DecodedRecord<'_>) -> Option<(TopicName, i32)> {
    let topic = TopicName::new(half.property(properties::REAL_TOPIC)?).ok()?;
    let queue_id = half.property(properties::REAL_QID)?.parse::<u16>().ok()?;
    Some((topic, i32::from(queue_id)))
}

/// The check-back service.
/// The check-back pass; the broker runs [`TransactionChecker::check_once`] on a
/// [`remoting::service::Service`] every `transactionCheckInterval`.
pub struct TransactionChecker {
    pub tx: Transactions,
    /// Half queue offsets known to be done (from op records), above the checked offset.
    done: Mutex<BTreeSet<i64>>,
}

impl TransactionChecker {
    pub fn new(tx: Transactions) -> Self {
        TransactionChecker { tx, done: Mutex::new(BTreeSet::new()) }
    }

    /// How often the broker runs a pass.
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.tx.config.load().transaction_check_interval_ms.max(100))
    }

    /// One pass: learn what the op queue says is done, then check half messages old enough.
    pub fn check_once(&self, now: i64) {
        let b = &self.tx;
        let Some(half_cq) = b.store.find_queue(system_topic::TRANS_HALF, 0) else { return };
        let mut done = self.done.lock();
        if let Some(op_cq) = b.store.find_queue(system_topic::TRANS_OP_HALF, 0) {
            let mut op_offset = b.offsets.query_offset(CHECK_GROUP, system_topic::TRANS_OP_HALF, 0).unwrap_or(0).max(op_cq.min_offset());
            while let Some(unit) = op_cq.get(op_offset) {
                if let Some(Ok(RecordAt::Record(op))) = b.store.look_message_by_offset(unit.phy_offset).as_deref().map(|bytes| decode_record(bytes, false)) {
                    if let Ok(offset) = std::str::from_utf8(op.body).unwrap_or("").trim().parse::<i64>() {
                        done.insert(offset);
                    }
                }
                op_offset += 1;
            }
            b.offsets.commit_offset("", &check_group(), &system_topic::name(system_topic::TRANS_OP_HALF), 0, op_offset);
        }
        let mut checked = b.offsets.query_offset(CHECK_GROUP, system_topic::TRANS_HALF, 0).unwrap_or(0).max(half_cq.min_offset());
        let mut offset = checked;
        while offset < half_cq.max_offset() {
            if !done.contains(&offset) {
                let Some(unit) = half_cq.get(offset) else { break };
                let Some(bytes) = b.store.look_message_by_offset(unit.phy_offset) else { break };
                let Ok(RecordAt::Record(half)) = decode_record(&bytes, false) else { break };
                let immunity =
                    half.property(CHECK_IMMUNITY).and_then(|s| s.parse::<i64>().ok()).map_or(b.config.load().transaction_timeout_ms as i64, |s| s * 1000);
                if now - half.store_timestamp < immunity {
                    break; // younger messages follow
                }
                self.check_one(&half, offset);
                done.insert(offset);
            }
            offset += 1;
        }
        while done.remove(&checked) {
            checked += 1;
        }
        b.offsets.commit_offset("", &check_group(), &system_topic::name(system_topic::TRANS_HALF), 0, checked);
    }

    /// Gives up on a half message checked too often; otherwise puts a fresh copy back with one
    /// more check counted (as Java's `putBackHalfMsgQueue`), whether or not a producer of its
    /// group is online, and asks a live producer about that copy. A copy put back while its
    /// producer is away is checked again on a later pass, once the producer may have returned.
    fn check_one(&self, half: &DecodedRecord<'_>, offset: i64) {
        let b = &self.tx;
        let checks = half.property(CHECK_TIMES).and_then(|c| c.parse::<i32>().ok()).unwrap_or(0);
        if checks >= b.config.load().transaction_check_max {
            info!(offset, checks, "half message checked too many times; discarded");
            b.write_op(offset);
            return;
        }
        let (Some(group), Some((real_topic, real_queue))) = (half.property(PGROUP), real_destination(half)) else {
            warn!(offset, "half message without a producer group or a valid destination; discarded");
            b.write_op(offset);
            return;
        };
        let mut copy = half.to_message();
        with_properties(&mut copy, |p| {
            p.insert(CHECK_TIMES.to_owned(), (checks + 1).to_string());
            p.insert(properties::WAIT.to_owned(), "false".to_owned());
        });
        let r = b.put.put(&copy, Origin::HalfPutBack);
        let Some(a) = r.append.filter(|_| r.status == store::commit_log::PutStatus::PutOk) else {
            warn!(offset, status = ?r.status, "cannot put a half message back for its check");
            return;
        };
        b.write_op(offset);
        let Some(channel) = b.producers.any_channel(group) else {
            debug!(group, "no live producer to check a transaction with; it is put back for a later check");
            return;
        };
        // The producer sees the message in its real topic and queue.
        let mut real = copy.clone();
        real.topic = real_topic.into_string();
        real.queue_id = real_queue;
        let Ok(mut record) = encode_record(&real) else { return };
        record.stamp(StampedFields { queue_offset: a.logics_offset, physical_offset: a.wrote_offset, store_timestamp: a.store_timestamp });
        let uniq = half.property(properties::UNIQ_KEY).map(str::to_owned);
        let header = CheckTransactionStateRequestHeader {
            tran_state_table_offset: a.logics_offset,
            commit_log_offset: a.wrote_offset,
            msg_id: uniq.clone(),
            transaction_id: uniq,
            offset_msg_id: Some(offset_message_id(half.store_host, a.wrote_offset)),
        };
        let request = RemotingCommand::request_with_header(RequestCode::CHECK_TRANSACTION_STATE, &header).with_body(record.bytes);
        if let Err(e) = channel.invoke_oneway(request) {
            debug!(error = %e, "transaction check not sent");
        }
    }
}
