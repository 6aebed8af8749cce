//! The admin side of 5.x's cold-data flow control (Java's `ColdDataCgCtrService`), behind
//! UPDATE_COLD_DATA_FLOW_CTR_CONFIG (2001), REMOVE_COLD_DATA_FLOW_CTR_CONFIG (2002) and
//! GET_COLD_DATA_FLOW_CTR_INFO (2003): per-group cold-read thresholds set by an admin, kept in
//! memory only (Java persists nothing: a restart forgets them), and the JSON report.
//!
//! The flow control itself is not built: our store does not measure cold reads (Java's
//! `coldDataFlowControlEnable`, off by default, makes it ask `mincore` per pull), so the runtime
//! table and the global count stay empty, as Java's do with the feature off.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use remoting::protocol::name::GroupName;
use remoting::server::ProcessError;
use remoting::ResponseCode;

/// Groups with a threshold at most; Java's map has no bound.
pub const MAX_CONFIGURED_GROUPS: usize = 10_000;

/// Java's service wakes every 180 s with the flow control off and drops the strategy's
/// `<group>||adaptive` entries (its `coldCtrStrategyEnable` is off by default).
const CLEAR_EVERY: Duration = Duration::from_secs(180);
const ADAPTIVE: &str = "||adaptive";

struct Entry {
    threshold: i64,
    /// Insertion order, for entries that share a bucket of Java's table.
    seq: u64,
}

struct Table {
    config: HashMap<String, Entry>,
    next_seq: u64,
    /// The most entries the table ever held: Java's table grows and never shrinks, and its
    /// size decides the order in which it is written.
    max_len: usize,
    /// Clear passes done since `started`.
    cleared: u64,
}

pub struct ColdDataFlowCtr {
    started: Instant,
    table: Mutex<Table>,
}

/// What an update did, for the log and the remark.
#[derive(Debug, Default, PartialEq)]
pub struct Update {
    pub applied: usize,
    /// Entries Java would also skip (threshold not a Long) or that it would take but we refuse
    /// (not a valid group name), as `key=value`.
    pub skipped: Vec<String>,
}

impl Default for ColdDataFlowCtr {
    fn default() -> Self {
        ColdDataFlowCtr::new(Instant::now())
    }
}

impl ColdDataFlowCtr {
    pub fn new(started: Instant) -> Self {
        ColdDataFlowCtr { started, table: Mutex::new(Table { config: HashMap::new(), next_seq: 0, max_len: 0, cleared: 0 }) }
    }

    /// UPDATE_COLD_DATA_FLOW_CTR_CONFIG's body: Java `Properties` text `group=threshold`. Each
    /// entry is applied or skipped on its own, as Java does; text `Properties.load` refuses is
    /// SYSTEM_ERROR "string2Properties error", and a new group past [`MAX_CONFIGURED_GROUPS`] is
    /// SYSTEM_ERROR (after the entries before it were applied).
    pub fn update(&self, body: &[u8], now: Instant) -> Result<Update, ProcessError> {
        let text = String::from_utf8_lossy(body);
        if has_malformed_unicode_escape(&text) {
            return Err(ProcessError::system("string2Properties error"));
        }
        let mut table = self.table.lock();
        self.clear_due(&mut table, now);
        let mut update = Update::default();
        for (key, value) in remoting::properties::parse(&text) {
            let (Ok(group), Ok(threshold)) = (GroupName::new(key.as_str()), value.parse::<i64>()) else {
                update.skipped.push(format!("{key}={value}"));
                continue;
            };
            let group = group.as_str().to_owned();
            if let Some(entry) = table.config.get_mut(&group) {
                entry.threshold = threshold;
            } else if table.config.len() >= MAX_CONFIGURED_GROUPS {
                return Err(ProcessError::new(
                    ResponseCode::SYSTEM_ERROR,
                    format!("cold data flow control: {MAX_CONFIGURED_GROUPS} groups have a threshold already; remove one before adding {group}"),
                ));
            } else {
                let seq = table.next_seq;
                table.next_seq += 1;
                table.config.insert(group, Entry { threshold, seq });
                table.max_len = table.max_len.max(table.config.len());
            }
            update.applied += 1;
        }
        Ok(update)
    }

