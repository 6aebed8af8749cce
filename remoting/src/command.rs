//! `RemotingCommand`: one request or response, with every field Java's class carries on the wire.

use bytes::Bytes;

use crate::code::{RequestCode, ResponseCode};
use crate::header::{CommandHeader, HeaderError};

/// Flag bit 0: the command is a response.
pub const FLAG_RESPONSE: i32 = 0x1;
/// Flag bit 1: the requester expects no response.
pub const FLAG_ONEWAY: i32 = 0x2;

/// The `version` we put in everything we send: Java 5.3.3's ordinal (`V5_3_3`), the release whose
/// features (timer, pop) the broker has; clients and tools show it and gate 5.x paths on it. A
/// real ordinal matters: version 0 makes Java name servers parse registrations in the pre-3.0.11
/// format.
pub const CURRENT_VERSION: i32 = 479;

/// How the header of a frame is serialized (the high byte of the header-length word).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SerializeType {
    #[default]
    Json,
    RocketMq,
}

impl SerializeType {
    pub fn from_byte(b: u8) -> Option<SerializeType> {
        match b {
            0 => Some(SerializeType::Json),
            1 => Some(SerializeType::RocketMq),
            _ => None,
        }
    }

    pub fn as_byte(self) -> u8 {
        match self {
            SerializeType::Json => 0,
            SerializeType::RocketMq => 1,
        }
    }

    /// The name Java writes in `serializeTypeCurrentRPC`.
    pub fn java_name(self) -> &'static str {
        match self {
            SerializeType::Json => "JSON",
            SerializeType::RocketMq => "ROCKETMQ",
        }
    }
}

/// The sender's language (`LanguageCode` in Java): a name in JSON headers, a byte in binary ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct LanguageCode(pub u8);

const LANGUAGE_NAMES: [&str; 14] = ["JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST", "NODE_JS"];

impl LanguageCode {
    pub const JAVA: LanguageCode = LanguageCode(0);
    pub const OTHER: LanguageCode = LanguageCode(7);
    pub const GO: LanguageCode = LanguageCode(9);

    pub fn from_name(name: &str) -> Option<LanguageCode> {
        LANGUAGE_NAMES.iter().position(|n| *n == name).map(|i| LanguageCode(i as u8))
    }

    /// The Java enum name; codes beyond the known table are written as `OTHER`.
    pub fn name(self) -> &'static str {
        LANGUAGE_NAMES.get(self.0 as usize).copied().unwrap_or("OTHER")
    }
}

pub use crate::header::ExtFields;

/// The remark of a response Java made with `createResponseCommand(Class)`, kept when only the code
/// is set afterwards.
pub const UNSET_REMARK: &str = "not set any response code";

#[derive(Clone, Debug, PartialEq, Default)]
pub struct RemotingCommand {
    pub code: i32,
    pub language: LanguageCode,
    pub version: i32,
    pub opaque: i32,
    pub flag: i32,
    pub remark: Option<String>,
    pub ext_fields: Option<ExtFields>,
    /// The body, or its first part when it was given in parts ([`RemotingCommand::with_body_parts`]).
    pub body: Option<Bytes>,
    /// The body's parts after the first, written right after `body` as one body on the wire. A
    /// pull's messages, each a slice of the commit log's mapping, so reach the socket without being
    /// copied together first (Java's FileRegion). Empty unless `body` is set; decoded frames never
    /// have one.
    pub body_tail: Vec<Bytes>,
    /// The serialize type the header arrived in, or will be written in.
    pub serialize_type: SerializeType,
}

impl RemotingCommand {
    /// A request with no header fields (`extFields` absent, as Java sends for header-less codes).
    pub fn request(code: RequestCode) -> RemotingCommand {
        RemotingCommand { code: code.0, version: CURRENT_VERSION, ..Default::default() }
    }

    /// A request carrying a typed header.
    pub fn request_with_header(code: RequestCode, header: &impl CommandHeader) -> RemotingCommand {
        let mut cmd = RemotingCommand::request(code);
        let mut ext = ExtFields::default();
        header.write_to(&mut ext);
        cmd.ext_fields = Some(ext);
        cmd
    }

