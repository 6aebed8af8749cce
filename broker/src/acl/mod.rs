//! ACL 1.0 as Java 4.9.7 has it (`aclEnable=true`; `PlainAccessValidator`,
//! `PlainPermissionManager`): every request is checked before its processor runs.
//!
//! - A client whose IP is on a global white list, or on its account's, passes.
//! - Otherwise the request must carry `AccessKey` and `Signature` (Java's `AclClientRPCHook`): the
//!   HMAC-SHA1, base64, with the account's secret key, of the values of every ext field but
//!   `Signature` in key order, followed by the body.
//! - Then the account's permissions: admin codes need an admin account, and the topics and
//!   groups a request touches need PUB or SUB (an unlisted one gets the account's default).
//!
//! A refusal is SYSTEM_ERROR with the text of Java's `AclException`, as a 4.9.7 broker answers.
//! The files are read at start (a bad file refuses the start) and again whenever one changes; a
//! change that does not load is logged and the last good config stays.

pub mod address;
pub mod admin;
pub mod config;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use remoting::RemotingCommand;
use tracing::{error, info};

use config::{perm, AclState};

pub const ACCESS_KEY: &str = "AccessKey";
pub const SIGNATURE: &str = "Signature";
/// Java's `MixAll.UNIQUE_MSG_QUERY_FLAG`, which the client adds after signing.
const UNIQUE_MSG_QUERY_FLAG: &str = "_UNIQUE_KEY_QUERY";
/// Java's message trace topic: a PUB to it passes once the signature is right.
const TRACE_TOPIC: &str = remoting::protocol::system_topic::TRACE;
/// How often the files are looked at for changes (Java's watcher: every 5 s; ours is quicker).
pub const WATCH_INTERVAL: Duration = Duration::from_millis(500);

/// The access validator, with the config it checks against now.
pub struct Acl {
    home: PathBuf,
    state: ArcSwap<AclState>,
    /// What the files looked like at the last load: (path, modified, length).
    seen: parking_lot::Mutex<Vec<(PathBuf, Option<SystemTime>, u64)>>,
    /// The admin codes rewrite files one at a time.
    writing: parking_lot::Mutex<()>,
}

fn fingerprint(home: &Path) -> Vec<(PathBuf, Option<SystemTime>, u64)> {
    config::files(home)
        .into_iter()
        .map(|p| {
            let meta = std::fs::metadata(&p).ok();
            let modified = meta.as_ref().and_then(|m| m.modified().ok());
            let len = meta.map_or(0, |m| m.len());
            (p, modified, len)
        })
        .collect()
}

/// The topics and groups a request touches, each with the permission it needs (a group as its
/// retry topic, `%RETRY%group`); an error is Java's `AclException` message.
pub type Resources = Vec<(String, u8)>;

/// What ACL 1.0 (`aclEnable=true`) checks for a code once the signature is right.
#[derive(Clone, Copy)]
pub enum Access {
    /// The signature only: the code touches no topic or group of its own.
    Signed,
    /// An admin account (Java's `Permission.ADMIN_CODE`, and more of ours: see `crate::routes`).
    Admin,
    /// The topics and groups read from the request (Java's `PlainAccessValidator.parse`).
    Touches(fn(&RemotingCommand) -> Result<Resources, String>),
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Access::Signed => f.write_str("Signed"),
            Access::Admin => f.write_str("Admin"),
            Access::Touches(_) => f.write_str("Touches(..)"),
        }
    }
}

/// Java's `AclException` text, as the 4.9.7 broker puts it in the remark.
pub fn refusal(message: &str) -> String {
    format!("org.apache.rocketmq.acl.common.AclException: {message}")
}

impl Acl {
    /// Loads the ACL files of a RocketMQ home (`rocketmqHome`); an empty `plain_acl.yml` is
    /// created when there is none, as Java does.
    pub fn open(home: &Path) -> Result<Acl, String> {
        let default = config::default_file(home);
        if !default.exists() {
            if let Some(dir) = default.parent() {
                std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            }
            std::fs::write(&default, b"").map_err(|e| format!("cannot create {}: {e}", default.display()))?;
        }
        let seen = fingerprint(home);
        let state = config::load(home)?;
        info!(files = ?state.files, accounts = state.accounts.len(), "ACL loaded");
        Ok(Acl { home: home.to_owned(), state: ArcSwap::from_pointee(state), seen: parking_lot::Mutex::new(seen), writing: Default::default() })
    }

