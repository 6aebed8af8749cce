//! JSON bodies as Java's fastjson writes and reads them.
//!
//! Writing: bodies are plain serde types (fields declared in alphabetical order, as fastjson sorts
//! them). What serde_json cannot do alone is fastjson's handling of maps with integer keys: the
//! default output writes them bare (`{0:"a"}`, not RFC 8259 JSON), the "standard" output the name
//! server sends to newer clients quotes them and escapes non-ASCII. [`FastjsonFormatter`] does
//! both, so a `BTreeMap<i64, String>` serializes exactly as Java's `HashMap<Long, String>` would.
//! It also writes fastjson's `PrettyFormat` ([`JsonStyle::FastjsonPretty`]), the layout of the
//! broker's `config/*.json` files.
//!
//! Reading: [`from_slice`] first rewrites bare keys (numbers or whole JSON objects, as Java writes
//! `Map<MessageQueue, _>`) into quoted strings, then lets serde_json do the rest; integer map keys
//! then deserialize from their quoted form as usual.

use std::borrow::Cow;
use std::io;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::ser::{CharEscape, Formatter};

/// Which of fastjson's two outputs to produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonStyle {
    /// fastjson's default: integer map keys bare, non-ASCII raw.
    Fastjson,
    /// BrowserCompatible + QuoteFieldNames: keys quoted, non-ASCII as `\uXXXX`, longs beyond
    /// ±2^53 as strings. What the Java name server sends to requesters of version ≥ 401.
    Standard,
    /// fastjson's default plus `PrettyFormat`: what Java's `ConfigManager.persist` writes
    /// (`topics.json`, `consumerOffset.json`, ...). Checked byte for byte against fastjson 1.2.69
    /// (RocketMQ 4.9.7) and 1.2.83 (5.3.3):
    /// - an object with string keys puts each key on its own line, indented by one tab per level,
    ///   with no space around `:`; its `}` goes on a new line at the parent's indent;
    /// - integer keys stay bare and inline (`{0:12,1:7` and then the newline before `}`);
    /// - an empty object is `{}`;
    /// - arrays (fastjson serializes Java `Set`s and `long[]` this way) stay on one line,
    ///   `[a,b]`, and add no indent: an object inside one indents as the member's value would;
    /// - no newline at the end.
    FastjsonPretty,
}

/// Serializes `value` in the given style.
pub fn to_vec<T: Serialize + ?Sized>(value: &T, style: JsonStyle) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, FastjsonFormatter::new(style));
    // Serializing plain data into a Vec cannot fail: our body types have string or integer keys.
    if value.serialize(&mut ser).is_err() {
        out.clear();
    }
    out
}

pub fn to_string<T: Serialize + ?Sized>(value: &T, style: JsonStyle) -> String {
    // The formatter only writes UTF-8 (escapes are ASCII, fragments come from &str).
    String::from_utf8(to_vec(value, style)).unwrap_or_default()
}

/// Parses a body written by Java (or anyone else), accepting fastjson's bare and object map keys.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, serde_json::Error> {
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        // Let serde_json produce the error message for non-UTF-8 input.
        Err(_) => return serde_json::from_slice(bytes),
    };
    serde_json::from_str(&quote_bare_keys(text))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyState {
    NotInKey,
    /// A key has started; its opening quote is held back until we know whether it is an integer.
    Pending,
    Quoted,
    Bare,
}

pub struct FastjsonFormatter {
    style: JsonStyle,
    key: KeyState,
    /// Pretty style only: the nesting depth of objects (arrays add none) ...
    indent: usize,
    /// ... and whether the innermost open object has an entry yet.
    has_value: bool,
}

impl FastjsonFormatter {
    pub fn new(style: JsonStyle) -> Self {
        FastjsonFormatter { style, key: KeyState::NotInKey, indent: 0, has_value: false }
    }

    fn pretty(&self) -> bool {
        self.style == JsonStyle::FastjsonPretty
    }

