//! Server-side load balancing of 5.x consumers (Java 5.3.3's `loadbalance` and the allocation of
//! `QueryAssignmentProcessor`): a consumer with `clientRebalance=false` asks the broker which
//! queues it holds (QUERY_ASSIGNMENT), and how it reads them, PULL or POP, as set per topic and
//! group by SET_MESSAGE_REQUEST_MODE (`mqadmin setConsumeMode`).
//!
//! - [`MessageRequestModes`]: `config/messageRequestMode.json` (Java's `MessageRequestModeManager`,
//!   a `ConfigManager`: loaded at start, written at once on every change);
//! - [`Strategy`], [`allocate_for_pop`]: the client's `AllocateMessageQueueAveragely` (`AVG`) and
//!   `AllocateMessageQueueAveragelyByCircle` (`AVG_BY_CIRCLE`), the only two Java's broker knows,
//!   and the pop variant that lets a consumer share the queues of the ones after it;
//! - [`TopicRoutes`]: a topic's readable queues over the whole cluster, from the name server
//!   (Java's `TopicRouteInfoManager.getTopicSubscribeInfo`), kept for
//!   `loadBalancePollNameServerInterval`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use remoting::client::RemotingClient;
use remoting::protocol::namesrv::GetRouteInfoRequestHeader;
use remoting::protocol::route::TopicRouteData;
use remoting::protocol::system_topic::RETRY_GROUP_TOPIC_PREFIX;
use remoting::{RemotingCommand, RequestCode, ResponseCode};

use crate::config::LiveConfig;
use crate::config_file::{self, ConfigFile, ConfigFileError};
use crate::pop::config_files::{MessageRequestMode, MessageRequestModeEntry, MessageRequestModeFile, MESSAGE_REQUEST_MODE_FILE};
pub use crate::rebalance_lock::MessageQueue;

/// `config/messageRequestMode.json`: topic -> consumer group -> the mode set for them.
pub struct MessageRequestModes {
    file: ConfigFile,
    table: RwLock<MessageRequestModeFile>,
}

impl MessageRequestModes {
    /// Loads the file (or its backup), as Java's `MessageRequestModeManager.load` at start.
    pub fn open(store_root_dir: &Path) -> Result<MessageRequestModes, ConfigFileError> {
        let file = ConfigFile::new(config_file::config_dir(store_root_dir).join(MESSAGE_REQUEST_MODE_FILE));
        let table = file.load::<MessageRequestModeFile>()?.unwrap_or_default();
        Ok(MessageRequestModes { file, table: RwLock::new(table) })
    }

    pub fn get(&self, topic: &str, group: &str) -> Option<MessageRequestModeEntry> {
        self.table.read().get(topic, group).cloned()
    }

    /// Sets the mode of `topic` and `group` (the request body as sent) and writes the file before
    /// returning, as Java persists before it answers.
    pub fn set(&self, topic: &str, group: &str, entry: MessageRequestModeEntry) -> Result<(), ConfigFileError> {
        self.table.write().message_request_mode_map.entry(topic.to_owned()).or_default().insert(group.to_owned(), entry);
        self.file.persist_now(|| self.table.read().encode_pretty())
    }

    /// GET_ALL_MESSAGE_REQUEST_MODE's body: the manager as `encode()` writes it (compact).
    pub fn encode_compact(&self) -> Vec<u8> {
        self.table.read().encode_compact()
    }

    /// A slave's copy of its master's table (Java's `syncMessageRequestMode`): topics the master
    /// does not have are dropped, the master's replace ours, and the file is written.
    pub fn replace_from_master(&self, master: MessageRequestModeFile) -> Result<(), ConfigFileError> {
        {
            let mut table = self.table.write();
            table.message_request_mode_map.retain(|topic, _| master.message_request_mode_map.contains_key(topic));
            table.message_request_mode_map.extend(master.message_request_mode_map);
        }
        self.file.persist_now(|| self.table.read().encode_pretty())
    }

    pub fn snapshot(&self) -> MessageRequestModeFile {
        self.table.read().clone()
    }
}

/// `defaultMessageRequestMode` in `broker.conf` (Java's `MessageRequestMode.valueOf`).
impl remoting::config::ConfigValue for MessageRequestMode {
    const EXPECTED: &'static str = "message request mode (PULL or POP)";

    fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "PULL" => Some(MessageRequestMode::Pull),
            "POP" => Some(MessageRequestMode::Pop),
            _ => None,
        }
    }

    fn to_text(&self) -> String {
        match self {
            MessageRequestMode::Pull => "PULL",
            MessageRequestMode::Pop => "POP",
        }
        .to_owned()
    }
}

