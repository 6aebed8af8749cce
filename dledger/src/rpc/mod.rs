//! DLedger's RPC transport on the remoting crate, as `DLedgerRpcNettyService` (0.3.1.2) runs it:
//! one remoting request per RPC, code [`request_code`], body the request's fastjson JSON
//! ([`crate::wire`]); the answer always has remoting code 200 and the DLedger outcome in the
//! body's `code`.
//!
//! - [`server`]: the codes registered on a remoting [`ProcessorRegistry`](remoting::server::ProcessorRegistry),
//!   the member checks every Java handler starts with, and the [`DLedgerHandler`] the engine's
//!   driver implements, answering now or later through a [`Responder`];
//! - [`peer`]: [`PeerClient`], a typed request to a peer's address and its typed answer (Java's
//!   3 s timeout, reconnects, a bound on requests in flight per peer).

pub mod peer;
pub mod server;

pub use peer::{PeerClient, PeerClientConfig, RpcError};
pub use server::{register, Call, DLedgerHandler, DLedgerRpcServer, Member, Responder};

use crate::protocol::*;
use crate::wire::{JsonBody, PullEntriesRequest, PullEntriesResponse};

/// A request body, with its code and the type of its answer.
pub trait RpcRequest: JsonBody + Send + Sync {
    const CODE: i32;
    /// The name of [`Self::CODE`] in `DLedgerRequestCode`.
    const NAME: &'static str;
    type Response: RpcResponse;
    fn base(&self) -> &Base;
    fn base_mut(&mut self) -> &mut Base;
}

/// A response body.
pub trait RpcResponse: JsonBody + Send + 'static {
    /// A fresh Java response object after `copyBaseInfo(request)`: the base fields given, every
    /// other field at its initial value (what Java's error answers are made of).
    fn with_base(base: Base) -> Self;
    fn base(&self) -> &Base;
}

macro_rules! rpc {
    ($req:ty => $resp:ty, $code:expr, $name:literal, |$b:ident| $fresh:expr) => {
        impl RpcRequest for $req {
            const CODE: i32 = $code;
            const NAME: &'static str = $name;
            type Response = $resp;
            fn base(&self) -> &Base {
                &self.base
            }
            fn base_mut(&mut self) -> &mut Base {
                &mut self.base
            }
        }

        impl RpcResponse for $resp {
            fn with_base($b: Base) -> Self {
                $fresh
            }
            fn base(&self) -> &Base {
                &self.base
            }
        }
    };
}

rpc!(MetadataRequest => MetadataResponse, request_code::METADATA, "METADATA", |base| MetadataResponse { base, peers: Default::default() });
rpc!(AppendEntryRequest => AppendEntryResponse, request_code::APPEND, "APPEND", |base| AppendEntryResponse { base, index: -1, pos: -1 });
rpc!(GetEntriesRequest => GetEntriesResponse, request_code::GET, "GET", |base| GetEntriesResponse { base, entries: Vec::new() });
rpc!(VoteRequest => VoteResponse, request_code::VOTE, "VOTE", |base| VoteResponse { base, vote_result: VoteResult::Unknown });
rpc!(HeartBeatRequest => HeartBeatResponse, request_code::HEART_BEAT, "HEART_BEAT", |base| HeartBeatResponse { base });
rpc!(PullEntriesRequest => PullEntriesResponse, request_code::PULL, "PULL", |base| PullEntriesResponse { base, entries: Vec::new() });
rpc!(PushEntryRequest => PushEntryResponse, request_code::PUSH, "PUSH", |base| PushEntryResponse {
    base,
    index: None,
    begin_index: 0,
    end_index: 0,
    count: 0
});
rpc!(LeadershipTransferRequest => LeadershipTransferResponse, request_code::LEADERSHIP_TRANSFER, "LEADERSHIP_TRANSFER", |base| {
    LeadershipTransferResponse { base }
});
