//! The 5.x timer's codes, as Java 5.3.3 answers them: GET_TIMER_CHECK_POINT (60) and
//! GET_TIMER_METRICS (61) from `AdminBrokerProcessor`, RECALL_MESSAGE (370) from
//! `RecallMessageProcessor` (a delete marker put into the timer, cancelling the message in the
//! slot it is due in).

use std::sync::Arc;

use remoting::protocol::broker::{RecallMessageRequestHeader, RecallMessageResponseHeader};
use remoting::protocol::perm;
use remoting::server::{Channel, ProcessResult, Reply, RequestProcessor};
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use store::commit_log::PutStatus;
use store::config::BrokerRole;
use store::message::{properties, MessageToStore};
use store::store::MessageStore;
use store::timer::TimerStore;

use crate::config::LiveConfig;
use crate::put::{Origin, PutPipeline};
use crate::timer::RecallHandle;
use crate::topic_config::TopicConfigManager;

/// Java's tag of a recall marker.
const RECALL_MESSAGE_TAG: &str = "_RECALL_TAG_";

pub struct TimerProcessor {
    pub config: LiveConfig,
    pub store: Arc<MessageStore>,
    pub topics: Arc<TopicConfigManager>,
    pub put: Arc<PutPipeline>,
    pub timer: Option<Arc<TimerStore>>,
    pub store_host: std::net::SocketAddr,
}

impl RequestProcessor for TimerProcessor {
    fn process(&self, channel: &Channel, request: RemotingCommand) -> ProcessResult {
        match request.request_code() {
            RequestCode::GET_TIMER_CHECK_POINT => Ok(Some(match &self.timer {
                Some(t) => RemotingCommand::response_to(&request, ResponseCode::SUCCESS).with_body(t.checkpoint_values().encode().to_vec()),
                None => RemotingCommand::error_response(&request, ResponseCode::SYSTEM_ERROR, "The checkpoint is null"),
            })),
            RequestCode::GET_TIMER_METRICS => Ok(Some(match &self.timer {
                Some(t) => RemotingCommand::response_to(&request, ResponseCode::SUCCESS).with_body(t.metrics().encode_body().into_bytes()),
                None => RemotingCommand::error_response(&request, ResponseCode::SYSTEM_ERROR, "The timer message store is null"),
            })),
            _ => Ok(self.recall(channel, &request)),
        }
    }
}

impl TimerProcessor {
    fn recall(&self, channel: &Channel, request: &RemotingCommand) -> Option<RemotingCommand> {
        let c = self.config.load();
        let region = c.region_id.clone();
        let answer = |code: ResponseCode, remark: &str| Some(RemotingCommand::error_response(request, code, remark).with_ext("MSG_REGION", region.clone()));
        let h: RecallMessageRequestHeader = match request.decode_header() {
            Ok(h) => h,
            Err(e) => return answer(ResponseCode::SYSTEM_ERROR, &e.to_string()),
        };
        if !c.recall_message_enable {
            return answer(ResponseCode::NO_PERMISSION, "recall failed, operation is forbidden");
        }
        if self.store.role() == BrokerRole::Slave {
            return answer(ResponseCode::SLAVE_NOT_AVAILABLE, "recall failed, broker service not available");
        }
        if remoting::clock::now_ms() < c.start_accept_send_request_timestamp_ms {
            return answer(ResponseCode::SERVICE_NOT_AVAILABLE, "recall failed, broker service not available");
        }
        if !perm::is_writeable(c.broker_permission) && !c.allow_recall_when_broker_not_writeable {
            return answer(ResponseCode::SERVICE_NOT_AVAILABLE, "recall failed, broker service not available");
        }
        if self.topics.select(&h.topic).is_none() {
            return answer(ResponseCode::TOPIC_NOT_EXIST, &format!("recall failed, the topic[{}] not exist", h.topic));
        }
        let handle = match RecallHandle::decode(&h.recall_handle) {
            Ok(handle) => handle,
            Err(remark) => return answer(ResponseCode::ILLEGAL_OPERATION, remark),
        };
        if handle.topic != h.topic {
            return answer(ResponseCode::ILLEGAL_OPERATION, "recall failed, topic not match");
        }
        if handle.broker_name != c.broker_name {
            return answer(ResponseCode::ILLEGAL_OPERATION, "recall failed, broker service not available");
        }
        let now = remoting::clock::now_ms();
        let time_left = handle.timestamp.parse::<i64>().unwrap_or(-1) - now;
        if time_left <= 0 || time_left >= self.store.config().timer_max_delay_sec.saturating_mul(1000) {
            return answer(ResponseCode::ILLEGAL_OPERATION, "recall failed, timestamp invalid");
        }
        let delete_key = store::timer::delete_key(&handle.topic, &handle.message_id);
        let props = [
            (properties::TAGS, RECALL_MESSAGE_TAG),
            (properties::TIMER_DEL_UNIQKEY, delete_key.as_str()),
            (properties::UNIQ_KEY, handle.message_id.as_str()),
            (properties::TIMER_DELIVER_MS, handle.timestamp.as_str()),
            ("BORN_TIMESTAMP", &now.to_string()),
            ("TRACE_CONTEXT", ""),
            (store::message::properties::PGROUP, h.producer_group.as_deref().unwrap_or("")),
        ];
        let msg = MessageToStore {
            topic: handle.topic.clone(),
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: now,
            born_host: channel.remote_addr(),
            store_host: self.store_host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: bytes::Bytes::from_static(b"0"),
            properties: properties::serialize(props.iter().filter(|(_, v)| !v.is_empty()).copied()),
        };
        let skeleton = RemotingCommand { body: None, ..request.clone() };
        let msg_id = handle.message_id.clone();
        self.put.put_and_answer(vec![msg], Origin::Recall, Reply::to(channel, request), move |result, _, _| {
            let response = match result.status {
                PutStatus::PutOk | PutStatus::FlushDiskTimeout => {
                    RemotingCommand::response_to(&skeleton, ResponseCode::SUCCESS).with_header(&RecallMessageResponseHeader { msg_id })
                }
                _ => RemotingCommand::error_response(&skeleton, ResponseCode::SYSTEM_ERROR, "recall failed, execute error"),
            };
            response.with_ext("MSG_REGION", region)
        })
    }
}
