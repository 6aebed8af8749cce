//! Topic and consumer-group names that may reach the disk: a topic names a folder under
//! `consumequeue/`, a group names `%RETRY%group` and `%DLQ%group` and a key of
//! `consumerOffset.json`. Their only constructors apply Java's rules (`TopicValidator`,
//! `Validators.CHARACTER_MAX_LENGTH`), so a name holding `/`, `..`, NUL or `@` cannot be
//! expressed, and every store or metadata API that makes a path takes one of these types.
//!
//! Both decode straight from request headers (they are [`HeaderScalar`]s): a bad name in a
//! header is an error response with Java's remark before any processor runs.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::header::{HeaderScalar, ScalarError};

/// Java's `TOPIC_MAX_LENGTH`; also what a commit-log record of version 1 can hold.
pub const TOPIC_MAX_LENGTH: usize = 127;
/// Java's `Validators.CHARACTER_MAX_LENGTH`, the longest group name.
pub const GROUP_MAX_LENGTH: usize = 255;

/// Java's `VALID_CHAR_BIT_MAP`: `^[%|a-zA-Z0-9_-]+$`.
fn is_valid_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-')
}

/// Java's `UtilAll.isBlank`: empty or only whitespace, checked before anything else.
fn is_blank(name: &str) -> bool {
    name.chars().all(char::is_whitespace)
}

/// Java's `String.length()`, in UTF-16 units, so a long non-ASCII name gets Java's remark.
fn java_length(name: &str) -> usize {
    name.encode_utf16().count()
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The remarks are Java's, so clients see the same words from either broker.
    #[error("The specified topic is blank.")]
    BlankTopic,
    #[error("The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$")]
    IllegalTopicChars,
    #[error("The specified topic is longer than topic max length.")]
    TopicTooLong,
    #[error("the consumer group is blank")]
    BlankGroup,
    #[error("the specified group[{0}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$")]
    IllegalGroupChars(String),
    #[error("the specified group is longer than group max length 255.")]
    GroupTooLong,
}

/// A topic name that Java's `TopicValidator.validateTopic` accepts.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicName(String);

impl TopicName {
    pub fn new(name: impl Into<String>) -> Result<TopicName, NameError> {
        let name = name.into();
        if is_blank(&name) {
            return Err(NameError::BlankTopic);
        }
        if !name.bytes().all(is_valid_char) {
            return Err(NameError::IllegalTopicChars);
        }
        if java_length(&name) > TOPIC_MAX_LENGTH {
            return Err(NameError::TopicTooLong);
        }
        Ok(TopicName(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// A consumer-group name as Java's broker accepts when it creates one
/// (`SubscriptionGroupManager.findSubscriptionGroupConfig`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupName(String);

impl GroupName {
    pub fn new(name: impl Into<String>) -> Result<GroupName, NameError> {
        let name = name.into();
        if is_blank(&name) {
            return Err(NameError::BlankGroup);
        }
        if java_length(&name) > GROUP_MAX_LENGTH {
            return Err(NameError::GroupTooLong);
        }
        if !name.bytes().all(is_valid_char) {
            return Err(NameError::IllegalGroupChars(name));
        }
        Ok(GroupName(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `%RETRY%<group>`; an error when the result would be too long for a topic.
    pub fn retry_topic(&self) -> Result<TopicName, NameError> {
        TopicName::new(format!("{}{}", super::system_topic::RETRY_GROUP_TOPIC_PREFIX, self.0))
    }

    /// `%DLQ%<group>`; an error when the result would be too long for a topic.
    pub fn dlq_topic(&self) -> Result<TopicName, NameError> {
        TopicName::new(format!("{}{}", super::system_topic::DLQ_GROUP_TOPIC_PREFIX, self.0))
    }
}

macro_rules! name_traits {
    ($ty:ident, $expected:literal) => {
        impl std::ops::Deref for $ty {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $ty {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $ty {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl PartialEq<str> for $ty {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<String> for $ty {
            fn eq(&self, other: &String) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<&str> for $ty {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl TryFrom<&str> for $ty {
            type Error = NameError;
            fn try_from(name: &str) -> Result<Self, NameError> {
                $ty::new(name)
            }
        }

        impl HeaderScalar for $ty {
            const EXPECTED: &'static str = $expected;
            const EMPTY_IS_MISSING: bool = false;
            fn to_text(&self) -> String {
                self.0.clone()
            }
            fn from_text(text: &str) -> Result<Self, ScalarError> {
                $ty::new(text).map_err(|e| ScalarError::Rejected(e.to_string()))
            }
        }

        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let name = String::deserialize(deserializer)?;
                $ty::new(name).map_err(serde::de::Error::custom)
            }
        }
    };
}

name_traits!(TopicName, "topic name");
name_traits!(GroupName, "group name");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_take_only_javas_characters_and_length() {
        for good in ["TopicTest", "%RETRY%g", "%DLQ%g", "a|b", "A-Z_09", &"t".repeat(127)] {
            assert!(TopicName::new(good).is_ok(), "{good}");
        }
        for bad in ["", " ", "../x", "a/b", "..", ".", "a\0b", "a b", "é", "a@b", "a.b", &"t".repeat(128)] {
            assert!(TopicName::new(bad).is_err(), "{bad:?}");
        }
        assert_eq!(TopicName::new("a/b").unwrap_err().to_string(), "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$");
        // Java judges blankness first, and length in UTF-16 units.
        assert_eq!(TopicName::new(" \t").unwrap_err(), NameError::BlankTopic);
    }

    #[test]
    fn groups_take_javas_characters_up_to_255_and_derive_their_topics() {
        assert!(GroupName::new("g".repeat(255)).is_ok());
        for bad in ["", "../../../victim_dir", "g@x", "g/h", "\0", &"g".repeat(256)] {
            assert!(GroupName::new(bad).is_err(), "{bad:?}");
        }
        let g = GroupName::new("cg").unwrap();
        assert_eq!(g.retry_topic().unwrap(), "%RETRY%cg");
        assert_eq!(g.dlq_topic().unwrap(), "%DLQ%cg");
        assert!(GroupName::new("g".repeat(121)).unwrap().retry_topic().is_err(), "a retry topic must fit a topic");
        assert_eq!(GroupName::new("  ").unwrap_err(), NameError::BlankGroup);
        assert!(matches!(GroupName::new("é".repeat(200)).unwrap_err(), NameError::IllegalGroupChars(_)));
    }

    #[test]
    fn names_decode_from_json_only_when_valid() {
        let ok: TopicName = serde_json::from_str("\"T\"").unwrap();
        assert_eq!(ok, "T");
        assert!(serde_json::from_str::<GroupName>("\"../x\"").is_err());
        assert_eq!(serde_json::to_string(&ok).unwrap(), "\"T\"");
    }
}
