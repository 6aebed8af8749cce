//! The revive service (Java 5.3.3's `PopReviveService`): reads each revive queue as the timer
//! releases its records into it, pairs check points with their acks, and puts every message a
//! check point handed out that found no ack into the group's pop retry topic, where the group
//! pops it again. Its progress is the offset of `CID_RMQ_SYS_REVIVE_GROUP` on each revive queue
//! (consumerOffset.json, as Java keeps it). Runs on a master only.
//!
//! A check point is revived once the queue has been read past its revive time by more than
//! `ackTimeInterval` + 1 s (records released after it prove that its acks, released at the revive
//! time, were read), or, when no record comes, once the timer has caught up and 3 s passed.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use remoting::protocol::name::{GroupName, TopicName};
use store::message::properties;
use store::message::record::{decode_record, RecordAt};
use store::store::GetMessageStatus;
use store::timer::TimerStore;

use crate::metrics::pop::ReviveKind;
use crate::pop::formats::{AckMsg, BatchAckMsg, PopCheckPoint, ReviveMessage};
use crate::pop::names::{self, ACK_TAG, ACK_TIME_INTERVAL_MS, BATCH_ACK_TAG, CK_TAG, REVIVE_GROUP};
use crate::popping::service::{stored, PopService, FIRST_POP_TIME};
use crate::put::Origin;

/// Java's `ckRewriteIntervalsInSeconds`: how much later a check point whose message could not be
/// revived is tried again, by the number of times it was put back.
const CK_REWRITE_INTERVALS_S: [i64; 17] = [10, 20, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200];
/// Records read from a revive queue at once (Java's 32).
const BATCH: usize = 32;

pub struct ReviveService {
    pop: Arc<PopService>,
    timer: Option<Arc<TimerStore>>,
}

/// Where each revive queue's passes got to (Java's `reviveOffset` and
/// `currentReviveMessageTimestamp` of each `PopReviveService`), for the next pass and the metrics.
#[derive(Default)]
pub struct ReviveProgress(Mutex<HashMap<i32, Progress>>);

#[derive(Clone, Copy)]
struct Progress {
    /// The last revived check point's offset (-1: none yet).
    revived: i64,
    /// The revive time of the first check point the last pass read, or the pass's time when it
    /// read none.
    timestamp: i64,
}

impl ReviveProgress {
    fn revived(&self, queue_id: i32) -> Option<i64> {
        self.0.lock().get(&queue_id).map(|p| p.revived)
    }

    fn record(&self, queue_id: i32, revived: i64, timestamp: i64) {
        self.0.lock().insert(queue_id, Progress { revived, timestamp });
    }

    /// Java's `getReviveBehindMessages` and `getReviveBehindMillis` of a revive queue: records
    /// of the queue past the last revived check point, and how long ago the oldest check point
    /// the last pass read was due when more than one record waits (both 0 before a first pass).
    pub fn behind(&self, pop: &PopService, queue_id: i32, now: i64) -> (i64, i64) {
        let Some(p) = self.0.lock().get(&queue_id).copied() else { return (0, 0) };
        if p.timestamp <= 0 {
            return (0, 0);
        }
        let max = pop.store.max_offset_in_queue(&pop.revive_topic(), queue_id);
        let latency = if max - p.revived > 1 { (now - p.timestamp).max(0) } else { 0 };
        ((max - p.revived).max(0), latency)
    }
}

/// What one pass over a revive queue found.
struct Scan {
    /// Check points by merge key, with their acks applied.
    cks: HashMap<String, PopCheckPoint>,
    old_offset: i64,
    /// The latest delivery time of the records read (or the clock, once the timer caught up).
    end_time: i64,
}

fn now_ms() -> i64 {
    remoting::clock::now_ms()
}

impl ReviveService {
    pub fn new(pop: Arc<PopService>, timer: Option<Arc<TimerStore>>) -> ReviveService {
        ReviveService { pop, timer }
    }

    /// One pass over every revive queue; nothing on a slave or without the timer (Java skips).
    pub fn run_once(&self) {
        if self.pop.store.role() == store::config::BrokerRole::Slave || self.timer.is_none() {
            return;
        }
        let queues = self.pop.config.load().revive_queue_num.max(0);
        for queue_id in 0..queues {
            let scan = self.scan(queue_id);
            self.merge_and_revive(queue_id, scan);
        }
    }

    /// Whether the timer has released everything due and taken everything stored (Java's
    /// `getDequeueBehind() <= 0 && getEnqueueBehind() <= 0`).
    fn timer_caught_up(&self) -> bool {
        let Some(timer) = &self.timer else { return false };
        let p = timer.progress();
        (now_ms() - p.curr_read_ms) / 1000 <= 0 && p.max_queue_offset - p.queue_offset <= 0
    }

