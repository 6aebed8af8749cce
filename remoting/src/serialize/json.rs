//! The JSON header, written exactly as Java's fastjson writes `RemotingCommand`: compact, keys in
//! alphabetical order, null members omitted, every `extFields` value a string.

use std::fmt::Write;

use bytes::{BufMut, BytesMut};
use serde::Deserialize;
use serde_json::Value;

use super::HeaderDecodeError;
use crate::command::{ExtFields, LanguageCode, RemotingCommand};
use crate::fastjson::escapes_as_unicode;

pub fn encode(cmd: &RemotingCommand, out: &mut BytesMut) {
    let mut s = String::with_capacity(160);
    // Numbers are written in place (fmt::Write into a String cannot fail).
    let _ = write!(s, "{{\"code\":{}", cmd.code);
    if let Some(ext) = &cmd.ext_fields {
        s.push_str(",\"extFields\":{");
        for (i, (k, v)) in ext.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            write_json_string(&mut s, k);
            s.push(':');
            write_json_string(&mut s, v);
        }
        s.push('}');
    }
    let _ = write!(s, ",\"flag\":{}", cmd.flag);
    s.push_str(",\"language\":\"");
    s.push_str(cmd.language.name());
    let _ = write!(s, "\",\"opaque\":{}", cmd.opaque);
    if let Some(remark) = &cmd.remark {
        s.push_str(",\"remark\":");
        write_json_string(&mut s, remark);
    }
    s.push_str(",\"serializeTypeCurrentRPC\":\"");
    s.push_str(cmd.serialize_type.java_name());
    let _ = write!(s, "\",\"version\":{}", cmd.version);
    s.push('}');
    out.put_slice(s.as_bytes());
}

/// Writes `value` as a JSON string the way fastjson does by default: `"` and `\` escaped, the
/// usual short escapes for \b \f \n \r \t, other control characters and those of
/// [`escapes_as_unicode`] as `\uXXXX` with upper-case hex, everything else (non-ASCII included) raw.
pub fn write_json_string(out: &mut String, value: &str) {
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || escapes_as_unicode(c) => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The fields a JSON header may hold. Unknown keys are ignored and missing ones keep Java's
/// defaults, as fastjson reads them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JsonHeader {
    #[serde(default, deserialize_with = "lenient_i32")]
    code: i32,
    #[serde(default)]
    language: Option<Value>,
    #[serde(default, deserialize_with = "lenient_i32")]
    version: i32,
    #[serde(default, deserialize_with = "lenient_i32")]
    opaque: i32,
    #[serde(default, deserialize_with = "lenient_i32")]
    flag: i32,
    #[serde(default)]
    remark: Option<String>,
    #[serde(default, deserialize_with = "ext_fields")]
    ext_fields: Option<ExtFields>,
}

/// `extFields` read straight into the command's map, not into a JSON map first: each value as
/// fastjson's text of it, null values dropped (a later null drops an earlier value, as the last
/// of a repeated key wins).
fn ext_fields<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<ExtFields>, D::Error> {
    struct Fields;
    impl<'de> serde::de::Visitor<'de> for Fields {
        type Value = Option<ExtFields>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object of ext fields")
        }

        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut ext = ExtFields::default();
            while let Some((key, value)) = map.next_entry::<String, Value>()? {
                match ext_text(value) {
                    Some(text) => ext.insert(key, text),
                    None => ext.shift_remove(&key),
                };
            }
            Ok(Some(ext))
        }
    }
    d.deserialize_option(Fields)
}

/// fastjson reads an int member from null (the default), a decimal (truncated) or a numeric
/// string; anything else is an error.
fn lenient_i32<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    use serde::de::Error;
    let v = Value::deserialize(d)?;
    let n = match &v {
        Value::Null => return Ok(0),
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    n.and_then(|n| i32::try_from(n).ok()).ok_or_else(|| D::Error::custom(format!("not an int: {v}")))
}

