//! The broker's role follows its DLedger member's (Java's `DLedgerRoleChangeHandler`):
//! - leader: once the log is committed to its end and dispatched, the queue offsets are rebuilt
//!   from the consume queues and the broker becomes the master (SYNC_MASTER, brokerId 0);
//! - follower: a slave (brokerId from `dLegerSelfId`), copying the master's metadata;
//! - candidate: a slave, unless it is one already.
//!
//! Each change re-registers with every name server. Delayed delivery, the transaction check and
//! the metadata copy look at the role on every tick, so nothing is started or stopped here.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dledger::engine::Role;
use dledger::server::{NodeHandle, NodeStatus};
use store::config::BrokerRole;
use store::message::record::{MessageToStore, TRANSACTION_ROLLBACK_TYPE};
use tracing::{info, warn};

use super::commit_log::QueueOffsets;
use crate::broker::Broker;

/// How often a new leader looks whether its log is committed and dispatched (Java: 100 ms).
const READY_CHECK_EVERY: Duration = Duration::from_millis(100);

/// A barrier not committed by then (no quorum yet) is appended again.
const BARRIER_RETRY_AFTER: Duration = Duration::from_secs(3);

/// The topic of the barrier record (Java's self-test topic; the record enters no queue).
const BARRIER_TOPIC: &str = "SELF_TEST_TOPIC";

/// Follows the member's role until the member stops.
pub async fn follow(broker: Arc<Broker>, node: NodeHandle, offsets: Arc<QueueOffsets>, slave_id: i64) {
    let mut statuses = node.watch();
    let mut acted_on: Option<(Role, i64)> = None;
    loop {
        let status = statuses.borrow_and_update().clone();
        if acted_on != Some((status.role, status.term)) {
            match status.role {
                Role::Leader => {
                    if become_master(&broker, &node, &offsets, status.term).await {
                        acted_on = Some((Role::Leader, status.term));
                    }
                }
                Role::Follower => {
                    become_slave(&broker, slave_id, &status);
                    acted_on = Some((status.role, status.term));
                }
                Role::Candidate => {
                    if broker.store.role() != BrokerRole::Slave || broker.broker_id() != slave_id {
                        become_slave(&broker, slave_id, &status);
                    }
                    acted_on = Some((status.role, status.term));
                }
            }
            // A leadership that ended while we waited is acted on at once.
            if acted_on.is_none_or(|(role, term)| role != node.status().role || term != node.status().term) {
                continue;
            }
        }
        if statuses.changed().await.is_err() {
            return;
        }
    }
}

fn become_slave(broker: &Broker, slave_id: i64, status: &NodeStatus) {
    let was = (broker.store.role(), broker.broker_id());
    broker.store.set_role(BrokerRole::Slave);
    broker.set_broker_id(slave_id);
    if let Some(timer) = broker.timer.get() {
        timer.set_dequeue(false);
    }
    if was != (BrokerRole::Slave, slave_id) {
        info!(term = status.term, leader = ?status.leader_id, broker_id = slave_id, "DLedger role {:?}: the broker is a slave", status.role);
        broker.register_soon(false);
    }
}

/// Waits until this leader's log is committed to its end and dispatched, then makes the broker
/// the master. False when the leadership (of `term`) ended first.
async fn become_master(broker: &Arc<Broker>, node: &NodeHandle, offsets: &QueueOffsets, term: i64) -> bool {
    let mut barrier_at: Option<std::time::Instant> = None;
    loop {
        let s = node.status();
        if s.role != Role::Leader || s.term != term {
            return false;
        }
        let committed = s.end_index == -1 || s.end_index == s.committed_index;
        if committed && broker.store.dispatched_all() {
            break;
        }
        if !committed && barrier_at.is_none_or(|at| at.elapsed() >= BARRIER_RETRY_AFTER) {
            // Entries of earlier terms commit only with one of this term (see the dledger
            // crate's quorum rule); the broker takes no sends yet, so it appends its own.
            barrier_at = Some(std::time::Instant::now());
            append_barrier(broker);
        }
        tokio::time::sleep(READY_CHECK_EVERY).await;
    }
    offsets.reset(broker.store.queue_offset_table());
    broker.store.set_role(BrokerRole::SyncMaster);
    broker.set_broker_id(0);
    // The new master releases timers from the checkpoint's read time on (Java `checkBrokerRole`).
    if let Some(timer) = broker.timer.get() {
        timer.set_dequeue(true);
    }
    info!(term, "DLedger leader: the broker is the master");
    broker.register_soon(false);
    true
}

/// A rolled-back transaction record: stored in the commit log, but in no queue and no index, on
/// our brokers as on Java's.
fn append_barrier(broker: &Broker) {
    let Some(appender) = broker.store.appender() else { return };
    let host = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
    let msg = MessageToStore {
        topic: BARRIER_TOPIC.to_owned(),
        queue_id: 0,
        flag: 0,
        sys_flag: TRANSACTION_ROLLBACK_TYPE,
        born_timestamp: remoting::clock::now_ms(),
        born_host: host,
        store_host: broker.store_host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: Bytes::from_static(b"dledger leader barrier"),
        properties: String::new(),
    };
    appender.append_then(
        std::slice::from_ref(&msg),
        Box::new(|result| {
            if !result.is_ok() {
                warn!(status = ?result.status, remark = ?result.remark, "the new leader's barrier entry was not committed");
            }
        }),
    );
}