    fn revive_topic_name(&self) -> Option<TopicName> {
        TopicName::new(self.pop.revive_topic()).ok()
    }

    fn scan(&self, queue_id: i32) -> Scan {
        let topic = self.pop.revive_topic();
        let committed = self.pop.offsets.query_offset(REVIVE_GROUP, &topic, queue_id).unwrap_or(-1);
        let old_offset = self.pop.revive_progress.revived(queue_id).unwrap_or(-1).max(committed);
        let config = self.pop.config.load();
        let own_broker = config.broker_name.clone();
        let started = now_ms();
        let mut scan = Scan { cks: HashMap::new(), old_offset, end_time: 0 };
        let mut offset = old_offset + 1;
        loop {
            let r = self.pop.store.get_message(&topic, queue_id, offset, BATCH, |_| true);
            if r.messages.is_empty() {
                if matches!(
                    r.status,
                    GetMessageStatus::OffsetTooSmall
                        | GetMessageStatus::OffsetOverflowBadly
                        | GetMessageStatus::OffsetFoundNull
                        | GetMessageStatus::MessageWasRemoving
                ) && r.next_begin_offset > offset
                {
                    // Records gone from the queue's head: continue after them (Java commits the
                    // new start).
                    offset = r.next_begin_offset;
                    scan.old_offset = offset - 1;
                    continue;
                }
                if scan.end_time != 0 && now_ms() - scan.end_time > 3 * 1000 && self.timer_caught_up() {
                    scan.end_time = now_ms();
                }
                break;
            }
            for (bytes, queue_offset) in r.messages.iter().zip(&r.queue_offsets) {
                let Ok(RecordAt::Record(record)) = decode_record(bytes, false) else { continue };
                match record.property("TAGS") {
                    Some(CK_TAG) => {
                        let Ok(mut ck) = PopCheckPoint::decode(record.body) else { continue };
                        if ck.topic.is_none() || ck.cid.is_none() {
                            continue;
                        }
                        if let (Some(topic), Some(cid)) = (&ck.topic, &ck.cid) {
                            self.pop.metrics.on_revive_get(cid, topic, queue_id, ReviveKind::Ck);
                        }
                        ck.revive_offset = *queue_offset;
                        scan.cks.insert(names::revive_merge_key_of_ck(&ck), ck);
                    }
                    Some(ACK_TAG) => {
                        let Ok(ack) = AckMsg::decode(record.body) else { continue };
                        self.count_ack(&ack, queue_id);
                        if let Some(ck) = scan.cks.get_mut(&names::revive_merge_key_of_ack(&ack, &own_broker)) {
                            if let Some(i) = ck.index_of_ack(ack.ack_offset) {
                                ck.mark_acked(i as u32);
                            }
                        }
                    }
                    Some(BATCH_ACK_TAG) => {
                        let Ok(batch) = BatchAckMsg::decode(record.body) else { continue };
                        self.count_ack(&batch.ack, queue_id);
                        if let Some(ck) = scan.cks.get_mut(&names::revive_merge_key_of_ack(&batch.ack, &own_broker)) {
                            for offset in &batch.ack_offset_list {
                                if let Some(i) = ck.index_of_ack(*offset) {
                                    ck.mark_acked(i as u32);
                                }
                            }
                        }
                    }
                    _ => {}
                }
                let deliver = record.property(names::PROPERTY_TIMER_DELIVER_MS).and_then(|d| d.parse::<i64>().ok()).unwrap_or(0);
                scan.end_time = scan.end_time.max(deliver);
            }
            offset += r.messages.len() as i64;
            if now_ms() - started > i64::try_from(config.revive_scan_time_ms).unwrap_or(i64::MAX) {
                break;
            }
        }
        scan
    }

    fn count_ack(&self, ack: &AckMsg, queue_id: i32) {
        let (group, topic) = (ack.consumer_group.as_deref().unwrap_or(""), ack.topic.as_deref().unwrap_or(""));
        self.pop.metrics.on_revive_get(group, topic, queue_id, ReviveKind::Ack);
    }

