//! 5.x topic attributes (Java 5.3.3's `TopicAttributes`, `AttributeParser`, `AttributeUtil`):
//! UPDATE_AND_CREATE_TOPIC's `attributes` header (`mqadmin updateTopic -a +message.type=FIFO`)
//! is a list of changes, `+key=value` to add or change and `-key` to delete, applied to the
//! topic's current attributes. A topic is created with additions only; `queue.type` and
//! `cleanup.policy` are set at creation and never changed. Refusals carry Java's messages (the
//! broker answers them SYSTEM_ERROR, as Java's catch-all does).

use std::collections::{BTreeMap, HashSet};

/// One attribute Java knows, with what it accepts.
struct Attribute {
    name: &'static str,
    changeable: bool,
    kind: Kind,
}

enum Kind {
    /// The values, and the set as Java's `HashSet.toString` prints it.
    Enum(&'static [&'static str], &'static str),
    LongRange(i64, i64),
}

/// `TopicAttributes.ALL`.
const ALL: &[Attribute] = &[
    Attribute { name: "queue.type", changeable: false, kind: Kind::Enum(&["BatchCQ", "SimpleCQ"], "[SimpleCQ, BatchCQ]") },
    Attribute { name: "cleanup.policy", changeable: false, kind: Kind::Enum(&["DELETE", "COMPACTION"], "[DELETE, COMPACTION]") },
    Attribute {
        name: MESSAGE_TYPE,
        changeable: true,
        kind: Kind::Enum(&["UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"], "[UNSPECIFIED, TRANSACTION, FIFO, MIXED, DELAY, NORMAL]"),
    },
    Attribute { name: "reserve.time", changeable: true, kind: Kind::LongRange(-1, i64::MAX) },
];

/// `TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE`.
pub const MESSAGE_TYPE: &str = "message.type";

impl Attribute {
    fn verify(&self, value: &str) -> Result<(), String> {
        match self.kind {
            Kind::Enum(values, printed) => match values.contains(&value) {
                true => Ok(()),
                false => Err(format!("value is not in set: {printed}")),
            },
            Kind::LongRange(min, max) => {
                let v: i64 = value.parse().map_err(|_| format!("For input string: \"{value}\""))?;
                match (min..=max).contains(&v) {
                    true => Ok(()),
                    false => Err(format!("value is not in range({min}, {max})")),
                }
            }
        }
    }
}

/// `AttributeParser.parseToMap`: `+k1=v1,+k2=v2,-k3` to `{"+k1": "v1", "+k2": "v2", "-k3": ""}`.
pub fn parse_to_map(modification: Option<&str>) -> Result<BTreeMap<String, String>, String> {
    let mut map = BTreeMap::new();
    let Some(text) = modification.filter(|t| !t.is_empty()) else {
        return Ok(map);
    };
    // Java's split drops trailing empty pieces.
    let mut pieces: Vec<&str> = text.split(',').collect();
    while pieces.len() > 1 && pieces.last() == Some(&"") {
        pieces.pop();
    }
    for kv in pieces {
        let (key, value) = if kv.contains('=') {
            // Java's `split("=")`: trailing empty pieces dropped, then pieces 0 and 1 read.
            let mut parts: Vec<&str> = kv.split('=').collect();
            while parts.last() == Some(&"") {
                parts.pop();
            }
            let (Some(key), Some(value)) = (parts.first().copied(), parts.get(1).copied()) else {
                return Err(format!("Index {} out of bounds for length {}", parts.len().min(1), parts.len()));
            };
            if !key.contains('+') {
                return Err(format!("add/alter attribute format is wrong: {key}"));
            }
            (key, value)
        } else {
            if !kv.contains('-') {
                return Err(format!("delete attribute format is wrong: {kv}"));
            }
            (kv, "")
        };
        if map.insert(key.to_owned(), value.to_owned()).is_some() {
            return Err(format!("key duplication: {key}"));
        }
    }
    Ok(map)
}

/// `AttributeParser.parseToString`: the map back to its text (as the admin client sends it).
pub fn parse_to_string(attributes: &BTreeMap<String, String>) -> String {
    let kvs: Vec<String> = attributes.iter().map(|(k, v)| if v.is_empty() { k.clone() } else { format!("{k}={v}") }).collect();
    kvs.join(",")
}

