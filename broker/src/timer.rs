//! 5.x timer messages in the broker: admission into the timer topic (Java 5.3.3's
//! `HookUtils.handleScheduleMessage` and `transformTimerMessage`, applied by the put pipeline),
//! Java's refusals, and the sink through which the store's timer ([`store::timer::TimerStore`])
//! puts released messages back ([`crate::put::TimerReleases`], through the put pipeline).

use store::commit_log::{PutMessageResult, PutStatus};
use store::config::MessageStoreConfig;
use store::message::{properties, MessageToStore};
use store::timer::{TimerStore, TIMER_TOPIC};

/// Java's remark for a timer message while `timerWheelEnable` is false.
pub fn not_enabled_remark(enabled: bool) -> String {
    format!("accurate timer message is not enabled, timerWheelEnable is {enabled}")
}

/// Java's remark for a timer message beyond `timerMaxDelaySec` (or a delete marker already due).
pub fn illegal_remark(max_delay_sec: i64) -> String {
    format!(
        "timer message illegal, the delay time should not be bigger than the max delay {}ms; or if set del msg, the delay time should be bigger than the current time",
        max_delay_sec * 1000
    )
}

/// Java's remark for a slot over `timerCongestNumEachSlot`.
pub fn flow_control_remark(congest_num: i64) -> String {
    let twice = congest_num.saturating_mul(2);
    format!("timer message is under flow control, max num limit is {twice} or the current value is greater than {congest_num} and less than {twice}, trigger random flow control")
}

/// Turns a timer message into its timer-topic form, as Java's put hook does: its due time
/// rounded to the precision in `TIMER_OUT_MS` (one precision earlier when already on a boundary),
/// its real topic and queue in `REAL_TOPIC`/`REAL_QID`, stored in `rmq_sys_wheel_timer` queue 0.
/// A delay level wins over the timer properties, which are dropped. A message already due is
/// stored as it is. Refusals carry Java's status and remark.
pub fn admit(msg: &mut MessageToStore, config: &MessageStoreConfig, timer: Option<&TimerStore>, now: i64) -> Result<(), PutMessageResult> {
    if msg.topic == TIMER_TOPIC {
        return Ok(());
    }
    let timer_keys = [properties::TIMER_DELIVER_MS, properties::TIMER_DELAY_SEC, properties::TIMER_DELAY_MS];
    if !timer_keys.iter().any(|k| properties::get(&msg.properties, k).is_some()) {
        return Ok(());
    }
    let mut props = properties::parse(&msg.properties);
    let level = props.get(properties::DELAY).and_then(|d| d.trim().parse::<i32>().ok()).unwrap_or(0);
    if level > 0 {
        for key in timer_keys {
            props.shift_remove(key);
        }
        msg.properties = properties::serialize(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        return Ok(());
    }
    if props.contains_key(properties::TIMER_OUT_MS) {
        return Ok(());
    }
    if !config.timer_wheel_enable {
        return Err(PutMessageResult::failed(PutStatus::WheelTimerNotEnable, not_enabled_remark(false)));
    }
    let illegal = || PutMessageResult::failed(PutStatus::WheelTimerMsgIllegal, illegal_remark(config.timer_max_delay_sec));
    let number = |key: &str| props.get(key).map(|v| v.parse::<i64>());
    let deliver_ms = match (number(properties::TIMER_DELAY_SEC), number(properties::TIMER_DELAY_MS), number(properties::TIMER_DELIVER_MS)) {
        (Some(sec), _, _) => sec.ok().and_then(|s| s.checked_mul(1000)).and_then(|ms| now.checked_add(ms)),
        (None, Some(ms), _) => ms.ok().and_then(|ms| now.checked_add(ms)),
        (None, None, Some(at)) => at.ok(),
        (None, None, None) => None,
    };
    let Some(mut deliver_ms) = deliver_ms else { return Err(illegal()) };
    if deliver_ms > now {
        if deliver_ms - now > config.timer_max_delay_sec.saturating_mul(1000) {
            return Err(illegal());
        }
        let precision = config.timer_precision();
        deliver_ms = if deliver_ms % precision == 0 { deliver_ms - precision } else { deliver_ms / precision * precision };
        if timer.is_some_and(|t| t.is_reject(deliver_ms)) {
            return Err(PutMessageResult::failed(PutStatus::WheelTimerFlowControl, flow_control_remark(config.timer_congest_num_each_slot)));
        }
        props.insert(properties::TIMER_OUT_MS.to_owned(), deliver_ms.to_string());
        props.insert(properties::REAL_TOPIC.to_owned(), msg.topic.clone());
        props.insert(properties::REAL_QID.to_owned(), msg.queue_id.to_string());
        msg.properties = properties::serialize(props.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        msg.topic = TIMER_TOPIC.to_owned();
        msg.queue_id = 0;
    } else if props.contains_key(properties::TIMER_DEL_UNIQKEY) {
        return Err(illegal());
    }
    Ok(())
}

/// Java's `RecallMessageHandle.HandleV1`: `v1 topic brokerName timestamp messageId`, URL-safe
/// Base64 with padding.
pub fn recall_handle(topic: &str, broker_name: &str, timestamp: i64, uniq_key: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE.encode(format!("v1 {topic} {broker_name} {timestamp} {uniq_key}"))
}

/// A decoded recall handle (Java `decodeHandle`): topic, broker name, timestamp text, unique key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecallHandle {
    pub topic: String,
    pub broker_name: String,
    pub timestamp: String,
    pub message_id: String,
}

impl RecallHandle {
    pub fn decode(handle: &str) -> Result<RecallHandle, &'static str> {
        use base64::Engine;
        const INVALID: &str = "recall handle is invalid";
        if handle.is_empty() {
            return Err(INVALID);
        }
        let raw = base64::engine::general_purpose::URL_SAFE.decode(handle.as_bytes()).map_err(|_| INVALID)?;
        let raw = String::from_utf8_lossy(&raw).into_owned();
        let items: Vec<&str> = raw.split(' ').collect();
        if items.first() != Some(&"v1") || items.len() < 5 {
            return Err(INVALID);
        }
        Ok(RecallHandle { topic: items[1].to_owned(), broker_name: items[2].to_owned(), timestamp: items[3].to_owned(), message_id: items[4].to_owned() })
    }
}

#[cfg(test)]
#[path = "timer_tests.rs"]
mod tests;
