//! The parts a store is made of, loaded from its directory before recovery: the commit log, the
//! consume queues, the checkpoint, the index and the dispatchers that build the latter from the
//! former. Recovery works on these; the `MessageStore` is made from them once it is done.

use std::sync::Arc;

use crate::checkpoint::Checkpoint;
use crate::commit_log::CommitLog;
use crate::config::{BrokerRole, MessageStoreConfig};
use crate::dispatch::{ArrivalNotice, BuildConsumeQueue, BuildIndex, DispatchList};
use crate::error::{io_err, StoreError};
use crate::index::{IndexConfig, IndexService};
use crate::message::record::DecodedRecord;
use crate::queues::ConsumeQueues;

pub(crate) struct Parts {
    pub(crate) config: Arc<MessageStoreConfig>,
    pub(crate) commit_log: Arc<CommitLog>,
    pub(crate) queues: Arc<ConsumeQueues>,
    pub(crate) checkpoint: Arc<Checkpoint>,
    pub(crate) index: Option<Arc<IndexService>>,
    /// What is done with each new record, in order: the consume queue, the index (when enabled),
    /// then long polling's arrival notice (Java's list holds the first two; it notifies arrivals
    /// right after).
    pub(crate) dispatchers: DispatchList,
    pub(crate) arrival: Arc<ArrivalNotice>,
}

impl Parts {
    /// Loads every file under the root (whose folders exist); the index, after a crash, drops
    /// what its checkpoint does not vouch for.
    pub(crate) fn load(config: Arc<MessageStoreConfig>, last_exit_ok: bool) -> Result<Parts, StoreError> {
        let root = config.root_dir();
        let commit_log = Arc::new(CommitLog::new(config.clone()).map_err(io_err("cannot allocate the transient store pool"))?);
        commit_log.load()?;
        let queues = Arc::new(ConsumeQueues::load(&config)?);
        let checkpoint = Arc::new(Checkpoint::open(&root.join("checkpoint")).map_err(io_err("cannot open checkpoint"))?);
        let index = if config.message_index_enable {
            let index_config =
                IndexConfig { max_hash_slot_num: config.max_hash_slot_num, max_index_num: config.max_index_num, max_msgs_num_batch: config.max_msgs_num_batch };
            let index = IndexService::new(&root, index_config).map_err(|e| StoreError::Index(e.to_string()))?;
            index.load(last_exit_ok, checkpoint.index_msg_timestamp()).map_err(|e| StoreError::Index(e.to_string()))?;
            Some(Arc::new(index))
        } else {
            None
        };
        let dispatchers = DispatchList::new(&config);
        let arrival = Arc::new(ArrivalNotice::new(queues.clone()));
        let _ = dispatchers.add_last(Arc::new(BuildConsumeQueue { queues: queues.clone(), checkpoint: checkpoint.clone() }));
        if let Some(index) = &index {
            let _ = dispatchers.add_last(Arc::new(BuildIndex { index: index.clone(), checkpoint: checkpoint.clone() }));
        }
        let _ = dispatchers.add_last(arrival.clone());
        Ok(Parts { config, commit_log, queues, checkpoint, index, dispatchers, arrival })
    }

    /// Recovery's re-dispatch of a plain commit log's record after a crash: a slave first notes
    /// the record's store time (its checkpoint's physic time follows it), as the live dispatcher
    /// does; then the dispatchers that run on recovery.
    pub(crate) fn redispatch(&self, record: &DecodedRecord<'_>, phy_offset: i64) {
        if self.config.broker_role == BrokerRole::Slave {
            self.commit_log.note_store_timestamp(record.store_timestamp);
        }
        self.dispatchers.redispatch(record, phy_offset);
    }
}
