//! The ACL admin codes of 4.9.7 (`mqadmin updateAclConfig`, `deleteAccessConfig`,
//! `updateGlobalWhiteAddr`, `clusterAclConfigVersion`, `getAclConfig`), as Java's
//! `AdminBrokerProcessor` and `PlainPermissionManager` answer them: the account's file (or
//! `plain_acl.yml` for a new account) is rewritten with its `dataVersion` moved on, and the
//! validator follows at once. Everything is checked before a file is written, so a refused
//! change leaves the files as they were.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use remoting::command_header;
use yaml_rust2::yaml::Hash;
use yaml_rust2::{Yaml, YamlEmitter};

use super::config::{self, perm};
use super::Acl;

/// 4.9.7's codes for the refusals (5.x reuses 209 and 210 for other things).
pub const UPDATE_AND_CREATE_ACL_CONFIG_FAILED: i32 = 209;
pub const DELETE_ACL_CONFIG_FAILED: i32 = 210;
pub const UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED: i32 = 211;

command_header! {
    /// UPDATE_AND_CREATE_ACL_CONFIG (`CreateAccessConfigRequestHeader`).
    pub struct CreateAccessConfigHeader {
        pub access_key: String => "accessKey",
        pub secret_key: Option<String> => "secretKey",
        pub white_remote_address: Option<String> => "whiteRemoteAddress",
        pub admin: Option<bool> => "admin",
        pub default_topic_perm: Option<String> => "defaultTopicPerm",
        pub default_group_perm: Option<String> => "defaultGroupPerm",
        pub topic_perms: Option<String> => "topicPerms",
        pub group_perms: Option<String> => "groupPerms",
    }
}

command_header! {
    /// DELETE_ACL_CONFIG.
    pub struct DeleteAccessConfigHeader {
        pub access_key: String => "accessKey",
    }
}

command_header! {
    /// UPDATE_GLOBAL_WHITE_ADDRS_CONFIG.
    pub struct UpdateGlobalWhiteAddrsHeader {
        pub global_white_addrs: Option<String> => "globalWhiteAddrs",
        pub acl_file_full_path: Option<String> => "aclFileFullPath",
    }
}

fn key(s: &str) -> Yaml {
    Yaml::String(s.to_owned())
}

/// Java's `UtilAll.split(s, ",")`: trimmed non-empty parts; None for no value.
pub fn split(s: &Option<String>) -> Option<Vec<String>> {
    s.as_ref().map(|s| s.split(',').map(str::trim).filter(|p| !p.is_empty()).map(str::to_owned).collect())
}

/// `Permission.checkResourcePerms`: `Res=Perm` with one of Java's permission words.
fn check_resource_perms(list: &[String]) -> Result<(), String> {
    for r in list {
        let Some((_, p)) = r.split_once('=').filter(|(n, p)| !n.trim().is_empty() && !p.contains('=')) else {
            return Err(format!("Parse Resource format error for {r}.\nThe expected resource format is 'Res=Perm'. For example: topicA=SUB"));
        };
        if p.trim() != "DENY" && perm::parse(Some(p)) == perm::DENY {
            return Err(format!("Parse resource permission error for {r}.\nThe expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'."));
        }
    }
    Ok(())
}

/// `updateAclConfigFileVersion`: counter + 1, stamped now, as `dataVersion: [{counter, timestamp}]`.
fn next_version(doc: &mut Hash) {
    let counter = doc.get(&key("dataVersion")).and_then(|v| v[0]["counter"].as_i64()).unwrap_or(0);
    let mut version = Hash::new();
    version.insert(key("counter"), Yaml::Integer(counter + 1));
    version.insert(key("timestamp"), Yaml::Integer(remoting::clock::now_ms()));
    doc.insert(key("dataVersion"), Yaml::Array(vec![Yaml::Hash(version)]));
}

