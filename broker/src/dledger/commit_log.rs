//! The append side of the DLedger commit log (Java's `DLedgerCommitLog.asyncPutMessage(s)`): each
//! record becomes one DLedger entry, appended through the member's handle and answered from the
//! member's thread once a quorum has it, so no thread waits per send.
//!
//! Queue offsets, the physical offset and the store time are written by the append hook, on the
//! member's thread, as the leader writes the entry: the log's order is then the queue order by
//! construction, and an append the member refuses takes no queue offset (Java assigns them under
//! its put lock before a synchronous local append; ours is asynchronous, so assigning them before
//! would leave holes when a later append succeeds after a refused one).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use dledger::protocol::Code;
use dledger::server::{AppendOutcome, AppendRefused, NodeHandle};
use dledger::store::{DataReader, MAX_ENTRY_SIZE};
use parking_lot::Mutex;
use remoting::clock::now_ms;
use store::commit_log::{check_and_encode, AppendLog, AppendResult, PutCallback, PutMessageResult, PutStatus};
use store::dledger_log::{EntryLog, ENTRY_BODY_OFFSET};
use store::message::record::{decode_record, restamp, RecordAt, StampedFields, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE};
use store::message::{offset_message_id, MessageToStore};

/// Where a record keeps its queue offset.
const QUEUE_OFFSET_POS: usize = 20;
/// Where a record keeps its physical offset (Java's `MessageDecoder.PHY_POS_POSITION`).
const PHYSICAL_OFFSET_POS: usize = 28;

/// The next queue offset of every queue, as the leader assigns them (Java's `topicQueueTable`).
/// Rebuilt from the consume queues whenever this member becomes leader.
#[derive(Default)]
pub struct QueueOffsets {
    table: Mutex<HashMap<String, HashMap<i32, i64>>>,
    last_store_timestamp: AtomicI64,
}

impl QueueOffsets {
    pub fn reset(&self, table: HashMap<String, HashMap<i32, i64>>) {
        *self.table.lock() = table;
    }

    /// The append hook: stamps the record in a leader's new entry at `pos`. Java's hook writes
    /// only the physical offset (`pos + 48`), at body offset 28, into whatever the body is; so do
    /// we, and for a commit-log record also its queue offset and store time.
    pub fn stamp(&self, body: &mut [u8], pos: i64) {
        let physical_offset = pos + ENTRY_BODY_OFFSET as i64;
        let Some(slot) = body.get_mut(PHYSICAL_OFFSET_POS..PHYSICAL_OFFSET_POS + 8) else { return };
        slot.copy_from_slice(&physical_offset.to_be_bytes());
        let (topic, queue_id, tx) = match decode_record(body, false) {
            Ok(RecordAt::Record(r)) => (r.topic.to_owned(), r.queue_id, r.transaction_type()),
            _ => return,
        };
        // Store times never go backwards in log order (Java's abnormal recovery relies on it).
        let now = now_ms();
        let store_timestamp = self.last_store_timestamp.fetch_max(now, Ordering::AcqRel).max(now);
        let queue_offset = if tx == TRANSACTION_PREPARED_TYPE || tx == TRANSACTION_ROLLBACK_TYPE {
            0
        } else {
            let mut table = self.table.lock();
            let next = table.entry(topic).or_default().entry(queue_id).or_insert(0);
            let offset = *next;
            *next += 1;
            offset
        };
        restamp(body, StampedFields { queue_offset, physical_offset, store_timestamp });
    }
}

/// The DLedger commit log's append path.
pub struct DLedgerCommitLog {
    node: NodeHandle,
    data: DataReader,
    max_message_size: usize,
    segment_size: usize,
}

impl DLedgerCommitLog {
    pub fn new(node: NodeHandle, data: DataReader, max_message_size: usize, segment_size: usize) -> DLedgerCommitLog {
        DLedgerCommitLog { node, data, max_message_size, segment_size }
    }

    fn encode(&self, msgs: &[MessageToStore]) -> Result<Vec<Bytes>, PutMessageResult> {
        if msgs.is_empty() {
            return Err(PutMessageResult::failed(PutStatus::MessageIllegal, "empty batch"));
        }
        let mut bodies = Vec::with_capacity(msgs.len());
        for msg in msgs {
            let record = check_and_encode(msg, self.max_message_size)?;
            let entry = record.len() + ENTRY_BODY_OFFSET;
            if entry > MAX_ENTRY_SIZE || entry + 8 > self.segment_size {
                return Err(PutMessageResult::failed(
                    PutStatus::MessageIllegal,
                    format!(
                        "a record of {} bytes does not fit a DLedger entry (at most {MAX_ENTRY_SIZE} bytes, within a {}-byte segment)",
                        record.len(),
                        self.segment_size
                    ),
                ));
            }
            bodies.push(Bytes::from(record.bytes));
        }
        Ok(bodies)
    }