/// Why an allocation gave no answer (Java throws; the broker then answers no assignment).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocateError {
    #[error("currentCID is empty")]
    NoClientId,
    #[error("mqAll is null or mqAll empty")]
    NoQueues,
    #[error("cidAll is null or cidAll empty")]
    NoClients,
}

/// The allocation strategies Java's broker registers, by their `getName()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// `AVG`: consecutive runs of queues, the first `queues % clients` clients one more.
    Averagely,
    /// `AVG_BY_CIRCLE`: every `clients`-th queue from the client's index.
    AveragelyByCircle,
}

impl Strategy {
    pub fn by_name(name: &str) -> Option<Strategy> {
        match name {
            "AVG" => Some(Strategy::Averagely),
            "AVG_BY_CIRCLE" => Some(Strategy::AveragelyByCircle),
            _ => None,
        }
    }

    /// The queues of `client_id` among `mq_all` and `cid_all`, both sorted (Java's `allocate`,
    /// with `AbstractAllocateMessageQueueStrategy.check`): none when the client is not listed.
    pub fn allocate(self, client_id: &str, mq_all: &[MessageQueue], cid_all: &[String]) -> Result<Vec<MessageQueue>, AllocateError> {
        check(client_id, mq_all, cid_all)?;
        let Some(index) = cid_all.iter().position(|c| c == client_id) else {
            tracing::info!(client_id, ?cid_all, "[BUG] the consumer id is not in the group's list");
            return Ok(Vec::new());
        };
        let (queues, clients) = (mq_all.len(), cid_all.len());
        Ok(match self {
            Strategy::Averagely => {
                let modulo = queues % clients;
                let one_more = modulo > 0 && index < modulo;
                let average = if queues <= clients { 1 } else { queues / clients + usize::from(one_more) };
                let start = if one_more { index * average } else { index * average + modulo };
                let range = average.min(queues.saturating_sub(start));
                mq_all.iter().skip(start).take(range).cloned().collect()
            }
            Strategy::AveragelyByCircle => mq_all.iter().enumerate().skip(index).filter(|(i, _)| i % clients == index).map(|(_, q)| q.clone()).collect(),
        })
    }
}

fn check(client_id: &str, mq_all: &[MessageQueue], cid_all: &[String]) -> Result<(), AllocateError> {
    if client_id.is_empty() {
        return Err(AllocateError::NoClientId);
    }
    if mq_all.is_empty() {
        return Err(AllocateError::NoQueues);
    }
    if cid_all.is_empty() {
        return Err(AllocateError::NoClients);
    }
    Ok(())
}

/// Java's `allocate4Pop`: with `pop_share_queue_num` <= 0 or at least the number of other
/// clients, every client pops every queue (each broker's queues as queue id -1); else a client
/// takes its own queues and those of the `pop_share_queue_num` clients after it, and when there
/// are more clients than queues, one queue each (index modulo the queue count).
pub fn allocate_for_pop(
    strategy: Strategy,
    client_id: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
    pop_share_queue_num: i32,
) -> Result<Vec<MessageQueue>, AllocateError> {
    let others = i64::try_from(cid_all.len()).unwrap_or(i64::MAX) - 1;
    if pop_share_queue_num <= 0 || i64::from(pop_share_queue_num) >= others {
        return Ok(mq_all.iter().map(|q| MessageQueue { queue_id: -1, ..q.clone() }).collect());
    }
    if cid_all.len() <= mq_all.len() {
        let mut result = strategy.allocate(client_id, mq_all, cid_all)?;
        if let Some(mut index) = cid_all.iter().position(|c| c == client_id) {
            for _ in 0..pop_share_queue_num {
                index = (index + 1) % cid_all.len();
                result.extend(strategy.allocate(&cid_all[index], mq_all, cid_all)?);
            }
        }
        return Ok(result);
    }
    check(client_id, mq_all, cid_all)?;
    Ok(match cid_all.iter().position(|c| c == client_id) {
        Some(index) => vec![mq_all[index % mq_all.len()].clone()],
        None => Vec::new(),
    })
}

/// Java's `MessageQueue.compareTo`: topic, broker name, queue id.
pub fn sort_queues(queues: &mut [MessageQueue]) {
    queues.sort_by(|a, b| (&a.topic, &a.broker_name, a.queue_id).cmp(&(&b.topic, &b.broker_name, b.queue_id)));
}

