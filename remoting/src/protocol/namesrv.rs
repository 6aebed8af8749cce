//! Headers of the name-server codes.

use crate::call::{self, expect_success, CallError, RemotingRequest};
use crate::command_header;
use crate::{RemotingCommand, RequestCode};

command_header! {
    /// REGISTER_BROKER request.
    #[derive(Default)]
    pub struct RegisterBrokerRequestHeader {
        pub broker_name: String => "brokerName",
        pub broker_addr: String => "brokerAddr",
        pub cluster_name: String => "clusterName",
        pub ha_server_addr: String => "haServerAddr",
        pub broker_id: i64 => "brokerId",
        pub heartbeat_timeout_millis: Option<i64> => "heartbeatTimeoutMillis",
        pub enable_acting_master: Option<bool> => "enableActingMaster",
        pub compressed: Option<bool> => "compressed",
        pub body_crc32: Option<i32> => "bodyCrc32",
    }
}

command_header! {
    /// REGISTER_BROKER response.
    #[derive(Default)]
    pub struct RegisterBrokerResponseHeader {
        pub ha_server_addr: Option<String> => "haServerAddr",
        pub master_addr: Option<String> => "masterAddr",
    }
}

command_header! {
    /// UNREGISTER_BROKER and QUERY_DATA_VERSION requests.
    #[derive(Default)]
    pub struct BrokerIdentityHeader {
        pub broker_name: String => "brokerName",
        pub broker_addr: String => "brokerAddr",
        pub cluster_name: String => "clusterName",
        pub broker_id: i64 => "brokerId",
    }
}

command_header! {
    /// BROKER_HEARTBEAT request (5.x).
    #[derive(Default)]
    pub struct BrokerHeartbeatRequestHeader {
        pub cluster_name: String => "clusterName",
        pub broker_addr: String => "brokerAddr",
        pub broker_name: String => "brokerName",
    }
}

command_header! {
    /// GET_ROUTEINFO_BY_TOPIC request.
    #[derive(Default)]
    pub struct GetRouteInfoRequestHeader {
        pub topic: String => "topic",
        pub accept_standard_json_only: Option<bool> => "acceptStandardJsonOnly",
    }
}

command_header! {
    /// DELETE_TOPIC_IN_NAMESRV request.
    #[derive(Default)]
    pub struct DeleteTopicFromNamesrvRequestHeader {
        pub topic: String => "topic",
        pub cluster_name: Option<String> => "clusterName",
    }
}

command_header! {
    /// GET_TOPICS_BY_CLUSTER request.
    #[derive(Default)]
    pub struct GetTopicsByClusterRequestHeader {
        pub cluster: String => "cluster",
    }
}

command_header! {
    /// WIPE_WRITE_PERM_OF_BROKER and ADD_WRITE_PERM_OF_BROKER requests.
    #[derive(Default)]
    pub struct BrokerNameHeader {
        pub broker_name: String => "brokerName",
    }
}

command_header! {
    /// PUT_KV_CONFIG request.
    #[derive(Default)]
    pub struct PutKvConfigRequestHeader {
        pub namespace: String => "namespace",
        pub key: String => "key",
        pub value: String => "value",
    }
}

command_header! {
    /// GET_KV_CONFIG and DELETE_KV_CONFIG requests.
    #[derive(Default)]
    pub struct KvConfigKeyHeader {
        pub namespace: String => "namespace",
        pub key: String => "key",
    }
}

command_header! {
    /// GET_KVLIST_BY_NAMESPACE request.
    #[derive(Default)]
    pub struct NamespaceHeader {
        pub namespace: String => "namespace",
    }
}

/// REGISTER_BROKER as a typed call: the header and the body (JSON or compressed, as the header
/// says); the answer's header names a slave's master.
#[derive(Clone, Debug)]
pub struct RegisterBroker {
    pub header: RegisterBrokerRequestHeader,
    pub body: bytes::Bytes,
}

impl RemotingRequest for RegisterBroker {
    const CODE: RequestCode = RequestCode::REGISTER_BROKER;
    type Response = RegisterBrokerResponseHeader;

    fn into_command(self) -> RemotingCommand {
        RemotingCommand::request_with_header(Self::CODE, &self.header).with_body(self.body)
    }

    fn parse_response(response: RemotingCommand) -> Result<RegisterBrokerResponseHeader, CallError> {
        call::header(&expect_success(response)?)
    }
}

/// UNREGISTER_BROKER as a typed call; a SUCCESS answer carries nothing.
#[derive(Clone, Debug)]
pub struct UnregisterBroker {
    pub header: BrokerIdentityHeader,
}

impl RemotingRequest for UnregisterBroker {
    const CODE: RequestCode = RequestCode::UNREGISTER_BROKER;
    type Response = ();

    fn into_command(self) -> RemotingCommand {
        RemotingCommand::request_with_header(Self::CODE, &self.header)
    }

    fn parse_response(response: RemotingCommand) -> Result<(), CallError> {
        expect_success(response).map(drop)
    }
}
