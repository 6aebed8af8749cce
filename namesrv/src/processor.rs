//! The name server's request processor: every code Java's name server answers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use remoting::config::JavaConfig;
use remoting::fastjson::{self, JsonStyle};
use remoting::protocol::body::KvTable;
use remoting::protocol::namesrv::*;
use remoting::protocol::register::RegisterBrokerBody;
use remoting::protocol::route::route_json_style;
use remoting::protocol::topic::{DataVersion, TopicConfigSerializeWrapper};
use remoting::server::{not_supported, Channel, ProcessError, ProcessResult, RequestProcessor};
use remoting::{RemotingCommand, RequestCode, ResponseCode};
use serde::Serialize;
use tracing::{info, warn};

use crate::config::{NamesrvConfig, RUNTIME_UPDATABLE_KEYS};
use crate::kv_config::KvConfigManager;
use crate::route_info::{BrokerIdentity, Registration, RouteInfoManager};

/// The namespace whose entries are the order-topic configs handed to brokers and routes.
pub const NAMESPACE_ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

use remoting::protocol::FAQ_SUFFIX;

/// Brokers older than this send a bare `TopicConfigSerializeWrapper` (Java `V3_0_11`).
const VERSION_3_0_11: i32 = 37;

pub struct NamesrvProcessor {
    pub config: Arc<RwLock<NamesrvConfig>>,
    pub routes: Arc<RouteInfoManager>,
    pub kv: Arc<KvConfigManager>,
    pub started: Instant,
}

fn ok(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
}

fn ok_json(request: &RemotingCommand, body: &impl Serialize) -> ProcessResult {
    Ok(Some(ok(request).with_body(fastjson::to_vec(body, JsonStyle::Fastjson))))
}

impl RequestProcessor for NamesrvProcessor {
    fn process(&self, channel: &Channel, request: RemotingCommand) -> ProcessResult {
        match request.request_code() {
            RequestCode::PUT_KV_CONFIG => self.put_kv_config(&request),
            RequestCode::GET_KV_CONFIG => self.get_kv_config(&request),
            RequestCode::DELETE_KV_CONFIG => self.delete_kv_config(&request),
            RequestCode::GET_KVLIST_BY_NAMESPACE => self.get_kv_list(&request),
            RequestCode::QUERY_DATA_VERSION => self.query_data_version(&request),
            RequestCode::REGISTER_BROKER => self.register_broker(channel, &request),
            RequestCode::UNREGISTER_BROKER => self.unregister_broker(&request),
            RequestCode::BROKER_HEARTBEAT => self.broker_heartbeat(&request),
            RequestCode::GET_ROUTEINFO_BY_TOPIC => self.get_route(&request),
            RequestCode::GET_BROKER_CLUSTER_INFO => ok_json(&request, &self.routes.cluster_info()),
            RequestCode::WIPE_WRITE_PERM_OF_BROKER => self.change_write_perm(&request, false),
            RequestCode::ADD_WRITE_PERM_OF_BROKER => self.change_write_perm(&request, true),
            RequestCode::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => self.topic_list(&request, self.config.read().enable_all_topic_list, || self.routes.all_topics()),
            RequestCode::DELETE_TOPIC_IN_NAMESRV => self.delete_topic(&request),
            RequestCode::GET_TOPICS_BY_CLUSTER => {
                let header: GetTopicsByClusterRequestHeader = request.decode_header()?;
                self.topic_list(&request, self.config.read().enable_topic_list, || self.routes.topics_by_cluster(&header.cluster))
            }
            RequestCode::GET_SYSTEM_TOPIC_LIST_FROM_NS => ok_json(&request, &self.routes.system_topics()),
            RequestCode::GET_UNIT_TOPIC_LIST => self.topic_list(&request, self.config.read().enable_topic_list, || self.routes.unit_topics()),
            RequestCode::GET_HAS_UNIT_SUB_TOPIC_LIST => self.topic_list(&request, self.config.read().enable_topic_list, || self.routes.has_unit_sub_topics()),
            RequestCode::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST => {
                self.topic_list(&request, self.config.read().enable_topic_list, || self.routes.has_unit_sub_ununit_topics())
            }
            RequestCode::UPDATE_NAMESRV_CONFIG => self.update_config(channel, &request),
            RequestCode::GET_NAMESRV_CONFIG => self.get_config(&request),
            _ => Ok(Some(not_supported(&request))),
        }
    }
}

impl NamesrvProcessor {
    fn put_kv_config(&self, request: &RemotingCommand) -> ProcessResult {
        let h: PutKvConfigRequestHeader = request.decode_header()?;
        self.kv.put(&h.namespace, &h.key, &h.value).map_err(|e| ProcessError::system(e.to_string()))?;
        Ok(Some(ok(request)))
    }

