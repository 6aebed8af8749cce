//! A leader answered EXPIRED_TERM by a heartbeat steps down, even when the round already had its
//! quorum (0.3.1.2 ignores the answer then, and a member that took a newer term while cut off,
//! with a shorter log, stays a candidate for ever: found by t70_chaos).

use dledger::config::DLedgerConfig;
use dledger::engine::{Action, Engine, Role};
use dledger::protocol::*;
use dledger::sim::{MemLog, MemTerms};

#[test]
fn a_leader_told_of_a_newer_term_by_a_heartbeat_answer_steps_down_though_it_has_a_quorum() {
    let config = DLedgerConfig {
        group: "g".into(),
        self_id: "n0".into(),
        peers: "n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3".into(),
        heart_beat_time_interval_ms: 200,
        min_vote_interval_ms: 100,
        max_vote_interval_ms: 300,
        ..Default::default()
    };
    let mut engine = Engine::new(&config, MemLog::new(64 * 1024), MemTerms::default(), 7, 0).unwrap();
    let mut now = 0;
    let mut heartbeats: Vec<(String, u64)> = Vec::new();
    // Elect n0: every vote accepted, pushes unanswered.
    while engine.role() != Role::Leader || heartbeats.len() < 2 {
        now += 10;
        assert!(now < 20_000, "n0 never led");
        let mut actions = engine.tick(now);
        while let Some(action) = actions.pop() {
            if let Action::Send { to, token, msg } = action {
                match msg {
                    PeerMessage::Vote(req) => {
                        let resp = VoteResponse { base: Base { term: req.base.term, ..req.base.clone() }, vote_result: VoteResult::Accept };
                        actions.extend(engine.on_response(now, token, Ok(PeerMessage::VoteResponse(resp))));
                    }
                    PeerMessage::HeartBeat(_) if engine.role() == Role::Leader => heartbeats.push((to, token)),
                    _ => {}
                }
            }
        }
    }
    let term = engine.term();
    let token_of = |peer: &str| heartbeats.iter().find(|(to, _)| to == peer).map(|(_, t)| *t).unwrap();
    let (n1, n2) = (token_of("n1"), token_of("n2"));
    // n1 keeps the quorum; n2 took a newer term meanwhile.
    let ok = HeartBeatResponse { base: Base { term: -1, code: Code::SUCCESS, ..Base::default() } };
    engine.on_response(now, n1, Ok(PeerMessage::HeartBeatResponse(ok)));
    assert_eq!(engine.role(), Role::Leader);
    let expired = HeartBeatResponse { base: Base { term: term + 3, code: Code::EXPIRED_TERM, ..Base::default() } };
    engine.on_response(now, n2, Ok(PeerMessage::HeartBeatResponse(expired)));
    assert_eq!(engine.role(), Role::Candidate, "the leader of term {term} kept leading after EXPIRED_TERM for term {}", term + 3);
    // Its next round takes the newer term at least.
    for _ in 0..100 {
        now += 10;
        engine.tick(now);
    }
    assert!(engine.term() >= term + 3, "term {} after stepping down", engine.term());
}
