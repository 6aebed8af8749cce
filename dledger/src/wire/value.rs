//! The field values of DLedger's JSON bodies, each read as leniently as fastjson reads the Java
//! field it stands for and written exactly as fastjson writes it. Every one sits in an `Option`
//! in the body structs: a missing key or `null` is `None`, which the conversions turn into
//! Java's default for that field.
//!
//! What fastjson 1.2.69 / 1.2.83 accept (checked by the `decode` golden vectors):
//! - numbers also as strings (`"term":"7"`);
//! - enums by name or by ordinal (`"type":2` is COMPARE);
//! - `byte[]` as base64 with or without padding.

use std::fmt;

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use bytes::Bytes;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use crate::protocol::{PushType, VoteResult};

/// A Java `long`: written as a JSON integer; read from an integer or a string holding one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct JLong(pub i64);

/// A Java `int`, read like [`JLong`] and refused outside the `int` range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct JInt(pub i32);

impl Serialize for JLong {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i64(self.0)
    }
}

impl Serialize for JInt {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i32(self.0)
    }
}

struct IntegerVisitor {
    min: i64,
    max: i64,
    java_type: &'static str,
}

impl IntegerVisitor {
    fn check<E: de::Error>(&self, v: i64) -> Result<i64, E> {
        if v < self.min || v > self.max {
            return Err(E::custom(format_args!("{v} is out of range for a Java {}", self.java_type)));
        }
        Ok(v)
    }
}

impl Visitor<'_> for IntegerVisitor {
    type Value = i64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an integer (a Java {}) or a string holding one", self.java_type)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
        self.check(v)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
        let v = i64::try_from(v).map_err(|_| E::custom(format_args!("{v} is out of range for a Java {}", self.java_type)))?;
        self.check(v)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<i64, E> {
        let n: i64 = v.trim().parse().map_err(|_| E::invalid_value(de::Unexpected::Str(v), &self))?;
        self.check(n)
    }
}

impl<'de> Deserialize<'de> for JLong {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(IntegerVisitor { min: i64::MIN, max: i64::MAX, java_type: "long" }).map(JLong)
    }
}

impl<'de> Deserialize<'de> for JInt {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(IntegerVisitor { min: i32::MIN.into(), max: i32::MAX.into(), java_type: "int" }).map(|v| JInt(v as i32))
    }
}

/// A Java `boolean` that only exists as a computed getter (`PushEntryRequest.isBatch`): written,
/// never read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct JBool(pub bool);

impl Serialize for JBool {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bool(self.0)
    }
}

/// fastjson reads base64 with or without its `=` padding; it writes the standard alphabet padded.
const LENIENT_BASE64: GeneralPurpose =
    GeneralPurpose::new(&alphabet::STANDARD, GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent));

/// A Java `byte[]`: a base64 string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Base64(pub Bytes);

impl Serialize for Base64 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for Base64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Base64;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a base64 string (a Java byte[])")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Base64, E> {
                LENIENT_BASE64.decode(v.trim()).map(|b| Base64(Bytes::from(b))).map_err(|e| E::custom(format_args!("invalid base64: {e}")))
            }
        }
        d.deserialize_str(V)
    }
}

/// A Java enum: written by name (fastjson's WriteEnumUsingName); read by name or by ordinal.
pub(crate) trait JavaEnum: Sized + Copy + 'static {
    const JAVA_TYPE: &'static str;
    const VALUES: &'static [Self];
    fn java_name(self) -> &'static str;
}

impl JavaEnum for PushType {
    const JAVA_TYPE: &'static str = "PushEntryRequest.Type";
    const VALUES: &'static [Self] = &[PushType::Append, PushType::Commit, PushType::Compare, PushType::Truncate];
    fn java_name(self) -> &'static str {
        PushType::java_name(self)
    }
}

impl JavaEnum for VoteResult {
    const JAVA_TYPE: &'static str = "VoteResponse.RESULT";
    const VALUES: &'static [Self] = &VoteResult::ALL;
    fn java_name(self) -> &'static str {
        VoteResult::java_name(self)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct JEnum<T>(pub T);

impl<T: JavaEnum> Serialize for JEnum<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.java_name())
    }
}