/// Java's `topicRouteData2TopicSubscribeInfo`: `0..readQueueNums` of every broker name whose
/// queues are readable.
pub fn subscribe_queues(topic: &str, route: &TopicRouteData) -> Vec<MessageQueue> {
    let mut queues: Vec<MessageQueue> = route
        .queue_datas
        .iter()
        .filter(|qd| remoting::protocol::perm::is_readable(qd.perm))
        .flat_map(|qd| (0..qd.read_queue_nums.max(0)).map(|queue_id| MessageQueue { topic: topic.to_owned(), broker_name: qd.broker_name.clone(), queue_id }))
        .collect();
    sort_queues(&mut queues);
    queues.dedup();
    queues
}

/// Java's `GET_TOPIC_ROUTE_TIMEOUT`.
const ROUTE_TIMEOUT: Duration = Duration::from_secs(3);

struct Cached {
    queues: Vec<MessageQueue>,
    fetched: Instant,
}

/// What a name server said of a topic.
enum Asked {
    Route(TopicRouteData),
    /// TOPIC_NOT_EXIST: Java forgets the topic's queues (but a retry topic's).
    NotExist,
    /// No name server answered, or the answer was unusable: what is known stays.
    Failed,
}

/// The readable queues of topics over the whole cluster, asked of the name servers when first
/// wanted and again once older than `loadBalancePollNameServerInterval` (Java asks every interval
/// for every topic asked once; asking on use gives the same freshness to the topics in use).
pub struct TopicRoutes {
    namesrv: Arc<RemotingClient>,
    config: LiveConfig,
    table: Mutex<HashMap<String, Cached>>,
}

impl TopicRoutes {
    pub fn new(namesrv: Arc<RemotingClient>, config: LiveConfig) -> TopicRoutes {
        TopicRoutes { namesrv, config, table: Mutex::new(HashMap::new()) }
    }

