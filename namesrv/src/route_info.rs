//! The name server's routing state: which brokers form which clusters, which broker names serve
//! which topics with how many queues, and when each broker was last heard from. Follows Java's
//! `RouteInfoManager`: registrations merge (a body may hold one topic), a broker unheard of for
//! its timeout (120 s) or whose connection closed is removed with the routes only it served.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use remoting::protocol::body::TopicList;
use remoting::protocol::perm;
use remoting::protocol::route::{BrokerData, ClusterInfo, QueueData, TopicRouteData};
use remoting::protocol::topic::{DataVersion, TopicConfig, TopicConfigSerializeWrapper};
use remoting::protocol::topic_sys_flag;
use remoting::server::Channel;
use tracing::info;

/// Brokers (cluster and address) held at most (ours; Java has no bound).
pub const MAX_BROKERS: usize = 10_000;
/// Routes (a topic served by a broker name) held at most (ours; Java has no bound): 5 broker
/// names of 100,000 topics each, about half a GiB of tables.
pub const MAX_ROUTES: usize = 500_000;

/// Why a registration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterRefused {
    /// A single-topic registration before the broker's first full one (Java's answer).
    #[error("register broker failed")]
    NotRegisteredYet,
    #[error("register broker failed: the name server already holds {max} brokers")]
    TooManyBrokers { max: usize },
    #[error("register broker failed: its topics would take the name server past {max} routes (topics served by a broker name); it holds {held}")]
    TooManyRoutes { held: usize, max: usize },
}

/// Java's `DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`.
pub const DEFAULT_BROKER_TIMEOUT: Duration = Duration::from_secs(120);

const MASTER_ID: i64 = 0;

/// A broker instance: the liveness table is keyed by cluster and address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct BrokerAddrInfo {
    cluster: String,
    addr: String,
}

struct BrokerLiveInfo {
    last_update: Instant,
    timeout: Duration,
    data_version: DataVersion,
    channel: Option<Channel>,
    ha_server_addr: String,
}

#[derive(Default)]
struct Tables {
    /// topic -> broker name -> queues
    topic_queue: BTreeMap<String, BTreeMap<String, QueueData>>,
    broker_addr: BTreeMap<String, BrokerData>,
    cluster_addr: BTreeMap<String, BTreeSet<String>>,
    broker_live: HashMap<BrokerAddrInfo, BrokerLiveInfo>,
    filter_server: HashMap<BrokerAddrInfo, Vec<String>>,
}

/// What a registering broker tells us.
pub struct Registration<'a> {
    pub cluster: &'a str,
    pub broker_addr: &'a str,
    pub broker_name: &'a str,
    pub broker_id: i64,
    pub ha_server_addr: &'a str,
    pub timeout: Option<Duration>,
    pub enable_acting_master: Option<bool>,
    pub topics: &'a TopicConfigSerializeWrapper,
    pub filter_servers: Option<&'a [String]>,
    pub channel: Option<Channel>,
}

/// The answer for a registering slave: its master, when the master is alive.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RegisterResult {
    pub master_addr: Option<String>,
    pub ha_server_addr: Option<String>,
}

/// Which broker to remove.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerIdentity {
    pub cluster: String,
    pub broker_addr: String,
    pub broker_name: String,
    pub broker_id: i64,
}

pub struct RouteInfoManager {
    tables: RwLock<Tables>,
    delete_topic_with_broker_registration: bool,
    max_brokers: usize,
    max_routes: usize,
}

impl Default for RouteInfoManager {
    fn default() -> Self {
        RouteInfoManager::new(false)
    }
}

impl RouteInfoManager {
    pub fn new(delete_topic_with_broker_registration: bool) -> Self {
        RouteInfoManager { tables: RwLock::new(Tables::default()), delete_topic_with_broker_registration, max_brokers: MAX_BROKERS, max_routes: MAX_ROUTES }
    }

    /// Other bounds than [`MAX_BROKERS`] and [`MAX_ROUTES`].
    pub fn with_bounds(self, max_brokers: usize, max_routes: usize) -> Self {
        RouteInfoManager { max_brokers, max_routes, ..self }
    }

