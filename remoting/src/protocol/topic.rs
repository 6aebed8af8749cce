//! `TopicConfig`, `DataVersion` and `TopicConfigSerializeWrapper`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Java `DataVersion`: a broker's config version. 4.9 has no `stateVersion`; it defaults to 0.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataVersion {
    #[serde(default)]
    pub counter: i64,
    #[serde(default)]
    pub state_version: i64,
    #[serde(default)]
    pub timestamp: i64,
}

fn default_queue_nums() -> i32 {
    16
}
fn default_perm() -> i32 {
    super::perm::READ | super::perm::WRITE
}
fn default_filter_type() -> String {
    "SINGLE_TAG".to_owned()
}

/// Java `TopicConfig`, with Java's defaults for missing members.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfig {
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    #[serde(default)]
    pub order: bool,
    #[serde(default = "default_perm")]
    pub perm: i32,
    #[serde(default = "default_queue_nums")]
    pub read_queue_nums: i32,
    #[serde(default = "default_filter_type")]
    pub topic_filter_type: String,
    #[serde(default)]
    pub topic_name: String,
    #[serde(default)]
    pub topic_sys_flag: i32,
    #[serde(default = "default_queue_nums")]
    pub write_queue_nums: i32,
}

impl TopicConfig {
    pub fn new(topic_name: &str) -> Self {
        TopicConfig {
            attributes: BTreeMap::new(),
            order: false,
            perm: default_perm(),
            read_queue_nums: default_queue_nums(),
            topic_filter_type: default_filter_type(),
            topic_name: topic_name.to_owned(),
            topic_sys_flag: 0,
            write_queue_nums: default_queue_nums(),
        }
    }

    /// The space-separated text form of the compressed register body:
    /// `topicName readQueueNums writeQueueNums perm topicFilterType [attributesJson]`.
    pub fn decode_text(text: &str) -> Option<TopicConfig> {
        let mut parts = text.splitn(6, ' ');
        let mut tc = TopicConfig::new(parts.next()?);
        tc.read_queue_nums = parts.next()?.parse().ok()?;
        tc.write_queue_nums = parts.next()?.parse().ok()?;
        tc.perm = parts.next()?.parse().ok()?;
        tc.topic_filter_type = parts.next()?.to_owned();
        if let Some(attributes) = parts.next() {
            tc.attributes = serde_json::from_str(attributes).ok()?;
        }
        Some(tc)
    }

    pub fn encode_text(&self) -> String {
        format!(
            "{} {} {} {} {} {}",
            self.topic_name,
            self.read_queue_nums,
            self.write_queue_nums,
            self.perm,
            self.topic_filter_type,
            serde_json::to_string(&self.attributes).unwrap_or_else(|_| "{}".to_owned())
        )
    }
}

/// Java `TopicConfigSerializeWrapper` (the 5.x mapping members are accepted and ignored).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfigSerializeWrapper {
    #[serde(default)]
    pub data_version: DataVersion,
    #[serde(default)]
    pub topic_config_table: BTreeMap<String, TopicConfig>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips_with_and_without_attributes() {
        let tc = TopicConfig::decode_text("T 4 8 6 SINGLE_TAG").unwrap();
        assert_eq!((tc.read_queue_nums, tc.write_queue_nums, tc.perm), (4, 8, 6));
        let with_attrs = TopicConfig::decode_text("T 4 4 7 MULTI_TAG {\"+a\":\"b c\"}").unwrap();
        assert_eq!(with_attrs.attributes["+a"], "b c");
        assert_eq!(TopicConfig::decode_text(&with_attrs.encode_text()).unwrap(), with_attrs);
        assert!(TopicConfig::decode_text("T x 4 6 SINGLE_TAG").is_none());
    }

    #[test]
    fn missing_members_take_java_defaults() {
        let tc: TopicConfig = serde_json::from_str(r#"{"topicName":"T"}"#).unwrap();
        assert_eq!(tc, TopicConfig::new("T"));
    }
}
