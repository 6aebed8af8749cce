//! The typed requests of `protocol` through `crate::call`: the frames they write and how their
//! answers read (here, so that `call` itself names no request of `protocol`).

use crate::call::*;
use crate::code::{RequestCode, ResponseCode};
use crate::codec::encode_frame;
use crate::command::RemotingCommand;
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