impl<'de, T: JavaEnum> Deserialize<'de> for JEnum<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<T: JavaEnum> Visitor<'_> for V<T> {
            type Value = JEnum<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "a {} name or ordinal", T::JAVA_TYPE)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<JEnum<T>, E> {
                T::VALUES.iter().find(|t| t.java_name() == v).map(|t| JEnum(*t)).ok_or_else(|| E::custom(format_args!("{v:?} is not a {}", T::JAVA_TYPE)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<JEnum<T>, E> {
                usize::try_from(v)
                    .ok()
                    .and_then(|i| T::VALUES.get(i))
                    .map(|t| JEnum(*t))
                    .ok_or_else(|| E::custom(format_args!("{v} is not an ordinal of {}", T::JAVA_TYPE)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<JEnum<T>, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom(format_args!("{v} is not an ordinal of {}", T::JAVA_TYPE))),
                }
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A Java `Map<String, String>` held as a `HashMap`, written in the `HashMap`'s iteration order
/// (fastjson does not sort map keys): see [`java_hash_map_order`].
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(crate) struct JStringMap(pub Vec<(String, String)>);

impl Serialize for JStringMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for JStringMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = JStringMap;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of strings (a Java Map<String, String>)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<JStringMap, A::Error> {
                let mut out: Vec<(String, String)> = Vec::new();
                while let Some((k, v)) = access.next_entry::<String, Option<String>>()? {
                    // A HashMap keeps the last value of a repeated key; null values are skipped.
                    out.retain(|(key, _)| *key != k);
                    if let Some(v) = v {
                        out.push((k, v));
                    }
                }
                Ok(JStringMap(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Java's `String.hashCode`: over UTF-16 code units, wrapping.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(i32::from(unit)))
}

/// The order a `java.util.HashMap<String, _>` filled with `keys` (in that order, by `put`, from
/// the default capacity) iterates them: by bucket (`(h ^ h >>> 16) & (capacity - 1)`, the
/// capacity doubling from 16 whenever the size passes 3/4 of it), and in insertion order within a
/// bucket. This is the order fastjson writes such a map in, e.g. `MetadataResponse.peers` (from
/// `MemberState`'s `HashMap`): for `n0`..`n12` it is `n0`..`n10`, `n12`, `n11`. (Buckets that
/// Java turns into trees, 8 or more colliding keys in a table of 64 or more, are not modelled.)
pub fn java_hash_map_order<'a>(keys: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut keys: Vec<&str> = keys.into_iter().collect();
    let mut capacity: usize = 16;
    while keys.len() > capacity / 4 * 3 {
        capacity *= 2;
    }
    let bucket = |k: &str| {
        let h = java_string_hash(k) as u32;
        ((h ^ (h >> 16)) as usize) & (capacity - 1)
    };
    keys.sort_by_key(|k| bucket(k)); // stable: insertion order within a bucket
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_string_hash_matches_java() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("n0"), 3458);
        assert_eq!(java_string_hash("n11"), 107_278);
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        // A non-BMP char counts as two UTF-16 units.
        assert_eq!(java_string_hash("😀"), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn hash_map_order_follows_buckets_after_a_resize() {
        let keys: Vec<String> = (0..13).map(|i| format!("n{i}")).collect();
        let order = java_hash_map_order(keys.iter().map(String::as_str));
        assert_eq!(order, ["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10", "n12", "n11"]);
        assert_eq!(java_hash_map_order(["n2", "n0", "n1"]), ["n0", "n1", "n2"]);
    }

    #[test]
    fn numbers_are_read_as_fastjson_reads_them() {
        let v: JLong = serde_json::from_str("\"-7\"").unwrap();
        assert_eq!(v, JLong(-7));
        let v: JLong = serde_json::from_str("9223372036854775807").unwrap();
        assert_eq!(v, JLong(i64::MAX));
        assert!(serde_json::from_str::<JLong>("9223372036854775808").is_err());
        assert!(serde_json::from_str::<JInt>("2147483648").is_err());
        assert!(serde_json::from_str::<JInt>("\"x\"").is_err());
        assert!(serde_json::from_str::<JLong>("1.5").is_err());
        assert!(serde_json::from_str::<JLong>("true").is_err());
    }

    #[test]
    fn enums_are_read_by_name_or_ordinal() {
        let t: JEnum<PushType> = serde_json::from_str("\"TRUNCATE\"").unwrap();
        assert_eq!(t.0, PushType::Truncate);
        let t: JEnum<PushType> = serde_json::from_str("2").unwrap();
        assert_eq!(t.0, PushType::Compare);
        assert!(serde_json::from_str::<JEnum<PushType>>("4").is_err());
        assert!(serde_json::from_str::<JEnum<PushType>>("-1").is_err());
        assert!(serde_json::from_str::<JEnum<VoteResult>>("\"accept\"").is_err());
        let r: JEnum<VoteResult> = serde_json::from_str("11").unwrap();
        assert_eq!(r.0, VoteResult::RejectTakingLeadership);
    }

    #[test]
    fn base64_is_read_with_or_without_padding() {
        let b: Base64 = serde_json::from_str("\"aGVsbG8\"").unwrap();
        assert_eq!(&b.0[..], b"hello");
        let b: Base64 = serde_json::from_str("\"aGVsbG8=\"").unwrap();
        assert_eq!(&b.0[..], b"hello");
        assert!(serde_json::from_str::<Base64>("\"a$b\"").is_err());
        assert_eq!(serde_json::to_string(&Base64(Bytes::from_static(b"hello"))).unwrap(), "\"aGVsbG8=\"");
    }
}
