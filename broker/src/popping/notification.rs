//! NOTIFICATION (`NotificationProcessor`): whether a group has a message to pop on a topic (its
//! pop retry topic included, orderly pops' blocked queues not), waiting up to `pollTime` for
//! one; and POLLING_INFO (`PollingInfoProcessor`): how many pops of a group wait on a queue.
//!
//! A notification that finds nothing is parked on its own lot (Java's second
//! `PopLongPollingService`), drawn from the budget parked pulls and pops share, and woken as
//! parked pops are: by an arrival on the topic or its pop retry topic, by an orderly ack that
//! frees a queue, or by its poll time. Woken, it runs again; one whose time is up answers
//! `hasMsg=false`.

use remoting::server::Channel;
use remoting::{RemotingCommand, ResponseCode};

use super::service::{now_ms, park_on, PopService};
use crate::parking::QueueKey;
use crate::pop::headers::{NotificationRequestHeader, NotificationResponseHeader, PollingInfoRequestHeader, PollingInfoResponseHeader};
use crate::pop::names;
use remoting::command::UNSET_REMARK;

/// Java's `PopRequest.isTimeout`: a request is due 50 ms before its `bornTime + pollTime`.
const DUE_EARLY_MS: i64 = 50;

impl PopService {
    /// NOTIFICATION. `None`: parked, answered by its wake.
    pub fn notification(&self, channel: &Channel, mut request: RemotingCommand) -> Option<RemotingCommand> {
        // Java fills in a missing or zero born time before decoding.
        if let Some(ext) = request.ext_fields.as_mut() {
            if ext.get("bornTime").is_none_or(|b| b == "0") {
                ext.insert("bornTime".into(), now_ms().to_string());
            }
        }
        let h = NotificationRequestHeader::read_as_java(&request);
        let answer = |request: &RemotingCommand, has_msg: bool, polling_full: bool| {
            RemotingCommand::response_to(request, ResponseCode::SUCCESS)
                .with_remark(UNSET_REMARK)
                .with_header(&NotificationResponseHeader { has_msg, polling_full })
        };
        if let Err((code, remark)) = self.check_readable(channel, h.topic.as_deref(), h.queue_id, h.consumer_group.as_deref()) {
            let refused = RemotingCommand::error_response(&request, code, remark);
            if code == ResponseCode::SYSTEM_ERROR {
                return Some(refused);
            }
            return Some(refused.with_header(&NotificationResponseHeader { has_msg: false, polling_full: false }));
        }
        let (topic, group) = (h.topic.as_deref().unwrap_or_default(), h.consumer_group.as_deref().unwrap_or_default());
        let config = self.config.load();
        let random_q = self.random_percent();
        let need_retry = random_q % 5 == 0;
        let from_retry = || {
            let retry_topic = names::pop_retry_topic(topic, group, config.enable_retry_topic_v2);
            self.has_msg_in_topic(&retry_topic, random_q, &h)
                || (config.enable_retry_topic_v2
                    && config.retrieve_message_from_pop_retry_topic_v1
                    && self.has_msg_in_topic(&names::pop_retry_topic_v1(topic, group), random_q, &h))
        };
        let seen = self.notifications.get().map_or(0, |lot| lot.arrivals());
        let mut has_msg = need_retry && from_retry();
        if !has_msg {
            has_msg = if h.queue_id < 0 { self.has_msg_in_topic(topic, random_q, &h) } else { self.has_msg_in_queue(topic, &h, h.queue_id) };
            if !need_retry && !has_msg {
                has_msg = from_retry();
            }
        }
        let mut polling_full = false;
        if !has_msg && h.poll_time > 0 {
            if let Some(lot) = self.notifications.get() {
                let key = QueueKey::new(topic, h.queue_id.max(-1));
                let expires_ms = h.born_time.saturating_add(h.poll_time).saturating_sub(DUE_EARLY_MS);
                match park_on(lot, channel, request, key, expires_ms, config.max_pop_polling_size, seen) {
                    Ok(()) => return None,
                    Err((refused, code)) => {
                        request = *refused;
                        polling_full = code == ResponseCode::POLLING_FULL;
                    }
                }
            }
        }
        Some(answer(&request, has_msg, polling_full))
    }

    /// Java's `hasMsgFromTopic`: any queue of the topic, from a random one on.
    fn has_msg_in_topic(&self, topic: &str, random_q: i32, h: &NotificationRequestHeader) -> bool {
        let Some(config) = self.topics.select(topic) else { return false };
        (0..config.read_queue_nums).any(|i| self.has_msg_in_queue(topic, h, (random_q + i) % config.read_queue_nums))
    }

    /// Java's `hasMsgFromQueue`: past the group's offset, unless an orderly pop of the queue (of
    /// the notified topic) is in flight.
    fn has_msg_in_queue(&self, target_topic: &str, h: &NotificationRequestHeader, queue_id: i32) -> bool {
        let (topic, group) = (h.topic.as_deref().unwrap_or_default(), h.consumer_group.as_deref().unwrap_or_default());
        if h.order == Some(true) && self.order.check_block(h.attempt_id.as_deref(), topic, group, queue_id, 0, now_ms()) {
            return false;
        }
        let offset = self.peek_offset(target_topic, group, queue_id);
        self.store.max_offset_in_queue(target_topic, queue_id) - offset > 0
    }

    /// POLLING_INFO: the pops of the group parked on the topic and queue (-1: on any queue).
    pub fn polling_info(&self, channel: &Channel, request: &RemotingCommand) -> RemotingCommand {
        let h = PollingInfoRequestHeader::read_as_java(request);
        if let Err((code, remark)) = self.check_readable(channel, h.topic.as_deref(), h.queue_id, h.consumer_group.as_deref()) {
            let refused = RemotingCommand::error_response(request, code, remark);
            if code == ResponseCode::SYSTEM_ERROR {
                return refused;
            }
            return refused.with_header(&PollingInfoResponseHeader { polling_num: 0 });
        }
        let key = QueueKey::new(h.topic.as_deref().unwrap_or_default(), h.queue_id.max(-1));
        let group = h.consumer_group.as_deref().unwrap_or_default();
        let parked = self.parking.get().map_or(0, |lot| lot.count_on(&key, |p| p.request.ext("consumerGroup") == Some(group)));
        RemotingCommand::response_to(request, ResponseCode::SUCCESS)
            .with_remark(UNSET_REMARK)
            .with_header(&PollingInfoResponseHeader { polling_num: i32::try_from(parked).unwrap_or(i32::MAX) })
    }
}
