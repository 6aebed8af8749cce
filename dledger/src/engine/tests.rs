//! Exact actions for the key transitions, one engine at a time (the simulation covers groups).

use bytes::Bytes;

use super::*;
use crate::entry::Entry;
use crate::mem_log::{MemLog, MemTerms};
use crate::protocol::{
    HeartBeatRequest, HeartBeatResponse, LeadershipTransferRequest, LeadershipTransferResponse, PushEntryRequest, PushEntryResponse, PushType, VoteRequest,
    VoteResponse, VoteResult,
};

const T0: u64 = 10_000_000;

fn config(self_id: &str, members: usize) -> DLedgerConfig {
    let peers: Vec<String> = (0..members).map(|i| format!("n{i}-127.0.0.1:{}", 40_911 + i)).collect();
    DLedgerConfig { group: "g".into(), self_id: self_id.into(), peers: peers.join(";"), ..DLedgerConfig::default() }
}

/// A log holding one entry per term given (index 0 first).
fn log_with(terms: &[i64]) -> MemLog {
    let mut log = MemLog::new(1 << 20);
    for (i, &t) in terms.iter().enumerate() {
        log.append_as_leader(t, Bytes::from(format!("e{i}"))).unwrap();
    }
    log
}

fn member(self_id: &str, members: usize, log: MemLog, term: i64, vote: Option<&str>) -> Engine<MemLog, MemTerms> {
    let terms = MemTerms { term, vote: vote.map(str::to_owned), ..MemTerms::default() };
    Engine::new(&config(self_id, members), log, terms, 7, T0).unwrap()
}

fn base(from: &str, to: &str, leader: Option<&str>, term: i64) -> Base {
    Base { group: "g".into(), remote_id: Some(to.into()), local_id: Some(from.into()), leader_id: leader.map(str::to_owned), term, code: Code::SUCCESS }
}

fn vote_req(candidate: &str, to: &str, term: i64, end_index: i64, end_term: i64) -> PeerMessage {
    PeerMessage::Vote(VoteRequest { base: base(candidate, to, Some(candidate), term), ledger_end_index: end_index, ledger_end_term: end_term })
}

fn heartbeat(leader: &str, to: &str, term: i64) -> PeerMessage {
    PeerMessage::HeartBeat(HeartBeatRequest { base: base(leader, to, Some(leader), term) })
}

fn push(leader: &str, to: &str, term: i64, kind: PushType, entries: Vec<Entry>, commit: i64) -> PeerMessage {
    PeerMessage::Push(PushEntryRequest { base: base(leader, to, Some(leader), term), commit_index: commit, kind, entries, batch: false })
}

/// The actions without the trailing WakeAt (checked to be there, and last).
fn body(mut actions: Vec<Action>) -> Vec<Action> {
    assert!(matches!(actions.pop(), Some(Action::WakeAt { .. })), "WakeAt comes last");
    assert!(!actions.iter().any(|a| matches!(a, Action::WakeAt { .. })));
    actions
}

fn wake(actions: &[Action]) -> u64 {
    match actions.last() {
        Some(Action::WakeAt { at_ms }) => *at_ms,
        other => panic!("no WakeAt: {other:?}"),
    }
}

fn sent(actions: &[Action]) -> Vec<(String, u64, PeerMessage)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send { to, token, msg } => Some((to.clone(), *token, msg.clone())),
            _ => None,
        })
        .collect()
}

fn vote_answer(actions: &[Action]) -> (VoteResult, i64) {
    let r = vote_reply(actions);
    (r.vote_result, r.base.term)
}

fn vote_reply(actions: &[Action]) -> VoteResponse {
    let replies: Vec<&VoteResponse> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Reply { msg: PeerMessage::VoteResponse(r), .. } => Some(r),
            _ => None,
        })
        .collect();
    match replies[..] {
        [r] => r.clone(),
        _ => panic!("not one vote answer: {actions:?}"),
    }
}

/// The voter's answer to one request, with the voter built fresh.
fn vote_on(log: &[i64], term: i64, vote: Option<&str>, req: PeerMessage) -> (VoteResult, i64, Engine<MemLog, MemTerms>) {
    let mut e = member("n0", 3, log_with(log), term, vote);
    let (result, t) = vote_answer(&e.on_request(T0, 1, req));
    (result, t, e)
}

#[test]
fn vote_rules_apply_in_java_order() {
    // 1. Unknown candidate first, even with a stale ledger and a newer term.
    assert_eq!(vote_on(&[1, 2], 2, None, vote_req("n9", "n0", 9, -1, -1)).0, VoteResult::RejectUnknownLeader);
    // ... and a remote request naming us.
    assert_eq!(vote_on(&[1], 1, None, vote_req("n0", "n0", 9, 5, 5)).0, VoteResult::RejectUnexpectedLeader);
    // 2. The ledger before the term: a newer term with an older ledger is refused without
    //    making us a candidate of that term.
    let (r, t, e) = vote_on(&[1, 2], 2, None, vote_req("n1", "n0", 9, 5, 1));
    assert_eq!((r, t), (VoteResult::RejectExpiredLedgerTerm, 2));
    assert_eq!(e.m.known_max_term, -1);
    assert_eq!(vote_on(&[1, 2], 2, None, vote_req("n1", "n0", 9, 0, 2)).0, VoteResult::RejectSmallLedgerEndIndex);
    // 3. The term: older refused with ours; ours needs our vote free (or already its).
    assert_eq!(vote_on(&[1], 4, None, vote_req("n1", "n0", 3, 0, 1)).0, VoteResult::RejectExpiredVoteTerm);
    assert_eq!(vote_on(&[1], 4, None, vote_req("n1", "n0", 3, 0, 1)).1, 4);
    assert_eq!(vote_on(&[1], 4, Some("n2"), vote_req("n1", "n0", 4, 0, 1)).0, VoteResult::RejectAlreadyVoted);
    assert_eq!(vote_on(&[1], 4, Some("n1"), vote_req("n1", "n0", 4, 0, 1)).0, VoteResult::Accept);
    // Newer: we become a candidate of it and vote nothing now; the state maintainer then takes
    // the term (persisted, no vote) and waits an interval before its own round.
    let mut e = member("n0", 3, log_with(&[1]), 4, None);
    body(e.tick(T0)); // its own first round, in term 4
    let actions = body(e.on_request(T0 + 1, 1, vote_req("n1", "n0", 6, 0, 1)));
    assert_eq!(actions[0], Action::RoleChanged { role: Role::Candidate, term: 4, leader_id: None });
    assert_eq!(actions.len(), 2, "{actions:?}");
    assert_eq!(vote_answer(&actions), (VoteResult::RejectTermNotReady, 4));
    assert_eq!((e.term(), e.voted_for()), (6, None));
    assert_eq!(e.terms_mut().term, 6);
    assert!(!e.el.need_increase_term);
    // 4. A term below our last entry's cannot lead (answered with our ledger end term).
    let (r, t, _) = vote_on(&[1, 5], 3, None, vote_req("n1", "n0", 3, 1, 5));
    assert_eq!((r, t), (VoteResult::RejectTermSmallThanLedger, 5));
    // 6. The vote is persisted before the answer goes out.
    let (r, _, mut e) = vote_on(&[1], 2, None, vote_req("n1", "n0", 2, 0, 1));
    assert_eq!(r, VoteResult::Accept);
    assert_eq!(e.voted_for(), Some("n1"));
    assert_eq!((e.terms_mut().term, e.terms_mut().vote.as_deref()), (2, Some("n1")));
}

