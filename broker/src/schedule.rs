//! Delay levels (Java `ScheduleMessageService`): a message with `DELAY=n` is stored in
//! `SCHEDULE_TOPIC_XXXX` queue n-1 with its real topic and queue in properties (the put pipeline's
//! rewrite, [`crate::put::PutPipeline::rewrite`], as Java's commit log does); its consume-queue tags code is its delivery time, and this service puts a
//! copy back into the real topic when that time comes. Progress per level is `delayOffset.json`.

use std::sync::Arc;

use remoting::clock::now_ms;
use remoting::protocol::name::TopicName;
use store::message::record::{decode_record, RecordAt};
use store::message::{properties, MessageToStore};
use store::store::MessageStore;
use tracing::warn;

use crate::delay_offset::DelayOffsets;
use crate::put::{Origin, PutPipeline};
use crate::topic_config::system_topic;

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
                let r = self.put.put_no_wait(&msg, Origin::DelayedDelivery);
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
/// had, `DELAY`, `REAL_TOPIC`, `REAL_QID` and `WAIT` included (it clears `DELAY` and sets
/// `waitStoreMsgOK=false` only after serialising them), and consumers see them; so do we, and the
/// put does not wait for a SYNC flush either ([`PutPipeline::put_no_wait`]).
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
    let mut msg = r.to_message();
    msg.topic = topic.into_string();
    msg.queue_id = i32::from(queue_id);
    Some(msg)
}