    /// A response to `request`: same opaque and serialize type, RESPONSE flag set.
    pub fn response_to(request: &RemotingCommand, code: ResponseCode) -> RemotingCommand {
        RemotingCommand {
            code: code.0,
            version: CURRENT_VERSION,
            opaque: request.opaque,
            flag: FLAG_RESPONSE,
            serialize_type: request.serialize_type,
            ..Default::default()
        }
    }

    /// SUCCESS with the remark Java's `createResponseCommand(Class)` starts a response with, which
    /// many of Java's processors never clear (they set the code only).
    pub fn success_unset_remark(request: &RemotingCommand) -> RemotingCommand {
        RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_remark(UNSET_REMARK)
    }

    /// A response with a remark, the usual shape of an error answer.
    pub fn error_response(request: &RemotingCommand, code: ResponseCode, remark: impl Into<String>) -> RemotingCommand {
        RemotingCommand::response_to(request, code).with_remark(remark)
    }

    pub fn with_remark(mut self, remark: impl Into<String>) -> Self {
        self.remark = Some(remark.into());
        self
    }

    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// A body given as parts written one after another (see `body_tail`); no parts, no body.
    pub fn with_body_parts(mut self, mut parts: Vec<Bytes>) -> Self {
        if parts.is_empty() {
            self.body = None;
            self.body_tail = Vec::new();
        } else {
            self.body = Some(parts.remove(0));
            self.body_tail = parts;
        }
        self
    }

    pub fn with_opaque(mut self, opaque: i32) -> Self {
        self.opaque = opaque;
        self
    }

    pub fn with_serialize_type(mut self, serialize_type: SerializeType) -> Self {
        self.serialize_type = serialize_type;
        self
    }

    /// Adds the fields of a typed header to `extFields` (creating the map if absent).
    pub fn with_header(mut self, header: &impl CommandHeader) -> Self {
        header.write_to(self.ext_fields.get_or_insert_with(ExtFields::default));
        self
    }

    /// Sets one ext field (creating the map if absent).
    pub fn with_ext(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.ext_fields.get_or_insert_with(ExtFields::default).insert(key.into(), value.into());
        self
    }

    pub fn mark_oneway(mut self) -> Self {
        self.flag |= FLAG_ONEWAY;
        self
    }

    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    pub fn request_code(&self) -> RequestCode {
        RequestCode(self.code)
    }

    pub fn response_code(&self) -> ResponseCode {
        ResponseCode(self.code)
    }

    /// Decodes the typed header from `extFields`; a missing map reads like an empty one.
    pub fn decode_header<H: CommandHeader>(&self) -> Result<H, HeaderError> {
        static EMPTY: std::sync::OnceLock<ExtFields> = std::sync::OnceLock::new();
        H::read_from(self.ext_fields.as_ref().unwrap_or_else(|| EMPTY.get_or_init(ExtFields::default)))
    }

    /// One ext field, treating an empty string like an absent one (Go sends `""` for unset keys).
    pub fn ext(&self, key: &str) -> Option<&str> {
        self.ext_fields.as_ref()?.get(key).filter(|v| !v.is_empty())
    }

    /// The body as one slice. A body in parts must be joined first ([`RemotingCommand::flatten_body`]);
    /// only writers of frames, which take the parts as they are, meet such bodies.
    pub fn body_bytes(&self) -> &[u8] {
        debug_assert!(self.body_tail.is_empty(), "a body in parts read as one slice");
        self.body.as_deref().unwrap_or(&[])
    }

    /// The body's length in bytes, all of its parts counted.
    pub fn body_len(&self) -> usize {
        self.body.as_ref().map_or(0, Bytes::len) + self.body_tail.iter().map(Bytes::len).sum::<usize>()
    }

    /// The body's parts in order (none when there is no body).
    pub fn body_parts(&self) -> impl Iterator<Item = &Bytes> {
        self.body.iter().chain(self.body_tail.iter())
    }

    /// Joins a body given in parts into one buffer, for whoever reads it as one (an in-process peer).
    pub fn flatten_body(&mut self) {
        if self.body_tail.is_empty() {
            return;
        }
        let mut joined = bytes::BytesMut::with_capacity(self.body_len());
        for part in self.body_parts() {
            joined.extend_from_slice(part);
        }
        self.body = Some(joined.freeze());
        self.body_tail = Vec::new();
    }
}
