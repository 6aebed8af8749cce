//! Requests a broker makes of a gRPC consumer for the console (Java's `ProxyRelayService`):
//! GET_CONSUMER_RUNNING_INFO with a thread stack asked for becomes a PrintThreadStackTraceCommand,
//! CONSUME_MESSAGE_DIRECTLY a VerifyMessageCommand, each with a nonce; the client's ThreadStackTrace
//! or VerifyMessageResult on its Telemetry stream answers the broker's request, as Java's proxy
//! answers it. Requests waiting for their client are bounded in number and age.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use remoting::code::{RequestCode, ResponseCode};
use remoting::fastjson::{self, JsonStyle};
use remoting::RemotingCommand;
use serde::Serialize;

use crate::backend::Reply;
use crate::pb;
use crate::pb::Code;

/// Requests waiting for their client's answer, at most (the oldest is dropped past it).
const MAX_WAITING: usize = 1024;
/// A client's answer after this is dropped (the broker has given up on it long before).
const MAX_WAIT: Duration = Duration::from_secs(60);

/// Java's `ConsumerRunningInfo` as a gRPC client's answer fills it: the thread stack only.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RunningInfo<'a> {
    jstack: &'a str,
    mq_pop_table: HashMap<String, String>,
    mq_table: HashMap<String, String>,
    properties: HashMap<String, String>,
    status_table: HashMap<String, String>,
    subscription_set: Vec<String>,
    user_consumer_info: HashMap<String, String>,
}

/// Java's `ConsumeMessageDirectlyResult` of a gRPC client (fastjson leaves out a null result).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DirectResult {
    auto_commit: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    consume_result: Option<&'static str>,
    order: bool,
    remark: &'static str,
    spent_time_mills: i64,
}

enum Kind {
    RunningInfo,
    Verify,
}

struct Waiting {
    kind: Kind,
    /// The broker's request's answer, its code and body still to set.
    response: RemotingCommand,
    reply: Reply,
    since: Instant,
}

#[derive(Default)]
pub(crate) struct Relays {
    waiting: Mutex<(HashMap<String, Waiting>, VecDeque<String>)>,
    next_nonce: AtomicU64,
}

impl Relays {
    /// The Telemetry command a broker's console request becomes, its answer kept until the
    /// client's comes; `None` for other requests, and for a running-info request without a
    /// thread stack (Java's proxy leaves those unanswered too).
    pub(crate) fn command_for(&self, request: &RemotingCommand, message: Option<pb::Message>, reply: Reply) -> Option<pb::telemetry_command::Command> {
        let kind = match RequestCode(request.code) {
            RequestCode::GET_CONSUMER_RUNNING_INFO if request.ext("jstackEnable") == Some("true") => Kind::RunningInfo,
            RequestCode::CONSUME_MESSAGE_DIRECTLY => Kind::Verify,
            _ => return None,
        };
        let nonce = format!("{:016x}", self.next_nonce.fetch_add(1, Ordering::Relaxed));
        let command = match kind {
            Kind::RunningInfo => pb::telemetry_command::Command::PrintThreadStackTraceCommand(pb::PrintThreadStackTraceCommand { nonce: nonce.clone() }),
            Kind::Verify => pb::telemetry_command::Command::VerifyMessageCommand(pb::VerifyMessageCommand { nonce: nonce.clone(), message: Some(message?) }),
        };
        let response = RemotingCommand::response_to(request, ResponseCode::SUCCESS);
        let mut waiting = self.waiting.lock();
        let (by_nonce, order) = &mut *waiting;
        while order.len() >= MAX_WAITING || order.front().is_some_and(|n| by_nonce.get(n).is_none_or(|w| w.since.elapsed() > MAX_WAIT)) {
            let Some(old) = order.pop_front() else { break };
            by_nonce.remove(&old);
        }
        by_nonce.insert(nonce.clone(), Waiting { kind, response, reply, since: Instant::now() });
        order.push_back(nonce);
        Some(command)
    }

    fn take(&self, nonce: &str) -> Option<Waiting> {
        let mut waiting = self.waiting.lock();
        let w = waiting.0.remove(nonce)?;
        waiting.1.retain(|n| n != nonce);
        Some(w)
    }

    /// A client's ThreadStackTrace: the running info with its stack, or Java's refusals.
    pub(crate) fn thread_stack(&self, status: Option<&pb::Status>, answer: pb::ThreadStackTrace) {
        let Some(w) = self.take(&answer.nonce).filter(|w| matches!(w.kind, Kind::RunningInfo)) else { return };
        let mut response = w.response;
        match code_of(status) {
            Code::Ok => {
                let info = RunningInfo {
                    jstack: answer.thread_stack_trace.as_deref().unwrap_or_default(),
                    mq_pop_table: HashMap::new(),
                    mq_table: HashMap::new(),
                    properties: HashMap::new(),
                    status_table: HashMap::new(),
                    subscription_set: Vec::new(),
                    user_consumer_info: HashMap::new(),
                };
                response = response.with_body(fastjson::to_vec(&info, JsonStyle::Fastjson));
            }
            Code::VerifyFifoMessageUnsupported => response = refused(response, ResponseCode::NO_PERMISSION, "forbidden to verify message"),
            _ => response = refused(response, ResponseCode::SYSTEM_ERROR, "verify message failed"),
        }
        (w.reply)(response);
    }

