//! 5.x timer messages (`setDeliverTimeMs`, `setDelayTimeSec`, `setDelayTimeMs`). This broker has no
//! timer wheel, so it answers such a send as Java 5.3.3 does with `timerWheelEnable=false`:
//! refused, never delivered early (`HookUtils.checkIfTimerMessage` and `handleScheduleMessage`).

use indexmap::IndexMap;

pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
/// Set on messages the timer itself re-delivers.
pub const TIMER_OUT_MS: &str = "TIMER_OUT_MS";
/// Java's `TimerMessageStore.TIMER_TOPIC`.
pub const TIMER_TOPIC: &str = remoting::protocol::system_topic::WHEEL_TIMER;

/// Java's remark for a timer message when the wheel is off.
pub const NOT_ENABLED: &str = "accurate timer message is not enabled, timerWheelEnable is false";

/// Refuses a timer message. As Java, a message that also has a delay level is a delay-level
/// message: its timer properties are dropped and the level wins.
pub fn refuse_timer_message(props: &mut IndexMap<String, String>) -> Result<(), &'static str> {
    let timer_keys = [TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS];
    let delay_level = props.get(store::message::properties::DELAY).and_then(|d| d.trim().parse::<i32>().ok()).unwrap_or(0);
    if delay_level > 0 {
        for key in timer_keys {
            props.shift_remove(key);
        }
        return Ok(());
    }
    if props.contains_key(TIMER_OUT_MS) {
        return Ok(());
    }
    if timer_keys.iter().any(|key| props.contains_key(*key)) {
        return Err(NOT_ENABLED);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> IndexMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_timer_message_is_refused_and_a_delay_level_wins_over_timer_properties() {
        for key in [TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS] {
            assert_eq!(refuse_timer_message(&mut props(&[(key, "3000")])), Err(NOT_ENABLED));
        }
        let mut delayed = props(&[("DELAY", "2"), (TIMER_DELAY_SEC, "5")]);
        assert_eq!(refuse_timer_message(&mut delayed), Ok(()));
        assert_eq!(delayed, props(&[("DELAY", "2")]));
        assert_eq!(refuse_timer_message(&mut props(&[("TAGS", "a")])), Ok(()));
    }
}