/// `AttributeUtil.alterCurrentAttributes`: the topic's attributes after the changes `changes`
/// (keys with their `+` or `-`), on creation (`create`) or on an existing topic.
pub fn alter(create: bool, current: &BTreeMap<String, String>, changes: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, String> {
    let mut seen = HashSet::new();
    let (mut set, mut delete) = (Vec::new(), Vec::new());
    for (key, value) in changes {
        let real = key.get(1..).unwrap_or("");
        if real.is_empty() || real.contains('+') || real.contains('-') {
            return Err("kv string format wrong.".into());
        }
        if !seen.insert(real) {
            return Err(format!("alter duplication key. key: {real}"));
        }
        match key.as_bytes().first() {
            Some(b'+') => set.push((real, value.as_str())),
            _ if create => return Err(format!("only add attribute is supported while creating topic. key: {real}")),
            Some(b'-') if !current.contains_key(real) => return Err(format!("attempt to delete a nonexistent key: {real}")),
            Some(b'-') => delete.push(real),
            _ => return Err(format!("wrong format key: {real}")),
        }
    }
    for (key, value) in &set {
        let attribute = known(key)?;
        if !create && !attribute.changeable {
            return Err(format!("attempt to update an unchangeable attribute. key: {key}"));
        }
        attribute.verify(value)?;
    }
    for key in &delete {
        if !known(key)?.changeable {
            return Err(format!("attempt to update an unchangeable attribute. key: {key}"));
        }
    }
    let mut result = current.clone();
    result.extend(set.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())));
    for key in delete {
        result.remove(key);
    }
    Ok(result)
}

fn known(key: &str) -> Result<&'static Attribute, String> {
    ALL.iter().find(|a| a.name == key).ok_or_else(|| format!("unsupported key: {key}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_modification_text_reads_as_javas_parser_reads_it() {
        assert_eq!(parse_to_map(Some("+message.type=FIFO,-reserve.time")), Ok(map(&[("+message.type", "FIFO"), ("-reserve.time", "")])));
        assert_eq!(parse_to_map(None), Ok(BTreeMap::new()));
        assert_eq!(parse_to_map(Some("message.type=FIFO")), Err("add/alter attribute format is wrong: message.type".into()));
        assert_eq!(parse_to_map(Some("message.type")), Err("delete attribute format is wrong: message.type".into()));
        assert_eq!(parse_to_map(Some("+a=1,+a=2")), Err("key duplication: +a".into()));
        assert_eq!(parse_to_map(Some("+a=")), Err("Index 1 out of bounds for length 1".into()));
        assert_eq!(parse_to_string(&map(&[("+message.type", "FIFO"), ("-x", "")])), "+message.type=FIFO,-x");
    }

    #[test]
    fn a_topic_is_created_with_additions_and_changed_within_the_rules() {
        let none = BTreeMap::new();
        let fifo = alter(true, &none, &map(&[("+message.type", "FIFO"), ("+queue.type", "SimpleCQ")])).unwrap();
        assert_eq!(fifo, map(&[("message.type", "FIFO"), ("queue.type", "SimpleCQ")]));
        assert_eq!(alter(true, &none, &map(&[("-message.type", "")])), Err("only add attribute is supported while creating topic. key: message.type".into()));
        assert_eq!(alter(true, &none, &map(&[("+colour", "red")])), Err("unsupported key: colour".into()));
        assert_eq!(
            alter(true, &none, &map(&[("+message.type", "FAST")])),
            Err("value is not in set: [UNSPECIFIED, TRANSACTION, FIFO, MIXED, DELAY, NORMAL]".into())
        );
        assert_eq!(alter(false, &fifo, &map(&[("+queue.type", "BatchCQ")])), Err("attempt to update an unchangeable attribute. key: queue.type".into()));
        assert_eq!(alter(false, &fifo, &map(&[("+message.type", "DELAY")])), Ok(map(&[("message.type", "DELAY"), ("queue.type", "SimpleCQ")])));
        assert_eq!(alter(false, &fifo, &map(&[("-message.type", "")])), Ok(map(&[("queue.type", "SimpleCQ")])));
        assert_eq!(alter(false, &none, &map(&[("-message.type", "")])), Err("attempt to delete a nonexistent key: message.type".into()));
        assert_eq!(alter(false, &none, &map(&[("+reserve.time", "-2")])), Err("value is not in range(-1, 9223372036854775807)".into()));
        // An update without changes keeps what the topic has.
        assert_eq!(alter(false, &fifo, &BTreeMap::new()), Ok(fifo.clone()));
    }
}