    /// The put's result from the member's answer (Java's status mapping), with the offsets and
    /// ids of the records as the leader stamped them.
    fn result(data: &DataReader, msgs: &[(std::net::SocketAddr, usize)], outcome: AppendOutcome) -> PutMessageResult {
        let code = outcome.response.base.code;
        let status = match code {
            Code::SUCCESS => PutStatus::PutOk,
            Code::INCONSISTENT_LEADER | Code::NOT_LEADER | Code::LEADER_NOT_READY | Code::DISK_FULL => PutStatus::ServiceNotAvailable,
            Code::WAIT_QUORUM_ACK_TIMEOUT | Code::LEADER_PENDING_FULL => PutStatus::OsPageCacheBusy,
            _ => PutStatus::UnknownError,
        };
        if status != PutStatus::PutOk {
            return PutMessageResult::failed(status, format!("DLedger answered {} ({})", code.0, code_name(code)));
        }
        let Some(first) = outcome.positions.first().map(|pos| pos + ENTRY_BODY_OFFSET as i64) else {
            return PutMessageResult::failed(PutStatus::UnknownError, "DLedger answered success without positions");
        };
        let read_i64 = |at: i64| {
            let bytes = data.read(at as u64, 8, u64::MAX)?;
            Some(i64::from_be_bytes(bytes.try_into().ok()?))
        };
        let Some(logics_offset) = read_i64(first + QUEUE_OFFSET_POS as i64) else {
            return PutMessageResult::failed(PutStatus::UnknownError, format!("the record at {first} is not readable after its commit"));
        };
        let msg_ids = outcome.positions.iter().zip(msgs).map(|(pos, (host, _))| offset_message_id(*host, pos + ENTRY_BODY_OFFSET as i64)).collect();
        let append = AppendResult {
            wrote_offset: first,
            wrote_bytes: msgs.iter().map(|(_, len)| len).sum(),
            msg_ids,
            store_timestamp: now_ms(),
            logics_offset,
            msg_num: msgs.len(),
        };
        PutMessageResult { status, append: Some(append), remark: None }
    }
}

fn code_name(code: Code) -> &'static str {
    match code {
        Code::NOT_LEADER => "NOT_LEADER",
        Code::INCONSISTENT_LEADER => "INCONSISTENT_LEADER",
        Code::LEADER_NOT_READY => "LEADER_NOT_READY",
        Code::DISK_FULL => "DISK_FULL",
        Code::WAIT_QUORUM_ACK_TIMEOUT => "WAIT_QUORUM_ACK_TIMEOUT",
        Code::LEADER_PENDING_FULL => "LEADER_PENDING_FULL",
        Code::TERM_CHANGED => "TERM_CHANGED",
        Code::DISK_ERROR => "DISK_ERROR",
        _ => "error",
    }
}

/// Answers a put exactly once: with the member's answer, or, if the member drops the append
/// unanswered (it stopped), as a broker whose store is shutting down answers.
struct AnswerOnce(Option<PutCallback>);

impl AnswerOnce {
    fn answer(mut self, result: PutMessageResult) {
        if let Some(done) = self.0.take() {
            done(result);
        }
    }
}

impl Drop for AnswerOnce {
    fn drop(&mut self) {
        if let Some(done) = self.0.take() {
            done(PutMessageResult::failed(PutStatus::ServiceNotAvailable, "the DLedger member stopped before the quorum answered"));
        }
    }
}

impl AppendLog for DLedgerCommitLog {
    fn append(&self, msgs: &[MessageToStore]) -> PutMessageResult {
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        self.append_then(
            msgs,
            Box::new(move |result| {
                let _ = answer.send(result);
            }),
        );
        answered.recv().unwrap_or_else(|_| PutMessageResult::failed(PutStatus::ServiceNotAvailable, "the DLedger member dropped the put"))
    }

    fn append_then(&self, msgs: &[MessageToStore], done: PutCallback) {
        let bodies = match self.encode(msgs) {
            Ok(bodies) => bodies,
            Err(refused) => return done(refused),
        };
        let shape: Vec<(std::net::SocketAddr, usize)> = msgs.iter().zip(&bodies).map(|(m, b)| (m.store_host, b.len())).collect();
        let data = self.data.clone();
        let once = Arc::new(Mutex::new(Some(AnswerOnce(Some(done)))));
        let on_answer = once.clone();
        let submitted = self.node.try_append(
            bodies,
            Box::new(move |outcome| {
                if let Some(answer) = on_answer.lock().take() {
                    answer.answer(Self::result(&data, &shape, outcome));
                }
            }),
        );
        if let Err(refused) = submitted {
            let status = match refused {
                AppendRefused::QueueFull => PutStatus::OsPageCacheBusy,
                AppendRefused::Stopped => PutStatus::ServiceNotAvailable,
            };
            if let Some(answer) = once.lock().take() {
                answer.answer(PutMessageResult::failed(status, refused.to_string()));
            }
        }
    }