    /// A client's VerifyMessageResult: always a result, its outcome from the status (Java's).
    pub(crate) fn verify_result(&self, status: Option<&pb::Status>, answer: pb::VerifyMessageResult) {
        let Some(w) = self.take(&answer.nonce).filter(|w| matches!(w.kind, Kind::Verify)) else { return };
        let consume_result = match code_of(status) {
            Code::Ok => Some("CR_SUCCESS"),
            Code::FailedToConsumeMessage => Some("CR_LATER"),
            Code::MessageCorrupted => Some("CR_RETURN_NULL"),
            _ => None,
        };
        let result = DirectResult { auto_commit: true, consume_result, order: false, remark: "from gRPC client", spent_time_mills: 0 };
        (w.reply)(w.response.with_body(fastjson::to_vec(&result, JsonStyle::Fastjson)));
    }
}

fn code_of(status: Option<&pb::Status>) -> Code {
    status.and_then(|s| Code::try_from(s.code).ok()).unwrap_or(Code::Unspecified)
}

fn refused(mut response: RemotingCommand, code: ResponseCode, remark: &str) -> RemotingCommand {
    response.code = code.0;
    response.with_remark(remark)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn capture() -> (Reply, Arc<Mutex<Option<RemotingCommand>>>) {
        let got = Arc::new(Mutex::new(None));
        let slot = got.clone();
        (Box::new(move |r| *slot.lock() = Some(r)), got)
    }

    const OK: pb::Status = pb::Status { code: Code::Ok as i32, message: String::new() };

    #[test]
    fn a_thread_stack_answers_the_running_info_request_with_java_s_body() {
        let relays = Relays::default();
        let request = RemotingCommand::request(RequestCode::GET_CONSUMER_RUNNING_INFO).with_ext("jstackEnable", "true");
        let (reply, got) = capture();
        let Some(pb::telemetry_command::Command::PrintThreadStackTraceCommand(c)) = relays.command_for(&request, None, reply) else { panic!() };
        relays.thread_stack(Some(&OK), pb::ThreadStackTrace { nonce: c.nonce.clone(), thread_stack_trace: Some("main\n\tat x".into()) });
        let response = got.lock().take().expect("answered");
        assert_eq!((response.code, response.opaque), (ResponseCode::SUCCESS.0, request.opaque));
        assert_eq!(
            std::str::from_utf8(response.body_bytes()).unwrap(),
            r#"{"jstack":"main\n\tat x","mqPopTable":{},"mqTable":{},"properties":{},"statusTable":{},"subscriptionSet":[],"userConsumerInfo":{}}"#
        );
        // Answered once: a second answer with the same nonce finds nothing.
        relays.thread_stack(Some(&OK), pb::ThreadStackTrace { nonce: c.nonce, thread_stack_trace: None });
        assert!(got.lock().is_none());

        let (reply, _) = capture();
        let no_stack = RemotingCommand::request(RequestCode::GET_CONSUMER_RUNNING_INFO).with_ext("jstackEnable", "false");
        assert!(relays.command_for(&no_stack, None, reply).is_none(), "Java's proxy relays only thread-stack requests");
    }

    #[test]
    fn a_verify_result_answers_consume_message_directly_with_the_outcome_of_its_status() {
        let relays = Relays::default();
        let request = RemotingCommand::request(RequestCode::CONSUME_MESSAGE_DIRECTLY);
        for (code, body) in [
            (Code::Ok, r#"{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"remark":"from gRPC client","spentTimeMills":0}"#),
            (Code::FailedToConsumeMessage, r#"{"autoCommit":true,"consumeResult":"CR_LATER","order":false,"remark":"from gRPC client","spentTimeMills":0}"#),
            (Code::InternalError, r#"{"autoCommit":true,"order":false,"remark":"from gRPC client","spentTimeMills":0}"#),
        ] {
            let (reply, got) = capture();
            let Some(pb::telemetry_command::Command::VerifyMessageCommand(c)) = relays.command_for(&request, Some(pb::Message::default()), reply) else {
                panic!()
            };
            relays.verify_result(Some(&pb::Status { code: code as i32, message: String::new() }), pb::VerifyMessageResult { nonce: c.nonce });
            let response = got.lock().take().expect("answered");
            assert_eq!((response.code, std::str::from_utf8(response.body_bytes()).unwrap()), (ResponseCode::SUCCESS.0, body));
        }
    }

    #[test]
    fn waiting_requests_are_bounded() {
        let relays = Relays::default();
        let request = RemotingCommand::request(RequestCode::CONSUME_MESSAGE_DIRECTLY);
        for _ in 0..MAX_WAITING + 10 {
            let (reply, _) = capture();
            relays.command_for(&request, Some(pb::Message::default()), reply);
        }
        let waiting = relays.waiting.lock();
        assert_eq!((waiting.0.len(), waiting.1.len()), (MAX_WAITING, MAX_WAITING));
    }
}