#[test]
fn a_known_leader_turns_a_second_candidate_away_with_already_has_leader() {
    let mut e = member("n0", 3, log_with(&[1]), 2, None);
    body(e.on_request(T0, 1, heartbeat("n1", "n0", 2)));
    assert_eq!((e.role(), e.leader_id()), (Role::Follower, Some("n1")));
    assert!(e.record_vote("n1"));
    let (r, _) = vote_answer(&e.on_request(T0, 2, vote_req("n2", "n0", 2, 0, 1)));
    assert_eq!(r, VoteResult::RejectAlreadyHasLeader);
}

#[test]
fn a_vote_that_cannot_be_persisted_is_not_given() {
    let mut e = member("n0", 3, log_with(&[1]), 2, None);
    e.terms_mut().fail_next = true;
    body(e.tick(T0)); // its own first round votes for itself in term 2
    body(e.on_request(T0 + 1, 1, vote_req("n1", "n0", 3, 0, 1))); // takes term 3, no vote
    assert_eq!((e.term(), e.voted_for()), (3, None));
    e.terms_mut().fail_next = true;
    let r = vote_reply(&e.on_request(T0 + 2, 2, vote_req("n1", "n0", 3, 0, 1)));
    assert_eq!((r.vote_result, r.base.code), (VoteResult::Unknown, Code::DISK_ERROR));
    assert_eq!(e.voted_for(), None);
}

#[test]
fn requests_for_another_member_or_group_are_refused_before_any_rule() {
    let mut e = member("n0", 3, log_with(&[]), 1, None);
    let r = vote_reply(&e.on_request(T0, 1, vote_req("n1", "n2", 1, -1, -1)));
    assert_eq!((r.base.code, r.vote_result), (Code::UNKNOWN_MEMBER, VoteResult::Unknown));
    let mut req = vote_req("n1", "n0", 1, -1, -1);
    if let PeerMessage::Vote(v) = &mut req {
        v.base.group = "other".into();
    }
    let r = vote_reply(&e.on_request(T0, 2, req));
    assert_eq!(r.base.code, Code::UNKNOWN_GROUP);
}

#[test]
fn heartbeat_rules_follow_java() {
    let hb = |e: &mut Engine<MemLog, MemTerms>, req| -> (Code, i64) {
        let actions = e.on_request(T0, 1, req);
        match &actions[0] {
            Action::Reply { msg: PeerMessage::HeartBeatResponse(r), .. } => (r.base.code, r.base.term),
            other => panic!("{other:?}"),
        }
    };
    let mut e = member("n0", 3, log_with(&[]), 3, None);
    body(e.tick(T0)); // its own first round
    assert_eq!(hb(&mut e, heartbeat("n7", "n0", 3)), (Code::UNKNOWN_MEMBER, 3));
    assert_eq!(hb(&mut e, heartbeat("n0", "n0", 3)), (Code::UNEXPECTED_MEMBER, 3));
    assert_eq!(hb(&mut e, heartbeat("n1", "n0", 2)), (Code::EXPIRED_TERM, 3));
    // Same term, no leader known: follow it.
    let actions = body(e.on_request(T0, 1, heartbeat("n1", "n0", 3)));
    assert_eq!(
        actions,
        vec![
            Action::RoleChanged { role: Role::Follower, term: 3, leader_id: Some("n1".into()) },
            Action::Reply { token: 1, msg: PeerMessage::HeartBeatResponse(HeartBeatResponse { base: Base::default() }) },
        ]
    );
    assert_eq!(hb(&mut e, heartbeat("n1", "n0", 3)), (Code::SUCCESS, -1));
    assert_eq!(hb(&mut e, heartbeat("n2", "n0", 3)), (Code::INCONSISTENT_LEADER, -1));
    // A newer term: candidate first; the state maintainer takes the term, without a vote yet.
    let actions = body(e.on_request(T0, 1, heartbeat("n2", "n0", 5)));
    assert_eq!(actions.len(), 2, "{actions:?}");
    assert_eq!(actions[0], Action::RoleChanged { role: Role::Candidate, term: 3, leader_id: None });
    assert!(matches!(&actions[1], Action::Reply { msg: PeerMessage::HeartBeatResponse(r), .. } if r.base.code == Code::TERM_NOT_READY));
    assert_eq!(e.term(), 5);
}