    /// The quorum is the only wait a DLedger append has; answered from the member's thread.
    fn append_no_wait_then(&self, msgs: &[MessageToStore], done: PutCallback) {
        self.append_then(msgs, done);
    }

    fn min_offset(&self) -> i64 {
        EntryLog::min_offset(&DataLog(self.data.clone()))
    }

    fn max_offset(&self) -> i64 {
        self.data.committed_pos()
    }

    fn read_bytes(&self, offset: i64, size: usize) -> Option<bytes::Bytes> {
        DataLog(self.data.clone()).read(offset, size, self.data.committed_pos()).filter(|b| b.len() == size).map(bytes::Bytes::from)
    }
}

/// The member's data as the store reads it.
pub struct DataLog(pub DataReader);

impl EntryLog for DataLog {
    fn committed_end(&self) -> i64 {
        self.0.committed_pos()
    }

    fn min_offset(&self) -> i64 {
        self.0.min_offset() as i64
    }

    fn first_segment_start(&self) -> Option<i64> {
        self.0.first_segment_start().map(|s| s as i64)
    }

    fn write_end(&self) -> i64 {
        self.0.write_pos() as i64
    }

    fn read(&self, offset: i64, max: usize, limit: i64) -> Option<Vec<u8>> {
        self.0.read(u64::try_from(offset).ok()?, max, u64::try_from(limit).ok()?)
    }

    fn segment_end(&self, offset: i64) -> Option<i64> {
        self.0.segment_end(u64::try_from(offset).ok()?).map(|e| e as i64)
    }

    fn start_at(&self, offset: i64) -> std::io::Result<()> {
        let offset = u64::try_from(offset).map_err(|_| std::io::Error::other(format!("negative offset {offset}")))?;
        self.0.start_data_at(offset).map_err(|e| std::io::Error::other(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::message::record::encode_record;

    fn record(topic: &str, queue_id: i32, sys_flag: i32) -> Vec<u8> {
        let host: std::net::SocketAddr = "127.0.0.1:10911".parse().unwrap();
        let msg = MessageToStore {
            topic: topic.into(),
            queue_id,
            flag: 0,
            sys_flag,
            born_timestamp: 1,
            born_host: host,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Bytes::from_static(b"body"),
            properties: String::new(),
        };
        encode_record(&msg).unwrap().bytes
    }

    fn stamped(offsets: &QueueOffsets, mut body: Vec<u8>, pos: i64) -> (i64, i64, i64) {
        offsets.stamp(&mut body, pos);
        let Ok(RecordAt::Record(r)) = decode_record(&body, true) else { panic!("not a record") };
        (r.physical_offset, r.queue_offset, r.store_timestamp)
    }

    #[test]
    fn the_hook_stamps_offsets_in_log_order_and_half_messages_take_none() {
        let offsets = QueueOffsets::default();
        offsets.reset([("T".to_owned(), [(1, 5)].into_iter().collect())].into_iter().collect());
        let (phy, queue, ts) = stamped(&offsets, record("T", 1, 0), 1000);
        assert_eq!((phy, queue), (1048, 5), "physical offset = pos + 48; the queue continues from the table");
        assert!(ts > 0);
        assert_eq!(stamped(&offsets, record("T", 1, 0), 2000).1, 6);
        assert_eq!(stamped(&offsets, record("T", 2, 0), 3000).1, 0, "a new queue starts at 0");
        let prepared = store::message::record::TRANSACTION_PREPARED_TYPE;
        assert_eq!(stamped(&offsets, record("T", 1, prepared), 4000).1, 0, "a half message takes no queue offset");
        assert_eq!(stamped(&offsets, record("T", 1, 0), 5000).1, 7);
        let (_, _, later) = stamped(&offsets, record("T", 1, 0), 6000);
        assert!(later >= ts, "store times never go backwards");
    }

    #[test]
    fn a_body_that_is_no_record_gets_only_the_physical_offset_as_java_writes_it() {
        let offsets = QueueOffsets::default();
        let mut body = vec![7u8; 40];
        offsets.stamp(&mut body, 100);
        assert_eq!(&body[28..36], &148i64.to_be_bytes());
        assert!(body[..28].iter().chain(&body[36..]).all(|b| *b == 7));
        let mut short = vec![1u8; 20];
        offsets.stamp(&mut short, 100);
        assert_eq!(short, vec![1u8; 20]);
    }
}