    fn bare_integer_keys(&self) -> bool {
        matches!(self.style, JsonStyle::Fastjson | JsonStyle::FastjsonPretty)
    }

    /// The pretty style's line break and tabs; written before a string key and before the `}` of
    /// an object with entries.
    fn new_line<W: ?Sized + io::Write>(&self, w: &mut W) -> io::Result<()> {
        if !self.pretty() {
            return Ok(());
        }
        w.write_all(b"\n")?;
        for _ in 0..self.indent {
            w.write_all(b"\t")?;
        }
        Ok(())
    }

    fn open_pending_quote<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.key == KeyState::Pending {
            self.key = KeyState::Quoted;
            self.new_line(w)?;
            w.write_all(b"\"")?;
        }
        Ok(())
    }

    fn write_integer<W: ?Sized + io::Write>(&mut self, w: &mut W, text: &str, fits_double: bool) -> io::Result<()> {
        if self.key == KeyState::Pending && self.bare_integer_keys() {
            self.key = KeyState::Bare;
            return w.write_all(text.as_bytes());
        }
        self.open_pending_quote(w)?;
        if self.key == KeyState::NotInKey && self.style == JsonStyle::Standard && !fits_double {
            return write!(w, "\"{text}\"");
        }
        w.write_all(text.as_bytes())
    }
}

/// Characters fastjson (1.2.69 and 1.2.83, checked by running them) writes as `\uXXXX` although
/// they are printable to JSON: DEL, the C1 controls and the two Unicode line separators.
pub fn escapes_as_unicode(c: char) -> bool {
    matches!(c, '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}')
}

const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

impl Formatter for FastjsonFormatter {
    fn write_i8<W: ?Sized + io::Write>(&mut self, w: &mut W, v: i8) -> io::Result<()> {
        self.write_integer(w, &v.to_string(), true)
    }
    fn write_i16<W: ?Sized + io::Write>(&mut self, w: &mut W, v: i16) -> io::Result<()> {
        self.write_integer(w, &v.to_string(), true)
    }
    fn write_i32<W: ?Sized + io::Write>(&mut self, w: &mut W, v: i32) -> io::Result<()> {
        self.write_integer(w, &v.to_string(), true)
    }
    fn write_i64<W: ?Sized + io::Write>(&mut self, w: &mut W, v: i64) -> io::Result<()> {
        self.write_integer(w, &v.to_string(), (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&v))
    }
    fn write_u8<W: ?Sized + io::Write>(&mut self, w: &mut W, v: u8) -> io::Result<()> {
        self.write_integer(w, &v.to_string(), true)
    }
    fn write_u16<W: ?Sized + io::Write>(&mut self, w: &mut W, v: u16) -> io::Result<()> {
        self.write_integer(w, &v.to_string(), true)
    }
    fn write_u32<W: ?Sized + io::Write>(&mut self, w: &mut W, v: u32) -> io::Result<()> {
        self.write_integer(w, &v.to_string(), true)
    }
    fn write_u64<W: ?Sized + io::Write>(&mut self, w: &mut W, v: u64) -> io::Result<()> {
        self.write_integer(w, &v.to_string(), v <= MAX_SAFE_INTEGER as u64)
    }

