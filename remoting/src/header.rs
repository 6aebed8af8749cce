//! Typed custom headers mapped to and from `extFields` as Java writes them: every value a string
//! (numbers in decimal, booleans as `true`/`false`), absent optional fields absent.
//!
//! Declare a header with [`command_header!`]; each field names its Java key:
//! ```
//! remoting::command_header! {
//!     /// GET_ROUTEINFO_BY_TOPIC
//!     pub struct GetRouteInfoRequestHeader {
//!         pub topic: String => "topic",
//!         pub accept_standard_json_only: Option<bool> => "acceptStandardJsonOnly",
//!     }
//! }
//! ```

pub use crate::ext::ExtFields;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// Java's wording for a missing `@CFNotNull` field.
    #[error("the custom field <{field}> is null")]
    Missing { field: &'static str },
    #[error("the custom field <{field}> has the value \"{value}\", which is not a valid {expected}")]
    Invalid { field: &'static str, value: String, expected: &'static str },
    /// A value of the right type that the field's rules refuse (a topic name with `/`); the
    /// reason is the remark Java answers with.
    #[error("{reason}")]
    Rejected { field: &'static str, reason: String },
}

impl HeaderError {
    /// The Java key of the field that could not be read.
    pub fn field(&self) -> &'static str {
        match self {
            HeaderError::Missing { field } | HeaderError::Invalid { field, .. } | HeaderError::Rejected { field, .. } => field,
        }
    }
}

/// Why a scalar's text did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScalarError {
    /// Not a value of the type at all (`x` for an int).
    Malformed,
    /// Of the type, but refused by its rules, with the reason.
    Rejected(String),
}

/// A typed view of a command's `extFields`.
pub trait CommandHeader: Sized {
    fn write_to(&self, ext: &mut ExtFields);
    fn read_from(ext: &ExtFields) -> Result<Self, HeaderError>;
}