    /// REMOVE_COLD_DATA_FLOW_CTR_CONFIG's body: the group, taken whole (Java does not trim it).
    /// An unknown group changes nothing.
    pub fn remove(&self, body: &[u8], now: Instant) -> bool {
        let group = String::from_utf8_lossy(body);
        let mut table = self.table.lock();
        self.clear_due(&mut table, now);
        table.config.remove(group.as_ref()).is_some()
    }

    /// GET_COLD_DATA_FLOW_CTR_INFO's body, as Java's fastjson2 `JSONObject` writes it: keys in
    /// Java's order, the config table in the iteration order of Java's `ConcurrentHashMap`.
    pub fn info_json(&self, cg_cold_read_threshold: i64, global_cold_read_threshold: i64, now: Instant) -> String {
        let mut table = self.table.lock();
        self.clear_due(&mut table, now);
        let mut config = String::from("{");
        for (i, (group, threshold)) in javas_order(&table).into_iter().enumerate() {
            if i > 0 {
                config.push(',');
            }
            config.push_str(&serde_json::Value::from(group).to_string());
            config.push(':');
            config.push_str(&threshold.to_string());
        }
        config.push('}');
        format!(
            r#"{{"runtimeTable":{{}},"configTable":{config},"cgColdReadThreshold":{cg_cold_read_threshold},"globalColdReadThreshold":{global_cold_read_threshold},"globalAcc":0}}"#
        )
    }

    /// The passes of Java's service due by `now`: each drops the `||adaptive` entries.
    fn clear_due(&self, table: &mut Table, now: Instant) {
        let passes = (now.saturating_duration_since(self.started).as_secs() / CLEAR_EVERY.as_secs()).max(table.cleared);
        if passes > table.cleared {
            table.config.retain(|group, _| !group.ends_with(ADAPTIVE));
            table.cleared = passes;
        }
    }
}

/// The order Java's `ConcurrentHashMap` (default capacity 16, resized at 3/4) iterates: by bucket
/// of the spread `String.hashCode`, then by insertion within a bucket.
fn javas_order(table: &Table) -> Vec<(&str, i64)> {
    let mut buckets: u32 = 16;
    while table.max_len >= (buckets as usize) * 3 / 4 {
        buckets = buckets.saturating_mul(2);
    }
    let bucket = |group: &str| {
        let h = store::message::java_string_hash(group) as u32;
        ((h ^ (h >> 16)) & 0x7fff_ffff) & (buckets - 1)
    };
    let mut entries: Vec<(&str, &Entry)> = table.config.iter().map(|(g, e)| (g.as_str(), e)).collect();
    entries.sort_by_key(|(g, e)| (bucket(g), e.seq));
    entries.into_iter().map(|(g, e)| (g, e.threshold)).collect()
}

/// `Properties.load` throws "Malformed \uxxxx encoding" on `\u` not followed by four hex digits
/// in a key or value (comment lines are not read; a line continued by a backslash is no comment).
fn has_malformed_unicode_escape(text: &str) -> bool {
    let mut continued = false;
    for line in text.replace("\r\n", "\n").split(['\n', '\r']) {
        let trimmed = line.trim_start_matches([' ', '\t', '\u{c}']);
        let comment = !continued && (trimmed.starts_with('#') || trimmed.starts_with('!'));
        continued = !comment && line.bytes().rev().take_while(|b| *b == b'\\').count() % 2 == 1;
        if !comment && line_has_malformed_escape(line.as_bytes()) {
            return true;
        }
    }
    false
}