/// n0 of `members`, elected in `term` over `log`: the actions of the election.
fn elect(members: usize, log: MemLog, term: i64) -> (Engine<MemLog, MemTerms>, Vec<Action>) {
    let mut e = member("n0", members, log, term, None);
    let votes = sent(&e.tick(T0));
    assert_eq!(votes.len(), members - 1);
    let mut actions = Vec::new();
    for (to, token, msg) in votes {
        let PeerMessage::Vote(req) = msg else { panic!("{msg:?}") };
        assert_eq!((req.base.term, req.base.remote_id.as_deref()), (term, Some(to.as_str())));
        let answer = VoteResponse { base: Base { term, ..req.base }, vote_result: VoteResult::Accept };
        actions.extend(e.on_response(T0 + 1, token, Ok(PeerMessage::VoteResponse(answer))));
        if e.role() == Role::Leader {
            break;
        }
    }
    assert_eq!(e.role(), Role::Leader);
    // The first heartbeats go out after the elector's pause, and the COMPAREs right after them;
    // the heartbeats are left out here (tests of the push answer the COMPAREs).
    assert!(sent(&actions).iter().all(|(_, _, m)| !matches!(m, PeerMessage::Push(_))), "no push before the first heartbeats");
    actions.retain(|a| !matches!(a, Action::WakeAt { .. }));
    let later = e.tick(T0 + 1 + super::election::MAINTAIN_PAUSE_MS);
    assert!(sent(&later).iter().any(|(_, _, m)| matches!(m, PeerMessage::HeartBeat(_))), "the first heartbeats");
    actions.extend(later.into_iter().filter(|a| !matches!(a, Action::Send { msg: PeerMessage::HeartBeat(_), .. })));
    (e, actions)
}

#[test]
fn a_new_member_campaigns_at_once_in_its_persisted_term() {
    let mut e = member("n0", 3, log_with(&[1, 1]), 4, None);
    let actions = e.tick(T0);
    let votes = sent(&actions);
    assert_eq!(votes.len(), 2);
    for (to, _, msg) in &votes {
        assert_eq!(msg, &vote_req("n0", to, 4, 1, 1));
    }
    assert_eq!(e.voted_for(), Some("n0"), "its own vote, through the same rules");
    // The round waits 2 s + rand(maxVoteIntervalMs) at most.
    assert!((T0 + 2_000..T0 + 3_000).contains(&wake(&actions)), "{}", wake(&actions));
}

#[test]
fn a_member_that_voted_for_itself_starts_in_a_new_term() {
    let mut e = member("n0", 3, log_with(&[1]), 4, Some("n0"));
    let votes = sent(&e.tick(T0));
    assert!(votes.iter().all(|(_, _, m)| matches!(m, PeerMessage::Vote(v) if v.base.term == 5)));
    assert_eq!(e.term(), 5);
}

#[test]
fn winning_a_quorum_makes_a_leader_that_compares_with_every_follower() {
    let (e, actions) = elect(3, log_with(&[1, 1, 2]), 3);
    let actions = body(actions);
    assert_eq!(actions[0], Action::RoleChanged { role: Role::Leader, term: 3, leader_id: Some("n0".into()) });
    let compares: Vec<_> = sent(&actions).into_iter().map(|(to, _, m)| (to, m)).collect();
    let entry = e.log().get(2).unwrap();
    assert_eq!(
        compares,
        vec![
            ("n1".to_string(), push("n0", "n1", 3, PushType::Compare, vec![entry.clone()], -1)),
            ("n2".to_string(), push("n0", "n2", 3, PushType::Compare, vec![entry], -1)),
        ]
    );
}

#[test]
fn a_round_refused_by_a_known_leader_waits_the_heartbeat_leak_longer() {
    let mut e = member("n0", 3, log_with(&[]), 1, None);
    let votes = sent(&e.tick(T0));
    for (_, token, msg) in votes {
        let PeerMessage::Vote(req) = msg else { panic!() };
        let answer = VoteResponse { base: Base { term: 1, ..req.base }, vote_result: VoteResult::RejectAlreadyHasLeader };
        e.on_response(T0 + 5, token, Ok(PeerMessage::VoteResponse(answer)));
    }
    assert_eq!(e.role(), Role::Candidate);
    assert_eq!(e.el.last_parse, election::ParseResult::WaitToRevote);
    // next = now + 300..1000 + 3 * 2000
    let next = e.el.next_vote_at;
    let now = e.clock.advance(T0 + 5);
    assert!((now + 6_300..now + 7_000).contains(&next), "{next} from {now}");
}

fn push_answer(kind: PushType, term: i64, index: Option<i64>, begin: i64, end: i64, code: Code) -> PeerMessage {
    PeerMessage::PushResponse(PushEntryResponse {
        base: Base { group: "g".into(), term, code, ..Base::default() },
        index,
        begin_index: begin,
        end_index: end,
        count: i32::from(kind != PushType::Commit),
    })
}

/// Elects n0 of 3 over 0..=9 and answers n1's first COMPARE (at 9) with `answer`: what n0 sends
/// n1 next.
fn after_compare(code: Code, begin: i64, end: i64) -> Vec<(String, PeerMessage)> {
    let (mut e, actions) = elect(3, log_with(&[1; 10]), 2);
    let (_, token, _) = sent(&actions).into_iter().find(|(to, _, _)| to == "n1").unwrap();
    let next = e.on_response(T0 + 2, token, Ok(push_answer(PushType::Compare, 2, Some(9), begin, end, code)));
    sent(&next).into_iter().filter(|(to, _, _)| to == "n1").map(|(to, _, m)| (to, m)).collect()
}

