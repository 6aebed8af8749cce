//! `RegisterBrokerBody`, the body of REGISTER_BROKER, in its JSON and its compressed form.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use serde::de::{Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::topic::{DataVersion, TopicConfig, TopicConfigSerializeWrapper};
use crate::fastjson::{self, JsonStyle};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterBrokerBody {
    #[serde(default)]
    pub filter_server_list: Vec<String>,
    #[serde(default)]
    pub topic_config_serialize_wrapper: TopicConfigSerializeWrapper,
}

#[derive(Debug, thiserror::Error)]
pub enum RegisterBodyError {
    #[error("register body is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("compressed register body cannot be inflated: {0}")]
    Inflate(std::io::Error),
    #[error("compressed register body is malformed: {0}")]
    Malformed(&'static str),
    #[error("compressed register body inflates past {max_bytes} bytes")]
    TooLarge { max_bytes: u64 },
    #[error("register body holds {topics} topics, more than {max} (a name server bound of ours)")]
    TooManyTopics { topics: usize, max: usize },
}

/// A compressed body inflates to at most this much; larger is refused (a zip bomb otherwise). A
/// broker of [`MAX_REGISTERED_TOPICS`] topics with long names inflates to about 35 MiB.
pub const MAX_INFLATED_BYTES: u64 = 48 * 1024 * 1024;
/// Topics one registration may hold (Java has no bound). Refused past it: the name server's
/// route table keeps every one, at a few hundred bytes each.
pub const MAX_REGISTERED_TOPICS: usize = 200_000;
/// One item of the compressed layout (the data version, a topic's text, the filter list).
const MAX_ITEM_BYTES: usize = 1 << 20;

impl RegisterBrokerBody {
    /// Decodes a body, with at most [`MAX_REGISTERED_TOPICS`] topics (and, compressed, at most
    /// [`MAX_INFLATED_BYTES`] inflated): past either it stops there, before holding the rest.
    pub fn decode(body: &[u8], compressed: bool) -> Result<RegisterBrokerBody, RegisterBodyError> {
        if compressed {
            decode_compressed(body)
        } else {
            let bounded: BoundedBody = fastjson::from_slice(body).map_err(|e| match too_many_topics(&e) {
                Some(topics) => RegisterBodyError::TooManyTopics { topics, max: MAX_REGISTERED_TOPICS },
                None => RegisterBodyError::Json(e),
            })?;
            Ok(RegisterBrokerBody {
                filter_server_list: bounded.filter_server_list,
                topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
                    data_version: bounded.topic_config_serialize_wrapper.data_version,
                    topic_config_table: bounded.topic_config_serialize_wrapper.topic_config_table,
                },
            })
        }
    }

    pub fn encode_json(&self) -> Vec<u8> {
        fastjson::to_vec(self, JsonStyle::Fastjson)
    }

    /// The compressed layout of a 4.9 broker (no 5.x mapping section).
    pub fn encode_compressed(&self) -> Vec<u8> {
        fn put_sized(raw: &mut Vec<u8>, bytes: &[u8]) {
            raw.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
            raw.extend_from_slice(bytes);
        }
        let wrapper = &self.topic_config_serialize_wrapper;
        let mut raw = Vec::new();
        put_sized(&mut raw, &fastjson::to_vec(&wrapper.data_version, JsonStyle::Fastjson));
        raw.extend_from_slice(&(wrapper.topic_config_table.len() as i32).to_be_bytes());
        for tc in wrapper.topic_config_table.values() {
            put_sized(&mut raw, tc.encode_text().as_bytes());
        }
        put_sized(&mut raw, &fastjson::to_vec(&self.filter_server_list, JsonStyle::Fastjson));
        let mut encoder = ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        // Writing into a Vec cannot fail.
        let _ = encoder.write_all(&raw);
        encoder.finish().unwrap_or_default()
    }
}

/// [`RegisterBrokerBody`] as JSON, its topic table read up to [`MAX_REGISTERED_TOPICS`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BoundedBody {
    #[serde(default)]
    filter_server_list: Vec<String>,
    #[serde(default)]
    topic_config_serialize_wrapper: BoundedWrapper,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BoundedWrapper {
    #[serde(default)]
    data_version: DataVersion,
    #[serde(default, deserialize_with = "bounded_topic_table")]
    topic_config_table: BTreeMap<String, TopicConfig>,
}

const TOO_MANY_TOPICS: &str = "topics past the bound: ";

fn bounded_topic_table<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, TopicConfig>, D::Error> {
    struct Table;
    impl<'de> Visitor<'de> for Table {
        type Value = BTreeMap<String, TopicConfig>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map of topic configs")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut table = BTreeMap::new();
            while let Some((name, config)) = map.next_entry::<String, TopicConfig>()? {
                if table.len() >= MAX_REGISTERED_TOPICS {
                    return Err(A::Error::custom(format!("{TOO_MANY_TOPICS}{}", table.len() + 1)));
                }
                table.insert(name, config);
            }
            Ok(table)
        }
    }
    d.deserialize_map(Table)
}

