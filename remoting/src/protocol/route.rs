//! Route data: `QueueData`, `BrokerData`, `TopicRouteData`, `ClusterInfo`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::fastjson::JsonStyle;

/// Requesters from this version on get standard JSON routes (Java `V4_9_4`).
const VERSION_4_9_4: i32 = 401;

/// How a GET_ROUTEINFO_BY_TOPIC answer is written for a request of `version`: newer clients (or
/// those asking, `acceptStandardJsonOnly`) get standard JSON, older ones (and Go) fastjson's
/// default, as Java's name server and proxy answer.
pub fn route_json_style(version: i32, accept_standard_json_only: Option<bool>) -> JsonStyle {
    if version >= VERSION_4_9_4 || accept_standard_json_only.unwrap_or(false) {
        JsonStyle::Standard
    } else {
        JsonStyle::Fastjson
    }
}

/// One broker name's queues of a topic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueData {
    pub broker_name: String,
    pub perm: i32,
    pub read_queue_nums: i32,
    #[serde(default)]
    pub topic_sys_flag: i32,
    pub write_queue_nums: i32,
}

/// The addresses of one broker name, by broker id (0 = master). `brokerAddrs` is a
/// `HashMap<Long, String>` in Java, hence the bare integer keys of fastjson's default output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerData {
    #[serde(default)]
    pub broker_addrs: BTreeMap<i64, String>,
    pub broker_name: String,
    #[serde(default)]
    pub cluster: String,
    #[serde(default)]
    pub enable_acting_master: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_name: Option<String>,
}

/// The answer to GET_ROUTEINFO_BY_TOPIC.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicRouteData {
    #[serde(default)]
    pub broker_datas: Vec<BrokerData>,
    #[serde(default)]
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_topic_conf: Option<String>,
    #[serde(default)]
    pub queue_datas: Vec<QueueData>,
}

/// The answer to GET_BROKER_CLUSTER_INFO.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInfo {
    #[serde(default)]
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    #[serde(default)]
    pub cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fastjson::{self, JsonStyle};

    fn route() -> TopicRouteData {
        TopicRouteData {
            broker_datas: vec![BrokerData {
                broker_addrs: [(0, "192.168.0.1:10911".to_owned())].into(),
                broker_name: "broker-a".into(),
                cluster: "DefaultCluster".into(),
                enable_acting_master: false,
                zone_name: None,
            }],
            filter_server_table: BTreeMap::new(),
            order_topic_conf: None,
            queue_datas: vec![QueueData { broker_name: "broker-a".into(), perm: 6, read_queue_nums: 4, topic_sys_flag: 0, write_queue_nums: 4 }],
        }
    }

    #[test]
    fn route_matches_the_java_name_servers_bytes_in_both_styles() {
        let standard = r#"{"brokerDatas":[{"brokerAddrs":{"0":"192.168.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#;
        assert_eq!(fastjson::to_string(&route(), JsonStyle::Standard), standard);
        assert_eq!(fastjson::to_string(&route(), JsonStyle::Fastjson), standard.replace(r#"{"0":"#, "{0:"));
        assert_eq!(fastjson::from_slice::<TopicRouteData>(standard.replace(r#"{"0":"#, "{0:").as_bytes()).unwrap(), route());
    }
}