    /// REGISTER_BROKER. Refused when a single-topic registration arrives before the broker's first
    /// full one (Java answers "register broker failed"), and past our bounds on brokers and routes.
    pub fn register_broker(&self, reg: Registration<'_>, now: Instant) -> Result<RegisterResult, RegisterRefused> {
        let mut t = self.tables.write();
        let addr_info = BrokerAddrInfo { cluster: reg.cluster.to_owned(), addr: reg.broker_addr.to_owned() };
        if !t.broker_live.contains_key(&addr_info) && t.broker_live.len() >= self.max_brokers {
            return Err(RegisterRefused::TooManyBrokers { max: self.max_brokers });
        }
        if reg.broker_id == MASTER_ID {
            let new_routes =
                reg.topics.topic_config_table.keys().filter(|topic| t.topic_queue.get(*topic).is_none_or(|m| !m.contains_key(reg.broker_name))).count();
            if new_routes > 0 {
                let held: usize = t.topic_queue.values().map(BTreeMap::len).sum();
                if held + new_routes > self.max_routes {
                    return Err(RegisterRefused::TooManyRoutes { held, max: self.max_routes });
                }
            }
        }
        t.cluster_addr.entry(reg.cluster.to_owned()).or_default().insert(reg.broker_name.to_owned());

        let mut register_first = !t.broker_addr.contains_key(reg.broker_name);
        let broker = t.broker_addr.entry(reg.broker_name.to_owned()).or_insert_with(|| BrokerData {
            broker_addrs: BTreeMap::new(),
            broker_name: reg.broker_name.to_owned(),
            cluster: reg.cluster.to_owned(),
            enable_acting_master: false,
            zone_name: None,
        });
        broker.enable_acting_master = reg.enable_acting_master.unwrap_or(false);
        // A slave promoted to master re-registers its address under id 0: one record per address.
        broker.broker_addrs.retain(|id, addr| !(addr == reg.broker_addr && *id != reg.broker_id));
        if !broker.broker_addrs.contains_key(&reg.broker_id) && reg.topics.topic_config_table.len() == 1 {
            return Err(RegisterRefused::NotRegisteredYet);
        }
        let old_addr = broker.broker_addrs.insert(reg.broker_id, reg.broker_addr.to_owned());
        register_first |= old_addr.is_none_or(|a| a.is_empty());
        let is_master = reg.broker_id == MASTER_ID;
        let master_addr = broker.broker_addrs.get(&MASTER_ID).cloned();

        if is_master {
            let version_changed = t.broker_live.get(&addr_info).is_none_or(|live| live.data_version != reg.topics.data_version);
            let table = &reg.topics.topic_config_table;
            if self.delete_topic_with_broker_registration {
                remove_broker_topics_not_in(&mut t.topic_queue, reg.broker_name, table);
            }
            for tc in table.values() {
                let missing = t.topic_queue.get(&tc.topic_name).is_none_or(|m| !m.contains_key(reg.broker_name));
                if register_first || version_changed || missing {
                    create_and_update_queue_data(&mut t.topic_queue, reg.broker_name, tc);
                }
            }
        }

        let previous = t.broker_live.insert(
            addr_info.clone(),
            BrokerLiveInfo {
                last_update: now,
                timeout: reg.timeout.unwrap_or(DEFAULT_BROKER_TIMEOUT),
                data_version: reg.topics.data_version.clone(),
                channel: reg.channel,
                ha_server_addr: reg.ha_server_addr.to_owned(),
            },
        );
        if previous.is_none() {
            info!(cluster = reg.cluster, broker = reg.broker_name, addr = reg.broker_addr, id = reg.broker_id, "new broker registered");
        }
        if let Some(filters) = reg.filter_servers {
            if filters.is_empty() {
                t.filter_server.remove(&addr_info);
            } else {
                t.filter_server.insert(addr_info, filters.to_vec());
            }
        }

        let mut result = RegisterResult::default();
        if !is_master {
            if let Some(master) = master_addr {
                let key = BrokerAddrInfo { cluster: reg.cluster.to_owned(), addr: master.clone() };
                if let Some(live) = t.broker_live.get(&key) {
                    result.ha_server_addr = Some(live.ha_server_addr.clone());
                    result.master_addr = Some(master);
                }
            }
        }
        Ok(result)
    }

