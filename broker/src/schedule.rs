//! Delay levels (Java `ScheduleMessageService` and the rewrite in `CommitLog.putMessage`): a
//! message with `DELAY=n` is stored in `SCHEDULE_TOPIC_XXXX` queue n-1 with its real topic and
//! queue in properties; its consume-queue tags code is its delivery time, and this service puts a
//! copy back into the real topic when that time comes. Progress per level is `delayOffset.json`.

use std::sync::Arc;

use remoting::protocol::name::TopicName;
use store::commit_log::now_ms;
use store::message::record::{decode_record, RecordAt, SYSFLAG_TRANSACTION_MASK, TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE};
use store::message::{properties, MessageToStore};
use store::store::MessageStore;
use tracing::warn;

use crate::delay_offset::DelayOffsets;
use crate::put::{Origin, PutPipeline};
use crate::topic_config::system_topic;

/// Rewrites a message with a positive `DELAY` into the schedule topic, as Java's commit log does
/// before storing. Levels above the highest clamp to it.
pub fn apply_delay(msg: &mut MessageToStore, max_level: usize) {
    let tx = msg.sys_flag & SYSFLAG_TRANSACTION_MASK;
    if tx != TRANSACTION_NOT_TYPE && tx != TRANSACTION_COMMIT_TYPE {
        return;
    }
    let Some(level) = properties::get(&msg.properties, properties::DELAY).and_then(|d| d.trim().parse::<usize>().ok()) else { return };
    if level == 0 || max_level == 0 {
        return;
    }
    let level = level.min(max_level);
    let mut props = properties::parse(&msg.properties);
    props.insert(properties::DELAY.to_owned(), level.to_string());
    props.insert(properties::REAL_TOPIC.to_owned(), msg.topic.clone());
    props.insert(properties::REAL_QID.to_owned(), msg.queue_id.to_string());
    msg.properties = properties::serialize(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    msg.topic = system_topic::SCHEDULE.to_owned();
    msg.queue_id = (level - 1) as i32;
}

/// Delivers due delayed messages (its loop runs on a [`remoting::service::Service`] every 100 ms);
/// the broker's persister writes its progress.
pub struct ScheduleService {
    /// Where the delayed messages are read.
    pub store: Arc<MessageStore>,
    pub offsets: Arc<DelayOffsets>,
    pub levels: usize,
    /// Where they are put back (and counted, as Java counts a delivery).
    pub put: Arc<PutPipeline>,
}

impl ScheduleService {
    /// One pass: everything due, level by level.
    pub fn deliver_all_due(&self) {
        for level in 1..=self.levels {
            self.deliver_due(level);
        }
    }

    /// Puts every due message of one level back into its real topic.
    pub fn deliver_due(&self, level: usize) {
        let Some(cq) = self.store.find_queue(system_topic::SCHEDULE, (level - 1) as i32) else { return };
        let mut offset = self.offsets.get(level as i32).unwrap_or(0).max(cq.min_offset());
        while let Some(unit) = cq.get(offset) {
            // The tags code of a scheduled message is its delivery time.
            if unit.tags_code > now_ms() {
                break;
            }
            let Some(bytes) = self.store.look_message_by_offset(unit.phy_offset) else {
                offset += 1;
                continue;
            };
            if let Some(msg) = real_message(&bytes) {
                let r = self.put.put(&msg, Origin::DelayedDelivery);
                if !r.is_ok() {
                    warn!(level, offset, status = ?r.status, "delivering a delayed message failed; will retry");
                    break;
                }
            }
            offset += 1;
            self.offsets.set(level as i32, offset);
        }
    }
}

/// The message to deliver: back in its real topic and queue. Java stores it with the properties it
/// had, `DELAY`, `REAL_TOPIC` and `REAL_QID` included (it clears `DELAY` only after serialising
/// them), and consumers see them; we do the same, except that `WAIT=false` keeps delivery from
/// waiting for a SYNC flush (Java passes that outside the properties).
///
/// `REAL_TOPIC` and `REAL_QID` are properties, so they must name a topic and queue the store can
/// hold; a message that names none is not delivered (and is reported).
fn real_message(bytes: &[u8]) -> Option<MessageToStore> {
    let Ok(RecordAt::Record(r)) = decode_record(bytes, false) else { return None };
    let destination =
        r.property(properties::REAL_TOPIC).and_then(|t| TopicName::new(t).ok()).zip(r.property(properties::REAL_QID).and_then(|q| q.parse::<u16>().ok()));
    let Some((topic, queue_id)) = destination else {
        warn!(
            offset = r.physical_offset,
            real_topic = r.property(properties::REAL_TOPIC),
            real_qid = r.property(properties::REAL_QID),
            "delayed message names no valid topic and queue; not delivered"
        );
        return None;
    };
    let (topic, queue_id) = (topic.into_string(), i32::from(queue_id));
    let mut props = properties::parse(r.properties);
    props.insert(properties::WAIT.to_owned(), "false".to_owned());
    let mut msg = r.to_message();
    msg.topic = topic;
    msg.queue_id = queue_id;
    msg.properties = properties::serialize(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    Some(msg)
}
