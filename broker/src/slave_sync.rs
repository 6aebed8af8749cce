//! A slave's copy of its master's metadata (Java `SlaveSynchronize`): every 10 s (the first
//! after 3 s) it asks the master for its topics, consumer offsets, delay offsets, groups and
//! (5.x) message request modes and timer counts over remoting; every 3 s for the timer's checkpoint, whose read time and
//! queue offset say where this broker's timer continues if it becomes master. Topics, groups and
//! timer counts are replaced when the master's data version differs; offsets are merged. The HA
//! stream carries only the commit log.

use std::time::Duration;

use remoting::call::{self, CallError, RemotingRequest};
use remoting::protocol::topic::TopicConfigSerializeWrapper;
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use tracing::{info, warn};

use crate::broker::Broker;
use crate::consumer_offset::ConsumerOffsetFile;
use crate::delay_offset::DelayOffsetFile;
use crate::subscription_group::SubscriptionGroupFile;
use store::timer::checkpoint::CheckpointValues;
use store::timer::metrics::TimerMetricsWrapper;

pub const FIRST_SYNC_AFTER: Duration = Duration::from_secs(3);
pub const SYNC_EVERY: Duration = Duration::from_secs(10);
/// How often the timer's checkpoint is copied (Java: every 3 s, "latency-sensitive").
pub const TIMER_SYNC_EVERY: Duration = Duration::from_secs(3);

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("{code:?} asked of the master {master}: {source}")]
    Call { code: RequestCode, master: String, source: remoting::client::ClientError },
    #[error("the master {master} answered {code:?} with {answer:?}: {remark}")]
    Refused { code: RequestCode, master: String, answer: ResponseCode, remark: String },
    #[error("the master {master}'s {code:?} body does not decode: {reason}")]
    Body { code: RequestCode, master: String, reason: String },
}

/// The four copies a slave asks its master for: each a bare request whose answer is a JSON body.
macro_rules! master_copy {
    ($($name:ident: $code:ident -> $response:ty;)*) => {$(
        struct $name;

        impl RemotingRequest for $name {
            const CODE: RequestCode = RequestCode::$code;
            type Response = $response;

            fn into_command(self) -> RemotingCommand {
                RemotingCommand::request(Self::CODE)
            }

            fn parse_response(response: RemotingCommand) -> Result<$response, CallError> {
                call::json_body(&call::expect_success(response)?)
            }
        }
    )*};
}

master_copy! {
    GetAllTopicConfig: GET_ALL_TOPIC_CONFIG -> TopicConfigSerializeWrapper;
    GetAllConsumerOffset: GET_ALL_CONSUMER_OFFSET -> ConsumerOffsetFile;
    GetAllDelayOffset: GET_ALL_DELAY_OFFSET -> DelayOffsetFile;
    GetAllSubscriptionGroupConfig: GET_ALL_SUBSCRIPTIONGROUP_CONFIG -> SubscriptionGroupFile;
    GetAllMessageRequestMode: GET_ALL_MESSAGE_REQUEST_MODE -> crate::pop::config_files::MessageRequestModeFile;
    GetTimerMetrics: GET_TIMER_METRICS -> TimerMetricsWrapper;
}

/// GET_TIMER_CHECK_POINT: its body is the checkpoint's 56 bytes.
struct GetTimerCheckPoint;

impl RemotingRequest for GetTimerCheckPoint {
    const CODE: RequestCode = RequestCode::GET_TIMER_CHECK_POINT;
    type Response = CheckpointValues;

    fn into_command(self) -> RemotingCommand {
        RemotingCommand::request(Self::CODE)
    }

    fn parse_response(response: RemotingCommand) -> Result<CheckpointValues, CallError> {
        let response = call::expect_success(response)?;
        CheckpointValues::decode(response.body_bytes()).ok_or_else(|| CallError::BadResponse { reason: "a timer checkpoint body is 56 bytes".into() })
    }
}

/// The timer's checkpoint from the master (not while this broker's timer releases itself).
pub async fn sync_timer_checkpoint(b: &Broker, master: &str) {
    let Some(timer) = b.timer.get() else { return };
    if master == b.identity.broker_addr || timer.is_dequeueing() {
        return;
    }
    match fetch(b, master, GetTimerCheckPoint).await {
        Ok(values) => timer.sync_from_master(values),
        Err(e) => warn!(error = %e, "cannot sync the timer checkpoint"),
    }
}

async fn fetch<R: RemotingRequest>(b: &Broker, master: &str, request: R) -> Result<R::Response, SyncError> {
    let timeout = Duration::from_secs(3);
    let (code, master) = (R::CODE, master.to_owned());
    let response = b.namesrv.invoke(&master, b.signed_for_master(request.into_command()), timeout).await;
    let response = response.map_err(|source| SyncError::Call { code, master: master.clone(), source })?;
    R::parse_response(response).map_err(|e| match e {
        CallError::Client(source) => SyncError::Call { code, master, source },
        CallError::Refused { code: answer, remark } => SyncError::Refused { code, master, answer, remark: remark.unwrap_or_default() },
        CallError::BadResponse { reason } => SyncError::Body { code, master, reason },
    })
}

/// One round of the four copies; each is tried even when another fails, as Java does. False when
/// the master could not be reached at all (the caller backs off and says so once).
pub async fn sync_all(b: &Broker, master: &str) -> bool {
    if master == b.identity.broker_addr {
        return true;
    }
    match fetch(b, master, GetAllTopicConfig).await {
        Err(SyncError::Call { source, .. }) => {
            tracing::debug!(master, error = %source, "master unreachable");
            return false;
        }
        Ok(topics) => {
            if b.topics.replace_from_master(topics) {
                info!(master, "slave topic config updated from the master");
            }
        }
        Err(e) => warn!(error = %e, "cannot sync topics"),
    }
    match fetch(b, master, GetAllConsumerOffset).await {
        Ok(offsets) => b.offsets.merge_from_master(offsets),
        Err(e) => warn!(error = %e, "cannot sync consumer offsets"),
    }
    match fetch(b, master, GetAllDelayOffset).await {
        Ok(delay) => b.delay_offsets.replace_from_master(delay),
        Err(e) => warn!(error = %e, "cannot sync delay offsets"),
    }
    match fetch(b, master, GetAllSubscriptionGroupConfig).await {
        Ok(groups) => {
            if b.groups.replace_from_master(groups) {
                info!(master, "slave subscription groups updated from the master");
            }
        }
        Err(e) => warn!(error = %e, "cannot sync subscription groups"),
    }
    match fetch(b, master, GetAllMessageRequestMode).await {
        Ok(modes) => {
            if let Err(e) = b.request_modes.replace_from_master(modes) {
                warn!(error = %e, "cannot persist the message request modes copied from the master");
            }
        }
        // A 4.9 master has no pop and no such code.
        Err(SyncError::Refused { answer: ResponseCode::REQUEST_CODE_NOT_SUPPORTED, .. }) => {}
        Err(e) => warn!(error = %e, "cannot sync message request modes"),
    }
    if let Some(timer) = b.timer.get() {
        match fetch(b, master, GetTimerMetrics).await {
            Ok(metrics) => {
                if timer.metrics().replace_from_master(metrics) {
                    if let Err(e) = timer.metrics().persist() {
                        warn!(error = %e, "cannot write the timer metrics");
                    }
                }
            }
            Err(e) => warn!(error = %e, "cannot sync timer metrics"),
        }
    }
    true
}
