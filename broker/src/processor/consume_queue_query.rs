//! QUERY_CONSUME_QUEUE (mqadmin queryCq): the units of one consume queue from an index, as
//! Java's `AdminBrokerProcessor.queryConsumeQueue` lists them in a `QueryConsumeQueueResponseBody`.

use remoting::fastjson::{self, JsonStyle};
use remoting::protocol::heartbeat::SubscriptionData;
use remoting::protocol::name::TopicName;
use remoting::server::{ProcessError, ProcessResult};
use remoting::{command_header, RemotingCommand};
use serde::Serialize;
use store::consume_queue::CqUnit;

use super::ok;
use crate::handles::AdminContext;

command_header! {
    pub struct QueryConsumeQueueHeader {
        pub topic: TopicName => "topic",
        pub queue_id: i32 => "queueId",
        pub index: i64 => "index",
        pub count: i32 => "count",
        pub consumer_group: Option<String> => "consumerGroup",
    }
}

/// The most units one answer lists: Java has no bound, but a count of millions would build a
/// body past the 16 MiB frame a client accepts (a unit is about 110 bytes of JSON).
const MAX_UNITS: usize = 65_536;

/// Java's `ConsumeQueueExt.MAX_ADDR` (`Integer.MIN_VALUE - 1`): a tags code at or below it is
/// the address of an extended unit, which this store never writes.
const MAX_EXT_ADDR: i64 = i32::MIN as i64 - 1;

/// `ConsumeQueueData`, fields in fastjson's (alphabetical) order; nulls are left out as fastjson
/// leaves them out.
#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConsumeQueueData {
    eval: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    msg: Option<String>,
    physic_offset: i64,
    physic_size: i32,
    tags_code: i64,
}

impl ConsumeQueueData {
    fn of(unit: &CqUnit) -> ConsumeQueueData {
        let msg = (unit.tags_code <= MAX_EXT_ADDR).then(|| format!("Cq extend not exist!addr: {}", unit.tags_code));
        ConsumeQueueData { eval: false, msg, physic_offset: unit.phy_offset, physic_size: unit.size, tags_code: unit.tags_code }
    }
}

/// `QueryConsumeQueueResponseBody`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryConsumeQueueResponseBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    filter_data: Option<String>,
    max_queue_index: i64,
    min_queue_index: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    queue_data: Option<Vec<ConsumeQueueData>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    subscription_data: Option<SubscriptionData>,
}

/// The units to list: from `index`, those whose queue offset is below `index + count`.
pub fn listed(units: &[CqUnit], count: i32) -> Vec<ConsumeQueueData> {
    let count = usize::try_from(count).unwrap_or(0).min(MAX_UNITS);
    units.iter().take(count).map(ConsumeQueueData::of).collect()
}

pub fn query_consume_queue(b: &AdminContext, request: &RemotingCommand) -> ProcessResult {
    let h: QueryConsumeQueueHeader = request.decode_header()?;
    let Some(cq) = b.store.find_queue(&h.topic, h.queue_id) else {
        return Err(ProcessError::system(format!("{}@{} is not exist!", h.queue_id, h.topic)));
    };
    let mut body = QueryConsumeQueueResponseBody {
        filter_data: None,
        max_queue_index: cq.max_offset(),
        min_queue_index: cq.min_offset(),
        queue_data: None,
        subscription_data: None,
    };
    if let Some(group) = &h.consumer_group {
        body.subscription_data = b.consumers.subscription(group, &h.topic);
        // Java prints the group's filter data (`JSON.toJSONString(null)` for a tag filter: no
        // class or SQL filter is registered here).
        body.filter_data = Some(match body.subscription_data {
            Some(_) => "null".to_owned(),
            None => format!("{group}@{} is not online!", h.topic),
        });
    }
    let units: Option<Vec<_>> = if h.index < cq.max_offset() { cq.units_from(h.index, MAX_UNITS).map(Iterator::collect) } else { None };
    let Some(units) = units else {
        // Java answers SUCCESS without a body here.
        return Ok(Some(ok(request).with_remark(format!("Index {} of {}@{} is not exist!", h.index, h.queue_id, h.topic))));
    };
    body.queue_data = Some(listed(&units, h.count));
    Ok(Some(ok(request).with_body(fastjson::to_vec(&body, JsonStyle::Fastjson))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(phy: i64, tags_code: i64) -> CqUnit {
        CqUnit { phy_offset: phy, size: 120, tags_code }
    }

    #[test]
    fn units_are_listed_up_to_the_count() {
        let units = [unit(0, 1), unit(120, 2), unit(240, 3)];
        assert_eq!(listed(&units, 2).len(), 2);
        assert_eq!(listed(&units, 10).len(), 3);
        assert!(listed(&units, -1).is_empty());
    }

    #[test]
    fn the_body_uses_javas_field_names() {
        let body = QueryConsumeQueueResponseBody {
            filter_data: None,
            max_queue_index: 3,
            min_queue_index: 0,
            queue_data: Some(listed(&[unit(240, 97)], 1)),
            subscription_data: None,
        };
        assert_eq!(
            fastjson::to_string(&body, JsonStyle::Fastjson),
            r#"{"maxQueueIndex":3,"minQueueIndex":0,"queueData":[{"eval":false,"physicOffset":240,"physicSize":120,"tagsCode":97}]}"#
        );
    }

    #[test]
    fn an_extended_address_is_reported_as_java_reports_it() {
        let data = ConsumeQueueData::of(&unit(0, i32::MIN as i64 - 5));
        assert_eq!(data.msg.as_deref(), Some("Cq extend not exist!addr: -2147483653"));
        assert_eq!(ConsumeQueueData::of(&unit(0, i32::MIN as i64)).msg, None);
    }
}
