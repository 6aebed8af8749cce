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

use config::{perm, Account, AclState};

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

/// A stored message a request names (its commit-log offset), with the permission the request
/// needs on the message's topic.
pub type StoredRef = (i64, u8);

/// What ACL 1.0 (`aclEnable=true`) checks for a code once the signature is right.
#[derive(Clone, Copy)]
pub enum Access {
    /// The signature only: the code touches no topic or group of its own.
    Signed,
    /// An admin account's signature, from a white address too (Java's `Permission.ADMIN_CODE`,
    /// and more of ours: see `crate::routes`).
    Admin,
    /// The topics and groups read from the request (Java's `PlainAccessValidator.parse`, 5.3's
    /// `DefaultAuthorizationContextBuilder`).
    Touches(fn(&RemotingCommand) -> Result<Resources, String>),
    /// As `Touches`, and the topic of the stored message the request names, read from the store
    /// once the rest has passed (viewing, sending back, committing a message by its offset).
    TouchesStored(fn(&RemotingCommand) -> Result<Resources, String>, fn(&RemotingCommand) -> Option<StoredRef>),
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Access::Signed => f.write_str("Signed"),
            Access::Admin => f.write_str("Admin"),
            Access::Touches(_) => f.write_str("Touches(..)"),
            Access::TouchesStored(..) => f.write_str("TouchesStored(..)"),
        }
    }
}

/// What begins the remark of a request ACL refused (Java's `AclException` class name).
pub const REFUSAL_PREFIX: &str = "org.apache.rocketmq.acl.common.AclException: ";

/// Java's `AclException` text, as the 4.9.7 broker puts it in the remark.
pub fn refusal(message: &str) -> String {
    format!("{REFUSAL_PREFIX}{message}")
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

    /// The secret key of an account, to check or make a signature with.
    pub fn secret_of(&self, access_key: &str) -> Option<String> {
        self.state.load().accounts.get(access_key).map(|a| a.secret_key.clone())
    }

    /// Checks one request from `ip` against its route's access rule; the error is the
    /// `AclException` message. A white address passes without a signature, unless the code is
    /// admin-only: that needs an admin account's valid signature from anywhere (Java 4.9.7 lets
    /// a white address through for every code).
    pub fn check(&self, ip: IpAddr, request: &RemotingCommand, access: Access) -> Result<(), String> {
        let state = self.state.load();
        let admin_code = matches!(access, Access::Admin);
        let Some(signed) = authenticate(&state, ip, request, admin_code, || match access {
            Access::Touches(touched) | Access::TouchesStored(touched, _) => touched(request),
            Access::Signed | Access::Admin => Ok(Vec::new()),
        })?
        else {
            return Ok(());
        };
        signed.authorize(&signed.needed)
    }

    /// Checks the topic of a stored message the request names (read once the route's check
    /// passed): `perm` on it, a retry topic as its group. Who sends is checked again as
    /// [`Acl::check`] does.
    pub fn check_stored(&self, ip: IpAddr, request: &RemotingCommand, topic: &str, perm: u8) -> Result<(), String> {
        let state = self.state.load();
        let Some(signed) = authenticate(&state, ip, request, false, || Ok(Vec::new()))? else {
            return Ok(());
        };
        signed.authorize(&[(topic.to_owned(), perm)])
    }
}

/// A signed account and what its request touches.
struct Signed<'a> {
    account: &'a Account,
    needed: Resources,
}