    /// Reloads when a file changed, appeared or went; returns whether the config changed.
    pub fn reload_if_changed(&self) -> bool {
        let now = fingerprint(&self.home);
        {
            let mut seen = self.seen.lock();
            if *seen == now {
                return false;
            }
            *seen = now;
        }
        match config::load(&self.home) {
            Ok(state) => {
                info!(files = ?state.files, accounts = state.accounts.len(), "ACL files changed: reloaded");
                self.state.store(Arc::new(state));
                true
            }
            Err(e) => {
                error!(error = e, "ACL files changed but do not load; the last good config stays");
                false
            }
        }
    }

    /// Checks one request from `ip` against its route's access rule; the error is the
    /// `AclException` message.
    pub fn check(&self, ip: IpAddr, request: &RemotingCommand, access: Access) -> Result<(), String> {
        let state = self.state.load();
        if state.global_white.iter().any(|rule| rule.matches(ip)) {
            return Ok(());
        }
        let ext = request.ext_fields.as_ref();
        let Some(access_key) = ext.and_then(|e| e.get(ACCESS_KEY)) else {
            return Err("No accessKey is configured".to_owned());
        };
        let Some(account) = state.accounts.get(access_key) else {
            return Err(format!("No acl config for {access_key}"));
        };
        if account.white.matches(ip) {
            return Ok(());
        }
        let needed = match access {
            Access::Touches(touched) => touched(request)?,
            Access::Signed | Access::Admin => Vec::new(),
        };
        let signature = ext.and_then(|e| e.get(SIGNATURE)).map(String::as_str).unwrap_or("");
        if !signature_matches(request, &account.secret_key, signature) {
            return Err(format!("Check signature failed for accessKey={access_key}"));
        }
        if needed.iter().any(|(resource, p)| resource == TRACE_TOPIC && *p == perm::PUB) {
            return Ok(());
        }
        if matches!(access, Access::Admin) && !account.admin {
            return Err(format!("Need admin permission for request code={}, but accessKey={access_key} is not", request.code));
        }
        if account.perms.is_empty() && account.admin {
            return Ok(());
        }
        for (resource, needed_perm) in &needed {
            let group = resource.strip_prefix(remoting::protocol::system_topic::RETRY_GROUP_TOPIC_PREFIX);
            let owned = account.perms.get(resource).copied().unwrap_or(if group.is_some() { account.default_group_perm } else { account.default_topic_perm });
            if !perm::allows(*needed_perm, owned) {
                let shown = match group {
                    Some(g) => format!("group:{g}"),
                    None => format!("topic:{resource}"),
                };
                return Err(format!("No default permission for {shown}"));
            }
        }
        Ok(())
    }
}

/// The signature Java's `AclClientRPCHook` computes and `AclUtils.calSignature` checks.
pub fn sign(request: &RemotingCommand, secret_key: &str) -> String {
    let mut fields: Vec<(&str, &str)> = request
        .ext_fields
        .iter()
        .flatten()
        .filter(|(k, _)| k.as_str() != SIGNATURE && k.as_str() != UNIQUE_MSG_QUERY_FLAG)
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    fields.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let Ok(mut mac) = Hmac::<sha1::Sha1>::new_from_slice(secret_key.as_bytes()) else {
        // HMAC takes keys of any length; this cannot happen.
        return String::new();
    };
    for (_, v) in fields {
        mac.update(v.as_bytes());
    }
    mac.update(request.body_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

fn signature_matches(request: &RemotingCommand, secret_key: &str, signature: &str) -> bool {
    // Not a secret-dependent early exit: compared whole.
    let expected = sign(request, secret_key);
    expected.len() == signature.len() && expected.bytes().zip(signature.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// A processor whose requests are checked first, by the access rule of their route (Java runs the
/// validator as an RPC hook before every processor).
pub struct Checked {
    pub inner: Arc<dyn remoting::server::RequestProcessor>,
    pub acl: Arc<Acl>,
    pub access: Access,
}

impl remoting::server::RequestProcessor for Checked {
    fn process(&self, channel: &remoting::server::Channel, request: RemotingCommand) -> remoting::server::ProcessResult {
        if let Err(message) = self.acl.check(channel.remote_addr().ip(), &request, self.access) {
            tracing::warn!(peer = %channel.remote_addr(), code = request.code, message, "refused by ACL");
            return Err(remoting::server::ProcessError::system(refusal(&message)));
        }
        self.inner.process(channel, request)
    }

    fn reject(&self) -> bool {
        self.inner.reject()
    }
}
