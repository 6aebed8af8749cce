//! The ACL admin codes of 4.9.7 (`mqadmin updateAclConfig`, `deleteAccessConfig`,
//! `updateGlobalWhiteAddr`, `clusterAclConfigVersion`, `getAclConfig`): the request side; the
//! file rewrites are [`crate::acl::admin`]'s.

use std::sync::Arc;

use remoting::server::{Channel, ProcessError, ProcessResult, RequestProcessor};
use remoting::{RemotingCommand, RequestCode, ResponseCode};

use super::ok;
use crate::acl::admin::{
    split, CreateAccessConfigHeader, DeleteAccessConfigHeader, UpdateGlobalWhiteAddrsHeader, DELETE_ACL_CONFIG_FAILED, UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
};
use crate::config::LiveConfig;

/// Answers the ACL admin codes; with ACL off, Java has no validator and answers nothing useful,
/// so these are refused with a clear remark.
pub struct AclAdminProcessor {
    /// The validator of `aclEnable=true`.
    pub acl: Option<Arc<crate::acl::Acl>>,
    pub config: LiveConfig,
    /// `brokerIP1:listenPort`, as the broker registers.
    pub broker_addr: String,
}

impl RequestProcessor for AclAdminProcessor {
    fn process(&self, _channel: &Channel, request: RemotingCommand) -> ProcessResult {
        let Some(acl) = &self.acl else {
            return Err(ProcessError::system("ACL is not enabled on this broker (aclEnable=false)"));
        };
        let code = request.request_code();
        let failed = |code: i32, remark: String| Ok(Some(RemotingCommand::error_response(&request, ResponseCode(code), remark)));
        if code == RequestCode::UPDATE_AND_CREATE_ACL_CONFIG {
            let h: CreateAccessConfigHeader = request.decode_header()?;
            match acl.update_account(&h) {
                Ok(()) => Ok(Some(ok(&request))),
                Err(e) => failed(UPDATE_AND_CREATE_ACL_CONFIG_FAILED, e),
            }
        } else if code == RequestCode::DELETE_ACL_CONFIG {
            let h: DeleteAccessConfigHeader = request.decode_header()?;
            match acl.delete_account(&h.access_key) {
                Ok(true) => Ok(Some(ok(&request))),
                Ok(false) => {
                    failed(DELETE_ACL_CONFIG_FAILED, format!("The accesskey[{}] corresponding to accessConfig has been deleted failed.", h.access_key))
                }
                Err(e) => failed(DELETE_ACL_CONFIG_FAILED, e),
            }
        } else if code == RequestCode::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG {
            let h: UpdateGlobalWhiteAddrsHeader = request.decode_header()?;
            let addrs = split(&h.global_white_addrs).unwrap_or_default();
            match acl.update_global_white(&addrs, h.acl_file_full_path.as_deref()) {
                Ok(true) => Ok(Some(ok(&request))),
                Ok(false) => failed(
                    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                    format!("The globalWhiteAddresses[{}] has been updated failed.", h.global_white_addrs.unwrap_or_default()),
                ),
                Err(e) => failed(UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, e),
            }
        } else if code == RequestCode::GET_BROKER_CLUSTER_ACL_INFO {
            let (version, all) = acl.versions_json();
            let c = self.config.load();
            Ok(Some(
                ok(&request)
                    .with_ext("version", version)
                    .with_ext("allAclFileVersion", all)
                    .with_ext("brokerName", c.broker_name.clone())
                    .with_ext("brokerAddr", self.broker_addr.clone())
                    .with_ext("clusterName", c.broker_cluster_name.clone()),
            ))
        } else if code == RequestCode::GET_BROKER_CLUSTER_ACL_CONFIG {
            let body = acl.all_config_json().map_err(ProcessError::system)?;
            Ok(Some(ok(&request).with_body(body)))
        } else {
            Ok(Some(remoting::server::not_supported(&request)))
        }
    }
}