/// One field type of a header. Implemented for the scalar types Java headers use, and for
/// `Option` of them (the optional fields).
pub trait HeaderField: Sized {
    fn write(&self, key: &'static str, ext: &mut ExtFields);
    /// The field from the text its key has (`None`: the key is absent).
    fn read_text(text: Option<&str>, key: &'static str) -> Result<Self, HeaderError>;
}

/// A scalar that has a Java text form.
pub trait HeaderScalar: Sized {
    const EXPECTED: &'static str;
    /// Whether a required field sent as `""` counts as missing (numbers: Go writes `""` for
    /// unset) rather than as a value to parse (text, whose rules judge an empty string).
    const EMPTY_IS_MISSING: bool = true;
    fn to_text(&self) -> String;
    fn from_text(text: &str) -> Result<Self, ScalarError>;
}

impl HeaderScalar for String {
    const EXPECTED: &'static str = "string";
    const EMPTY_IS_MISSING: bool = false;
    fn to_text(&self) -> String {
        self.clone()
    }
    fn from_text(text: &str) -> Result<Self, ScalarError> {
        Ok(text.to_owned())
    }
}

impl HeaderScalar for bool {
    const EXPECTED: &'static str = "boolean";
    // Java parses `""` as false rather than reporting the field missing.
    const EMPTY_IS_MISSING: bool = false;
    fn to_text(&self) -> String {
        self.to_string()
    }
    /// Java `Boolean.parseBoolean`: only "true", in any case, is true; nothing fails.
    fn from_text(text: &str) -> Result<Self, ScalarError> {
        Ok(text.eq_ignore_ascii_case("true"))
    }
}

macro_rules! numeric_scalar {
    ($($ty:ty => $expected:literal),*) => {$(
        impl HeaderScalar for $ty {
            const EXPECTED: &'static str = $expected;
            fn to_text(&self) -> String {
                self.to_string()
            }
            fn from_text(text: &str) -> Result<Self, ScalarError> {
                text.trim().parse().map_err(|_| ScalarError::Malformed)
            }
        }
    )*};
}
numeric_scalar!(i32 => "int", i64 => "long", f64 => "double");

fn parse<T: HeaderScalar>(key: &'static str, text: &str) -> Result<T, HeaderError> {
    T::from_text(text).map_err(|e| match e {
        ScalarError::Malformed => HeaderError::Invalid { field: key, value: text.to_owned(), expected: T::EXPECTED },
        ScalarError::Rejected(reason) => HeaderError::Rejected { field: key, reason },
    })
}

impl<T: HeaderScalar> HeaderField for T {
    fn write(&self, key: &'static str, ext: &mut ExtFields) {
        ext.insert(key.to_owned(), self.to_text());
    }

    fn read_text(text: Option<&str>, key: &'static str) -> Result<Self, HeaderError> {
        match text {
            // An empty number is what Go sends for "unset"; for a required field that is missing.
            Some("") if T::EMPTY_IS_MISSING => Err(HeaderError::Missing { field: key }),
            Some(text) => parse(key, text),
            None => Err(HeaderError::Missing { field: key }),
        }
    }
}

impl<T: HeaderScalar> HeaderField for Option<T> {
    fn write(&self, key: &'static str, ext: &mut ExtFields) {
        if let Some(value) = self {
            value.write(key, ext);
        }
    }

    /// Empty strings read as absent: Go writes `""` for every unset key.
    fn read_text(text: Option<&str>, key: &'static str) -> Result<Self, HeaderError> {
        match text {
            None | Some("") => Ok(None),
            Some(text) => parse(key, text).map(Some),
        }
    }
}

/// Declares a typed header struct and its `CommandHeader` mapping, one line per field. Add
/// `#[derive(Default)]` to a header whose fields all have a meaningful default (a validated name
/// has none).
#[macro_export]
macro_rules! command_header {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty => $key:literal ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $crate::header::CommandHeader for $name {
            fn write_to(&self, ext: &mut $crate::header::ExtFields) {
                $( $crate::header::HeaderField::write(&self.$field, $key, ext); )*
            }

            // One pass over the fields, each of ours taking its key's text, rather than a
            // lookup per field.
            #[allow(unused_mut, unused_variables)]
            fn read_from(__ext: &$crate::header::ExtFields) -> Result<Self, $crate::header::HeaderError> {
                $( let mut $field: Option<&str> = None; )*
                for (__key, __text) in __ext.iter() {
                    match __key {
                        $( $key => $field = Some(__text), )*
                        _ => {}
                    }
                }
                Ok($name { $( $field: $crate::header::HeaderField::read_text($field, $key)?, )* })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    command_header! {
        #[derive(Default)]
        pub struct Probe {
            pub topic: String => "topic",
            pub queue_id: i32 => "queueId",
            pub offset: i64 => "offset",
            pub force: bool => "isForce",
            pub note: Option<String> => "note",
            pub limit: Option<i32> => "limit",
        }
    }

    fn ext(pairs: &[(&str, &str)]) -> ExtFields {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn header_writes_numbers_and_booleans_as_strings_and_skips_absent_optionals() {
        let h = Probe { topic: "T".into(), queue_id: 3, offset: -1, force: true, note: None, limit: Some(7) };
        let mut out = ExtFields::default();
        h.write_to(&mut out);
        assert_eq!(out, ext(&[("topic", "T"), ("queueId", "3"), ("offset", "-1"), ("isForce", "true"), ("limit", "7")]));
        assert_eq!(Probe::read_from(&out).unwrap(), h);
    }

    #[test]
    fn missing_required_field_is_reported_with_javas_wording() {
        let err = Probe::read_from(&ext(&[("topic", "T")])).unwrap_err();
        assert_eq!(err.to_string(), "the custom field <queueId> is null");
    }

    #[test]
    fn bad_number_is_an_error_but_any_boolean_text_parses_like_java() {
        let bad = ext(&[("topic", "T"), ("queueId", "x"), ("offset", "1"), ("isForce", "yes")]);
        assert!(matches!(Probe::read_from(&bad), Err(HeaderError::Invalid { field: "queueId", .. })));
        let odd_bool = ext(&[("topic", "T"), ("queueId", "1"), ("offset", "1"), ("isForce", "TRUE")]);
        assert!(Probe::read_from(&odd_bool).unwrap().force);
        let empty_bool = ext(&[("topic", "T"), ("queueId", "1"), ("offset", "1"), ("isForce", "")]);
        assert!(!Probe::read_from(&empty_bool).unwrap().force);
    }

    #[test]
    fn go_style_empty_values_read_as_absent() {
        let go = ext(&[("topic", "T"), ("queueId", "1"), ("offset", "1"), ("isForce", "false"), ("note", ""), ("limit", "")]);
        let h = Probe::read_from(&go).unwrap();
        assert_eq!((h.note, h.limit), (None, None));
    }
}
