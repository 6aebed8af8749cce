//! `RegisterBrokerBody`, the body of REGISTER_BROKER, in its JSON and its compressed form.

use std::io::{Read, Write};

use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use serde::{Deserialize, Serialize};

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
}

/// A compressed body inflates to at most this much; larger is refused (a zip bomb otherwise).
const MAX_INFLATED_BYTES: u64 = 64 * 1024 * 1024;

impl RegisterBrokerBody {
    pub fn decode(body: &[u8], compressed: bool) -> Result<RegisterBrokerBody, RegisterBodyError> {
        if compressed {
            decode_compressed(body)
        } else {
            Ok(fastjson::from_slice(body)?)
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

fn decode_compressed(body: &[u8]) -> Result<RegisterBrokerBody, RegisterBodyError> {
    let mut raw = Vec::new();
    ZlibDecoder::new(body).take(MAX_INFLATED_BYTES + 1).read_to_end(&mut raw).map_err(RegisterBodyError::Inflate)?;
    if raw.len() as u64 > MAX_INFLATED_BYTES {
        return Err(RegisterBodyError::Malformed("inflates beyond 64 MiB"));
    }
    let mut r = Reader { buf: &raw };
    let data_version: DataVersion = fastjson::from_slice(r.sized("dataVersion")?)?;
    let count = r.i32("topic count")?;
    if count < 0 {
        return Err(RegisterBodyError::Malformed("negative topic count"));
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

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn i32(&mut self, what: &'static str) -> Result<i32, RegisterBodyError> {
        if self.buf.len() < 4 {
            return Err(RegisterBodyError::Malformed(what));
        }
        let (head, rest) = self.buf.split_at(4);
        self.buf = rest;
        Ok(i32::from_be_bytes([head[0], head[1], head[2], head[3]]))
    }

    fn sized(&mut self, what: &'static str) -> Result<&'a [u8], RegisterBodyError> {
        let len = usize::try_from(self.i32(what)?).map_err(|_| RegisterBodyError::Malformed(what))?;
        if self.buf.len() < len {
            return Err(RegisterBodyError::Malformed(what));
        }
        let (head, rest) = self.buf.split_at(len);
        self.buf = rest;
        Ok(head)
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
}