fn kind_and_index(sends: &[(String, PeerMessage)]) -> Vec<(PushType, i64)> {
    sends
        .iter()
        .map(|(_, m)| match m {
            PeerMessage::Push(p) => (p.kind, p.entries.first().map_or(-1, |e| e.index)),
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn compare_decisions_follow_do_compare() {
    // Equal at our end and nothing after: APPEND from 10 (nothing to send yet: a COMMIT).
    assert_eq!(kind_and_index(&after_compare(Code::SUCCESS, 0, 9)), vec![(PushType::Commit, -1)]);
    // Equal, but the follower is longer: TRUNCATE there.
    assert_eq!(kind_and_index(&after_compare(Code::SUCCESS, 0, 12)), vec![(PushType::Truncate, 9)]);
    // The follower ends before: compare at its end.
    assert_eq!(kind_and_index(&after_compare(Code::INCONSISTENT_STATE, 0, 4)), vec![(PushType::Compare, 4)]);
    // Differs inside the follower's range: one back.
    assert_eq!(kind_and_index(&after_compare(Code::INCONSISTENT_STATE, 0, 15)), vec![(PushType::Compare, 8)]);
    // No overlap: start the follower over from our first entry.
    assert_eq!(kind_and_index(&after_compare(Code::INCONSISTENT_STATE, 20, 30)), vec![(PushType::Truncate, 0)]);
    // The compared index is below the follower's begin: the same.
    assert_eq!(kind_and_index(&after_compare(Code::INCONSISTENT_STATE, 9, 9)), vec![(PushType::Compare, 8)]);
    assert_eq!(kind_and_index(&after_compare(Code::INCONSISTENT_STATE, 10, 12)), vec![(PushType::Truncate, 0)]);
    // Any other code: nothing now, COMPARE again from our end after 500 ms.
    assert_eq!(kind_and_index(&after_compare(Code::NOT_FOLLOWER, 0, 9)), vec![]);
}

#[test]
fn an_error_pauses_the_dispatcher_half_a_second_then_compares_from_the_end() {
    let (mut e, actions) = elect(3, log_with(&[1; 10]), 2);
    let (_, token, _) = sent(&actions).into_iter().find(|(to, _, _)| to == "n1").unwrap();
    e.on_response(T0 + 2, token, Ok(push_answer(PushType::Compare, 2, Some(9), 0, 9, Code::NOT_FOLLOWER)));
    let quiet: Vec<_> = sent(&e.tick(T0 + 400)).into_iter().filter(|(to, _, m)| to == "n1" && matches!(m, PeerMessage::Push(_))).collect();
    assert!(quiet.is_empty());
    let again: Vec<_> = sent(&e.tick(T0 + 503)).into_iter().filter(|(to, _, m)| to == "n1" && matches!(m, PeerMessage::Push(_))).collect();
    assert_eq!(kind_and_index(&again.into_iter().map(|(t, _, m)| (t, m)).collect::<Vec<_>>()), vec![(PushType::Compare, 9)]);
}

#[test]
fn a_follower_that_acknowledged_more_is_checked_at_its_watermark_before_any_truncate() {
    // The leader compares at 5 (the follower's end then); an APPEND of 6 lands and is
    // acknowledged before the COMPARE's answer, which now says the follower ends at 6.
    let (mut e, actions) = elect(3, log_with(&[1; 8]), 2);
    let (_, token, _) = sent(&actions).into_iter().find(|(to, _, _)| to == "n1").unwrap();
    let next = e.on_response(T0 + 2, token, Ok(push_answer(PushType::Compare, 2, Some(7), 0, 5, Code::INCONSISTENT_STATE)));
    let (_, token, _) = sent(&next).into_iter().find(|(to, _, _)| to == "n1").unwrap();
    e.q.update_watermark(2, "n1", 6);
    let next = e.on_response(T0 + 3, token, Ok(push_answer(PushType::Compare, 2, Some(5), 0, 6, Code::SUCCESS)));
    let to_n1: Vec<_> = sent(&next).into_iter().filter(|(to, _, _)| to == "n1").map(|(t, _, m)| (t, m)).collect();
    assert_eq!(kind_and_index(&to_n1), vec![(PushType::Compare, 6)], "Java would truncate at 5 and drop the acknowledged 6");
}

/// n0 following n1 in term 2, with an empty log.
fn follower() -> Engine<MemLog, MemTerms> {
    let mut e = member("n0", 3, MemLog::new(1 << 20), 2, None);
    body(e.on_request(T0, 100, heartbeat("n1", "n0", 2)));
    assert_eq!(e.role(), Role::Follower);
    e
}

fn leader_entries(n: usize, term: i64) -> Vec<Entry> {
    let mut log = MemLog::new(1 << 20);
    (0..n).map(|i| log.append_as_leader(term, Bytes::from(format!("e{i}"))).unwrap()).collect()
}

fn push_replies(actions: &[Action]) -> Vec<(u64, Code, Option<i64>)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Reply { token, msg: PeerMessage::PushResponse(r) } => Some((*token, r.base.code, r.index)),
            _ => None,
        })
        .collect()
}

#[test]
fn parked_appends_are_applied_in_index_order() {
    let mut f = follower();
    let es = leader_entries(3, 2);
    let a2 = body(f.on_request(T0 + 1, 12, push("n1", "n0", 2, PushType::Append, vec![es[2].clone()], 1)));
    assert!(a2.is_empty(), "parked: {a2:?}");
    let dup = body(f.on_request(T0 + 1, 13, push("n1", "n0", 2, PushType::Append, vec![es[2].clone()], 1)));
    assert_eq!(push_replies(&dup), vec![(13, Code::REPEATED_PUSH, Some(2))]);
    assert!(body(f.on_request(T0 + 2, 11, push("n1", "n0", 2, PushType::Append, vec![es[1].clone()], 1))).is_empty());
    let all = body(f.on_request(T0 + 3, 10, push("n1", "n0", 2, PushType::Append, vec![es[0].clone()], 1)));
    assert_eq!(
        all,
        vec![
            Action::Reply { token: 10, msg: push_answer(PushType::Append, 2, Some(0), 0, 0, Code::SUCCESS) },
            Action::Reply { token: 11, msg: push_answer(PushType::Append, 2, Some(1), 0, 1, Code::SUCCESS) },
            Action::Reply { token: 12, msg: push_answer(PushType::Append, 2, Some(2), 0, 2, Code::SUCCESS) },
            Action::Committed { index: 1 },
        ]
    );
    assert_eq!(f.log().entries(), &es[..]);
}

#[test]
fn a_parked_append_stuck_behind_a_gap_fails_after_a_second() {
    let mut f = follower();
    let es = leader_entries(6, 2);
    body(f.on_request(T0 + 1, 15, push("n1", "n0", 2, PushType::Append, vec![es[5].clone()], -1)));
    body(f.on_request(T0 + 1, 14, push("n1", "n0", 2, PushType::Append, vec![es[4].clone()], -1)));
    // The handler looks once a second (from its start at T0); at T0 + 1 s they are parked for
    // only 999 ms.
    assert!(push_replies(&f.tick(T0 + 1_000)).is_empty());
    // The lowest one parked for a second fails, so the leader compares again; one a second.
    assert_eq!(push_replies(&f.tick(T0 + 2_000)), vec![(14, Code::INCONSISTENT_STATE, Some(4))]);
    assert_eq!(push_replies(&f.tick(T0 + 3_000)), vec![(15, Code::INCONSISTENT_STATE, Some(5))]);
}