    fn get_kv_config(&self, request: &RemotingCommand) -> ProcessResult {
        let h: KvConfigKeyHeader = request.decode_header()?;
        match self.kv.get(&h.namespace, &h.key) {
            Some(value) => Ok(Some(ok(request).with_ext("value", value))),
            None => Err(ProcessError::new(ResponseCode::QUERY_NOT_FOUND, format!("No config item, Namespace: {} Key: {}", h.namespace, h.key))),
        }
    }

    fn delete_kv_config(&self, request: &RemotingCommand) -> ProcessResult {
        let h: KvConfigKeyHeader = request.decode_header()?;
        self.kv.delete(&h.namespace, &h.key).map_err(|e| ProcessError::system(e.to_string()))?;
        Ok(Some(ok(request)))
    }

    fn get_kv_list(&self, request: &RemotingCommand) -> ProcessResult {
        let h: NamespaceHeader = request.decode_header()?;
        match self.kv.list(&h.namespace) {
            Some(table) => ok_json(request, &KvTable { table }),
            None => Err(ProcessError::new(ResponseCode::QUERY_NOT_FOUND, format!("No config item, Namespace: {}", h.namespace))),
        }
    }

    fn query_data_version(&self, request: &RemotingCommand) -> ProcessResult {
        let h: BrokerIdentityHeader = request.decode_header()?;
        let theirs: DataVersion = fastjson::from_slice(request.body_bytes()).map_err(|e| ProcessError::system(format!("body is not a DataVersion: {e}")))?;
        let ours = self.routes.data_version(&h.cluster_name, &h.broker_addr);
        let changed = ours.as_ref() != Some(&theirs);
        self.routes.touch(&h.cluster_name, &h.broker_addr, Instant::now());
        let mut response = ok(request).with_ext("changed", changed.to_string());
        if let Some(ours) = ours {
            response = response.with_body(fastjson::to_vec(&ours, JsonStyle::Fastjson));
        }
        Ok(Some(response))
    }

    fn register_broker(&self, channel: &Channel, request: &RemotingCommand) -> ProcessResult {
        let h: RegisterBrokerRequestHeader = request.decode_header()?;
        let body = request.body_bytes();
        if let Some(expected) = h.body_crc32.filter(|crc| *crc != 0) {
            if crc32(body) != expected {
                warn!(peer = %channel.remote_addr(), "register broker: crc32 not match");
                return Err(ProcessError::system("crc32 not match"));
            }
        }
        let decoded = if body.is_empty() {
            RegisterBrokerBody::default()
        } else if request.version >= VERSION_3_0_11 {
            RegisterBrokerBody::decode(body, h.compressed.unwrap_or(false))
                .map_err(|e| ProcessError::system(format!("Failed to decode RegisterBrokerBody: {e}")))?
        } else {
            let topics: TopicConfigSerializeWrapper =
                fastjson::from_slice(body).map_err(|e| ProcessError::system(format!("Failed to decode TopicConfigSerializeWrapper: {e}")))?;
            RegisterBrokerBody { filter_server_list: Vec::new(), topic_config_serialize_wrapper: topics }
        };
        let result = self.routes.register_broker(
            Registration {
                cluster: &h.cluster_name,
                broker_addr: &h.broker_addr,
                broker_name: &h.broker_name,
                broker_id: h.broker_id,
                ha_server_addr: &h.ha_server_addr,
                timeout: h.heartbeat_timeout_millis.filter(|ms| *ms > 0).map(|ms| Duration::from_millis(ms as u64)),
                enable_acting_master: h.enable_acting_master,
                topics: &decoded.topic_config_serialize_wrapper,
                filter_servers: Some(&decoded.filter_server_list),
                channel: Some(channel.clone()),
            },
            Instant::now(),
        );
        let result = result.map_err(|refused| {
            warn!(peer = %channel.remote_addr(), broker = h.broker_name, %refused, "registration refused");
            ProcessError::system(refused.to_string())
        })?;
        let mut response = ok(request).with_header(&RegisterBrokerResponseHeader { ha_server_addr: result.ha_server_addr, master_addr: result.master_addr });
        if self.config.read().return_order_topic_config_to_broker {
            if let Some(table) = self.kv.list(NAMESPACE_ORDER_TOPIC_CONFIG) {
                response = response.with_body(fastjson::to_vec(&KvTable { table }, JsonStyle::Fastjson));
            }
        }
        Ok(Some(response))
    }