    fn begin_string<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.key == KeyState::Pending {
            return Ok(());
        }
        w.write_all(b"\"")
    }

    fn end_string<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        match self.key {
            KeyState::Bare => Ok(()),
            KeyState::Pending => {
                self.key = KeyState::Quoted;
                self.new_line(w)?;
                w.write_all(b"\"\"")
            }
            KeyState::Quoted | KeyState::NotInKey => w.write_all(b"\""),
        }
    }

    fn write_string_fragment<W: ?Sized + io::Write>(&mut self, w: &mut W, fragment: &str) -> io::Result<()> {
        self.open_pending_quote(w)?;
        let escape_non_ascii = self.style == JsonStyle::Standard;
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if escapes_as_unicode(c) || (escape_non_ascii && !c.is_ascii()) {
                w.write_all(&fragment.as_bytes()[start..i])?;
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(w, "\\u{:04X}", unit)?;
                }
                start = i + c.len_utf8();
            }
        }
        w.write_all(&fragment.as_bytes()[start..])
    }

    fn write_char_escape<W: ?Sized + io::Write>(&mut self, w: &mut W, escape: CharEscape) -> io::Result<()> {
        self.open_pending_quote(w)?;
        let s: Cow<'static, str> = match escape {
            CharEscape::Quote => "\\\"".into(),
            CharEscape::ReverseSolidus => "\\\\".into(),
            CharEscape::Solidus => "/".into(),
            CharEscape::Backspace => "\\b".into(),
            CharEscape::FormFeed => "\\f".into(),
            CharEscape::LineFeed => "\\n".into(),
            CharEscape::CarriageReturn => "\\r".into(),
            CharEscape::Tab => "\\t".into(),
            CharEscape::AsciiControl(byte) => format!("\\u{:04X}", byte).into(),
        };
        w.write_all(s.as_bytes())
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.pretty() {
            self.indent += 1;
            self.has_value = false;
        }
        w.write_all(b"{")
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.pretty() {
            self.indent = self.indent.saturating_sub(1);
            if self.has_value {
                self.new_line(w)?;
            }
        }
        w.write_all(b"}")
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.key = KeyState::Pending;
        if first {
            Ok(())
        } else {
            w.write_all(b",")
        }
    }

    fn end_object_key<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.key = KeyState::NotInKey;
        Ok(())
    }
}

/// Rewrites object keys that are not strings (bare numbers, `true`, nested objects or arrays)
/// into JSON strings holding their text, leaving everything else untouched.
pub fn quote_bare_keys(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut stack: Vec<u8> = Vec::new(); // b'{' or b'['
                                         // True right after `{` or an object's `,` (whitespace keeps it): the next token is a key.
    let mut expect_key = false;
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if expect_key && !matches!(b, b'"' | b'}' | b' ' | b'\t' | b'\n' | b'\r') {
            // A bare key: a number or literal runs to the ':'; an object or array key is balanced.
            let end = if b == b'{' || b == b'[' { skip_balanced(bytes, i) } else { find_colon(bytes, i) };
            let buf = out.get_or_insert_with(|| String::with_capacity(text.len() + 16));
            buf.push_str(&text[copied..i]);
            buf.push_str(&serde_json::Value::String(text[i..end].trim().to_owned()).to_string());
            copied = end;
            i = end;
            expect_key = false;
            continue;
        }
        match b {
            b'"' => {
                i = skip_string(bytes, i);
                expect_key = false;
                continue;
            }
            b'{' => {
                stack.push(b'{');
                expect_key = true;
            }
            b'[' => stack.push(b'['),
            b'}' | b']' => {
                stack.pop();
                expect_key = false;
            }
            b',' => expect_key = stack.last() == Some(&b'{'),
            _ => {}
        }
        i += 1;
    }
    match out {
        Some(mut buf) => {
            buf.push_str(&text[copied..]);
            Cow::Owned(buf)
        }
        None => Cow::Borrowed(text),
    }
}