/// The count in a [`bounded_topic_table`] refusal.
fn too_many_topics(e: &serde_json::Error) -> Option<usize> {
    let text = e.to_string();
    let at = text.find(TOO_MANY_TOPICS)? + TOO_MANY_TOPICS.len();
    text[at..].split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// Reads the compressed layout as it inflates, each item's length checked against what may still
/// inflate and the topic count against [`MAX_REGISTERED_TOPICS`] before anything is held for it.
fn decode_compressed(body: &[u8]) -> Result<RegisterBrokerBody, RegisterBodyError> {
    let mut r = Inflating { inner: ZlibDecoder::new(body).take(MAX_INFLATED_BYTES), item: Vec::new() };
    let data_version: DataVersion = fastjson::from_slice(r.sized("dataVersion")?)?;
    let count = r.i32("topic count")?;
    let count = usize::try_from(count).map_err(|_| RegisterBodyError::Malformed("negative topic count"))?;
    if count > MAX_REGISTERED_TOPICS {
        return Err(RegisterBodyError::TooManyTopics { topics: count, max: MAX_REGISTERED_TOPICS });
    }
    let mut wrapper = TopicConfigSerializeWrapper { data_version, ..Default::default() };
    for _ in 0..count {
        let text = std::str::from_utf8(r.sized("topic config")?).map_err(|_| RegisterBodyError::Malformed("topic config is not UTF-8"))?;
        let tc = TopicConfig::decode_text(text).ok_or(RegisterBodyError::Malformed("topic config text"))?;
        wrapper.topic_config_table.insert(tc.topic_name.clone(), tc);
    }
    let filter_server_list = fastjson::from_slice(r.sized("filter server list")?)?;
    // A 5.x broker (version >= 413) appends static-topic mappings; we do not serve static topics.
    Ok(RegisterBrokerBody { filter_server_list, topic_config_serialize_wrapper: wrapper })
}

/// The inflating body, read item by item.
struct Inflating<R> {
    inner: std::io::Take<R>,
    /// The current item's bytes (reused).
    item: Vec<u8>,
}

impl<R: Read> Inflating<R> {
    fn exact(&mut self, len: usize, what: &'static str) -> Result<(), RegisterBodyError> {
        if len as u64 > self.inner.limit() {
            return Err(RegisterBodyError::TooLarge { max_bytes: MAX_INFLATED_BYTES });
        }
        self.item.clear();
        self.item.resize(len, 0);
        self.inner.read_exact(&mut self.item).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => RegisterBodyError::Malformed(what),
            _ => RegisterBodyError::Inflate(e),
        })
    }

    fn i32(&mut self, what: &'static str) -> Result<i32, RegisterBodyError> {
        self.exact(4, what)?;
        Ok(i32::from_be_bytes([self.item[0], self.item[1], self.item[2], self.item[3]]))
    }

    fn sized(&mut self, what: &'static str) -> Result<&[u8], RegisterBodyError> {
        let len = usize::try_from(self.i32(what)?).map_err(|_| RegisterBodyError::Malformed(what))?;
        if len > MAX_ITEM_BYTES {
            return Err(RegisterBodyError::Malformed(what));
        }
        self.exact(len, what)?;
        Ok(&self.item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body() -> RegisterBrokerBody {
        let mut wrapper =
            TopicConfigSerializeWrapper { data_version: DataVersion { counter: 3, state_version: 0, timestamp: 1_700_000_000_000 }, ..Default::default() };
        for name in ["TopicTest", "TBW102"] {
            wrapper.topic_config_table.insert(name.to_owned(), TopicConfig::new(name));
        }
        RegisterBrokerBody { filter_server_list: vec![], topic_config_serialize_wrapper: wrapper }
    }

    #[test]
    fn json_and_compressed_forms_round_trip() {
        let b = body();
        assert_eq!(RegisterBrokerBody::decode(&b.encode_json(), false).unwrap(), b);
        assert_eq!(RegisterBrokerBody::decode(&b.encode_compressed(), true).unwrap(), b);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for garbage in [&b"\x00\x01garbage"[..], b"{\"topicConfigSerializeWrapper\":", b""] {
            assert!(RegisterBrokerBody::decode(garbage, true).is_err());
            assert!(RegisterBrokerBody::decode(garbage, false).is_err());
        }
    }

    fn compress(raw: &[u8]) -> Vec<u8> {
        let mut z = ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(raw).unwrap();
        z.finish().unwrap()
    }

    #[test]
    fn a_compressed_body_is_refused_at_its_topic_count_or_an_oversized_item_before_the_rest_inflates() {
        let mut raw = Vec::new();
        raw.extend_from_slice(&2i32.to_be_bytes());
        raw.extend_from_slice(b"{}");
        raw.extend_from_slice(&3_100_000i32.to_be_bytes());
        assert!(matches!(
            RegisterBrokerBody::decode(&compress(&raw), true),
            Err(RegisterBodyError::TooManyTopics { topics: 3_100_000, max: MAX_REGISTERED_TOPICS })
        ));
        // An item that says it is larger than any item may be, and one longer than what is left.
        let mut raw = Vec::new();
        raw.extend_from_slice(&(64i32 << 20).to_be_bytes());
        assert!(matches!(RegisterBrokerBody::decode(&compress(&raw), true), Err(RegisterBodyError::Malformed("dataVersion"))));
        let mut raw = Vec::new();
        raw.extend_from_slice(&1000i32.to_be_bytes());
        raw.extend_from_slice(b"{}");
        assert!(matches!(RegisterBrokerBody::decode(&compress(&raw), true), Err(RegisterBodyError::Malformed("dataVersion"))));
    }
}
