use super::*;

fn msg(props: &[(&str, &str)]) -> MessageToStore {
    let mut m = crate::testing::message("Later", &properties::serialize(props.iter().copied()));
    m.queue_id = 3;
    m
}

fn config() -> MessageStoreConfig {
    MessageStoreConfig::default()
}

#[test]
fn a_timer_message_goes_to_the_timer_topic_rounded_to_the_precision() {
    let now = 1_700_000_000_300;
    let mut m = msg(&[("TIMER_DELAY_SEC", "3"), ("UNIQ_KEY", "u1")]);
    admit(&mut m, &config(), None, now).unwrap();
    assert_eq!((m.topic.as_str(), m.queue_id), (TIMER_TOPIC, 0));
    let p = properties::parse(&m.properties);
    assert_eq!(p.get("TIMER_OUT_MS").map(String::as_str), Some("1700000003000"));
    assert_eq!((p["REAL_TOPIC"].as_str(), p["REAL_QID"].as_str()), ("Later", "3"));
    // On a boundary: one slot earlier.
    let mut m = msg(&[("TIMER_DELIVER_MS", "1700000005000")]);
    admit(&mut m, &config(), None, now).unwrap();
    assert_eq!(properties::get(&m.properties, "TIMER_OUT_MS"), Some("1700000004000"));
    let mut m = msg(&[("TIMER_DELAY_MS", "1500")]);
    admit(&mut m, &config(), None, now).unwrap();
    assert_eq!(properties::get(&m.properties, "TIMER_OUT_MS"), Some("1700000001000"));
}

#[test]
fn refusals_and_exceptions_are_javas() {
    let now = 1_700_000_000_000;
    let mut m = msg(&[("TIMER_DELAY_SEC", &(3 * 24 * 3600 + 1).to_string())]);
    let r = admit(&mut m, &config(), None, now).unwrap_err();
    assert_eq!(r.status, PutStatus::WheelTimerMsgIllegal);
    assert_eq!(r.remark.as_deref(), Some(illegal_remark(259_200).as_str()));
    assert!(r.remark.unwrap().contains("max delay 259200000ms"));
    let mut m = msg(&[("TIMER_DELAY_SEC", "x")]);
    assert_eq!(admit(&mut m, &config(), None, now).unwrap_err().status, PutStatus::WheelTimerMsgIllegal);
    let off = MessageStoreConfig { timer_wheel_enable: false, ..config() };
    let mut m = msg(&[("TIMER_DELAY_SEC", "3")]);
    let r = admit(&mut m, &off, None, now).unwrap_err();
    assert_eq!((r.status, r.remark.as_deref()), (PutStatus::WheelTimerNotEnable, Some("accurate timer message is not enabled, timerWheelEnable is false")));
    // A delay level wins: the timer properties go, the message stays.
    let mut m = msg(&[("DELAY", "2"), ("TIMER_DELAY_SEC", "5")]);
    admit(&mut m, &off, None, now).unwrap();
    assert_eq!((m.topic.as_str(), m.properties.as_str()), ("Later", "DELAY\u{1}2\u{2}"));
    // Already due: stored as it is; a due delete marker is refused.
    let mut m = msg(&[("TIMER_DELIVER_MS", "1000")]);
    admit(&mut m, &config(), None, now).unwrap();
    assert_eq!(m.topic, "Later");
    let mut m = msg(&[("TIMER_DELIVER_MS", "1000"), ("TIMER_DEL_UNIQKEY", "Later+u")]);
    assert_eq!(admit(&mut m, &config(), None, now).unwrap_err().status, PutStatus::WheelTimerMsgIllegal);
}
