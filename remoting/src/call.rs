//! Typed calls: a request type names its code, writes its header and body, and reads its answer,
//! so a caller sends a value and gets a value back (as `dledger::rpc` does for DLedger's RPCs).
//!
//! ```
//! use remoting::call::{expect_success, CallError, RemotingRequest};
//! use remoting::protocol::body::KvTable;
//! use remoting::{RemotingCommand, RequestCode};
//!
//! struct GetRuntimeInfo;
//!
//! impl RemotingRequest for GetRuntimeInfo {
//!     const CODE: RequestCode = RequestCode::GET_BROKER_RUNTIME_INFO;
//!     type Response = KvTable;
//!     fn into_command(self) -> RemotingCommand {
//!         RemotingCommand::request(Self::CODE)
//!     }
//!     fn parse_response(response: RemotingCommand) -> Result<KvTable, CallError> {
//!         remoting::call::json_body(&expect_success(response)?)
//!     }
//! }
//! ```
//! Send one with [`RemotingClient::call`](crate::client::RemotingClient::call) (by address) or
//! [`Channel::call`](crate::connection::Channel::call).

use serde::de::DeserializeOwned;

use crate::client::ClientError;
use crate::code::{RequestCode, ResponseCode};
use crate::command::RemotingCommand;
use crate::connection::ChannelError;
use crate::header::CommandHeader;

/// A request with its code, its frame and the type of its answer.
pub trait RemotingRequest: Send {
    /// The code [`RemotingRequest::into_command`] writes.
    const CODE: RequestCode;
    type Response;
    /// The request frame: `CODE`, its header in `extFields`, its body. The opaque is set when
    /// it is sent.
    fn into_command(self) -> RemotingCommand;
    /// Reads the answer; an answer the request does not expect (another code, a body that does
    /// not decode) is an error.
    fn parse_response(response: RemotingCommand) -> Result<Self::Response, CallError>;
}

/// Why a typed call produced no answer of its type.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Not connected, the connection closed, or no answer in time.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The peer answered with a code the request does not take as success.
    #[error("answered {code:?}: {}", remark.as_deref().unwrap_or(""))]
    Refused { code: ResponseCode, remark: Option<String> },
    /// A success whose header or body does not read as the response type.
    #[error("the answer does not decode: {reason}")]
    BadResponse { reason: String },
}

impl From<ChannelError> for CallError {
    fn from(e: ChannelError) -> Self {
        CallError::Client(ClientError::Channel(e))
    }
}

/// The response itself when it is SUCCESS, [`CallError::Refused`] with its code and remark otherwise.
pub fn expect_success(response: RemotingCommand) -> Result<RemotingCommand, CallError> {
    match response.response_code() {
        ResponseCode::SUCCESS => Ok(response),
        code => Err(CallError::Refused { code, remark: response.remark }),
    }
}

/// The response's body read as fastjson writes it.
pub fn json_body<T: DeserializeOwned>(response: &RemotingCommand) -> Result<T, CallError> {
    crate::fastjson::from_slice(response.body_bytes()).map_err(|e| CallError::BadResponse { reason: e.to_string() })
}

/// The response's custom header.
pub fn header<H: CommandHeader>(response: &RemotingCommand) -> Result<H, CallError> {
    response.decode_header().map_err(|e| CallError::BadResponse { reason: e.to_string() })
}

/// The frame of `request`, checked (in debug builds) to carry the code its type names.
pub(crate) fn command_of<R: RemotingRequest>(request: R) -> RemotingCommand {
    let command = request.into_command();
    debug_assert_eq!(command.code, R::CODE.0, "a request type writes its own code");
    command
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::encode_frame;
    use crate::protocol::body::GetBrokerRuntimeInfo;
    use crate::protocol::namesrv::{BrokerIdentityHeader, RegisterBroker, RegisterBrokerRequestHeader, UnregisterBroker};

    fn identity() -> BrokerIdentityHeader {
        BrokerIdentityHeader { broker_name: "b".into(), broker_addr: "127.0.0.1:10911".into(), cluster_name: "c".into(), broker_id: 0 }
    }

    #[test]
    fn typed_requests_write_the_frames_written_by_hand() {
        let header = RegisterBrokerRequestHeader { broker_name: "b".into(), broker_id: 1, compressed: Some(false), body_crc32: Some(7), ..Default::default() };
        let typed = RegisterBroker { header: header.clone(), body: bytes::Bytes::from_static(b"{}") }.into_command();
        let by_hand = RemotingCommand::request_with_header(RequestCode::REGISTER_BROKER, &header).with_body(&b"{}"[..]);
        assert_eq!(encode_frame(&typed).unwrap(), encode_frame(&by_hand).unwrap());

        let typed = UnregisterBroker { header: identity() }.into_command();
        let by_hand = RemotingCommand::request_with_header(RequestCode::UNREGISTER_BROKER, &identity());
        assert_eq!(encode_frame(&typed).unwrap(), encode_frame(&by_hand).unwrap());

        let typed = GetBrokerRuntimeInfo.into_command();
        assert_eq!(encode_frame(&typed).unwrap(), encode_frame(&RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO)).unwrap());
    }

    #[test]
    fn an_answer_other_than_success_is_refused_with_its_code_and_remark() {
        let request = RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO);
        let answer = RemotingCommand::error_response(&request, ResponseCode::SYSTEM_BUSY, "busy");

        let refused = GetBrokerRuntimeInfo::parse_response(answer).unwrap_err();

        assert!(matches!(refused, CallError::Refused { code: ResponseCode::SYSTEM_BUSY, remark: Some(ref r) } if r == "busy"), "{refused:?}");
    }

    #[test]
    fn a_success_whose_body_does_not_read_is_a_bad_response() {
        let request = RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO);
        let answer = RemotingCommand::response_to(&request, ResponseCode::SUCCESS).with_body(&b"not json"[..]);

        assert!(matches!(GetBrokerRuntimeInfo::parse_response(answer), Err(CallError::BadResponse { .. })));
    }

    #[test]
    fn a_runtime_info_body_reads_as_its_table() {
        let request = RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO);
        let answer = RemotingCommand::response_to(&request, ResponseCode::SUCCESS).with_body(&br#"{"table":{"commitLogMaxOffset":"42"}}"#[..]);

        let info = GetBrokerRuntimeInfo::parse_response(answer).unwrap();

        assert_eq!(info.table.get("commitLogMaxOffset").map(String::as_str), Some("42"));
    }
}
