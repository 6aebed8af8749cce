//! Master/slave replication as the broker runs it (the `ha` crate does the work):
//! - a master (ASYNC_MASTER or SYNC_MASTER) listens on the HA port, and a SYNC_MASTER answers a
//!   put once enough slaves hold it, from the HA service, not from a waiting thread;
//! - a slave follows the master whose HA address the name server names (or `haMasterAddress`),
//!   and copies the master's metadata every 10 s ([`crate::slave_sync`]).
//!
//! **What SYNC_MASTER promises here:** a put waits for at least one slave, and for
//! `inSyncReplicas - 1` slaves when that asks for more. Java 4.9 waits for one slave; Java 5.x
//! waits only when `inSyncReplicas` >= 2, so with its default of 1 a 5.x SYNC_MASTER answers
//! before any slave has the bytes. This broker keeps the promise the role's name makes.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ha::master::{HaMaster, MasterConfig, Replication};
use ha::slave::{HaSlave, SlaveConfig};
use ha::tracker::SyncPolicy;
use store::config::{BrokerRole, MessageStoreConfig};
use store::store::MessageStore;

pub use ha::tracker::Outcome;

/// The broker's side of replication.
pub enum Ha {
    Master(HaMaster),
    Slave(HaSlave),
    /// DLedger mode: the group replicates the log, the classic HA service does not run.
    Off,
}

impl Ha {
    /// Starts what the role asks for. `bind` is the broker's bind address; the HA port is
    /// `haListenPort` (0: any free port, for tests).
    pub async fn start(store: &Arc<MessageStore>, config: &MessageStoreConfig, bind: IpAddr) -> std::io::Result<Ha> {
        if config.broker_role == BrokerRole::Slave {
            let slave = HaSlave::start(
                store.clone(),
                SlaveConfig {
                    report_interval: Duration::from_millis(config.ha_send_heartbeat_interval_ms.max(100)),
                    housekeeping_interval: Duration::from_millis(config.ha_housekeeping_interval_ms.max(1000)),
                    ..SlaveConfig::default()
                },
            );
            // Java takes `haMasterAddress` only when it looks like an address (>= 6 chars).
            if config.ha_master_address.trim().len() >= 6 {
                slave.set_master(Some(config.ha_master_address.trim().to_owned()));
            }
            return Ok(Ha::Slave(slave));
        }
        let master = HaMaster::start(
            MasterConfig {
                listen: SocketAddr::new(bind, config.ha_listen_port),
                transfer_batch_bytes: config.ha_transfer_batch_size.clamp(1, ha::wire::MAX_FRAME_BODY_BYTES),
                heartbeat_interval: Duration::from_millis(config.ha_send_heartbeat_interval_ms.max(100)),
                housekeeping_interval: Duration::from_millis(config.ha_housekeeping_interval_ms.max(1000)),
                policy: SyncPolicy {
                    slaves_needed: config.sync_slaves_needed(),
                    fallbehind_max_bytes: config.ha_fallbehind_max(),
                    timeout: Duration::from_millis(config.slave_timeout_ms.max(1)),
                },
            },
            store.clone(),
        )
        .await?;
        let replication = master.replication();
        store.set_append_listener(Arc::new(move || replication.on_append()));
        Ok(Ha::Master(master))
    }

    /// The master's replication state (waiting puts, slaves), if this broker is a master.
    pub fn replication(&self) -> Option<Arc<Replication>> {
        match self {
            Ha::Master(master) => Some(master.replication()),
            Ha::Slave(_) | Ha::Off => None,
        }
    }

    /// The HA port a master listens on.
    pub fn listen_addr(&self) -> Option<SocketAddr> {
        match self {
            Ha::Master(master) => Some(master.local_addr()),
            Ha::Slave(_) | Ha::Off => None,
        }
    }

    /// A slave learns where its master's HA port is (from the name server).
    pub fn follow(&self, ha_server_addr: &str) {
        if let Ha::Slave(slave) = self {
            slave.set_master(Some(ha_server_addr.to_owned()));
        }
    }

    /// A slave stops following (its master's log is shorter than its own).
    pub fn stop_following(&self) {
        if let Ha::Slave(slave) = self {
            slave.set_master(None);
        }
    }

    pub fn slave_client(&self) -> Option<&HaSlave> {
        match self {
            Ha::Slave(slave) => Some(slave),
            Ha::Master(_) | Ha::Off => None,
        }
    }

    pub async fn shutdown(&self) {
        match self {
            Ha::Master(master) => master.shutdown().await,
            Ha::Slave(slave) => slave.shutdown().await,
            Ha::Off => {}
        }
    }
}