/// Java decodes the header bytes with `new String(bytes, UTF_8)` before parsing, so invalid UTF-8
/// becomes U+FFFD and the request is still answered. Valid input is borrowed, not copied.
pub fn decode(header: &[u8]) -> Result<RemotingCommand, HeaderDecodeError> {
    let h: JsonHeader = serde_json::from_str(&String::from_utf8_lossy(header))?;
    Ok(RemotingCommand {
        code: h.code,
        language: h.language.as_ref().map(language_of).unwrap_or_default(),
        version: h.version,
        opaque: h.opaque,
        flag: h.flag,
        remark: h.remark,
        ext_fields: h.ext_fields,
        body: None,
        body_tail: Vec::new(),
        serialize_type: Default::default(),
    })
}

/// Java accepts the language as its name or its ordinal; an unknown one is kept as OTHER.
fn language_of(v: &Value) -> LanguageCode {
    match v {
        Value::String(name) => LanguageCode::from_name(name).unwrap_or(LanguageCode::OTHER),
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| u8::try_from(n).ok())
            .map(LanguageCode)
            .filter(|code| LanguageCode::from_name(code.name()) == Some(*code))
            .unwrap_or(LanguageCode::OTHER),
        _ => LanguageCode::OTHER,
    }
}

/// fastjson turns non-string ext values into their text; null values are dropped.
fn ext_text(v: Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_fastjson() {
        let mut s = String::new();
        write_json_string(&mut s, "a\"b\\c\u{1}\u{2}\n\u{7f}é");
        assert_eq!(s, r#""a\"b\\c\u0001\u0002\n\u007Fé""#);
    }

    #[test]
    fn reads_int_members_as_leniently_as_fastjson() {
        let cmd = decode(br#"{"code":1.0,"opaque":null,"flag":"1","version":"409","language":200}"#).unwrap();
        assert_eq!((cmd.code, cmd.opaque, cmd.flag, cmd.version, cmd.language), (1, 0, 1, 409, LanguageCode::OTHER));
        assert!(decode(br#"{"code":[1]}"#).is_err());
    }

    #[test]
    fn invalid_utf8_in_a_string_value_reads_as_a_replacement_character() {
        let cmd = decode(b"{\"code\":34,\"opaque\":5,\"remark\":\"r\xc3\",\"extFields\":{\"k\":\"a\xffb\"}}").unwrap();
        assert_eq!(cmd.ext("k"), Some("a\u{FFFD}b"));
        assert_eq!(cmd.remark.as_deref(), Some("r\u{FFFD}"));
    }

    #[test]
    fn reads_numeric_language_and_non_string_ext_values() {
        let cmd = decode(br#"{"code":34,"language":9,"opaque":5,"extFields":{"a":1,"b":true,"c":null}}"#).unwrap();
        assert_eq!(cmd.language, LanguageCode::GO);
        let ext = cmd.ext_fields.unwrap();
        assert_eq!(ext.get("a"), Some("1"));
        assert_eq!(ext.get("b"), Some("true"));
        assert!(!ext.contains_key("c"));
    }

    #[test]
    fn ext_fields_keep_their_order_and_the_last_of_a_repeated_key() {
        let cmd = decode(br#"{"code":34,"extFields":{"z":"1","a":"2","z":"3","n":null,"b":null,"b":"4"}}"#).unwrap();
        let ext: Vec<(String, String)> = cmd.ext_fields.unwrap().into_iter().collect();
        let pairs = |v: &[(&str, &str)]| v.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
        assert_eq!(ext, pairs(&[("z", "3"), ("a", "2"), ("b", "4")]));
        assert_eq!(decode(br#"{"code":34,"extFields":null}"#).unwrap().ext_fields, None);
        assert_eq!(decode(br#"{"code":34,"extFields":{}}"#).unwrap().ext_fields, Some(ExtFields::default()));
        assert!(decode(br#"{"code":34,"extFields":"x"}"#).is_err());
    }
}
