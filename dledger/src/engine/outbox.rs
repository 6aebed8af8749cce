//! What the engine hands back: the actions of one call, and the requests it sent that still
//! wait for an answer.
//!
//! Every request goes out with a token; the driver reports its answer (or its failure) with the
//! same token. The engine does not rely on the driver for that: a request unanswered after
//! [`RPC_TIMEOUT_MS`] (Java's remoting client timeout) counts as failed, as Java's RPC service
//! completes it with NETWORK_ERROR (or, for a vote, an UNKNOWN result). A late answer then finds no
//! token and is dropped.

use std::collections::BTreeMap;

use crate::protocol::{LeadershipTransferRequest, PeerMessage, PushType};

use super::Action;

/// Java's `invokeAsync(..., 3000, ...)` for every DLedger RPC.
pub const RPC_TIMEOUT_MS: u64 = 3_000;

/// What a sent request was for, so that its answer can be routed.
#[derive(Clone, Debug)]
pub(super) enum Sent {
    Vote { round: u64 },
    HeartBeat { round: u64, peer: String },
    Push(PushSent),
    TakeLeadership { admin: Option<u64>, request: LeadershipTransferRequest },
}

#[derive(Clone, Debug)]
pub(super) struct PushSent {
    pub peer: String,
    pub term: i64,
    pub kind: PushType,
    pub batch: bool,
    pub first: i64,
    pub count: i32,
}

#[derive(Debug)]
pub(super) struct Outbox {
    next_token: u64,
    /// By token. Tokens grow and engine time never goes back, so the first entry always has the
    /// earliest deadline.
    outstanding: BTreeMap<u64, (u64, Sent)>,
    pub actions: Vec<Action>,
}

impl Outbox {
    pub fn new() -> Outbox {
        Outbox { next_token: 1, outstanding: BTreeMap::new(), actions: Vec::new() }
    }

    /// Queues a request to `to`; its answer comes back under the returned token.
    pub fn send(&mut self, now: u64, to: &str, msg: PeerMessage, sent: Sent) -> u64 {
        let token = self.next_token;
        self.next_token += 1;
        self.outstanding.insert(token, (now + RPC_TIMEOUT_MS, sent));
        self.actions.push(Action::Send { to: to.to_owned(), token, msg });
        token
    }

    pub fn reply(&mut self, token: u64, msg: PeerMessage) {
        self.actions.push(Action::Reply { token, msg });
    }

    /// The request behind an answer, once: a duplicate or late answer finds nothing.
    pub fn take(&mut self, token: u64) -> Option<Sent> {
        self.outstanding.remove(&token).map(|(_, sent)| sent)
    }

    /// Requests whose time is up, oldest first.
    pub fn expire(&mut self, now: u64) -> Vec<(u64, Sent)> {
        let mut out = Vec::new();
        while let Some(entry) = self.outstanding.first_entry() {
            if entry.get().0 > now {
                break;
            }
            let (token, (_, sent)) = entry.remove_entry();
            out.push((token, sent));
        }
        out
    }

    pub fn next_deadline(&self) -> Option<u64> {
        self.outstanding.first_key_value().map(|(_, (deadline, _))| *deadline)
    }

    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }
}
