//! Small bodies: `TopicList`, `KVTable`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicList {
    /// Only GET_SYSTEM_TOPIC_LIST_FROM_NS fills it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_addr: Option<String>,
    #[serde(default)]
    pub topic_list: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvTable {
    #[serde(default)]
    pub table: BTreeMap<String, String>,
}
