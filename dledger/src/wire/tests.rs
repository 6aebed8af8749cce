//! The rules of fastjson that the golden vectors do not pin down by themselves.

use bytes::Bytes;

use super::*;

fn base(group: &str) -> Base {
    Base { group: group.to_owned(), remote_id: Some("n1".into()), local_id: Some("n0".into()), leader_id: Some("n0".into()), term: 4, code: Code::SUCCESS }
}

fn entry(index: i64, body: &'static [u8]) -> Entry {
    Entry { magic: 1, index, term: 4, pos: index * 100, body: Bytes::from_static(body), ..Default::default() }
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap()
}

#[test]
fn keys_are_sorted_and_nulls_left_out() {
    let req = VoteRequest { base: Base { local_id: None, ..base("g") }, ledger_end_index: 9, ledger_end_term: 2 };
    assert_eq!(text(encode(&req)), r#"{"code":200,"group":"g","leaderId":"n0","ledgerEndIndex":9,"ledgerEndTerm":2,"remoteId":"n1","term":4}"#);
}

#[test]
fn an_empty_group_is_written_as_absent() {
    let resp = HeartBeatResponse { base: Base::default() };
    assert_eq!(text(encode(&resp)), r#"{"code":200,"term":-1}"#);
}

#[test]
fn several_entries_travel_as_a_batch_even_unflagged() {
    let push = PushEntryRequest { base: base("g"), commit_index: 1, kind: PushType::Append, entries: vec![entry(1, b"a"), entry(2, b"bc")], batch: false };
    let json = text(encode(&push));
    assert!(json.starts_with(r#"{"batch":true,"batchEntry":[{"body":"YQ==""#), "{json}");
    assert!(json.contains(r#""count":2,"firstEntryIndex":1,"#), "{json}");
    assert!(json.contains(r#""lastEntryIndex":2,"#), "{json}");
    assert!(json.contains(r#""totalSize":99,"#), "{json}");
    assert!(!json.contains(r#""entry""#), "{json}");
    let back: PushEntryRequest = decode(json.as_bytes()).unwrap();
    assert_eq!(back, PushEntryRequest { batch: true, ..push });
}

#[test]
fn a_batch_flag_without_entries_is_no_batch() {
    let push = PushEntryRequest { base: base("g"), commit_index: 1, kind: PushType::Commit, entries: vec![], batch: true };
    let json = text(encode(&push));
    assert!(json.starts_with(r#"{"batch":false,"batchEntry":[],"#), "{json}");
    assert!(json.contains(r#""count":0,"firstEntryIndex":-1,"#), "{json}");
}

#[test]
fn a_batch_wins_over_a_single_entry_on_input() {
    let json = br#"{"entry":{"index":9,"body":"eA=="},"batchEntry":[{"index":1,"body":""},{"index":2}],"type":"APPEND"}"#;
    let push: PushEntryRequest = decode(json).unwrap();
    assert!(push.batch);
    assert_eq!(push.entries.iter().map(|e| e.index).collect::<Vec<_>>(), [1, 2]);
    assert!(push.entries[1].body.is_empty());
}

#[test]
fn what_is_not_one_object_is_refused_with_the_class_named() {
    for (body, what) in [
        (&b""[..], "body is missing"),
        (b"  \n", "body is missing"),
        (b"null", "not a JSON object"),
        (b"[200,\"g\"]", "not a JSON object"),
        (b"\"x\"", "not a JSON object"),
        (b"{", "invalid"),
        (b"{\"term\":1}x", "invalid"),
        (b"{\"term\":1,\"term\":2}", "duplicate field `term`"),
        (b"{\"term\":\"seven\"}", "invalid"),
        (b"{\"term\":1.5}", "invalid"),
        (b"{\"group\":5}", "invalid"),
        (b"\xff\xfe{}", "not a JSON object"),
        (b"{\"group\":\"\xff\"}", "invalid"),
    ] {
        let err = decode::<VoteRequest>(body).unwrap_err().to_string();
        assert!(err.starts_with("VoteRequest body"), "{err}");
        assert!(err.contains(what), "{:?}: {err}", String::from_utf8_lossy(body));
    }
    let err = decode::<PushEntryRequest>(br#"{"type":"SNAPSHOT"}"#).unwrap_err().to_string();
    assert!(err.contains("\"SNAPSHOT\" is not a PushEntryRequest.Type"), "{err}");
    let err = decode::<AppendEntryRequest>(br#"{"body":"@@"}"#).unwrap_err().to_string();
    assert!(err.contains("invalid base64"), "{err}");
    let err = decode::<VoteResponse>(br#"{"voteResult":12}"#).unwrap_err().to_string();
    assert!(err.contains("12 is not an ordinal of VoteResponse.RESULT"), "{err}");
}

#[test]
fn deep_nesting_neither_overflows_the_stack_nor_hides_errors() {
    // An unknown key's value is skipped without recursion, however deep.
    let mut body = String::from(r#"{"zzz":"#);
    body.push_str(&"[".repeat(100_000));
    body.push_str(&"]".repeat(100_000));
    body.push_str(r#","term":3}"#);
    assert_eq!(decode::<HeartBeatRequest>(body.as_bytes()).unwrap().base.term, 3);
    // Unbalanced, it is an error.
    let mut body = String::from(r#"{"zzz":"#);
    body.push_str(&"{\"a\":".repeat(50_000));
    assert!(decode::<HeartBeatRequest>(body.as_bytes()).is_err());
    // Known fields have a fixed depth: nesting where an entry belongs is a type error.
    let mut body = String::from(r#"{"entries":"#);
    body.push_str(&"[".repeat(100_000));
    assert!(decode::<GetEntriesResponse>(body.as_bytes()).is_err());
}

#[test]
fn bodies_over_the_frame_limit_are_refused_before_parsing() {
    let mut body = vec![b' '; MAX_BODY_BYTES + 1];
    body[0] = b'{';
    let err = decode::<AppendEntryRequest>(&body).unwrap_err();
    assert!(matches!(err, WireError::TooLarge { size_bytes, .. } if size_bytes == MAX_BODY_BYTES + 1), "{err}");
}

#[test]
fn null_index_list_members_are_dropped() {
    let req: GetEntriesRequest = decode(br#"{"indexList":[1,null,"3"],"beginIndex":null}"#).unwrap();
    assert_eq!(req.index_list, Some(vec![1, 3]));
    assert_eq!(req.begin_index, None);
}

#[test]
fn peers_keep_the_last_of_a_repeated_key_and_skip_nulls() {
    let resp: MetadataResponse = decode(br#"{"peers":{"n0":"a:1","n1":null,"n0":"b:2"}}"#).unwrap();
    assert_eq!(resp.peers.into_iter().collect::<Vec<_>>(), [("n0".to_owned(), "b:2".to_owned())]);
}