#[test]
fn compare_and_truncate_drop_parked_appends_unanswered() {
    let mut f = follower();
    let es = leader_entries(4, 2);
    body(f.on_request(T0 + 1, 13, push("n1", "n0", 2, PushType::Append, vec![es[3].clone()], -1)));
    let actions = body(f.on_request(T0 + 2, 20, push("n1", "n0", 2, PushType::Compare, vec![es[0].clone()], -1)));
    assert_eq!(
        actions,
        vec![Action::NoReply { token: 13 }, Action::Reply { token: 20, msg: push_answer(PushType::Compare, 2, Some(0), -1, -1, Code::INCONSISTENT_STATE) },]
    );
}

#[test]
fn a_compare_from_another_term_or_leader_is_refused() {
    let mut f = follower();
    let es = leader_entries(1, 2);
    body(f.on_request(T0 + 1, 10, push("n1", "n0", 2, PushType::Append, vec![es[0].clone()], -1)));
    let other_term = body(f.on_request(T0 + 2, 20, push("n1", "n0", 1, PushType::Compare, vec![es[0].clone()], -1)));
    assert_eq!(push_replies(&other_term), vec![(20, Code::INCONSISTENT_TERM, Some(0))]);
    let other_leader = body(f.on_request(T0 + 2, 21, push("n2", "n0", 2, PushType::Compare, vec![es[0].clone()], -1)));
    assert_eq!(push_replies(&other_leader), vec![(21, Code::INCONSISTENT_LEADER, Some(0))]);
    let ours = body(f.on_request(T0 + 2, 22, push("n1", "n0", 2, PushType::Compare, vec![es[0].clone()], -1)));
    assert_eq!(push_replies(&ours), vec![(22, Code::SUCCESS, Some(0))]);
}

#[test]
fn after_a_restart_appends_wait_for_a_comparison() {
    // Our log may hold entries the leader never wrote (a power loss brings back old ones).
    let es = leader_entries(3, 2);
    let mut log = MemLog::new(1 << 20);
    for e in &es[..2] {
        log.append_as_follower(e).unwrap();
    }
    let mut f = member("n0", 3, log, 2, Some("n1"));
    body(f.on_request(T0, 100, heartbeat("n1", "n0", 2)));
    let refused = body(f.on_request(T0 + 1, 10, push("n1", "n0", 2, PushType::Append, vec![es[2].clone()], 2)));
    assert_eq!(push_replies(&refused), vec![(10, Code::INCONSISTENT_STATE, Some(2))]);
    let compared = body(f.on_request(T0 + 2, 11, push("n1", "n0", 2, PushType::Compare, vec![es[1].clone()], 2)));
    assert_eq!(push_replies(&compared), vec![(11, Code::SUCCESS, Some(1))]);
    let applied = body(f.on_request(T0 + 3, 12, push("n1", "n0", 2, PushType::Append, vec![es[2].clone()], 2)));
    assert_eq!(push_replies(&applied), vec![(12, Code::SUCCESS, Some(2))]);
}

#[test]
fn a_commit_index_reaches_only_what_is_known_to_be_the_leaders() {
    let es = leader_entries(3, 2);
    let mut log = MemLog::new(1 << 20);
    for e in &es {
        log.append_as_follower(e).unwrap();
    }
    let mut f = member("n0", 3, log, 2, Some("n1"));
    body(f.on_request(T0, 100, heartbeat("n1", "n0", 2)));
    body(f.on_request(T0 + 1, 10, push("n1", "n0", 2, PushType::Commit, vec![], 2)));
    assert_eq!(f.log().committed_index(), -1, "nothing compared yet");
    body(f.on_request(T0 + 2, 11, push("n1", "n0", 2, PushType::Compare, vec![es[1].clone()], 2)));
    assert_eq!(f.log().committed_index(), -1);
    body(f.on_request(T0 + 3, 12, push("n1", "n0", 2, PushType::Commit, vec![], 2)));
    assert_eq!(f.log().committed_index(), 1);
}

#[test]
fn the_quorum_index_is_the_middle_watermark_and_commits_only_our_terms_entries() {
    // Five members; n0 leads term 3 over 0..=9, where 0..=6 are of term 2.
    let mut terms = vec![2; 7];
    terms.extend([3, 3, 3]);
    let (mut e, _) = elect(5, log_with(&terms), 3);
    assert_eq!(e.q.term_start(), 7, "term 3 starts at 7 (entries a restart left in our log)");
    let marks = |e: &mut Engine<MemLog, MemTerms>, w: [i64; 4]| {
        for (p, w) in ["n1", "n2", "n3", "n4"].into_iter().zip(w) {
            e.q.update_watermark(3, p, w);
        }
        e.q.quorum_index(e.log())
    };
    // Sorted high to low: 9 (ours), 8, 6, 5, -1: the third is 6.
    assert_eq!(marks(&mut e, [6, 8, -1, 5]), (6, -1));
    body(e.tick(T0 + 2));
    assert_eq!(e.log().committed_index(), -1, "index 6 is of term 2: counting replicas does not commit it");
    // Once every member holds it, it is safe whatever its term.
    assert_eq!(marks(&mut e, [6, 8, 6, 6]), (6, 6));
    body(e.tick(T0 + 3));
    assert_eq!(e.log().committed_index(), 6);
    // An entry of term 3 on a quorum commits by counting.
    assert_eq!(marks(&mut e, [7, 8, 6, 6]), (7, 6));
    let actions = body(e.tick(T0 + 4));
    assert!(actions.contains(&Action::Committed { index: 7 }));
    assert_eq!(e.log().committed_index(), 7);
}

