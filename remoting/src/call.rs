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

/// Typed calls by address: a connection is made or reused as for `invoke`.
impl crate::client::RemotingClient {
    /// Sends a typed request and reads its typed answer.
    pub async fn call<R: RemotingRequest>(&self, addr: &str, request: R, timeout: std::time::Duration) -> Result<R::Response, CallError> {
        let response = self.invoke(addr, command_of(request), timeout).await?;
        R::parse_response(response)
    }

    /// Sends a typed request marked oneway.
    pub async fn call_oneway<R: RemotingRequest>(&self, addr: &str, request: R) -> Result<(), ClientError> {
        self.invoke_oneway(addr, command_of(request)).await
    }
}

/// Typed calls on one connection.
impl crate::connection::Channel {
    /// Sends a typed request and reads its typed answer.
    pub async fn call<R: RemotingRequest>(&self, request: R, timeout: std::time::Duration) -> Result<R::Response, CallError> {
        let response = self.invoke(command_of(request), timeout).await?;
        R::parse_response(response)
    }

    /// Sends a typed request marked oneway; nothing comes back.
    pub fn call_oneway<R: RemotingRequest>(&self, request: R) -> Result<(), ChannelError> {
        self.invoke_oneway(command_of(request))
    }
}
