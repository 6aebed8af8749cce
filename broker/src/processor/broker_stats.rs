//! The stats codes (Java `AdminBrokerProcessor.ViewBrokerStatsData` and
//! `fetchAllConsumeStatsInBroker`): VIEW_BROKER_STATS_DATA (`mqadmin statsAll`, dashboards) reads
//! one item of the [`crate::stats_manager`]; GET_BROKER_CONSUME_STATS (`mqadmin
//! brokerConsumeStats`) is the consume stats of every group on the broker. The consume stats of
//! one group (GET_CONSUME_STATS) are built here too.

use remoting::command_header;
use remoting::fastjson::{self, JsonStyle};
use remoting::server::{Channel, ProcessError, ProcessResult, RequestProcessor};
use remoting::{RemotingCommand, RequestCode, ResponseCode};

use super::ok;
use crate::handles::AdminContext;
use crate::stats::java_double;
use crate::stats_manager::Figures;

/// The largest stats body we build: well inside the 16 MiB frame a client accepts.
pub const MAX_STATS_BODY_BYTES: usize = 8 * 1024 * 1024;

command_header! {
    /// VIEW_BROKER_STATS_DATA.
    pub struct ViewBrokerStatsDataHeader {
        pub stats_name: String => "statsName",
        pub stats_key: String => "statsKey",
    }
}

command_header! {
    /// GET_BROKER_CONSUME_STATS (Java's field is `isOrder`).
    pub struct ConsumeStatsInBrokerHeader {
        pub is_order: bool => "isOrder",
    }
}

/// A `MessageQueue` written as fastjson writes map keys of that type: the object itself.
pub fn mq_key(topic: &str, broker: &str, queue_id: i32) -> String {
    format!(r#"{{"brokerName":{},"queueId":{queue_id},"topic":{}}}"#, json_str(broker), json_str(topic))
}

fn json_str(s: &str) -> String {
    fastjson::to_string(s, JsonStyle::Fastjson)
}

/// Which queues of a topic the consume stats cover: Java's GET_CONSUME_STATS takes the read
/// queues, GET_BROKER_CONSUME_STATS the write queues.
#[derive(Clone, Copy, PartialEq)]
pub enum Queues {
    Read,
    Write,
}

/// The offset table entries (`OffsetWrapper` by `MessageQueue`) of `group` on `topic` (None: no
/// such topic here) and their total diff. `budget` is what is left of [`MAX_STATS_BODY_BYTES`]
/// for the whole body.
pub fn offset_entries(b: &AdminContext, group: &str, topic: &str, queues: Queues, budget: &mut usize) -> Result<Option<(Vec<String>, i64)>, ProcessError> {
    let Some(tc) = b.topics.select(topic) else { return Ok(None) };
    let count = match queues {
        Queues::Read => tc.read_queue_nums,
        Queues::Write => tc.write_queue_nums,
    };
    let broker_name = b.config().broker_name.clone();
    let mut entries = Vec::new();
    let mut diff = 0i64;
    // A topic loaded from a file may predate the queue-count bound; the body stays bounded.
    for q in 0..count.clamp(0, b.config().max_topic_queue_nums as i32) {
        let broker_offset = b.store.max_offset_in_queue(topic, q).max(0);
        let consumer_offset = b.offsets.query_offset(group, topic, q).unwrap_or(0).max(0);
        let last = if consumer_offset > 0 { b.store.message_store_timestamp(topic, q, consumer_offset - 1).unwrap_or(0) } else { 0 };
        let entry = format!(
            r#"{}:{{"brokerOffset":{broker_offset},"consumerOffset":{consumer_offset},"lastTimestamp":{last},"pullOffset":{consumer_offset}}}"#,
            mq_key(topic, &broker_name, q)
        );
        *budget = budget
            .checked_sub(entry.len() + 1)
            .ok_or_else(|| ProcessError::system(format!("the consume stats exceed {MAX_STATS_BODY_BYTES} bytes; ask for one group and topic")))?;
        entries.push(entry);
        diff += broker_offset - consumer_offset;
    }
    Ok(Some((entries, diff)))
}

/// A `ConsumeStats` body: the offset table entries and the consume TPS (Java's group-get TPS).
pub fn consume_stats_json(entries: &[String], tps: f64) -> String {
    format!(r#"{{"consumeTps":{},"offsetTable":{{{}}}}}"#, java_double(tps), entries.join(","))
}

fn item_json(f: Figures) -> String {
    format!(r#"{{"avgpt":{},"sum":{},"tps":{}}}"#, java_double(f.avgpt), f.sum, java_double(f.tps))
}

pub struct BrokerStatsProcessor {
    pub ctx: AdminContext,
}

impl RequestProcessor for BrokerStatsProcessor {
    fn process(&self, _channel: &Channel, request: RemotingCommand) -> ProcessResult {
        match request.request_code() {
            RequestCode::VIEW_BROKER_STATS_DATA => self.view(&request),
            RequestCode::GET_BROKER_CONSUME_STATS => self.all_consume_stats(&request),
            _ => Ok(Some(remoting::server::not_supported(&request))),
        }
    }
}

impl BrokerStatsProcessor {
    fn view(&self, request: &RemotingCommand) -> ProcessResult {
        let h: ViewBrokerStatsDataHeader = request.decode_header()?;
        let Some(item) = self.ctx.broker_stats.item(&h.stats_name, &h.stats_key) else {
            return Err(ProcessError::system(format!("The stats <{}> <{}> not exist", h.stats_name, h.stats_key)));
        };
        let body = format!(r#"{{"statsDay":{},"statsHour":{},"statsMinute":{}}}"#, item_json(item.day()), item_json(item.hour()), item_json(item.minute()));
        Ok(Some(ok(request).with_body(body)))
    }

    /// Every subscription group, each with the consume stats of the topics it has offsets of;
    /// a topic the group's online consumers do not subscribe to is left out, as Java does.
    fn all_consume_stats(&self, request: &RemotingCommand) -> ProcessResult {
        let b = &self.ctx;
        let h: ConsumeStatsInBrokerHeader = request.decode_header()?;
        let mut budget = MAX_STATS_BODY_BYTES;
        let mut total_diff = 0i64;
        let mut groups = Vec::new();
        for group in b.groups.snapshot().subscription_group_table.into_keys() {
            let online = b.consumers.group(&group);
            let mut stats = Vec::new();
            for topic in b.offsets.topics_of_group(&group) {
                if h.is_order && !b.topics.select(&topic).is_some_and(|tc| tc.order) {
                    continue;
                }
                if let Some(g) = &online {
                    if !g.subscriptions.is_empty() && !g.subscriptions.contains_key(&topic) {
                        continue;
                    }
                }
                if let Some((entries, diff)) = offset_entries(b, &group, &topic, Queues::Write, &mut budget)? {
                    total_diff += diff;
                    stats.push(consume_stats_json(&entries, b.broker_stats.group_get_tps(&group, &topic)));
                }
            }
            groups.push(format!("{{{}:[{}]}}", json_str(&group), stats.join(",")));
        }
        let body = format!(r#"{{"brokerAddr":{},"consumeStatsList":[{}],"totalDiff":{total_diff}}}"#, json_str(&b.broker_addr), groups.join(","));
        if body.len() > MAX_STATS_BODY_BYTES {
            return Err(ProcessError::new(ResponseCode::SYSTEM_ERROR, format!("the consume stats exceed {MAX_STATS_BODY_BYTES} bytes")));
        }
        Ok(Some(ok(request).with_body(body)))
    }
}