fn answers(actions: &[Action]) -> Vec<(u64, Code, i64)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Answer { token, response, .. } => Some((*token, response.base.code, response.index)),
            _ => None,
        })
        .collect()
}

/// Ticks a leader, answering its heartbeats SUCCESS so that it keeps leading.
fn tick_led(e: &mut Engine<MemLog, MemTerms>, now: u64) -> Vec<Action> {
    let actions = e.tick(now);
    let mut out = actions.clone();
    for (_, token, msg) in sent(&actions) {
        if let PeerMessage::HeartBeat(_) = msg {
            out.extend(e.on_response(now, token, Ok(PeerMessage::HeartBeatResponse(HeartBeatResponse { base: Base::default() }))));
        }
    }
    out
}

#[test]
fn proposals_time_out_after_max_wait_ack_and_still_count_as_pending() {
    let mut c = config("n0", 3);
    c.max_pending_requests_num = 1;
    let mut e = Engine::new(&c, MemLog::new(1 << 20), MemTerms { term: 1, ..MemTerms::default() }, 7, T0).unwrap();
    let votes = sent(&e.tick(T0));
    let PeerMessage::Vote(req) = votes[0].2.clone() else { panic!() };
    e.on_response(T0, votes[0].1, Ok(PeerMessage::VoteResponse(VoteResponse { base: req.base, vote_result: VoteResult::Accept })));
    assert_eq!(e.role(), Role::Leader);
    tick_led(&mut e, T0 + 15); // the first heartbeat round, answered: the lease holds
    assert!(answers(&e.propose(T0 + 10, 1, vec![Bytes::from_static(b"a")])).is_empty());
    assert!(answers(&e.propose(T0 + 20, 2, vec![Bytes::from_static(b"b")])).is_empty());
    // More than maxPendingRequestsNum (1) waiting: refused at once.
    assert_eq!(answers(&e.propose(T0 + 30, 3, vec![Bytes::from_static(b"c")])), vec![(3, Code::LEADER_PENDING_FULL, -1)]);
    assert!(answers(&tick_led(&mut e, T0 + 2_509)).is_empty());
    assert_eq!(answers(&tick_led(&mut e, T0 + 2_510)), vec![(1, Code::WAIT_QUORUM_ACK_TIMEOUT, 0)]);
    assert_eq!(answers(&tick_led(&mut e, T0 + 2_520)), vec![(2, Code::WAIT_QUORUM_ACK_TIMEOUT, 1)]);
    assert_eq!(e.pending_proposals(), 2, "Java keeps timed-out waiters until commit or a new term");
    assert_eq!(answers(&e.propose(T0 + 2_600, 4, vec![Bytes::from_static(b"d")])), vec![(4, Code::LEADER_PENDING_FULL, -1)]);
    // A follower acknowledges 0 and 1: they commit, nobody is answered twice, room again.
    e.q.update_watermark(1, "n1", 1);
    let after = tick_led(&mut e, T0 + 2_700);
    assert!(answers(&after).is_empty(), "{after:?}");
    assert_eq!((e.log().committed_index(), e.pending_proposals()), (1, 0));
    let ok = e.propose(T0 + 2_800, 5, vec![Bytes::from_static(b"e"), Bytes::from_static(b"f")]);
    assert!(answers(&ok).is_empty());
    e.q.update_watermark(1, "n1", 3);
    let done = tick_led(&mut e, T0 + 2_810);
    let [Action::Answer { token: 5, response, positions }] = &body(done).into_iter().filter(|a| matches!(a, Action::Answer { .. })).collect::<Vec<_>>()[..]
    else {
        panic!()
    };
    assert_eq!((response.base.code, response.index, response.base.term), (Code::SUCCESS, 3, 1));
    assert_eq!(positions, &vec![e.log().get(2).unwrap().pos, e.log().get(3).unwrap().pos]);
    assert_eq!(response.pos, positions[1]);
}

#[test]
fn proposals_of_an_old_term_are_answered_term_changed_when_the_term_moves() {
    let (mut e, _) = elect(3, MemLog::new(1 << 20), 1);
    assert!(answers(&e.propose(T0 + 10, 1, vec![Bytes::from_static(b"a")])).is_empty());
    // A vote of term 3 from a member with a longer log: we step down and take term 3, and the
    // waiter of term 1 is answered.
    let actions = e.on_request(T0 + 20, 50, vote_req("n1", "n0", 3, 5, 1));
    assert_eq!((e.role(), e.term()), (Role::Candidate, 3));
    assert_eq!(answers(&actions), vec![(1, Code::TERM_CHANGED, 0)]);
}

#[test]
fn not_leader_and_empty_proposals_are_refused_at_once() {
    let mut e = member("n0", 3, MemLog::new(1 << 20), 1, None);
    assert_eq!(answers(&e.propose(T0, 1, vec![Bytes::from_static(b"a")])), vec![(1, Code::NOT_LEADER, -1)]);
    assert_eq!(answers(&e.propose(T0, 2, vec![])), vec![(2, Code::REQUEST_WITH_EMPTY_BODYS, -1)]);
}

#[test]
fn a_follower_times_its_leader_out_after_the_heartbeat_leak_and_clock_jumps_back_do_not_count() {
    let mut f = follower();
    // The driver's clock jumps an hour back: no time passed for the engine.
    body(f.tick(T0 - 3_600_000));
    body(f.tick(T0 - 3_600_000 + 5_000));
    assert_eq!(f.role(), Role::Follower);
    body(f.tick(T0 - 3_600_000 + 6_000));
    assert_eq!(f.role(), Role::Follower, "exactly 6 s is not more than 6 s");
    // A forward jump fires the timer.
    let actions = body(f.tick(T0 + 60_000));
    assert_eq!(actions[0], Action::RoleChanged { role: Role::Candidate, term: 2, leader_id: None });
}

#[test]
fn a_leader_without_a_quorum_of_heartbeats_for_the_leak_steps_down() {
    let (mut e, _) = elect(3, MemLog::new(1 << 20), 1);
    let mut now = T0 + 1;
    // Heartbeat rounds nobody answers: each lasts 2 s; the lease (never renewed) is gone after one.
    while e.role() == Role::Leader && now < T0 + 20_000 {
        now = wake(&e.tick(now)).max(now + 1);
    }
    assert_eq!(e.role(), Role::Candidate);
    assert!(now <= T0 + 2_100, "{now}");
}