/// Who sends the request: `None` for a white address (not for an admin code), else the account
/// whose signature is right (an admin one for an admin code), with the resources `touched`
/// reads (read after the account is known, as before the signature in Java).
fn authenticate<'a>(
    state: &'a AclState,
    ip: IpAddr,
    request: &RemotingCommand,
    admin_code: bool,
    touched: impl FnOnce() -> Result<Resources, String>,
) -> Result<Option<Signed<'a>>, String> {
    if !admin_code && state.global_white.iter().any(|rule| rule.matches(ip)) {
        return Ok(None);
    }
    let ext = request.ext_fields.as_ref();
    let Some(access_key) = ext.and_then(|e| e.get(ACCESS_KEY)) else {
        return Err("No accessKey is configured".to_owned());
    };
    let Some(account) = state.accounts.get(access_key) else {
        return Err(format!("No acl config for {access_key}"));
    };
    if !admin_code && account.white.matches(ip) {
        return Ok(None);
    }
    let needed = touched()?;
    let signature = ext.and_then(|e| e.get(SIGNATURE)).unwrap_or("");
    if !signature_matches(request, &account.secret_key, signature) {
        return Err(format!("Check signature failed for accessKey={access_key}"));
    }
    if admin_code && !account.admin {
        return Err(format!("Need admin permission for request code={}, but accessKey={access_key} is not", request.code));
    }
    Ok(Some(Signed { account, needed }))
}

