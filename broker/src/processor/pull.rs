//! PULL_MESSAGE and LITE_PULL_MESSAGE (Java `PullMessageProcessor`), with long polling.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use remoting::header::HeaderError;
use remoting::protocol::broker::{PullMessageRequestHeader, PullMessageResponseHeader};
use remoting::protocol::heartbeat::SubscriptionData;
use remoting::protocol::perm;
use remoting::server::{Channel, ProcessResult, RequestProcessor};
use remoting::{RemotingCommand, ResponseCode};
use store::message::java_string_hash;
use store::store::GetMessageStatus;

use crate::broker::{Broker, FAQ_SUFFIX};
use crate::long_polling::HeldPull;
use crate::parking::QueueKey;

/// Java `PullSysFlag` bits.
const FLAG_COMMIT_OFFSET: i32 = 0x1;
const FLAG_SUSPEND: i32 = 0x2;
const FLAG_SUBSCRIPTION: i32 = 0x4;

/// Java's `MixAll.MASTER_ID`.
const MASTER_ID: i64 = 0;

/// The longest a pull is held, whatever it asks (Java clients ask 15-30 s).
const MAX_SUSPEND: Duration = Duration::from_secs(120);

pub struct PullProcessor {
    pub broker: Arc<Broker>,
}

impl RequestProcessor for PullProcessor {
    fn process(&self, channel: &Channel, request: RemotingCommand) -> ProcessResult {
        Ok(self.pull(channel, request, true))
    }
}

impl PullProcessor {
    /// Runs a pull. `first_time`: the request may be parked and its offset commit applies; a
    /// woken pull runs again with neither.
    pub fn pull(&self, channel: &Channel, request: RemotingCommand, first_time: bool) -> Option<RemotingCommand> {
        let b = &self.broker;
        let err = |code, remark: String| Some(RemotingCommand::error_response(&request, code, remark));
        let h: PullMessageRequestHeader = match request.decode_header() {
            Ok(h) => h,
            // Java finds no group by an illegal name (and will not create one).
            Err(e @ HeaderError::Rejected { field: "consumerGroup", .. }) => {
                return err(ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, format!("subscription group [{e}] does not exist,{FAQ_SUFFIX}"))
            }
            Err(e) => return err(ResponseCode::SYSTEM_ERROR, e.to_string()),
        };
        if !b.is_readable() {
            return err(ResponseCode::NO_PERMISSION, format!("the broker[{}] pulling message is forbidden", b.config().broker_ip1));
        }
        let Some(group) = b.groups.find_or_create(&h.consumer_group, b.config().auto_create_subscription_group) else {
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

        let sql = match crate::filter::pull_filter(b.config().enable_property_filter, &subscription) {
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
        let mut suggest = if !b.config().slave_read_enable {
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
            if let Some(hold) = b.hold() {
                let timeout = if b.config().long_polling_enable {
                    // The client's wish, up to the idle time after which its connection closes.
                    Duration::from_millis(u64::try_from(h.suspend_timeout_millis).unwrap_or(0)).min(MAX_SUSPEND)
                } else {
                    Duration::from_millis(b.config().short_polling_time_ms)
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
            let mut body = BytesMut::with_capacity(result.buffer_total_size);
            for m in &result.messages {
                body.extend_from_slice(m);
            }
            response = response.with_body(body.freeze());
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
        let b = &self.broker;
        let Some(group) = b.consumers.group(&h.consumer_group) else {
            return Err((ResponseCode::SUBSCRIPTION_NOT_EXIST, format!("the consumer's group info not exist{FAQ_SUFFIX}")));
        };
        let Some(sub) = group.subscriptions.get(h.topic.as_str()) else {
            return Err((ResponseCode::SUBSCRIPTION_NOT_EXIST, format!("the consumer's subscription not exist{FAQ_SUFFIX}")));
        };
        if sub.sub_version < h.sub_version {
            return Err((ResponseCode::SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest".into()));
        }
        Ok(sub.clone())
    }
}
