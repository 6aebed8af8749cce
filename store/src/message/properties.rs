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

/// Looks one property up without building the map (the hot path reads TAGS, KEYS, UNIQ_KEY,
/// WAIT, DELAY and the timer's keys): the value [`parse`] would map `name` to. Walks the pairs
/// from the end (later duplicates win), finding each separator with `memrchr` and comparing the
/// pair's head with `name 0x01`, with no searcher to build and nothing split twice.
pub fn get<'a>(s: &'a str, name: &str) -> Option<&'a str> {
    let (bytes, name) = (s.as_bytes(), name.as_bytes());
    if name.is_empty() {
        return None;
    }
    let mut end = bytes.len();
    loop {
        let start = memchr::memrchr(PROPERTY_SEPARATOR as u8, &bytes[..end]).map_or(0, |at| at + 1);
        let pair = &bytes[start..end];
        // The pair's name is what precedes its first 0x01: `name` exactly when the pair starts
        // with `name 0x01`. An empty value does not count, as in `parse`.
        if pair.len() > name.len() + 1 && pair.starts_with(name) && pair[name.len()] == NAME_VALUE_SEPARATOR as u8 {
            // Next to ASCII separators or the string's ends: char boundaries.
            return s.get(start + name.len() + 1..end);
        }
        if start == 0 {
            return None;
        }
        end = start - 1;
    }
}

/// Looks several properties up in one pass: for each of `names`, the value [`get`] would give
/// (the last pair with that name and a value). Cheaper than a [`get`] per name when the
/// dispatcher thread reads three or four of them from every record.
pub fn get_each<'a, const N: usize>(s: &'a str, names: [&str; N]) -> [Option<&'a str>; N] {
    let mut found = [None; N];
    for_each(s, |name, value| {
        for (at, wanted) in names.iter().enumerate() {
            if *wanted == name {
                found[at] = Some(value);
            }
        }
    });
    found
}

/// Calls `f` with each pair [`parse`] keeps (name and value both non-empty), in order, duplicates
/// included: one pass for a caller that looks for several names.
pub fn for_each<'a>(s: &'a str, mut f: impl FnMut(&'a str, &'a str)) {
    for pair in s.split(PROPERTY_SEPARATOR) {
        if let Some((name, value)) = pair.split_once(NAME_VALUE_SEPARATOR) {
            if !name.is_empty() && !value.is_empty() {
                f(name, value);
            }
        }
    }
}

/// Pairs past which [`with_set`] builds the map as [`parse`] does (its duplicate check is
/// quadratic in the pairs).
const WITH_SET_MAX_PAIRS: usize = 32;

/// The properties string `s` with `set`'s names mapped to their values: what [`serialize`] of
/// [`parse`] with each of `set` inserted gives (a name already there keeps its place, new ones
/// follow in `set`'s order), written in one pass without the map when `s` holds no duplicate
/// name (as every client writes it).
pub fn with_set(s: &str, set: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(s.len() + set.iter().map(|(n, v)| n.len() + v.len() + 2).sum::<usize>() + 1);
    let mut seen: [&str; WITH_SET_MAX_PAIRS] = [""; WITH_SET_MAX_PAIRS];
    let mut pairs = 0;
    let mut written = [false; 8];
    let fall_back = set.len() > written.len()
        || !s.split(PROPERTY_SEPARATOR).all(|pair| {
            let Some((name, value)) = pair.split_once(NAME_VALUE_SEPARATOR) else { return true };
            if name.is_empty() || value.is_empty() {
                return true;
            }
            if pairs == WITH_SET_MAX_PAIRS || seen[..pairs].contains(&name) {
                return false;
            }
            seen[pairs] = name;
            pairs += 1;
            let value = match set.iter().position(|(n, _)| *n == name) {
                Some(i) => {
                    written[i] = true;
                    set[i].1
                }
                None => value,
            };
            out.push_str(name);
            out.push(NAME_VALUE_SEPARATOR);
            out.push_str(value);
            out.push(PROPERTY_SEPARATOR);
            true
        });
    if fall_back {
        let mut map = parse(s);
        for (name, value) in set {
            map.insert((*name).to_owned(), (*value).to_owned());
        }
        return serialize(map.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    }
    for (i, (name, value)) in set.iter().enumerate() {
        if !written[i] {
            out.push_str(name);
            out.push(NAME_VALUE_SEPARATOR);
            out.push_str(value);
            out.push(PROPERTY_SEPARATOR);
        }
    }
    out
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

    /// The map's answer, which `get` must give.
    fn get_by_parse(s: &str, name: &str) -> Option<String> {
        parse(s).get(name).cloned()
    }

    fn with_set_by_parse(s: &str, set: &[(&str, &str)]) -> String {
        let mut map = parse(s);
        for (n, v) in set {
            map.insert(n.to_string(), v.to_string());
        }
        serialize(map.iter().map(|(n, v)| (n.as_str(), v.as_str())))
    }

    #[test]
    fn get_and_with_set_agree_with_the_map_on_edge_cases() {
        let cases = [
            "",
            "A\u{1}",
            "\u{1}A\u{2}A\u{1}x",
            "AA\u{1}1\u{2}A\u{1}2",
            "A\u{1}1\u{2}BA\u{1}3",
            "A\u{1}1\u{2}A\u{1}\u{2}",
            "A\u{1}1\u{1}2\u{2}B\u{1}\u{1}",
            "A\u{1}A\u{1}A\u{2}A\u{1}\u{2}",
            "é\u{1}ü\u{2}A\u{1}ß",
        ];
        for s in cases {
            let names = ["A", "AA", "B", "BA", "é", "X"];
            for name in names {
                assert_eq!(get(s, name).map(str::to_owned), get_by_parse(s, name), "{s:?} {name}");
            }
            assert_eq!(get_each(s, names), names.map(|name| get(s, name)), "{s:?}");
            let set = [("A", "v"), ("CLUSTER", "c")];
            assert_eq!(with_set(s, &set), with_set_by_parse(s, &set), "{s:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn get_and_with_set_agree_with_the_map(s in "[AB\u{1}\u{2}é]{0,40}", name in "[AB]{1,2}") {
            proptest::prop_assert_eq!(get(&s, &name).map(str::to_owned), get_by_parse(&s, &name));
            proptest::prop_assert_eq!(get_each(&s, [name.as_str(), "B"]), [get(&s, &name), get(&s, "B")]);
            let set = [(name.as_str(), "v"), ("C", "w")];
            proptest::prop_assert_eq!(with_set(&s, &set), with_set_by_parse(&s, &set));
        }
    }
}