fn line_has_malformed_escape(bytes: &[u8]) -> bool {
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            if bytes.get(i + 1) == Some(&b'u') {
                let hex = bytes.get(i + 2..i + 6);
                if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                    return true;
                }
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(ctr: &ColdDataFlowCtr, now: Instant) -> String {
        ctr.info_json(3_145_728, 104_857_600, now)
    }

    #[test]
    fn an_empty_table_reports_the_thresholds_as_java() {
        let now = Instant::now();
        assert_eq!(
            info(&ColdDataFlowCtr::new(now), now),
            r#"{"runtimeTable":{},"configTable":{},"cgColdReadThreshold":3145728,"globalColdReadThreshold":104857600,"globalAcc":0}"#
        );
    }

    #[test]
    fn updates_apply_each_entry_and_skip_bad_ones() {
        let now = Instant::now();
        let ctr = ColdDataFlowCtr::new(now);
        let update = ctr.update(b"g1=100\ng2=abc\nbad/name=5\ng3=+7\n", now).unwrap();
        assert_eq!(update, Update { applied: 2, skipped: vec!["g2=abc".into(), "bad/name=5".into()] });
        ctr.update(b"g1=-1\n", now).unwrap();
        assert_eq!(info(&ctr, now), info_with(r#""g1":-1,"g3":7"#));
        assert!(ctr.remove(b"g1", now));
        assert!(!ctr.remove(b"g1", now));
        assert_eq!(info(&ctr, now), info_with(r#""g3":7"#));
    }

    fn info_with(config: &str) -> String {
        format!(r#"{{"runtimeTable":{{}},"configTable":{{{config}}},"cgColdReadThreshold":3145728,"globalColdReadThreshold":104857600,"globalAcc":0}}"#)
    }

    #[test]
    fn the_config_table_is_written_in_the_order_of_javas_concurrent_hash_map() {
        let now = Instant::now();
        let ctr = ColdDataFlowCtr::new(now);
        // "a".hashCode() = 97 -> bucket 1 of 16, "b" = 98 -> bucket 2: written a, b whatever the
        // insertion order.
        ctr.update(b"b=1\nGroupB=2\na=3\nGroupA=4\n", now).unwrap();
        let h = |s: &str| {
            let h = store::message::java_string_hash(s) as u32;
            ((h ^ (h >> 16)) & 0x7fff_ffff) & 15
        };
        let mut expected = [("b", 1, h("b")), ("GroupB", 2, h("GroupB")), ("a", 3, h("a")), ("GroupA", 4, h("GroupA"))];
        expected.sort_by_key(|e| e.2);
        let body: Vec<String> = expected.iter().map(|(g, t, _)| format!("\"{g}\":{t}")).collect();
        assert_eq!(info(&ctr, now), info_with(&body.join(",")));
        assert_eq!((h("a"), h("b")), (1, 2));
    }

    #[test]
    fn malformed_unicode_escapes_are_refused_as_java_properties_refuses_them() {
        let now = Instant::now();
        let ctr = ColdDataFlowCtr::new(now);
        let err = ctr.update(b"g\\u12=5\n", now).unwrap_err();
        assert_eq!((err.code, err.remark.as_str()), (ResponseCode::SYSTEM_ERROR, "string2Properties error"));
        assert!(ctr.update(b"g\\\\u12=5\n", now).is_ok());
        assert!(ctr.update(b"# a comment: \\u12\n  ! another \\u\ng\\u0041=5\n", now).is_ok());
        assert!(ctr.update(b"g=1 \\\n# continued, no comment: \\u12\n", now).is_err());
        assert!(ctr.update(b"g=1 \\\r\n# continued, no comment: \\u12\r\n", now).is_err());
    }

    #[test]
    fn the_table_is_bounded() {
        let now = Instant::now();
        let ctr = ColdDataFlowCtr::new(now);
        let body: String = (0..MAX_CONFIGURED_GROUPS).map(|i| format!("g{i}=1\n")).collect();
        assert_eq!(ctr.update(body.as_bytes(), now).unwrap().applied, MAX_CONFIGURED_GROUPS);
        assert!(ctr.update(b"g0=2\n", now).is_ok(), "an update of a known group still applies");
        let err = ctr.update(b"another=1\n", now).unwrap_err();
        assert_eq!(err.code, ResponseCode::SYSTEM_ERROR);
        assert!(err.remark.contains("remove one before adding another"), "{}", err.remark);
    }

    #[test]
    fn adaptive_entries_go_at_the_services_next_pass() {
        let start = Instant::now();
        let ctr = ColdDataFlowCtr::new(start);
        ctr.update(b"g||adaptive=5\ng=6\n", start).unwrap();
        assert_eq!(info(&ctr, start + Duration::from_secs(179)).matches("adaptive").count(), 1);
        assert_eq!(info(&ctr, start + Duration::from_secs(180)), info_with(r#""g":6"#));
    }
}