    fn unregister_broker(&self, request: &RemotingCommand) -> ProcessResult {
        let h: BrokerIdentityHeader = request.decode_header()?;
        self.routes.unregister_broker(&BrokerIdentity {
            cluster: h.cluster_name,
            broker_addr: h.broker_addr,
            broker_name: h.broker_name,
            broker_id: h.broker_id,
        });
        Ok(Some(ok(request)))
    }

    fn broker_heartbeat(&self, request: &RemotingCommand) -> ProcessResult {
        let h: BrokerHeartbeatRequestHeader = request.decode_header()?;
        self.routes.touch(&h.cluster_name, &h.broker_addr, Instant::now());
        Ok(Some(ok(request)))
    }

    fn get_route(&self, request: &RemotingCommand) -> ProcessResult {
        let h: GetRouteInfoRequestHeader = request.decode_header()?;
        let (need_wait, wait_secs, order_enabled) = {
            let c = self.config.read();
            (c.need_wait_for_service, c.wait_seconds_for_service, c.order_message_enable)
        };
        if need_wait && self.started.elapsed() < Duration::from_secs(wait_secs) {
            return Err(ProcessError::system("name server not ready"));
        }
        let Some(mut route) = self.routes.pickup_topic_route(&h.topic) else {
            return Err(ProcessError::new(
                ResponseCode::TOPIC_NOT_EXIST,
                format!("No topic route info in name server for the topic: {}{}", h.topic, FAQ_SUFFIX),
            ));
        };
        if order_enabled {
            route.order_topic_conf = self.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, &h.topic);
        }
        let style = route_json_style(request.version, h.accept_standard_json_only);
        Ok(Some(ok(request).with_body(fastjson::to_vec(&route, style))))
    }

    fn change_write_perm(&self, request: &RemotingCommand, add: bool) -> ProcessResult {
        let h: BrokerNameHeader = request.decode_header()?;
        let (count, key) =
            if add { (self.routes.add_write_perm(&h.broker_name), "addTopicCount") } else { (self.routes.wipe_write_perm(&h.broker_name), "wipeTopicCount") };
        info!(broker = h.broker_name, count, add, "write permission changed");
        Ok(Some(ok(request).with_ext(key, count.to_string())))
    }

    fn topic_list(&self, request: &RemotingCommand, enabled: bool, list: impl FnOnce() -> remoting::protocol::body::TopicList) -> ProcessResult {
        if !enabled {
            return Err(ProcessError::system("disable"));
        }
        ok_json(request, &list())
    }

    fn delete_topic(&self, request: &RemotingCommand) -> ProcessResult {
        let h: DeleteTopicFromNamesrvRequestHeader = request.decode_header()?;
        self.routes.delete_topic(&h.topic, h.cluster_name.as_deref());
        Ok(Some(ok(request)))
    }

    fn update_config(&self, channel: &Channel, request: &RemotingCommand) -> ProcessResult {
        info!(peer = %channel.remote_addr(), "updateConfig called");
        let Some(body) = request.body.as_ref() else { return Ok(Some(ok(request))) };
        let text = std::str::from_utf8(body).map_err(|_| ProcessError::system("string2Properties error"))?;
        let properties = remoting::properties::parse(text);
        if let Some(key) = properties.keys().find(|k| !RUNTIME_UPDATABLE_KEYS.contains(&k.as_str())) {
            warn!(key, "refused runtime update of a config key that is not on the allow list");
            return Err(ProcessError::new(ResponseCode::NO_PERMISSION, format!("Can not update config in black list. {key} cannot be changed at runtime")));
        }
        let persisted = {
            let mut config = self.config.write();
            let mut updated = config.clone();
            updated.apply(&properties).map_err(|e| ProcessError::system(e.to_string()))?;
            *config = updated;
            (config.config_store_path.clone(), config_text(&config))
        };
        crate::file::write_atomically(std::path::Path::new(&persisted.0), persisted.1.as_bytes())
            .map_err(|e| ProcessError::system(format!("config updated but not persisted to {}: {e}", persisted.0)))?;
        Ok(Some(ok(request)))
    }

    fn get_config(&self, request: &RemotingCommand) -> ProcessResult {
        Ok(Some(ok(request).with_body(config_text(&self.config.read()))))
    }
}

/// The config as Java properties text (GET_NAMESRV_CONFIG body, `-p`, the persisted file).
pub fn config_text(config: &NamesrvConfig) -> String {
    let entries = config.entries();
    remoting::properties::write(entries.iter().map(|(k, v)| (*k, v.as_str())))
}

/// Java `UtilAll.crc32`: CRC32 masked to a non-negative int.
fn crc32(bytes: &[u8]) -> i32 {
    (crc32fast::hash(bytes) & 0x7FFF_FFFF) as i32
}