    /// UNREGISTER_BROKER, connection close and expiry all end here.
    pub fn unregister_broker(&self, who: &BrokerIdentity) {
        let mut t = self.tables.write();
        let addr_info = BrokerAddrInfo { cluster: who.cluster.clone(), addr: who.broker_addr.clone() };
        t.broker_live.remove(&addr_info);
        t.filter_server.remove(&addr_info);
        let mut remove_name = false;
        if let Some(broker) = t.broker_addr.get_mut(&who.broker_name) {
            broker.broker_addrs.retain(|_, addr| *addr != who.broker_addr);
            remove_name = broker.broker_addrs.is_empty();
        }
        if !remove_name {
            return;
        }
        info!(broker = who.broker_name, "last address of broker name gone; removing its routes");
        t.broker_addr.remove(&who.broker_name);
        if let Some(names) = t.cluster_addr.get_mut(&who.cluster) {
            names.remove(&who.broker_name);
            if names.is_empty() {
                t.cluster_addr.remove(&who.cluster);
            }
        }
        t.topic_queue.retain(|_, by_broker| {
            by_broker.remove(&who.broker_name);
            !by_broker.is_empty()
        });
    }

    /// Refreshes liveness (QUERY_DATA_VERSION, BROKER_HEARTBEAT).
    pub fn touch(&self, cluster: &str, broker_addr: &str, now: Instant) {
        let key = BrokerAddrInfo { cluster: cluster.to_owned(), addr: broker_addr.to_owned() };
        if let Some(live) = self.tables.write().broker_live.get_mut(&key) {
            live.last_update = now;
        }
    }

    /// The data version we hold for a broker, if it is registered.
    pub fn data_version(&self, cluster: &str, broker_addr: &str) -> Option<DataVersion> {
        let key = BrokerAddrInfo { cluster: cluster.to_owned(), addr: broker_addr.to_owned() };
        self.tables.read().broker_live.get(&key).map(|live| live.data_version.clone())
    }

    /// Removes every broker not heard from within its timeout, closing its connection.
    pub fn scan_not_active_brokers(&self, now: Instant) -> Vec<BrokerIdentity> {
        let expired: Vec<(BrokerAddrInfo, Option<Channel>)> = self
            .tables
            .read()
            .broker_live
            .iter()
            .filter(|(_, live)| now.saturating_duration_since(live.last_update) > live.timeout)
            .map(|(key, live)| (key.clone(), live.channel.clone()))
            .collect();
        let mut removed = Vec::new();
        for (key, channel) in expired {
            if let Some(channel) = channel {
                channel.close();
            }
            if let Some(who) = self.identity_of(&key) {
                info!(addr = who.broker_addr, "broker expired");
                self.unregister_broker(&who);
                removed.push(who);
            } else {
                self.tables.write().broker_live.remove(&key);
            }
        }
        removed
    }

    /// A connection closed: remove the broker that registered over it, if any.
    pub fn on_channel_closed(&self, channel: &Channel) -> Option<BrokerIdentity> {
        let key = {
            let t = self.tables.read();
            t.broker_live.iter().find(|(_, live)| live.channel.as_ref() == Some(channel)).map(|(k, _)| k.clone())?
        };
        let who = self.identity_of(&key)?;
        info!(addr = who.broker_addr, "broker connection closed; unregistering");
        self.unregister_broker(&who);
        Some(who)
    }

    fn identity_of(&self, key: &BrokerAddrInfo) -> Option<BrokerIdentity> {
        let t = self.tables.read();
        t.broker_addr.values().filter(|b| b.cluster == key.cluster).find_map(|b| {
            b.broker_addrs.iter().find(|(_, addr)| **addr == key.addr).map(|(id, _)| BrokerIdentity {
                cluster: key.cluster.clone(),
                broker_addr: key.addr.clone(),
                broker_name: b.broker_name.clone(),
                broker_id: *id,
            })
        })
    }

    /// GET_ROUTEINFO_BY_TOPIC: `None` when no broker serves the topic.
    pub fn pickup_topic_route(&self, topic: &str) -> Option<TopicRouteData> {
        let t = self.tables.read();
        let by_broker = t.topic_queue.get(topic)?;
        let mut route = TopicRouteData { queue_datas: by_broker.values().cloned().collect(), ..Default::default() };
        for name in by_broker.keys() {
            let Some(broker) = t.broker_addr.get(name) else { continue };
            if !t.filter_server.is_empty() {
                for addr in broker.broker_addrs.values() {
                    let key = BrokerAddrInfo { cluster: broker.cluster.clone(), addr: addr.clone() };
                    if let Some(filters) = t.filter_server.get(&key) {
                        route.filter_server_table.insert(addr.clone(), filters.clone());
                    }
                }
            }
            route.broker_datas.push(broker.clone());
        }
        if route.broker_datas.is_empty() {
            return None;
        }
        Some(route)
    }

