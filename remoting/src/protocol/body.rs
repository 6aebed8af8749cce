//! Small bodies: `TopicList`, `KVTable`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::call::{expect_success, json_body, CallError, RemotingRequest};
use crate::{RemotingCommand, RequestCode};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicList {
    /// Only GET_SYSTEM_TOPIC_LIST_FROM_NS fills it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_addr: Option<String>,
    #[serde(default)]
    pub topic_list: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvTable {
    #[serde(default)]
    pub table: BTreeMap<String, String>,
}

/// GET_BROKER_RUNTIME_INFO as a typed call: a broker's runtime figures, every value a string.
#[derive(Clone, Copy, Debug, Default)]
pub struct GetBrokerRuntimeInfo;

impl RemotingRequest for GetBrokerRuntimeInfo {
    const CODE: RequestCode = RequestCode::GET_BROKER_RUNTIME_INFO;
    type Response = KvTable;

    fn into_command(self) -> RemotingCommand {
        RemotingCommand::request(Self::CODE)
    }

    fn parse_response(response: RemotingCommand) -> Result<KvTable, CallError> {
        json_body(&expect_success(response)?)
    }
}