/// Index just past the string starting at `start` (which holds the opening quote).
fn skip_string(bytes: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// Index just past the object or array starting at `start`.
fn skip_balanced(bytes: &[u8], start: usize) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i = skip_string(bytes, i);
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

fn find_colon(bytes: &[u8], start: usize) -> usize {
    bytes[start..].iter().position(|b| *b == b':').map_or(bytes.len(), |p| start + p)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    #[serde(rename_all = "camelCase")]
    struct BrokerData {
        broker_addrs: BTreeMap<i64, String>,
        broker_name: String,
    }

    fn sample() -> BrokerData {
        BrokerData { broker_addrs: [(0, "10.0.0.1:10911".to_owned()), (1, "10.0.0.2:10911".to_owned())].into(), broker_name: "broker-ä".into() }
    }

    #[test]
    fn fastjson_style_writes_integer_keys_bare() {
        assert_eq!(to_string(&sample(), JsonStyle::Fastjson), r#"{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-ä"}"#);
    }

    #[test]
    fn standard_style_quotes_keys_and_escapes_non_ascii() {
        assert_eq!(to_string(&sample(), JsonStyle::Standard), r#"{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"brokerName":"broker-\u00E4"}"#);
    }

    #[test]
    fn empty_string_keys_and_escapes_survive() {
        let m: BTreeMap<String, String> = [(String::new(), "a\u{1}\"".to_owned())].into();
        assert_eq!(to_string(&m, JsonStyle::Fastjson), r#"{"":"a\u0001\""}"#);
    }

    #[test]
    fn reader_accepts_bare_keys_with_and_without_whitespace() {
        for text in [
            r#"{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-ä"}"#,
            r#"{ "brokerAddrs" : { 0 : "10.0.0.1:10911" , 1:"10.0.0.2:10911"}, "brokerName":"broker-\u00e4"}"#,
        ] {
            assert_eq!(from_slice::<BrokerData>(text.as_bytes()).unwrap(), sample());
        }
    }

    #[test]
    fn reader_turns_object_keys_into_strings() {
        let text = r#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5,{"brokerName":"b","queueId":1,"topic":"T"}:7}}"#;
        let v: serde_json::Value = from_slice(text.as_bytes()).unwrap();
        let table = v["offsetTable"].as_object().unwrap();
        assert_eq!(table[r#"{"brokerName":"b","queueId":0,"topic":"T"}"#], 5);
        assert_eq!(table.len(), 2);
    }

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Group {
        attributes: BTreeMap<String, String>,
        group_name: String,
        subscription_data_set: Vec<BTreeMap<String, String>>,
    }

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct ConfigFile {
        offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
        empty: BTreeMap<i32, i64>,
        groups: BTreeMap<String, Group>,
    }

    #[test]
    fn pretty_style_indents_like_fastjson_prettyformat() {
        let file = ConfigFile {
            offset_table: [("T@g".to_owned(), [(0, 12), (1, 7)].into())].into(),
            empty: BTreeMap::new(),
            groups: [(
                "g".to_owned(),
                Group {
                    attributes: BTreeMap::new(),
                    group_name: "g\u{7f}ä".to_owned(),
                    subscription_data_set: vec![[("topic".to_owned(), "T".to_owned())].into(), BTreeMap::new()],
                },
            )]
            .into(),
        };
        let expected = "{\n\t\"offsetTable\":{\n\t\t\"T@g\":{0:12,1:7\n\t\t}\n\t},\n\t\"empty\":{},\n\t\"groups\":{\n\t\t\"g\":{\n\t\t\t\"attributes\":{},\n\t\t\t\"groupName\":\"g\\u007Fä\",\n\t\t\t\"subscriptionDataSet\":[{\n\t\t\t\t\"topic\":\"T\"\n\t\t\t},{}]\n\t\t}\n\t}\n}";
        assert_eq!(to_string(&file, JsonStyle::FastjsonPretty), expected);
        let back: serde_json::Value = from_slice(expected.as_bytes()).unwrap();
        assert_eq!(back["offsetTable"]["T@g"]["1"], 7);
    }

    #[test]
    fn pretty_style_writes_an_empty_key_on_its_own_line() {
        let m: BTreeMap<String, i32> = [(String::new(), 1)].into();
        assert_eq!(to_string(&m, JsonStyle::FastjsonPretty), "{\n\t\"\":1\n}");
    }

    #[test]
    fn reader_leaves_strings_with_braces_alone() {
        let text = r#"{"a":"{0:1}","b":[{"c":"x,{y"}]}"#;
        assert!(matches!(quote_bare_keys(text), Cow::Borrowed(_)));
    }
}