    pub fn cluster_info(&self) -> ClusterInfo {
        let t = self.tables.read();
        ClusterInfo { broker_addr_table: t.broker_addr.clone(), cluster_addr_table: t.cluster_addr.clone() }
    }

    pub fn all_topics(&self) -> TopicList {
        TopicList { broker_addr: None, topic_list: self.tables.read().topic_queue.keys().cloned().collect() }
    }

    /// DELETE_TOPIC_IN_NAMESRV: the whole topic, or only the queues of one cluster's brokers.
    pub fn delete_topic(&self, topic: &str, cluster: Option<&str>) {
        let mut t = self.tables.write();
        let Some(cluster) = cluster else {
            t.topic_queue.remove(topic);
            return;
        };
        let Some(names) = t.cluster_addr.get(cluster).cloned() else { return };
        if let Some(by_broker) = t.topic_queue.get_mut(topic) {
            by_broker.retain(|name, _| !names.contains(name));
            if by_broker.is_empty() {
                t.topic_queue.remove(topic);
            }
        }
    }

    /// GET_TOPICS_BY_CLUSTER.
    pub fn topics_by_cluster(&self, cluster: &str) -> TopicList {
        let t = self.tables.read();
        let names = t.cluster_addr.get(cluster).cloned().unwrap_or_default();
        let topic_list =
            t.topic_queue.iter().filter(|(_, by_broker)| by_broker.keys().any(|name| names.contains(name))).map(|(topic, _)| topic.clone()).collect();
        TopicList { broker_addr: None, topic_list }
    }

    /// GET_SYSTEM_TOPIC_LIST_FROM_NS: cluster names and broker names, plus one broker address.
    pub fn system_topics(&self) -> TopicList {
        let t = self.tables.read();
        let mut topics = Vec::new();
        for (cluster, names) in &t.cluster_addr {
            topics.push(cluster.clone());
            topics.extend(names.iter().cloned());
        }
        let broker_addr = t.broker_addr.values().find_map(|b| b.broker_addrs.values().next().cloned());
        TopicList { broker_addr, topic_list: topics }
    }

    /// The unit-topic lists (GET_UNIT_TOPIC_LIST and friends), by the first queue data's sys flag.
    pub fn topics_by_sys_flag(&self, pred: impl Fn(i32) -> bool) -> TopicList {
        let t = self.tables.read();
        let topic_list = t
            .topic_queue
            .iter()
            .filter(|(_, by_broker)| by_broker.values().next().is_some_and(|qd| pred(qd.topic_sys_flag)))
            .map(|(topic, _)| topic.clone())
            .collect();
        TopicList { broker_addr: None, topic_list }
    }

    pub fn unit_topics(&self) -> TopicList {
        self.topics_by_sys_flag(topic_sys_flag::has_unit)
    }

    pub fn has_unit_sub_topics(&self) -> TopicList {
        self.topics_by_sys_flag(topic_sys_flag::has_unit_sub)
    }

    pub fn has_unit_sub_ununit_topics(&self) -> TopicList {
        self.topics_by_sys_flag(|f| !topic_sys_flag::has_unit(f) && topic_sys_flag::has_unit_sub(f))
    }

    /// WIPE_WRITE_PERM_OF_BROKER: clears the write bit on every topic of the broker name.
    pub fn wipe_write_perm(&self, broker_name: &str) -> i32 {
        self.update_perm(broker_name, |p| p & !perm::WRITE)
    }

    /// ADD_WRITE_PERM_OF_BROKER: sets read and write, as Java does.
    pub fn add_write_perm(&self, broker_name: &str) -> i32 {
        self.update_perm(broker_name, |_| perm::READ | perm::WRITE)
    }

    fn update_perm(&self, broker_name: &str, f: impl Fn(i32) -> i32) -> i32 {
        let mut t = self.tables.write();
        let mut count = 0;
        for qd in t.topic_queue.values_mut().filter_map(|m| m.get_mut(broker_name)) {
            qd.perm = f(qd.perm);
            count += 1;
        }
        count
    }
}