#[test]
fn leadership_transfer_marks_the_leader_and_makes_the_transferee_campaign() {
    let (mut leader, _) = elect(3, MemLog::new(1 << 20), 1);
    let actions = leader.transfer_leadership(T0 + 10, 77, "n1");
    let [(to, token, PeerMessage::LeadershipTransfer(req))] = &sent(&actions)[..] else { panic!("{actions:?}") };
    assert_eq!(to, "n1");
    assert_eq!((req.transfer_id.as_deref(), req.transferee_id.as_deref(), req.base.term), (Some("n0"), Some("n1"), 1));
    assert_eq!(leader.transferee(), Some("n1"));
    assert_eq!(answers(&leader.propose(T0 + 11, 1, vec![Bytes::from_static(b"a")])), vec![(1, Code::LEADER_TRANSFERRING, -1)]);
    // The transferee, following n0, caught up (both logs empty): it campaigns for term 2.
    let mut t = member("n1", 3, MemLog::new(1 << 20), 1, Some("n0"));
    body(t.on_request(T0, 100, heartbeat("n0", "n1", 1)));
    let campaign = t.on_request(T0 + 12, 500, PeerMessage::LeadershipTransfer(req.clone()));
    assert_eq!(body(campaign)[0], Action::RoleChanged { role: Role::Candidate, term: 1, leader_id: None });
    let votes = sent(&t.tick(T0 + 30));
    assert!(votes.is_empty(), "the bump only moves the term");
    assert_eq!(t.term(), 2);
    let mut at = T0 + 30;
    let votes = loop {
        at += 10;
        let v = sent(&t.tick(at));
        if !v.is_empty() {
            break v;
        }
    };
    assert!(votes.iter().all(|(_, _, m)| matches!(m, PeerMessage::Vote(v) if v.base.term == 2)));
    // Elected: the transfer request is answered SUCCESS.
    let mut done = Vec::new();
    for (_, tok, m) in votes {
        let PeerMessage::Vote(v) = m else { panic!() };
        done.extend(t.on_response(at, tok, Ok(PeerMessage::VoteResponse(VoteResponse { base: v.base, vote_result: VoteResult::Accept }))));
    }
    assert!(done.contains(&Action::Reply {
        token: 500,
        msg: PeerMessage::LeadershipTransferResponse(LeadershipTransferResponse { base: Base { term: 2, ..Base::default() } })
    }));
    // The old leader hears SUCCESS, passes it on to the admin and drops the transfer mark.
    let ok = LeadershipTransferResponse { base: Base { term: 2, ..Base::default() } };
    let relayed = leader.on_response(T0 + 40, *token, Ok(PeerMessage::LeadershipTransferResponse(ok.clone())));
    assert!(relayed.contains(&Action::Reply { token: 77, msg: PeerMessage::LeadershipTransferResponse(ok) }));
    assert_eq!(leader.transferee(), None);
}

/// n0 led term 1 and handed over to n1; n1, campaigning for term 2, answers n0's next heartbeat
/// EXPIRED_TERM 2 before it asks n0 for its vote, so n0 steps down at once; n1 is elected by n2
/// and n0 then gets its heartbeat. Returns n0 stepped down, and the time.
fn handed_over_and_stepped_down(quirks: JavaQuirks) -> (Engine<MemLog, MemTerms>, u64) {
    let mut leader = member("n0", 3, MemLog::new(1 << 20), 1, None).with_java_quirks(quirks);
    for (_, token, msg) in sent(&leader.tick(T0)) {
        let PeerMessage::Vote(req) = msg else { panic!("{msg:?}") };
        let answer = VoteResponse { base: Base { term: 1, ..req.base }, vote_result: VoteResult::Accept };
        body(leader.on_response(T0 + 1, token, Ok(PeerMessage::VoteResponse(answer))));
    }
    assert_eq!(leader.role(), Role::Leader);
    let beats: Vec<_> = sent(&leader.tick(T0 + 1 + super::election::MAINTAIN_PAUSE_MS))
        .into_iter()
        .filter_map(|(to, token, m)| matches!(m, PeerMessage::HeartBeat(_)).then_some((to, token)))
        .collect();
    let actions = leader.transfer_leadership(T0 + 20, 77, "n1");
    assert!(matches!(&sent(&actions)[..], [(to, _, PeerMessage::LeadershipTransfer(_))] if to == "n1"), "{actions:?}");
    // The heartbeats' answers: n2 follows; n1 already took term 2.
    for (to, token) in beats {
        let resp = if to == "n1" {
            HeartBeatResponse { base: Base { term: 2, code: Code::EXPIRED_TERM, ..Base::default() } }
        } else {
            HeartBeatResponse { base: Base { term: -1, ..Base::default() } }
        };
        body(leader.on_response(T0 + 21, token, Ok(PeerMessage::HeartBeatResponse(resp))));
    }
    assert_eq!(leader.role(), Role::Candidate);
    (leader, T0 + 21)
}

#[test]
fn a_leader_that_handed_over_waits_for_the_transferee_and_follows_its_heartbeat() {
    let (mut old, mut now) = handed_over_and_stepped_down(JavaQuirks::default());
    // It takes the term it learnt, but asks for no vote while n1 takes over (0.3.1.2 campaigns
    // after a vote interval, 300..1 000 ms, before n1's next heartbeat).
    let until = now + 3_000;
    while now < until {
        let votes: Vec<_> = sent(&old.tick(now)).into_iter().filter(|(_, _, m)| matches!(m, PeerMessage::Vote(_))).collect();
        assert!(votes.is_empty(), "campaigns at {}: {votes:?}", now - T0);
        now += 10;
    }
    assert_eq!((old.role(), old.term()), (Role::Candidate, 2));
    // n1's vote is still welcome.
    assert_eq!(vote_answer(&old.on_request(now, 5, vote_req("n1", "n0", 2, -1, -1))), (VoteResult::Accept, 2));
    // n1's heartbeat of term 3 (a later term than ours): followed at once, its term persisted.
    let (mut old, now) = handed_over_and_stepped_down(JavaQuirks::default());
    let answer = body(old.on_request(now + 1, 6, heartbeat("n1", "n0", 3)));
    assert!(answer.iter().any(|a| matches!(a, Action::Reply { msg: PeerMessage::HeartBeatResponse(r), .. } if r.base.code == Code::SUCCESS)), "{answer:?}");
    assert_eq!((old.role(), old.term(), old.leader_id()), (Role::Follower, 3, Some("n1")));
    assert_eq!(old.terms_mut().term, 3);
}