    /// Java's `getTopicSubscribeInfo`: the known queues, asked for again when there are none or
    /// (ours) they are older than the poll interval; `None` when the topic has no route.
    pub async fn subscribe_info(&self, topic: &str) -> Option<Vec<MessageQueue>> {
        let interval = Duration::from_millis(self.config.load().load_balance_poll_name_server_interval_ms);
        if let Some(c) = self.table.lock().get(topic).filter(|c| !c.queues.is_empty() && c.fetched.elapsed() < interval) {
            return Some(c.queues.clone());
        }
        match self.ask(topic).await {
            Asked::Route(route) => {
                let queues = subscribe_queues(topic, &route);
                self.table.lock().insert(topic.to_owned(), Cached { queues, fetched: Instant::now() });
            }
            Asked::NotExist if !topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) => {
                self.table.lock().remove(topic);
            }
            Asked::NotExist | Asked::Failed => {}
        }
        self.table.lock().get(topic).map(|c| c.queues.clone())
    }

    /// GET_ROUTEINFO_BY_TOPIC to the name servers in turn until one answers.
    async fn ask(&self, topic: &str) -> Asked {
        let addrs = self.config.load().namesrv_addrs();
        let header = GetRouteInfoRequestHeader { topic: topic.to_owned(), accept_standard_json_only: None };
        for addr in &addrs {
            let request = RemotingCommand::request_with_header(RequestCode::GET_ROUTEINFO_BY_TOPIC, &header);
            match self.namesrv.invoke(addr, request, ROUTE_TIMEOUT).await {
                Ok(answer) if answer.response_code() == ResponseCode::SUCCESS && answer.body.is_some() => {
                    return match remoting::fastjson::from_slice::<TopicRouteData>(answer.body_bytes()) {
                        Ok(route) => Asked::Route(route),
                        Err(e) => {
                            tracing::warn!(namesrv = addr, topic, error = %e, "route of the topic does not decode");
                            Asked::Failed
                        }
                    };
                }
                Ok(answer) if answer.response_code() == ResponseCode::TOPIC_NOT_EXIST => return Asked::NotExist,
                Ok(answer) => {
                    tracing::warn!(namesrv = addr, topic, code = answer.code, remark = ?answer.remark, "route of the topic refused");
                    return Asked::Failed;
                }
                Err(e) => tracing::warn!(namesrv = addr, topic, error = %e, "cannot ask the name server for the route"),
            }
        }
        Asked::Failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queues(n: i32) -> Vec<MessageQueue> {
        (0..n).map(|queue_id| MessageQueue { topic: "T".into(), broker_name: "b".into(), queue_id }).collect()
    }

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i}")).collect()
    }

    fn queue_ids(queues: &[MessageQueue]) -> Vec<i32> {
        queues.iter().map(|q| q.queue_id).collect()
    }

    #[test]
    fn averagely_gives_the_first_clients_one_more_in_runs() {
        let (mq, cid) = (queues(8), ids(3));
        let got: Vec<_> = cid.iter().map(|c| queue_ids(&Strategy::Averagely.allocate(c, &mq, &cid).unwrap())).collect();
        assert_eq!(got, [vec![0, 1, 2], vec![3, 4, 5], vec![6, 7]]);
        let cid = ids(10);
        assert_eq!(queue_ids(&Strategy::Averagely.allocate("c9", &mq, &cid).unwrap()), Vec::<i32>::new());
        assert_eq!(queue_ids(&Strategy::Averagely.allocate("c7", &mq, &cid).unwrap()), [7]);
        assert_eq!(Strategy::Averagely.allocate("stranger", &mq, &cid), Ok(vec![]));
        assert_eq!(Strategy::Averagely.allocate("", &mq, &cid), Err(AllocateError::NoClientId));
        assert_eq!(Strategy::Averagely.allocate("c0", &[], &cid), Err(AllocateError::NoQueues));
    }

    #[test]
    fn by_circle_deals_the_queues_round() {
        let (mq, cid) = (queues(8), ids(3));
        let got: Vec<_> = cid.iter().map(|c| queue_ids(&Strategy::AveragelyByCircle.allocate(c, &mq, &cid).unwrap())).collect();
        assert_eq!(got, [vec![0, 3, 6], vec![1, 4, 7], vec![2, 5]]);
        assert_eq!(Strategy::by_name("AVG_BY_CIRCLE"), Some(Strategy::AveragelyByCircle));
        assert_eq!(Strategy::by_name("CONSISTENT_HASH"), None);
    }

    #[test]
    fn pop_shares_the_queues_of_the_following_clients() {
        let (mq, cid) = (queues(8), ids(4));
        // -1 (Java's default) or as many as the other clients: everything, as queue -1.
        assert_eq!(queue_ids(&allocate_for_pop(Strategy::Averagely, "c0", &mq, &cid, -1).unwrap()), [-1; 8]);
        assert_eq!(queue_ids(&allocate_for_pop(Strategy::Averagely, "c0", &mq, &cid, 3).unwrap()), [-1; 8]);
        assert_eq!(queue_ids(&allocate_for_pop(Strategy::Averagely, "c3", &mq, &cid, 1).unwrap()), [6, 7, 0, 1]);
        // More clients than queues: one each, round.
        let cid = ids(10);
        assert_eq!(queue_ids(&allocate_for_pop(Strategy::Averagely, "c9", &mq, &cid, 1).unwrap()), [1]);
        assert_eq!(queue_ids(&allocate_for_pop(Strategy::Averagely, "x", &mq, &cid, 1).unwrap()), Vec::<i32>::new());
    }

    #[test]
    fn subscribe_info_is_the_readable_queues_of_every_broker() {
        use remoting::protocol::route::QueueData;
        let qd = |broker_name: &str, perm, read_queue_nums| QueueData {
            broker_name: broker_name.into(),
            perm,
            read_queue_nums,
            topic_sys_flag: 0,
            write_queue_nums: 8,
        };
        let route = TopicRouteData { queue_datas: vec![qd("b2", 6, 2), qd("b1", 4, 1), qd("wo", 2, 4)], ..Default::default() };
        let got: Vec<_> = subscribe_queues("T", &route).into_iter().map(|q| (q.broker_name, q.queue_id)).collect();
        assert_eq!(got, [("b1".to_owned(), 0), ("b2".to_owned(), 0), ("b2".to_owned(), 1)]);
    }

    #[test]
    fn modes_survive_a_restart_in_javas_file() {
        let dir = tempfile::tempdir().unwrap();
        let modes = MessageRequestModes::open(dir.path()).unwrap();
        assert_eq!(modes.encode_compact(), br#"{"messageRequestModeMap":{}}"#);
        let entry = MessageRequestModeEntry {
            topic: Some("T".into()),
            consumer_group: Some("G".into()),
            mode: crate::pop::config_files::MessageRequestMode::Pop,
            pop_share_queue_num: 8,
        };
        modes.set("T", "G", entry.clone()).unwrap();
        let again = MessageRequestModes::open(dir.path()).unwrap();
        assert_eq!(again.get("T", "G"), Some(entry));
        assert_eq!(
            String::from_utf8(again.encode_compact()).unwrap(),
            r#"{"messageRequestModeMap":{"T":{"G":{"consumerGroup":"G","mode":"POP","popShareQueueNum":8,"topic":"T"}}}}"#
        );
    }
}
