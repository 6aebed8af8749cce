//! Java's `GrpcValidator`: topic and consumer group names (the client's `Validators` rules and
//! messages, then the system names), and invisible durations.

use remoting::protocol::system_topic;

use crate::convert::Refusal;
use crate::pb::Code;

const TOPIC_MAX_LENGTH: usize = 127;
const GROUP_MAX_LENGTH: usize = 255;
const LEGAL: &str = "^[%|a-zA-Z0-9_-]+$";
/// Java's `MixAll.CID_RMQ_SYS_PREFIX`.
const SYSTEM_GROUP_PREFIX: &str = "CID_RMQ_SYS_";

fn is_blank(s: &str) -> bool {
    s.chars().all(char::is_whitespace)
}

fn has_illegal_character(s: &str) -> bool {
    !s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-'))
}

/// Java counts UTF-16 units.
fn java_length(s: &str) -> usize {
    s.encode_utf16().count()
}

pub fn topic(name: &str) -> Result<(), Refusal> {
    let refuse = |m: String| Err(Refusal::new(Code::IllegalTopic, m));
    if is_blank(name) {
        return refuse("The specified topic is blank".into());
    }
    if java_length(name) > TOPIC_MAX_LENGTH {
        return refuse(format!("The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}."));
    }
    if has_illegal_character(name) {
        return refuse(format!("The specified topic[{name}] contains illegal characters, allowing only {LEGAL}"));
    }
    if system_topic::is_system_topic(name) {
        return refuse("cannot access system topic".into());
    }
    Ok(())
}

pub fn group(name: &str) -> Result<(), Refusal> {
    let refuse = |m: String| Err(Refusal::new(Code::IllegalConsumerGroup, m));
    if is_blank(name) {
        return refuse("the specified group is blank".into());
    }
    if java_length(name) > GROUP_MAX_LENGTH {
        return refuse(format!("the specified group is longer than group max length {GROUP_MAX_LENGTH}."));
    }
    if has_illegal_character(name) {
        return refuse(format!("the specified group[{name}] contains illegal characters, allowing only {LEGAL}"));
    }
    if name.starts_with(SYSTEM_GROUP_PREFIX) {
        return refuse("cannot use system consumer group".into());
    }
    Ok(())
}

pub fn topic_and_group(topic_name: &str, group_name: &str) -> Result<(), Refusal> {
    topic(topic_name)?;
    group(group_name)
}

/// Within `[min_ms, max_ms]` (no upper bound when `max_ms <= 0`).
pub fn invisible_time(invisible_ms: i64, min_ms: i64, max_ms: i64) -> Result<(), Refusal> {
    if invisible_ms < min_ms {
        return Err(Refusal::new(Code::IllegalInvisibleTime, format!("the invisibleTime is too small. min is {min_ms}")));
    }
    if max_ms > 0 && invisible_ms > max_ms {
        return Err(Refusal::new(Code::IllegalInvisibleTime, format!("the invisibleTime is too large. max is {max_ms}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<(), Refusal>) -> String {
        r.err().map(|r| r.message).unwrap_or_default()
    }

    #[test]
    fn names_are_refused_in_javas_order_with_its_messages() {
        assert_eq!(message(topic(" ")), "The specified topic is blank");
        assert_eq!(message(topic(&"é".repeat(128))), "The specified topic is longer than topic max length 127.");
        assert_eq!(message(topic("a b")), "The specified topic[a b] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$");
        assert_eq!(message(topic("TBW102")), "cannot access system topic");
        assert_eq!(message(topic("rmq_sys_x")), "cannot access system topic");
        assert!(topic("%RETRY%g").is_ok() && topic(&"T".repeat(127)).is_ok());
        assert_eq!(message(group("")), "the specified group is blank");
        assert_eq!(message(group("CID_RMQ_SYS_X")), "cannot use system consumer group");
        assert!(group(&"g".repeat(255)).is_ok() && group(&"g".repeat(256)).is_err());
    }

    #[test]
    fn invisible_times_are_bounded_below_and_above() {
        assert_eq!(message(invisible_time(10, 1000, 43_200_000)), "the invisibleTime is too small. min is 1000");
        assert_eq!(message(invisible_time(43_200_001, 0, 43_200_000)), "the invisibleTime is too large. max is 43200000");
        assert!(invisible_time(43_200_001, 0, 0).is_ok());
    }
}
