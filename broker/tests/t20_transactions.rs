//! Transactions through the socket: half messages stay invisible until committed, rollback drops
//! them, and an unresolved one is checked back with the producer, which answers END_TRANSACTION.

use std::sync::Arc;
use std::time::{Duration, Instant};

use broker::controller::BrokerController;
use broker::transaction::{CheckTransactionStateRequestHeader, EndTransactionRequestHeader};
use remoting::client::{ClientConfig, RemotingClient};
use remoting::connection::{InFlight, InboundHandler};
use remoting::protocol::broker::SendMessageRequestHeader;
use remoting::server::Channel;
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use store::message::record::{decode_record, RecordAt};

mod common;

use common::*;

async fn start_checking(dir: &std::path::Path) -> BrokerController {
    start(dir, &[("transactionCheckInterval", "300"), ("transactionTimeOut", "200")]).await
}

/// Answers every check with "commit", as a producer whose local transaction succeeded.
struct CommitOnCheck {
    checks: std::sync::Mutex<Vec<i64>>,
}

impl InboundHandler for CommitOnCheck {
    fn on_request(&self, channel: &Channel, request: RemotingCommand, _: InFlight) {
        if request.request_code() != RequestCode::CHECK_TRANSACTION_STATE {
            return;
        }
        let h: CheckTransactionStateRequestHeader = request.decode_header().unwrap();
        // The body shows the message in its real topic.
        let Ok(RecordAt::Record(r)) = decode_record(request.body_bytes(), true) else { panic!("bad check body") };
        assert_eq!(r.topic, "Payments");
        self.checks.lock().unwrap().push(h.commit_log_offset);
        let end = EndTransactionRequestHeader {
            producer_group: "txg".into(),
            tran_state_table_offset: h.tran_state_table_offset,
            commit_log_offset: h.commit_log_offset,
            commit_or_rollback: 8,
            from_transaction_check: Some(true),
            msg_id: h.msg_id.unwrap_or_default(),
            transaction_id: h.transaction_id,
        };
        channel.invoke_oneway(RemotingCommand::request_with_header(RequestCode::END_TRANSACTION, &end)).unwrap();
    }
}

fn prepared(body: &str, uniq: &str) -> RemotingCommand {
    let h = SendMessageRequestHeader {
        producer_group: "txg".into(),
        sys_flag: 0x4,
        ..send_header("Payments", 0, &format!("TRAN_MSG\u{1}true\u{2}PGROUP\u{1}txg\u{2}UNIQ_KEY\u{1}{uniq}\u{2}"))
    };
    send_request(h, body)
}

fn end(send_response: &RemotingCommand, commit_or_rollback: i32) -> RemotingCommand {
    let offset = store::message::decode_offset_message_id(send_response.ext("msgId").unwrap()).unwrap().1;
    let h = EndTransactionRequestHeader {
        producer_group: "txg".into(),
        tran_state_table_offset: send_response.ext("queueOffset").unwrap().parse().unwrap(),
        commit_log_offset: offset,
        commit_or_rollback,
        msg_id: "x".into(),
        ..Default::default()
    };
    RemotingCommand::request_with_header(RequestCode::END_TRANSACTION, &h)
}

async fn pull_all(c: &RemotingClient, addr: &str) -> Vec<(String, i32)> {
    {
        let r = c.invoke(addr, pull_as("reader", "Payments", 0, 0, 0), TIMEOUT).await.unwrap();
        let mut out = Vec::new();
        let mut rest = r.body_bytes();
        while !rest.is_empty() {
            let Ok(RecordAt::Record(m)) = decode_record(rest, true) else { panic!() };
            assert!(m.property("TRAN_MSG").is_none());
            out.push((String::from_utf8_lossy(m.body).into_owned(), m.sys_flag & 0xC));
            rest = &rest[m.store_size as usize..];
        }
        out
    }
}

/// Pulls until `n` messages are visible (dispatch runs behind the append), or fails at the deadline.
async fn wait_for(c: &RemotingClient, addr: &str, n: usize) -> Vec<(String, i32)> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let got = pull_all(c, addr).await;
        if got.len() >= n {
            return got;
        }
        assert!(Instant::now() < deadline, "only {got:?} became visible");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn commit_rollback_and_check_back() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_checking(dir.path()).await;
    let addr = broker.local_addr().to_string();
    let handler = Arc::new(CommitOnCheck { checks: std::sync::Mutex::new(Vec::new()) });
    let c = RemotingClient::with_handler(ClientConfig::default(), handler.clone());
    let heartbeat = r#"{"clientID":"tx-client","consumerDataSet":[],"producerDataSet":[{"groupName":"txg"}]}"#;
    assert_eq!(c.invoke(&addr, RemotingCommand::request(RequestCode::HEART_BEAT).with_body(heartbeat.as_bytes().to_vec()), TIMEOUT).await.unwrap().code, 0);

    let a = c.invoke(&addr, prepared("committed", "A"), TIMEOUT).await.unwrap();
    assert_eq!((a.code, a.ext("transactionId")), (0, Some("A")));
    assert!(pull_all(&c, &addr).await.is_empty(), "a half message is invisible");
    assert_eq!(c.invoke(&addr, end(&a, 8), TIMEOUT).await.unwrap().code, 0);
    assert_eq!(wait_for(&c, &addr, 1).await, vec![("committed".to_owned(), 8)]);

    let b = c.invoke(&addr, prepared("rolled back", "B"), TIMEOUT).await.unwrap();
    assert_eq!(c.invoke(&addr, end(&b, 12), TIMEOUT).await.unwrap().code, 0);
    let wrong = c.invoke(&addr, end(&a, 12).with_ext("producerGroup", "other"), TIMEOUT).await.unwrap();
    assert_eq!((wrong.response_code(), wrong.remark.as_deref()), (ResponseCode::SYSTEM_ERROR, Some("The producer group wrong")));

    c.invoke(&addr, prepared("checked", "C"), TIMEOUT).await.unwrap();
    let got = wait_for(&c, &addr, 2).await;
    assert_eq!(got, vec![("committed".to_owned(), 8), ("checked".to_owned(), 8)], "the rolled-back one never shows");
    assert_eq!(handler.checks.lock().unwrap().len(), 1, "one check for the one open transaction");
    broker.shutdown().await;
}
