//! A slave's copy of its master's metadata (Java `SlaveSynchronize`): every 10 s (the first
//! after 3 s) it asks the master for its topics, consumer offsets, delay offsets and groups over
//! remoting. Topics and groups are replaced when the master's data version differs; offsets are
//! merged. The HA stream carries only the commit log.

use std::time::Duration;

use remoting::fastjson;
use remoting::protocol::topic::TopicConfigSerializeWrapper;
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use serde::de::DeserializeOwned;
use tracing::{info, warn};

use crate::broker::Broker;
use crate::consumer_offset::ConsumerOffsetFile;
use crate::delay_offset::DelayOffsetFile;
use crate::subscription_group::SubscriptionGroupFile;

pub const FIRST_SYNC_AFTER: Duration = Duration::from_secs(3);
pub const SYNC_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("{code:?} asked of the master {master}: {source}")]
    Call { code: RequestCode, master: String, source: remoting::client::ClientError },
    #[error("the master {master} answered {code:?} with {answer:?}: {remark}")]
    Refused { code: RequestCode, master: String, answer: ResponseCode, remark: String },
    #[error("the master {master}'s {code:?} body does not decode: {reason}")]
    Body { code: RequestCode, master: String, reason: String },
}

async fn fetch<T: DeserializeOwned>(b: &Broker, master: &str, code: RequestCode) -> Result<T, SyncError> {
    let timeout = Duration::from_secs(3);
    let response = b.namesrv.invoke(master, RemotingCommand::request(code), timeout).await.map_err(|source| SyncError::Call {
        code,
        master: master.to_owned(),
        source,
    })?;
    if response.response_code() != ResponseCode::SUCCESS {
        return Err(SyncError::Refused { code, master: master.to_owned(), answer: response.response_code(), remark: response.remark.unwrap_or_default() });
    }
    fastjson::from_slice(response.body_bytes()).map_err(|e| SyncError::Body { code, master: master.to_owned(), reason: e.to_string() })
}

/// One round of the four copies; each is tried even when another fails, as Java does.
pub async fn sync_all(b: &Broker, master: &str) {
    if master == b.identity.broker_addr {
        return;
    }
    match fetch::<TopicConfigSerializeWrapper>(b, master, RequestCode::GET_ALL_TOPIC_CONFIG).await {
        Ok(topics) => {
            if b.topics.replace_from_master(topics) {
                info!(master, "slave topic config updated from the master");
            }
        }
        Err(e) => warn!(error = %e, "cannot sync topics"),
    }
    match fetch::<ConsumerOffsetFile>(b, master, RequestCode::GET_ALL_CONSUMER_OFFSET).await {
        Ok(offsets) => b.offsets.merge_from_master(offsets),
        Err(e) => warn!(error = %e, "cannot sync consumer offsets"),
    }
    match fetch::<DelayOffsetFile>(b, master, RequestCode::GET_ALL_DELAY_OFFSET).await {
        Ok(delay) => b.delay_offsets.replace_from_master(delay),
        Err(e) => warn!(error = %e, "cannot sync delay offsets"),
    }
    match fetch::<SubscriptionGroupFile>(b, master, RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG).await {
        Ok(groups) => {
            if b.groups.replace_from_master(groups) {
                info!(master, "slave subscription groups updated from the master");
            }
        }
        Err(e) => warn!(error = %e, "cannot sync subscription groups"),
    }
}