#[test]
fn with_0_3_1_2_rules_a_leader_that_handed_over_campaigns_again() {
    // Java's rule: TERM_NOT_READY to the transferee's heartbeat of a newer term ...
    let (mut old, now) = handed_over_and_stepped_down(JavaQuirks { handover_forgotten: true, ..JavaQuirks::default() });
    let answer = body(old.on_request(now, 6, heartbeat("n1", "n0", 3)));
    assert!(
        answer.iter().any(|a| matches!(a, Action::Reply { msg: PeerMessage::HeartBeatResponse(r), .. } if r.base.code == Code::TERM_NOT_READY)),
        "{answer:?}"
    );
    assert_eq!(old.role(), Role::Candidate);
    // ... and a round of its own within a vote interval, before the next heartbeat (2 s).
    let mut at = now;
    let votes = loop {
        at += 10;
        let v: Vec<_> = sent(&old.tick(at)).into_iter().filter(|(_, _, m)| matches!(m, PeerMessage::Vote(_))).collect();
        if !v.is_empty() || at > now + 2_000 {
            break v;
        }
    };
    assert!(at - now <= 1_100, "the round came after {} ms", at - now);
    assert!(!votes.is_empty(), "no campaign within 2 s");
    assert!(votes.iter().all(|(_, _, m)| matches!(m, PeerMessage::Vote(v) if v.base.term == 3)));
}

#[test]
fn a_transferee_that_cannot_catch_up_in_time_refuses() {
    let mut t = member("n1", 3, MemLog::new(1 << 20), 1, Some("n0"));
    body(t.on_request(T0, 100, heartbeat("n0", "n1", 1)));
    let req = LeadershipTransferRequest {
        base: base("n0", "n1", Some("n0"), 1),
        transfer_id: Some("n0".into()),
        transferee_id: Some("n1".into()),
        take_leadership_ledger_index: 5,
    };
    assert!(body(t.on_request(T0 + 1, 9, PeerMessage::LeadershipTransfer(req))).is_empty());
    assert!(body(t.tick(T0 + 1_001)).is_empty());
    let refused = body(t.tick(T0 + 1_002));
    assert!(
        matches!(&refused[..], [Action::Reply { token: 9, msg: PeerMessage::LeadershipTransferResponse(r) }] if r.base.code == Code::TAKE_LEADERSHIP_FAILED)
    );
}

/// n0 restarted following n1 in `term`, holding `log` committed up to `committed`.
fn restarted_follower(log: &[Entry], committed: i64, term: i64) -> Engine<MemLog, MemTerms> {
    let mut l = MemLog::new(1 << 20);
    for e in log {
        l.append_as_follower(e).unwrap();
    }
    l.update_committed(term, committed);
    let mut f = member("n0", 3, l, term, Some("n1"));
    body(f.on_request(T0, 100, heartbeat("n1", "n0", term)));
    assert_eq!(f.role(), Role::Follower);
    f
}

#[test]
fn a_stale_truncate_does_not_cut_committed_or_same_term_entries() {
    // Seed 361 861: a duplicate of the leader's first TRUNCATE (at 0) arrived after the
    // follower had restarted holding 0..=4, committed, all of the leader's term.
    let es = leader_entries(5, 2);
    let mut f = restarted_follower(&es, 4, 2);
    let r = body(f.on_request(T0 + 1, 10, push("n1", "n0", 2, PushType::Truncate, vec![es[0].clone()], -1)));
    assert_eq!(push_replies(&r), vec![(10, Code::SUCCESS, Some(0))]);
    assert_eq!((f.log().end_index(), f.log().committed_index()), (4, 4));
    // Entries of an older term: the committed prefix stays, the rest goes.
    let old = leader_entries(5, 1);
    let mut f = restarted_follower(&old, 2, 2);
    let r = body(f.on_request(T0 + 1, 11, push("n1", "n0", 2, PushType::Truncate, vec![old[0].clone()], -1)));
    assert_eq!(push_replies(&r), vec![(11, Code::SUCCESS, Some(0))]);
    assert_eq!(f.log().end_index(), 2);
    // Java cuts right after the TRUNCATE's entry.
    let mut f = restarted_follower(&es, 4, 2).with_java_quirks(JavaQuirks { truncate_below_acked: true, ..JavaQuirks::default() });
    body(f.on_request(T0 + 1, 12, push("n1", "n0", 2, PushType::Truncate, vec![es[0].clone()], -1)));
    assert_eq!(f.log().end_index(), 0);
}

#[test]
fn a_committed_prefix_a_compare_shows_different_is_truncated() {
    // Our committed 0..=2 (term 1) differs from the leader's at 2 (a power loss beyond what the
    // group tolerates): the leader finds the difference, and its TRUNCATE at 1 is obeyed.
    let ours = leader_entries(3, 1);
    let mut theirs = ours[..2].to_vec();
    theirs.push(Entry { body: Bytes::from_static(b"other"), ..ours[2].clone() });
    let mut f = restarted_follower(&ours, 2, 2);
    let r = body(f.on_request(T0 + 1, 10, push("n1", "n0", 2, PushType::Compare, vec![theirs[2].clone()], -1)));
    assert_eq!(push_replies(&r), vec![(10, Code::INCONSISTENT_STATE, Some(2))]);
    let r = body(f.on_request(T0 + 2, 11, push("n1", "n0", 2, PushType::Truncate, vec![theirs[1].clone()], -1)));
    assert_eq!(push_replies(&r), vec![(11, Code::SUCCESS, Some(1))]);
    assert_eq!(f.log().end_index(), 1);
}
