//! Config structs that mirror Java's: each field names its Java key and default, and the struct
//! reads Java properties (`-c FILE`, runtime updates) and prints itself as Java does (`-p`,
//! GET_*_CONFIG bodies). Declare one with [`java_config!`].

use indexmap::IndexMap;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("config key {key} has the value \"{value}\", which is not a valid {expected}")]
    Invalid { key: String, value: String, expected: &'static str },
}

/// A config field type with a Java text form.
pub trait ConfigValue: Sized {
    const EXPECTED: &'static str;
    fn parse(text: &str) -> Option<Self>;
    fn to_text(&self) -> String;
}

impl ConfigValue for String {
    const EXPECTED: &'static str = "string";
    /// Trimmed as Java's `MixAll.properties2Object` trims a `String` (`String.trim()`: every
    /// character up to U+0020 at either end).
    fn parse(text: &str) -> Option<Self> {
        Some(text.trim_matches(|c: char| c <= ' ').to_owned())
    }
    fn to_text(&self) -> String {
        self.clone()
    }
}

impl ConfigValue for bool {
    const EXPECTED: &'static str = "boolean (true or false)";
    fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            t if t.eq_ignore_ascii_case("true") => Some(true),
            t if t.eq_ignore_ascii_case("false") => Some(false),
            _ => None,
        }
    }
    fn to_text(&self) -> String {
        self.to_string()
    }
}

macro_rules! numeric_config_value {
    ($($ty:ty => $expected:literal),*) => {$(
        impl ConfigValue for $ty {
            const EXPECTED: &'static str = $expected;
            fn parse(text: &str) -> Option<Self> {
                text.trim().parse().ok()
            }
            fn to_text(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
numeric_config_value!(i32 => "int", i64 => "long", u16 => "port number", u32 => "non-negative int", u64 => "non-negative long", usize => "non-negative int", f64 => "number");

/// Parses one value for `key`, with a typed error naming the key.
pub fn parse_value<T: ConfigValue>(key: &str, text: &str) -> Result<T, ConfigError> {
    T::parse(text).ok_or_else(|| ConfigError::Invalid { key: key.to_owned(), value: text.to_owned(), expected: T::EXPECTED })
}

/// Behaviour every [`java_config!`] struct gets.
pub trait JavaConfig {
    /// The Java keys, in declaration order.
    fn keys() -> &'static [&'static str];
    /// The Java text form of one key's value.
    fn get(&self, key: &str) -> Option<String>;
    /// Sets one key from its text. `Ok(false)`: the key is not ours.
    fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError>;

    /// Every key with its value, in declaration order.
    fn entries(&self) -> Vec<(&'static str, String)> {
        Self::keys().iter().filter_map(|k| self.get(k).map(|v| (*k, v))).collect()
    }

    /// `key=value` for each of `keys` set to other than its default.
    fn differing_from_default(&self, keys: &[&str]) -> Vec<String>
    where
        Self: Default,
    {
        let default = Self::default();
        keys.iter().filter_map(|k| Some((k, self.get(k)?, default.get(k)?))).filter(|(_, v, d)| v != d).map(|(k, v, _)| format!("{k}={v}")).collect()
    }

    /// The keys from `first` to `last` (both included), in declaration order: a block of keys
    /// declared together for one reason.
    fn keys_between(first: &str, last: &str) -> Vec<&'static str> {
        let keys = Self::keys();
        let start = keys.iter().position(|k| *k == first).unwrap_or(keys.len());
        let end = keys.iter().position(|k| *k == last).map_or(start, |e| e + 1).max(start);
        keys[start..end].to_vec()
    }

    /// Applies properties; returns the keys that are not ours (Java ignores them; callers log them).
    fn apply(&mut self, properties: &IndexMap<String, String>) -> Result<Vec<String>, ConfigError> {
        let mut unknown = Vec::new();
        for (key, value) in properties {
            if !self.set(key, value)? {
                unknown.push(key.clone());
            }
        }
        Ok(unknown)
    }
}

/// The keys of Java's `NettyServerConfig` that the broker and the name server both read and print.
/// Each config declares them itself: `-p` and GET_BROKER_CONFIG / GET_NAMESRV_CONFIG print keys
/// in declaration order, and the two print these in different orders (`bindAddress` before or
/// after `listenPort`, the allocator flag before or after the buffer sizes) with different
/// `listenPort` defaults, so one shared declaration would change one of the outputs. This list
/// is what both must hold (each crate's tests check it).
pub const NETTY_SERVER_KEYS: [&str; 15] = [
    "bindAddress",
    "listenPort",
    "serverWorkerThreads",
    "serverCallbackExecutorThreads",
    "serverSelectorThreads",
    "serverOnewaySemaphoreValue",
    "serverAsyncSemaphoreValue",
    "serverChannelMaxIdleTimeSeconds",
    "serverSocketSndBufSize",
    "serverSocketRcvBufSize",
    "writeBufferHighWaterMark",
    "writeBufferLowWaterMark",
    "serverSocketBacklog",
    "serverPooledByteBufAllocatorEnable",
    "useEpollNativeSelector",
];

/// Declares a config struct: `pub field: Type = "javaKey" => default_expr,` per field.
#[macro_export]
macro_rules! java_config {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty = $key:literal => $default:expr ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $( $field: $default, )* }
            }
        }

        impl $crate::config::JavaConfig for $name {
            fn keys() -> &'static [&'static str] {
                &[$($key),*]
            }

            fn get(&self, key: &str) -> Option<String> {
                match key {
                    $( $key => Some($crate::config::ConfigValue::to_text(&self.$field)), )*
                    _ => None,
                }
            }

            fn set(&mut self, key: &str, value: &str) -> Result<bool, $crate::config::ConfigError> {
                match key {
                    $( $key => { self.$field = $crate::config::parse_value(key, value)?; Ok(true) } )*
                    _ => Ok(false),
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    java_config! {
        pub struct Probe {
            pub listen_port: u16 = "listenPort" => 9876,
            pub enabled: bool = "enabled" => true,
            pub home: String = "home" => String::from("/h"),
        }
    }

    #[test]
    fn defaults_apply_and_print_in_declaration_order() {
        let mut p = Probe::default();
        let props: IndexMap<String, String> = [("listenPort", "10000"), ("mystery", "x")].into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
        assert_eq!(p.apply(&props).unwrap(), vec!["mystery".to_owned()]);
        assert_eq!(p.listen_port, 10000);
        assert_eq!(p.entries(), vec![("listenPort", "10000".to_owned()), ("enabled", "true".to_owned()), ("home", "/h".to_owned())]);
    }

    #[test]
    fn a_bad_value_names_its_key() {
        let err = Probe::default().set("listenPort", "99999").unwrap_err();
        assert_eq!(err.to_string(), "config key listenPort has the value \"99999\", which is not a valid port number");
    }
}