    fn merge_and_revive(&self, queue_id: i32, scan: Scan) {
        let mut cks: Vec<PopCheckPoint> = scan.cks.into_values().collect();
        cks.sort_by_key(|ck| ck.revive_offset);
        let timestamp = cks.first().map_or_else(now_ms, |ck| ck.revive_time());
        let mut new_offset = scan.old_offset;
        for ck in &cks {
            if scan.end_time - ck.revive_time() <= ACK_TIME_INTERVAL_MS + 1000 {
                break;
            }
            let (Some(topic), Some(cid)) = (ck.topic.as_deref(), ck.cid.as_deref()) else { continue };
            let normal = names::parse_normal_topic(topic, cid);
            if self.pop.topics.select(&normal).is_none() || self.pop.groups.select(cid).is_none() {
                new_offset = ck.revive_offset;
                continue;
            }
            self.revive(queue_id, ck, topic, cid);
            new_offset = ck.revive_offset;
        }
        if new_offset > scan.old_offset {
            if let (Some(topic), Ok(group)) = (self.revive_topic_name(), GroupName::new(REVIVE_GROUP)) {
                self.pop.offsets.commit_offset("127.0.0.1", &group, &topic, queue_id, new_offset);
            }
        }
        self.pop.revive_progress.record(queue_id, new_offset, timestamp);
    }

    /// Every message of `ck` not acked goes to the retry topic (or, when it cannot, a check
    /// point of its own is written to try again later).
    fn revive(&self, queue_id: i32, ck: &PopCheckPoint, topic: &str, cid: &str) {
        for index in 0..u8::try_from(ck.num.max(0)).unwrap_or(0) {
            if ck.is_acked(u32::from(index)) {
                continue;
            }
            let Some(msg_offset) = ck.ack_offset_by_index(index) else { continue };
            let r = self.pop.store.get_message(topic, ck.queue_id, msg_offset, 1, |_| true);
            let record = r.messages.first().filter(|_| r.queue_offsets.first() == Some(&msg_offset));
            let Some(record) = record else {
                tracing::info!(topic, queue_id = ck.queue_id, msg_offset, "revive: the message is gone; skipped");
                continue;
            };
            if !self.revive_one(ck, topic, cid, record) {
                self.re_put_ck(queue_id, ck, msg_offset);
            }
        }
    }

    /// Java's `reviveRetry`.
    fn revive_one(&self, ck: &PopCheckPoint, topic: &str, cid: &str, record: &[u8]) -> bool {
        let Ok(RecordAt::Record(r)) = decode_record(record, false) else { return true };
        let retry_topic = if topic.starts_with(names::RETRY_GROUP_TOPIC_PREFIX) {
            topic.to_owned()
        } else {
            names::pop_retry_topic(topic, cid, self.pop.config.load().enable_retry_topic_v2)
        };
        let mut msg = r.to_message();
        let mut props = properties::parse(&msg.properties);
        if r.reconsume_times == 0 || !props.contains_key(FIRST_POP_TIME) {
            props.insert(FIRST_POP_TIME.to_owned(), ck.pop_time.to_string());
        }
        msg.properties = properties::serialize(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        msg.topic = retry_topic.clone();
        msg.queue_id = 0;
        msg.born_host = self.pop.store_host;
        msg.store_host = self.pop.store_host;
        msg.reconsume_times = r.reconsume_times.saturating_add(1);
        self.pop.ensure_retry_topic(&retry_topic, cid);
        let result = self.pop.put.put_rewritten(msg, Origin::PopRevive);
        self.pop.metrics.on_revive_retry(cid, topic, result.status);
        if !stored(&result) {
            tracing::error!(topic, ?result.status, "revive: cannot put the retry message");
            return false;
        }
        true
    }

    /// Java's `rePutCK`.
    fn re_put_ck(&self, queue_id: i32, old: &PopCheckPoint, msg_offset: i64) {
        let times = old.parse_re_put_times();
        if times as usize >= CK_REWRITE_INTERVALS_S.len() && self.pop.config.load().skip_when_ck_re_put_reach_max_times {
            return;
        }
        let mut ck = PopCheckPoint {
            start_offset: msg_offset,
            pop_time: old.pop_time,
            invisible_time: old.invisible_time,
            num: 1,
            queue_id: old.queue_id,
            topic: old.topic.clone(),
            cid: old.cid.clone(),
            broker_name: old.broker_name.clone(),
            re_put_times: Some((times.saturating_add(1)).to_string()),
            ..PopCheckPoint::default()
        };
        ck.add_diff(0);
        if old.revive_time() <= now_ms() {
            let i = usize::try_from(times).unwrap_or(0).min(CK_REWRITE_INTERVALS_S.len() - 1);
            ck.invisible_time = old.invisible_time + CK_REWRITE_INTERVALS_S[i] * 1000;
        }
        let result = self.pop.put_revive(&ReviveMessage::check_point(&ck, &self.pop.revive_topic(), queue_id), Origin::PopCheckPoint);
        if !stored(&result) {
            tracing::error!(?result.status, "revive: cannot put the check point back");
        }
    }
}
