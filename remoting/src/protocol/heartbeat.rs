//! The HEART_BEAT body and its parts, as Java and Go write them.

use serde::{Deserialize, Deserializer, Serialize};

/// `HeartbeatData`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HeartbeatData {
    #[serde(rename = "clientID", default)]
    pub client_id: String,
    #[serde(rename = "consumerDataSet", default)]
    pub consumer_data_set: Vec<ConsumerData>,
    #[serde(rename = "producerDataSet", default)]
    pub producer_data_set: Vec<ProducerData>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerData {
    pub group_name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerData {
    #[serde(default)]
    pub consume_from_where: String,
    #[serde(default)]
    pub consume_type: String,
    pub group_name: String,
    #[serde(default)]
    pub message_model: String,
    #[serde(default)]
    pub subscription_data_set: Vec<SubscriptionData>,
    #[serde(default)]
    pub unit_mode: bool,
}

/// `SubscriptionData`. Go sends `codeSet` as strings and `subVersion` in nanoseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionData {
    #[serde(default)]
    pub class_filter_mode: bool,
    #[serde(default, deserialize_with = "ints_or_numeric_strings")]
    pub code_set: Vec<i32>,
    #[serde(default = "default_expression_type")]
    pub expression_type: String,
    #[serde(default)]
    pub sub_string: String,
    #[serde(default)]
    pub sub_version: i64,
    #[serde(default)]
    pub tags_set: Vec<String>,
    pub topic: String,
}

fn default_expression_type() -> String {
    "TAG".to_owned()
}

fn ints_or_numeric_strings<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<i32>, D::Error> {
    use serde::de::Error;
    let values: Vec<serde_json::Value> = Option::deserialize(d)?.unwrap_or_default();
    values
        .iter()
        .map(|v| match v {
            serde_json::Value::Number(n) => n.as_i64().and_then(|n| i32::try_from(n).ok()),
            serde_json::Value::String(s) => s.trim().parse().ok(),
            _ => None,
        })
        .map(|n| n.ok_or_else(|| D::Error::custom(format!("codeSet holds a non-number: {values:?}"))))
        .collect()
}

impl SubscriptionData {
    /// Whether a consume-queue tags code passes this subscription (`*` or empty: everything).
    pub fn matches_tags_code(&self, tags_code: i64) -> bool {
        if self.sub_string.is_empty() || self.sub_string == "*" {
            return true;
        }
        self.code_set.iter().any(|c| *c as i64 == tags_code)
    }

    /// Builds a tag subscription the way the Java client does (`TagA || TagB`).
    pub fn from_expression(topic: &str, expression: &str, hash: impl Fn(&str) -> i32) -> SubscriptionData {
        let expression = expression.trim();
        let mut s = SubscriptionData {
            topic: topic.to_owned(),
            sub_string: if expression.is_empty() { "*".to_owned() } else { expression.to_owned() },
            expression_type: default_expression_type(),
            ..Default::default()
        };
        if s.sub_string != "*" {
            for tag in s.sub_string.split("||").map(str::trim).filter(|t| !t.is_empty()) {
                s.tags_set.push(tag.to_owned());
                s.code_set.push(hash(tag));
            }
        }
        s
    }
}

/// `GetConsumerListByGroupResponseBody`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerIdList {
    pub consumer_id_list: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_and_go_heartbeats_both_parse() {
        let java = r#"{"clientID":"10.0.0.7@4242#1187343240139","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"cg","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[2598919,2598920],"expressionType":"TAG","subString":"TagA || TagB","subVersion":1700000000123,"tagsSet":["TagA","TagB"],"topic":"TopicTest"}],"unitMode":false}],"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}]}"#;
        let h: HeartbeatData = crate::fastjson::from_slice(java.as_bytes()).unwrap();
        assert_eq!(h.consumer_data_set[0].subscription_data_set[0].code_set, vec![2598919, 2598920]);
        let go = r#"{"clientID":"192.168.1.2@1234","producerDataSet":[],"consumerDataSet":[{"groupName":"g","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"classFilterMode":false,"topic":"T","subString":"TagA","tagsSet":["TagA"],"codeSet":["2598919"],"subVersion":1700000000123456789,"expressionType":"TAG"}],"unitMode":false}]}"#;
        let h: HeartbeatData = crate::fastjson::from_slice(go.as_bytes()).unwrap();
        let sub = &h.consumer_data_set[0].subscription_data_set[0];
        assert!(sub.matches_tags_code(2598919) && !sub.matches_tags_code(1));
    }
}
