//! The numbers the engine runs on, taken once from `DLedgerConfig` (Java's keys and defaults) and
//! checked so that nothing later can panic (Java's `Random.nextInt(max - min)` throws on a bad
//! interval; we refuse the config instead).

use crate::config::DLedgerConfig;

use super::EngineError;

#[derive(Clone, Debug)]
pub(super) struct Settings {
    pub group: String,
    pub self_id: String,
    /// Every member, this node included, in the order of the `peers` string.
    pub peers: Vec<String>,
    pub heartbeat_interval_ms: u64,
    pub max_heartbeat_leak: u64,
    pub min_vote_interval_ms: u64,
    pub max_vote_interval_ms: u64,
    pub min_take_leadership_vote_interval_ms: u64,
    pub max_take_leadership_vote_interval_ms: u64,
    pub max_pending_requests: usize,
    pub max_wait_ack_ms: u64,
    pub max_push_timeout_ms: u64,
    pub push_throttle_point_bytes: i64,
    pub push_quota_bytes_per_s: i64,
    pub batch_push: bool,
    pub max_batch_push_bytes: usize,
    /// `preferredLeaderIds`; `None` when the key is empty (Java's `null`).
    pub preferred_leaders: Option<Vec<String>>,
    pub max_leadership_transfer_wait_index: i64,
    pub leadership_transfer_wait_timeout_ms: u64,
    pub leader_elector: bool,
}

impl Settings {
    pub fn from_config(c: &DLedgerConfig) -> Result<Settings, EngineError> {
        let peers: Vec<String> = c.peer_list()?.into_iter().map(|p| p.id).collect();
        let interval = |key: &'static str, min: u64, max: u64| {
            if max > min {
                Ok(())
            } else {
                Err(EngineError::Config(format!("{key}: max {max} must be greater than min {min}")))
            }
        };
        interval("minVoteIntervalMs/maxVoteIntervalMs", c.min_vote_interval_ms, c.max_vote_interval_ms)?;
        interval(
            "minTakeLeadershipVoteIntervalMs/maxTakeLeadershipVoteIntervalMs",
            c.min_take_leadership_vote_interval_ms,
            c.max_take_leadership_vote_interval_ms,
        )?;
        if c.heart_beat_time_interval_ms == 0 {
            return Err(EngineError::Config("heartBeatTimeIntervalMs must be positive".into()));
        }
        let preferred = c.preferred_leaders();
        Ok(Settings {
            group: c.group.clone(),
            self_id: c.self_id.clone(),
            peers,
            heartbeat_interval_ms: c.heart_beat_time_interval_ms,
            max_heartbeat_leak: u64::from(c.max_heart_beat_leak),
            min_vote_interval_ms: c.min_vote_interval_ms,
            max_vote_interval_ms: c.max_vote_interval_ms,
            min_take_leadership_vote_interval_ms: c.min_take_leadership_vote_interval_ms,
            max_take_leadership_vote_interval_ms: c.max_take_leadership_vote_interval_ms,
            max_pending_requests: c.max_pending_requests_num,
            max_wait_ack_ms: c.max_wait_ack_time_ms,
            max_push_timeout_ms: c.max_push_time_out_ms,
            push_throttle_point_bytes: i64::try_from(c.peer_push_throttle_point).unwrap_or(i64::MAX),
            push_quota_bytes_per_s: i64::try_from(c.peer_push_quota).unwrap_or(i64::MAX),
            batch_push: c.enable_batch_push,
            max_batch_push_bytes: c.max_batch_push_size,
            preferred_leaders: if c.preferred_leader_ids.trim().is_empty() { None } else { Some(preferred) },
            max_leadership_transfer_wait_index: c.max_leadership_transfer_wait_index,
            leadership_transfer_wait_timeout_ms: c.leadership_transfer_wait_timeout_ms,
            leader_elector: c.enable_leader_elector,
        })
    }

    /// `MemberState.isQuorum`: `n >= peers/2 + 1`.
    pub fn is_quorum(&self, n: usize) -> bool {
        n > self.peers.len() / 2
    }

    pub fn is_peer(&self, id: Option<&str>) -> bool {
        id.is_some_and(|id| self.peers.iter().any(|p| p == id))
    }

    /// The members this node pushes to and sends heartbeats to.
    pub fn others(&self) -> impl Iterator<Item = &String> {
        self.peers.iter().filter(move |p| **p != self.self_id)
    }

    /// How long a follower waits for a heartbeat, and a leader for a quorum of them.
    pub fn heartbeat_leak_ms(&self) -> u64 {
        self.heartbeat_interval_ms.saturating_mul(self.max_heartbeat_leak)
    }
}