fn create_and_update_queue_data(topic_queue: &mut BTreeMap<String, BTreeMap<String, QueueData>>, broker_name: &str, tc: &TopicConfig) {
    let qd = QueueData {
        broker_name: broker_name.to_owned(),
        perm: tc.perm,
        read_queue_nums: tc.read_queue_nums,
        topic_sys_flag: tc.topic_sys_flag,
        write_queue_nums: tc.write_queue_nums,
    };
    topic_queue.entry(tc.topic_name.clone()).or_default().insert(broker_name.to_owned(), qd);
}

fn remove_broker_topics_not_in(topic_queue: &mut BTreeMap<String, BTreeMap<String, QueueData>>, broker_name: &str, table: &BTreeMap<String, TopicConfig>) {
    topic_queue.retain(|topic, by_broker| {
        if !table.contains_key(topic) {
            by_broker.remove(broker_name);
        }
        !by_broker.is_empty()
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrapper(counter: i64, topics: &[(&str, i32)]) -> TopicConfigSerializeWrapper {
        let mut w = TopicConfigSerializeWrapper { data_version: DataVersion { counter, ..Default::default() }, ..Default::default() };
        for (name, queues) in topics {
            let mut tc = TopicConfig::new(name);
            tc.read_queue_nums = *queues;
            tc.write_queue_nums = *queues;
            w.topic_config_table.insert(name.to_string(), tc);
        }
        w
    }

    fn register(m: &RouteInfoManager, name: &str, addr: &str, id: i64, topics: &TopicConfigSerializeWrapper, now: Instant) -> Option<RegisterResult> {
        m.register_broker(
            Registration {
                cluster: "DefaultCluster",
                broker_addr: addr,
                broker_name: name,
                broker_id: id,
                ha_server_addr: &format!("{addr}-ha"),
                timeout: None,
                enable_acting_master: None,
                topics,
                filter_servers: None,
                channel: None,
            },
            now,
        )
        .ok()
    }

    #[test]
    fn brokers_and_routes_are_bounded_and_a_refused_registration_changes_nothing() {
        let m = RouteInfoManager::default().with_bounds(2, 5);
        let now = Instant::now();
        let reg = |m: &RouteInfoManager, name: &str, addr: &str, topics: &[(&str, i32)]| {
            let w = wrapper(1, topics);
            m.register_broker(
                Registration {
                    cluster: "C",
                    broker_addr: addr,
                    broker_name: name,
                    broker_id: 0,
                    ha_server_addr: "",
                    timeout: None,
                    enable_acting_master: None,
                    topics: &w,
                    filter_servers: None,
                    channel: None,
                },
                now,
            )
        };
        assert!(reg(&m, "a", "a:1", &[("T", 4), ("U", 4), ("V", 4)]).is_ok());
        assert_eq!(reg(&m, "b", "b:1", &[("T", 4), ("U", 4), ("W", 4)]), Err(RegisterRefused::TooManyRoutes { held: 3, max: 5 }));
        assert!(m.pickup_topic_route("W").is_none(), "nothing of a refused registration is kept");
        assert!(!m.cluster_info().broker_addr_table.contains_key("b"));
        assert!(reg(&m, "b", "b:1", &[("T", 4), ("W", 4)]).is_ok());
        assert!(reg(&m, "a", "a:1", &[("T", 4), ("U", 4), ("V", 4)]).is_ok(), "a re-registration adds no route");
        assert_eq!(reg(&m, "c", "c:1", &[]), Err(RegisterRefused::TooManyBrokers { max: 2 }));
    }

    #[test]
    fn a_registered_master_serves_its_topics() {
        let m = RouteInfoManager::default();
        let now = Instant::now();
        register(&m, "broker-a", "10.0.0.1:10911", 0, &wrapper(1, &[("T", 4), ("U", 8)]), now).unwrap();
        let route = m.pickup_topic_route("T").unwrap();
        assert_eq!(route.queue_datas[0].write_queue_nums, 4);
        assert_eq!(route.broker_datas[0].broker_addrs[&0], "10.0.0.1:10911");
        assert_eq!(m.all_topics().topic_list, vec!["T", "U"]);
        assert!(m.pickup_topic_route("nope").is_none());
    }

    #[test]
    fn single_topic_registrations_merge_and_need_a_prior_full_one() {
        let m = RouteInfoManager::default();
        let now = Instant::now();
        assert_eq!(register(&m, "broker-a", "a:1", 0, &wrapper(1, &[("Late", 1)]), now), None);
        register(&m, "broker-a", "a:1", 0, &wrapper(1, &[("T", 4), ("U", 4)]), now).unwrap();
        register(&m, "broker-a", "a:1", 0, &wrapper(2, &[("New", 2)]), now).unwrap();
        assert_eq!(m.all_topics().topic_list, vec!["New", "T", "U"]);
    }

    #[test]
    fn a_slave_learns_its_live_master_and_does_not_change_queues() {
        let m = RouteInfoManager::default();
        let now = Instant::now();
        register(&m, "broker-a", "m:1", 0, &wrapper(1, &[("T", 4), ("U", 4)]), now).unwrap();
        let r = register(&m, "broker-a", "s:1", 1, &wrapper(1, &[("T", 16), ("U", 16)]), now).unwrap();
        assert_eq!(r, RegisterResult { master_addr: Some("m:1".into()), ha_server_addr: Some("m:1-ha".into()) });
        assert_eq!(m.pickup_topic_route("T").unwrap().queue_datas[0].read_queue_nums, 4);
        assert_eq!(m.pickup_topic_route("T").unwrap().broker_datas[0].broker_addrs.len(), 2);
    }

    #[test]
    fn brokers_expire_after_their_timeout_and_take_their_routes_along() {
        let m = RouteInfoManager::default();
        let t0 = Instant::now();
        register(&m, "broker-a", "a:1", 0, &wrapper(1, &[("T", 4), ("Shared", 4)]), t0).unwrap();
        register(&m, "broker-b", "b:1", 0, &wrapper(1, &[("Shared", 4), ("Own", 4)]), t0 + Duration::from_secs(60)).unwrap();
        assert!(m.scan_not_active_brokers(t0 + Duration::from_secs(120)).is_empty());
        let gone = m.scan_not_active_brokers(t0 + Duration::from_secs(121));
        assert_eq!(gone.iter().map(|b| b.broker_name.as_str()).collect::<Vec<_>>(), vec!["broker-a"]);
        assert!(m.pickup_topic_route("T").is_none());
        assert_eq!(m.pickup_topic_route("Shared").unwrap().queue_datas.len(), 1);
        assert_eq!(m.cluster_info().cluster_addr_table["DefaultCluster"], BTreeSet::from(["broker-b".to_owned()]));
    }

    #[test]
    fn wipe_and_add_write_perm_count_topics() {
        let m = RouteInfoManager::default();
        register(&m, "broker-a", "a:1", 0, &wrapper(1, &[("T", 4), ("U", 4)]), Instant::now()).unwrap();
        assert_eq!(m.wipe_write_perm("broker-a"), 2);
        assert_eq!(m.pickup_topic_route("T").unwrap().queue_datas[0].perm, perm::READ);
        assert_eq!(m.add_write_perm("broker-a"), 2);
        assert_eq!(m.pickup_topic_route("T").unwrap().queue_datas[0].perm, perm::READ | perm::WRITE);
        assert_eq!(m.wipe_write_perm("nobody"), 0);
    }

    #[test]
    fn delete_topic_by_cluster_keeps_other_clusters_queues() {
        let m = RouteInfoManager::default();
        let now = Instant::now();
        register(&m, "broker-a", "a:1", 0, &wrapper(1, &[("T", 4), ("U", 4)]), now).unwrap();
        m.register_broker(
            Registration {
                cluster: "Other",
                broker_addr: "o:1",
                broker_name: "broker-o",
                broker_id: 0,
                ha_server_addr: "",
                timeout: None,
                enable_acting_master: None,
                topics: &wrapper(1, &[("T", 2), ("V", 2)]),
                filter_servers: None,
                channel: None,
            },
            now,
        )
        .unwrap();
        m.delete_topic("T", Some("DefaultCluster"));
        let route = m.pickup_topic_route("T").unwrap();
        assert_eq!(route.queue_datas.iter().map(|q| q.broker_name.as_str()).collect::<Vec<_>>(), vec!["broker-o"]);
        assert_eq!(m.topics_by_cluster("Other").topic_list, vec!["T", "V"]);
        m.delete_topic("T", None);
        assert!(m.pickup_topic_route("T").is_none());
    }
}