fn write_doc(path: &Path, doc: Hash) -> Result<(), String> {
    let mut out = String::new();
    YamlEmitter::new(&mut out).dump(&Yaml::Hash(doc)).map_err(|e| format!("cannot write {}: {e:?}", path.display()))?;
    out.push('\n');
    let tmp = path.with_extension("yml.tmp");
    std::fs::write(&tmp, out.trim_start_matches("---\n")).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

impl Acl {
    /// Writes `doc` to `path` and loads every file again; if the result would not load, nothing
    /// is written.
    fn rewrite(&self, path: &Path, doc: Hash) -> Result<(), String> {
        let _one_at_a_time = self.writing.lock();
        let old = std::fs::read(path).ok();
        write_doc(path, doc)?;
        match config::load(&self.home) {
            Ok(state) => {
                *self.seen.lock() = super::fingerprint(&self.home);
                self.state.store(Arc::new(state));
                Ok(())
            }
            Err(e) => {
                // Put the old content back: the change would leave files that do not load.
                let _ = match old {
                    Some(bytes) => std::fs::write(path, bytes),
                    None => std::fs::remove_file(path),
                };
                Err(e)
            }
        }
    }

    /// `updateAccessConfig`: the account is replaced in its file (the keys given overwrite its
    /// old ones) or appended to `plain_acl.yml`.
    pub fn update_account(&self, h: &CreateAccessConfigHeader) -> Result<(), String> {
        let (topic_perms, group_perms) = (split(&h.topic_perms), split(&h.group_perms));
        if h.access_key.len() <= 6 {
            return Err(format!("The accessKey={} cannot be null and length should longer than 6", h.access_key));
        }
        if let Some(sk) = h.secret_key.as_ref().filter(|s| !s.is_empty()) {
            if sk.len() <= 6 {
                return Err(format!("The secretKey={sk} value length should longer than 6"));
            }
        }
        check_resource_perms(topic_perms.as_deref().unwrap_or_default())?;
        check_resource_perms(group_perms.as_deref().unwrap_or_default())?;
        let state = self.state.load();
        let path = state.file_of.get(&h.access_key).cloned().unwrap_or_else(|| config::default_file(&self.home));
        let mut doc = match config::read_doc(&path)? {
            Yaml::Hash(doc) => doc,
            _ => Hash::new(),
        };
        let mut accounts = match doc.remove(&key("accounts")) {
            Some(Yaml::Array(a)) => a,
            _ => Vec::new(),
        };
        let existing = accounts.iter().position(|a| {
            a["accessKey"].as_str() == Some(h.access_key.as_str()) || a["accessKey"].as_i64().map(|i| i.to_string()) == Some(h.access_key.clone())
        });
        let mut account = match existing.map(|i| accounts.remove(i)) {
            Some(Yaml::Hash(a)) => a,
            _ => Hash::new(),
        };
        account.insert(key("accessKey"), key(&h.access_key));
        if let Some(sk) = h.secret_key.as_ref().filter(|s| !s.is_empty()) {
            account.insert(key("secretKey"), key(sk));
        }
        if let Some(white) = &h.white_remote_address {
            account.insert(key("whiteRemoteAddress"), key(white));
        }
        account.insert(key("admin"), Yaml::Boolean(h.admin.unwrap_or(false)));
        for (name, value) in [("defaultTopicPerm", &h.default_topic_perm), ("defaultGroupPerm", &h.default_group_perm)] {
            if let Some(v) = value.as_ref().filter(|v| !v.is_empty()) {
                account.insert(key(name), key(v));
            }
        }
        for (name, list) in [("topicPerms", topic_perms), ("groupPerms", group_perms)] {
            if let Some(list) = list {
                account.insert(key(name), Yaml::Array(list.iter().map(|s| key(s)).collect()));
            }
        }
        // As Java builds the account before writing: a new account needs a secret key.
        config::account(&Yaml::Hash(account.clone()))?;
        accounts.push(Yaml::Hash(account));
        doc.insert(key("accounts"), Yaml::Array(accounts));
        next_version(&mut doc);
        self.rewrite(&path, doc)
    }

    /// `deleteAccessConfig`: false when no file has the account.
    pub fn delete_account(&self, access_key: &str) -> Result<bool, String> {
        let Some(path) = self.state.load().file_of.get(access_key).cloned() else { return Ok(false) };
        let Yaml::Hash(mut doc) = config::read_doc(&path)? else { return Ok(false) };
        let Some(Yaml::Array(mut accounts)) = doc.remove(&key("accounts")) else { return Ok(false) };
        let before = accounts.len();
        accounts.retain(|a| a["accessKey"].as_str() != Some(access_key));
        if accounts.len() == before {
            return Ok(false);
        }
        doc.insert(key("accounts"), Yaml::Array(accounts));
        next_version(&mut doc);
        self.rewrite(&path, doc).map(|()| true)
    }

    /// `updateGlobalWhiteAddrsConfig`: the list replaces the file's (`plain_acl.yml` unless a file
    /// of the home's is named). The file must be inside the home once `..` and symbolic links are
    /// resolved (Java 4.9.7 compares the text of the name, so `<home>/conf/../../x.yml` passes
    /// there); the resolved file is the one rewritten.
    pub fn update_global_white(&self, addrs: &[String], file: Option<&str>) -> Result<bool, String> {
        let named = match file.filter(|f| !f.is_empty()) {
            Some(f) => PathBuf::from(f),
            None => config::default_file(&self.home),
        };
        let (Ok(path), Ok(home)) = (std::fs::canonicalize(&named), std::fs::canonicalize(&self.home)) else {
            tracing::warn!(file = %named.display(), "updateGlobalWhiteAddrsConfig: the file does not exist");
            return Ok(false);
        };
        if !path.is_file() || !path.starts_with(&home) || !path.extension().is_some_and(|e| e == "yml" || e == "yaml") {
            tracing::warn!(file = %named.display(), home = %home.display(), "updateGlobalWhiteAddrsConfig: not an ACL file inside the RocketMQ home; refused");
            return Ok(false);
        }
        for a in addrs {
            super::address::AddressRule::parse(a)?;
        }
        let Yaml::Hash(mut doc) = config::read_doc(&path)? else { return Ok(false) };
        doc.insert(key("globalWhiteRemoteAddresses"), Yaml::Array(addrs.iter().map(|a| key(a)).collect()));
        next_version(&mut doc);
        self.rewrite(&path, doc).map(|()| true)
    }

    /// GET_BROKER_CLUSTER_ACL_CONFIG's body: every file's white addresses and accounts.
    pub fn all_config_json(&self) -> Result<String, String> {
        let state = self.state.load();
        let mut white = Vec::new();
        let mut accounts = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for path in &state.files {
            let doc = config::read_doc(path)?;
            if let Yaml::Array(list) = &doc["globalWhiteRemoteAddresses"] {
                white.extend(list.iter().filter_map(|y| y.as_str().map(str::to_owned)));
            }
            if let Yaml::Array(list) = &doc["accounts"] {
                for a in list {
                    let Ok(acc) = config::account(a) else { continue };
                    if !seen.insert(acc.access_key.clone()) {
                        continue;
                    }
                    let text = |k: &str| a[k].as_str().map(str::to_owned);
                    let strings = |k: &str| match &a[k] {
                        Yaml::Array(l) => Some(l.iter().filter_map(|y| y.as_str().map(str::to_owned)).collect::<Vec<_>>()),
                        _ => None,
                    };
                    let mut o = serde_json::Map::new();
                    o.insert("accessKey".into(), acc.access_key.clone().into());
                    o.insert("admin".into(), acc.admin.into());
                    for (k, v) in [("defaultGroupPerm", text("defaultGroupPerm")), ("defaultTopicPerm", text("defaultTopicPerm"))] {
                        if let Some(v) = v {
                            o.insert(k.into(), v.into());
                        }
                    }
                    if let Some(g) = strings("groupPerms") {
                        o.insert("groupPerms".into(), g.into());
                    }
                    o.insert("secretKey".into(), acc.secret_key.clone().into());
                    if let Some(t) = strings("topicPerms") {
                        o.insert("topicPerms".into(), t.into());
                    }
                    if let Some(w) = text("whiteRemoteAddress") {
                        o.insert("whiteRemoteAddress".into(), w.into());
                    }
                    accounts.push(serde_json::Value::Object(o));
                }
            }
        }
        Ok(serde_json::json!({ "globalWhiteAddrs": white, "plainAccessConfigs": accounts }).to_string())
    }

    /// GET_BROKER_CLUSTER_ACL_INFO's versions: `plain_acl.yml`'s, and every file's by path.
    pub fn versions_json(&self) -> (String, String) {
        let state = self.state.load();
        let json = |counter: i64, ts: i64| format!(r#"{{"counter":{counter},"timestamp":{ts}}}"#);
        let default = config::default_file(&self.home);
        let version = state.versions.iter().find(|(p, _, _)| *p == default).map_or_else(|| json(0, 0), |(_, c, t)| json(*c, *t));
        let all = state.versions.iter().map(|(p, c, t)| format!("{}:{}", serde_json::Value::from(p.display().to_string()), json(*c, *t)));
        (version, format!("{{{}}}", all.collect::<Vec<_>>().join(",")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(ak: &str, sk: Option<&str>, topics: Option<&str>) -> CreateAccessConfigHeader {
        CreateAccessConfigHeader {
            access_key: ak.into(),
            secret_key: sk.map(Into::into),
            white_remote_address: None,
            admin: Some(false),
            default_topic_perm: Some("DENY".into()),
            default_group_perm: Some("SUB".into()),
            topic_perms: topics.map(Into::into),
            group_perms: None,
        }
    }

    #[test]
    fn accounts_and_white_lists_are_written_to_the_files_and_followed_at_once() {
        let home = tempfile::tempdir().unwrap();
        let acl = Acl::open(home.path()).unwrap();
        acl.update_account(&header("NewAccount", Some("secret-1"), Some("TopicA=PUB,TopicB=SUB"))).unwrap();
        let state = acl.state.load();
        assert_eq!(state.accounts["NewAccount"].perms["TopicA"], perm::PUB);
        let text = std::fs::read_to_string(config::default_file(home.path())).unwrap();
        assert!(text.contains("accessKey: NewAccount") && text.contains("counter: 1"), "{text}");
        // An update keeps what it does not name (the secret) and moves the version on.
        acl.update_account(&header("NewAccount", None, Some("TopicA=SUB"))).unwrap();
        let state = acl.state.load();
        assert_eq!((state.accounts["NewAccount"].perms["TopicA"], state.accounts["NewAccount"].secret_key.as_str()), (perm::SUB, "secret-1"));
        assert!(acl.versions_json().0.starts_with(r#"{"counter":2,"#));
        // Refused before anything is written.
        for bad in [header("short", Some("secret-1"), None), header("NewAccount", Some("short"), None), header("NewAccount", None, Some("TopicA=READ"))] {
            assert!(acl.update_account(&bad).is_err());
        }
        assert!(acl.update_account(&header("NoSecretYet", None, None)).is_err(), "a new account needs a secret key");
        assert!(acl.update_global_white(&["10.1.1.*".into()], None).unwrap());
        assert_eq!(acl.state.load().global_white.len(), 1);
        assert!(acl.update_global_white(&["300.1.1.1".into()], None).is_err());
        assert!(!acl.update_global_white(&["10.1.1.1".into()], Some("/etc/passwd")).unwrap(), "only files of the home");
        let body = acl.all_config_json().unwrap();
        assert!(body.contains(r#""globalWhiteAddrs":["10.1.1.*"]"#) && body.contains(r#""accessKey":"NewAccount""#), "{body}");
        assert!(acl.delete_account("NewAccount").unwrap());
        assert!(!acl.delete_account("NewAccount").unwrap());
        assert!(acl.state.load().accounts.is_empty());
    }
}
