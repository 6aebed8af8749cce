//! The properties string: `name 0x01 value 0x02 ...`. Java 4.9.1–5.1.4 drop the final 0x02,
//! others keep it; both parse. A pair is kept only when name and value are both non-empty, and a
//! later duplicate wins, as in Java's `string2messageProperties`.

use indexmap::IndexMap;

// Property names (Java's `MessageConst`), named here once for every crate.

pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
pub const PROPERTY_SEPARATOR: char = '\u{2}';

pub const KEYS: &str = "KEYS";
pub const TAGS: &str = "TAGS";
pub const UNIQ_KEY: &str = "UNIQ_KEY";
pub const WAIT: &str = "WAIT";
pub const DELAY: &str = "DELAY";
pub const REAL_TOPIC: &str = "REAL_TOPIC";
pub const REAL_QID: &str = "REAL_QID";
pub const TRAN_MSG: &str = "TRAN_MSG";
pub const PGROUP: &str = "PGROUP";
pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
pub const CHECK_IMMUNITY_TIME_IN_SECONDS: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
pub const POP_CK: &str = "POP_CK";
pub const SHARDING_KEY: &str = "__SHARDINGKEY";
pub const TRACE_CONTEXT: &str = "TRACE_CONTEXT";
pub const BORN_HOST: &str = "__BORNHOST";
pub const BORN_TIMESTAMP: &str = "BORN_TIMESTAMP";
pub const DLQ_ORIGIN_TOPIC: &str = "DLQ_ORIGIN_TOPIC";
pub const DLQ_ORIGIN_MESSAGE_ID: &str = "DLQ_ORIGIN_MESSAGE_ID";
pub const TRANSACTION_ID: &str = "__transactionId__";
/// Set on a message one broker hands to another (Java's `PROPERTY_TRANSFER_FLAG`): a proxy does
/// not check its type again.
pub const TRANSFER_FLAG: &str = "TRANSFER_FLAG";

/// 5.x timer messages (Java `MessageConst`): what a producer asks for (an absolute time, or a
/// delay in seconds or milliseconds), and what the broker adds: the due time it rounded
/// (`TIMER_OUT_MS`), when the timer took and released it, how often it was rolled, and on a recall
/// marker the `topic+uniqKey` it cancels.
pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
pub const TIMER_OUT_MS: &str = "TIMER_OUT_MS";
pub const TIMER_ENQUEUE_MS: &str = "TIMER_ENQUEUE_MS";
pub const TIMER_DEQUEUE_MS: &str = "TIMER_DEQUEUE_MS";
pub const TIMER_ROLL_TIMES: &str = "TIMER_ROLL_TIMES";
pub const TIMER_DEL_UNIQKEY: &str = "TIMER_DEL_UNIQKEY";

pub fn parse(s: &str) -> IndexMap<String, String> {
    let mut map = IndexMap::new();
    for pair in s.split(PROPERTY_SEPARATOR) {
        if let Some((name, value)) = pair.split_once(NAME_VALUE_SEPARATOR) {
            if !name.is_empty() && !value.is_empty() {
                map.insert(name.to_owned(), value.to_owned());
            }
        }
    }
    map
}

/// Serializes with a trailing separator, as Java ≥ 5.2 and Go do.
pub fn serialize<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (name, value) in entries {
        out.push_str(name);
        out.push(NAME_VALUE_SEPARATOR);
        out.push_str(value);
        out.push(PROPERTY_SEPARATOR);
    }
    out
}

/// Looks one property up without building the map (the hot path reads TAGS, KEYS, UNIQ_KEY).
pub fn get<'a>(s: &'a str, name: &str) -> Option<&'a str> {
    // Later duplicates win, so keep the last match.
    s.split(PROPERTY_SEPARATOR).rev().filter_map(|pair| pair.split_once(NAME_VALUE_SEPARATOR)).find(|(n, v)| *n == name && !v.is_empty()).map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_with_and_without_the_final_separator_and_drops_empty_pairs() {
        for s in ["TAGS\u{1}A\u{2}KEYS\u{1}k1 k2", "TAGS\u{1}A\u{2}KEYS\u{1}k1 k2\u{2}", "X\u{1}\u{2}TAGS\u{1}A\u{2}\u{1}v\u{2}KEYS\u{1}k1 k2"] {
            let map = parse(s);
            assert_eq!(map.len(), 2, "{s:?}");
            assert_eq!(map["TAGS"], "A");
            assert_eq!(get(s, KEYS), Some("k1 k2"));
        }
        assert_eq!(get("A\u{1}1\u{2}A\u{1}2", "A"), Some("2"));
        assert_eq!(serialize([("a", "1"), ("b", "2")]), "a\u{1}1\u{2}b\u{1}2\u{2}");
    }
}
