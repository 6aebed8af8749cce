//! The RPC side of a member: each request that passed the transport's member checks is queued
//! for the engine's thread with its responder, except METADATA, which the member answers from
//! its published status without waiting.

use std::collections::BTreeMap;

use tokio::sync::mpsc::error::TrySendError;
use tracing::debug;

use super::driver::{AnswerTo, Input, Pending};
use super::{peer_map, NodeHandle};
use crate::config::Peer;
use crate::protocol::*;
use crate::rpc::{Call, DLedgerHandler, Member};

pub(super) struct Handler {
    member: Member,
    peers: BTreeMap<String, String>,
    node: NodeHandle,
}

impl Handler {
    pub(super) fn new(member: Member, peers: &[Peer], node: NodeHandle) -> Handler {
        Handler { member, peers: peer_map(peers), node }
    }

    /// Queues `input`; when the engine's queue is full the request is dropped unanswered (the
    /// requester times out, as with a Java member too busy to answer), except an append, which
    /// is told LEADER_PENDING_FULL at once.
    fn enqueue(&self, input: Input) {
        match self.node.inputs.try_send(input) {
            Ok(()) => {}
            Err(TrySendError::Full(Input::Append { answer: AnswerTo::Rpc(reply), .. })) => {
                let status = self.node.status();
                let base = Base {
                    group: self.member.group.clone(),
                    term: status.term,
                    leader_id: status.leader_id,
                    code: Code::LEADER_PENDING_FULL,
                    ..Base::default()
                };
                reply.send(AppendEntryResponse { base, index: -1, pos: -1 });
            }
            Err(e) => debug!(error = %e, "dledger input queue full or closed; request dropped"),
        }
    }
}

impl DLedgerHandler for Handler {
    fn leader_id(&self) -> Option<String> {
        self.node.status.borrow().leader_id.clone()
    }

    fn handle(&self, call: Call) {
        match call {
            Call::Metadata(_, reply) => {
                let base = Base { group: self.member.group.clone(), leader_id: self.leader_id(), ..Base::default() };
                reply.send(MetadataResponse { base, peers: self.peers.clone() });
            }
            Call::Append(request, reply) => self.enqueue(Input::Append { bodies: vec![request.body], answer: AnswerTo::Rpc(reply) }),
            Call::Get(request, reply) => self.enqueue(Input::Get { request, reply }),
            Call::Vote(request, reply) => self.enqueue(Input::Request { msg: PeerMessage::Vote(request), reply: Pending::Vote(reply) }),
            Call::HeartBeat(request, reply) => self.enqueue(Input::Request { msg: PeerMessage::HeartBeat(request), reply: Pending::HeartBeat(reply) }),
            Call::Push(request, reply) => self.enqueue(Input::Request { msg: PeerMessage::Push(request), reply: Pending::Push(reply) }),
            Call::LeadershipTransfer(request, reply) => {
                self.enqueue(Input::Request { msg: PeerMessage::LeadershipTransfer(request), reply: Pending::Transfer(reply) })
            }
        }
    }
}