impl Signed<'_> {
    /// The account's permission on each resource (an unlisted one gets the account's default).
    fn authorize(&self, needed: &[(String, u8)]) -> Result<(), String> {
        let account = self.account;
        if needed.iter().any(|(resource, p)| resource == TRACE_TOPIC && *p == perm::PUB) {
            return Ok(());
        }
        if account.perms.is_empty() && account.admin {
            return Ok(());
        }
        for (resource, needed_perm) in needed {
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
    let mut fields: Vec<(&str, &str)> = request.ext_fields.iter().flatten().filter(|(k, _)| *k != SIGNATURE && *k != UNIQUE_MSG_QUERY_FLAG).collect();
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

/// The topic a stored message counts as: where a system topic holds it for later (a half
/// message, a delayed or timer message), the topic it is bound for.
pub fn stored_topic(store: &store::store::MessageStore, offset: i64) -> Option<String> {
    use remoting::protocol::system_topic as sys;
    let bytes = store.look_message_by_offset(offset)?;
    let Ok(store::message::record::RecordAt::Record(record)) = store::message::record::decode_record(&bytes, false) else {
        return None;
    };
    let held = [sys::TRANS_HALF, sys::SCHEDULE, sys::WHEEL_TIMER].contains(&record.topic);
    match record.property(store::message::properties::REAL_TOPIC) {
        Some(real) if held => Some(real.to_owned()),
        _ => Some(record.topic.to_owned()),
    }
}

/// A processor whose requests are checked first, by the access rule of their route (Java runs the
/// validator as an RPC hook before every processor); a route that names a stored message has its
/// topic checked too, once read.
pub struct Checked {
    pub inner: Arc<dyn remoting::server::RequestProcessor>,
    pub acl: Arc<Acl>,
    pub access: Access,
    /// Where the messages a request names by offset are read.
    pub store: Arc<store::store::MessageStore>,
}

impl remoting::server::RequestProcessor for Checked {
    fn process(&self, channel: &remoting::server::Channel, request: RemotingCommand) -> remoting::server::ProcessResult {
        let ip = channel.remote_addr().ip();
        if let Err(message) = self.acl.check(ip, &request, self.access) {
            tracing::warn!(peer = %channel.remote_addr(), code = request.code, message, "refused by ACL");
            return Err(remoting::server::ProcessError::system(refusal(&message)));
        }
        if let Access::TouchesStored(_, stored) = self.access {
            // A message that is not there is the processor's to answer.
            if let Some((topic, perm)) = stored(&request).and_then(|(offset, perm)| Some((stored_topic(&self.store, offset)?, perm))) {
                if let Err(message) = self.acl.check_stored(ip, &request, &topic, perm) {
                    tracing::warn!(peer = %channel.remote_addr(), code = request.code, message, "refused by ACL: the stored message's topic");
                    return Err(remoting::server::ProcessError::new(remoting::ResponseCode::NO_PERMISSION, refusal(&message)));
                }
            }
        }
        self.inner.process(channel, request)
    }

    fn reject(&self) -> bool {
        self.inner.reject()
    }

    fn answers_are_small(&self) -> bool {
        self.inner.answers_are_small()
    }

    fn runs_in_place(&self, request: &RemotingCommand) -> bool {
        self.inner.runs_in_place(request)
    }
}

/// What answers a code no route serves when `aclEnable=true`: behind [`Checked`] as Java's default
/// processor is behind its validator, so an unknown code is answered REQUEST_CODE_NOT_SUPPORTED
/// only once its signature is right.
pub struct NotServed;

impl remoting::server::RequestProcessor for NotServed {
    fn process(&self, _channel: &remoting::server::Channel, request: RemotingCommand) -> remoting::server::ProcessResult {
        Ok(Some(remoting::server::not_supported(&request)))
    }
}

/// The credentials this broker signs its own requests to its master with (5.3's
/// `innerClientAuthenticationCredentials`, `{"accessKey":"...","secretKey":"..."}`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credentials {
    pub access_key: String,
    pub secret_key: String,
}

impl Credentials {
    /// Java's rule: none unless both keys are there (blank or unreadable JSON: none).
    pub fn parse(json: &str) -> Option<Credentials> {
        if json.trim().is_empty() {
            return None;
        }
        match remoting::fastjson::from_slice::<Credentials>(json.as_bytes()) {
            Ok(c) if !c.access_key.trim().is_empty() && !c.secret_key.trim().is_empty() => Some(c),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "innerClientAuthenticationCredentials is not JSON with accessKey and secretKey: requests go unsigned");
                None
            }
        }
    }

    /// Signs a request as Java's `AclClientRPCHook` does: `AccessKey`, then `Signature`.
    pub fn sign(&self, request: &mut RemotingCommand) {
        request.ext_fields.get_or_insert_with(Default::default).insert(ACCESS_KEY.to_owned(), self.access_key.clone());
        let signature = sign(request, &self.secret_key);
        request.ext_fields.get_or_insert_with(Default::default).insert(SIGNATURE.to_owned(), signature);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inner_client_credentials_are_read_as_java_5_reads_them_and_sign_as_its_hook_signs() {
        assert_eq!(Credentials::parse(""), None);
        assert_eq!(Credentials::parse("not json"), None);
        assert_eq!(Credentials::parse(r#"{"accessKey":"rocketmq2","secretKey":""}"#), None);
        let c = Credentials::parse(r#"{"accessKey":"rocketmq2","secretKey":"12345678"}"#).unwrap();
        assert_eq!((c.access_key.as_str(), c.secret_key.as_str()), ("rocketmq2", "12345678"));
        let mut request = RemotingCommand::request(remoting::RequestCode::GET_ALL_TOPIC_CONFIG);
        c.sign(&mut request);
        let ext = request.ext_fields.as_ref().unwrap();
        assert_eq!(&ext[ACCESS_KEY], "rocketmq2");
        assert!(signature_matches(&request, "12345678", &ext[SIGNATURE]));
    }

    #[test]
    fn inner_client_credentials_are_never_printed_but_written_back() {
        let credentials = r#"{"accessKey":"rocketmq2","secretKey":"12345678"}"#;
        let props = [("innerClientAuthenticationCredentials".to_owned(), credentials.to_owned())].into_iter().collect();
        let (broker, store, unknown) = crate::config::apply_properties(&props).unwrap();
        assert!(unknown.is_empty());
        assert_eq!(broker.inner_client_authentication_credentials, credentials);
        assert!(!crate::config::print_all(&broker, &store).contains("12345678"));
        let written = crate::runtime_config::persisted_text(&broker, &store);
        assert!(written.lines().any(|l| l == format!("innerClientAuthenticationCredentials={credentials}")), "{written}");
        let (unset, store) = crate::config::apply_properties(&Default::default()).map(|(b, s, _)| (b, s)).unwrap();
        assert!(!crate::runtime_config::persisted_text(&unset, &store).contains("innerClientAuthenticationCredentials"));
    }
}
