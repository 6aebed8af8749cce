//! Request processors, one file per family of codes, as Java's.

pub mod admin;
pub mod client_manage;
pub mod consumer_manage;
pub mod end_transaction;
pub mod lock;
pub mod pull;
pub mod query;
pub mod send;

use remoting::RemotingCommand;
use remoting::ResponseCode;

pub(crate) fn ok(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
}

/// Java's `TopicValidator.validateTopic` rules.
pub(crate) fn validate_topic(topic: &str) -> Result<(), String> {
    if topic.trim().is_empty() {
        return Err("The specified topic is blank.".to_owned());
    }
    if topic.len() > 127 {
        return Err("The specified topic is longer than topic max length 127.".to_owned());
    }
    if !topic.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'%' || b == b'|' || b == b'_' || b == b'-') {
        return Err(format!("The specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"));
    }
    Ok(())
}
