//! The ACL files as Java 4.9.7 reads them (`PlainPermissionManager.load`): `plain_acl.yml` and
//! every `*.yml` / `*.yaml` under `conf/acl/`, each with `globalWhiteRemoteAddresses` and
//! `accounts`. An access key is taken from the first file that has it. A file that does not parse,
//! or an account Java would refuse, fails the whole load with Java's message: the caller keeps
//! what it had.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use yaml_rust2::{Yaml, YamlLoader};

use super::address::AddressRule;

/// Java's `Permission` bits.
pub mod perm {
    pub const DENY: u8 = 1;
    pub const ANY: u8 = 1 << 1;
    pub const PUB: u8 = 1 << 2;
    pub const SUB: u8 = 1 << 3;

    /// `parsePermFromString`: anything unknown (and nothing) is DENY.
    pub fn parse(s: Option<&str>) -> u8 {
        match s.map(str::trim) {
            Some("PUB") => PUB,
            Some("SUB") => SUB,
            Some("PUB|SUB") | Some("SUB|PUB") => PUB | SUB,
            _ => DENY,
        }
    }

    /// `checkPermission`.
    pub fn allows(needed: u8, owned: u8) -> bool {
        if owned & DENY != 0 {
            return false;
        }
        if needed & ANY != 0 {
            return owned & (PUB | SUB) != 0;
        }
        needed & owned != 0
    }
}

/// One account (`PlainAccessResource` built from a `PlainAccessConfig`).
#[derive(Clone, Debug)]
pub struct Account {
    pub access_key: String,
    pub secret_key: String,
    pub white: AddressRule,
    pub admin: bool,
    pub default_topic_perm: u8,
    pub default_group_perm: u8,
    /// Topics by name, groups by their retry topic (`%RETRY%group`), as Java keys them.
    pub perms: HashMap<String, u8>,
}

/// Everything the validator needs, from every file.
#[derive(Clone, Debug, Default)]
pub struct AclState {
    pub global_white: Vec<AddressRule>,
    pub accounts: HashMap<String, Account>,
    /// The files read, in order.
    pub files: Vec<PathBuf>,
    /// The file each access key was taken from.
    pub file_of: HashMap<String, PathBuf>,
    /// Each file's `dataVersion` (counter, timestamp): 0 and 0 when it has none.
    pub versions: Vec<(PathBuf, i64, i64)>,
}

/// `plain_acl.yml` and `conf/acl/` of a RocketMQ home.
pub fn default_file(home: &Path) -> PathBuf {
    home.join("conf").join("plain_acl.yml")
}

pub fn acl_dir(home: &Path) -> PathBuf {
    home.join("conf").join("acl")
}

/// The files Java reads: `conf/acl/**/*.yml|yaml`, then `plain_acl.yml` unless already listed.
pub fn files(home: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "yml" || e == "yaml") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&acl_dir(home), &mut out);
    let default = default_file(home);
    if default.exists() && !out.contains(&default) {
        out.push(default);
    }
    out
}

fn scalar(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn strings(y: &Yaml) -> Vec<String> {
    match y {
        Yaml::Array(items) => items.iter().filter_map(scalar).collect(),
        other => scalar(other).into_iter().collect(),
    }
}

/// Reads one file's YAML document (an empty map for an empty or missing file).
pub fn read_doc(path: &Path) -> Result<Yaml, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let docs = YamlLoader::load_from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    match docs.into_iter().next() {
        None | Some(Yaml::Null) => Ok(Yaml::Hash(Default::default())),
        Some(doc @ Yaml::Hash(_)) => Ok(doc),
        Some(_) => Err(format!("{}: not a YAML map of globalWhiteRemoteAddresses and accounts", path.display())),
    }
}

pub(super) fn account(y: &Yaml) -> Result<Account, String> {
    let field = |k: &str| scalar(&y[k]);
    let (access_key, secret_key) = (field("accessKey"), field("secretKey"));
    let (Some(access_key), Some(secret_key)) = (access_key.clone().filter(|a| a.len() > 6), secret_key.clone().filter(|s| s.len() > 6)) else {
        return Err(format!(
            "The accessKey={} and secretKey={} cannot be null and length should longer than 6",
            access_key.as_deref().unwrap_or("null"),
            secret_key.as_deref().unwrap_or("null")
        ));
    };
    let mut perms = HashMap::new();
    for (list, is_topic) in [("groupPerms", false), ("topicPerms", true)] {
        for entry in strings(&y[list]) {
            let Some((name, p)) = entry.split_once('=').filter(|(n, p)| !n.trim().is_empty() && !p.trim().is_empty() && !p.contains('=')) else {
                return Err(format!("Parse resource permission failed for {}:{entry}", if is_topic { "topic" } else { "group" }));
            };
            let key = if is_topic { name.trim().to_owned() } else { format!("{}{}", remoting::protocol::system_topic::RETRY_GROUP_TOPIC_PREFIX, name.trim()) };
            perms.insert(key, perm::parse(Some(p)));
        }
    }
    Ok(Account {
        white: AddressRule::parse(field("whiteRemoteAddress").as_deref().unwrap_or(""))?,
        admin: matches!(y["admin"], Yaml::Boolean(true)) || field("admin").is_some_and(|a| a.eq_ignore_ascii_case("true")),
        default_topic_perm: perm::parse(field("defaultTopicPerm").as_deref()),
        default_group_perm: perm::parse(field("defaultGroupPerm").as_deref()),
        perms,
        access_key,
        secret_key,
    })
}

/// Reads one file into `state`. An empty or missing file adds nothing, as in Java.
fn load_file(path: &Path, state: &mut AclState) -> Result<(), String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let docs = YamlLoader::load_from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let Some(doc) = docs.into_iter().next() else { return Ok(()) };
    if matches!(doc, Yaml::Null) {
        return Ok(());
    }
    if doc.as_hash().is_none() {
        return Err(format!("{}: not a YAML map of globalWhiteRemoteAddresses and accounts", path.display()));
    }
    for pattern in strings(&doc["globalWhiteRemoteAddresses"]) {
        state.global_white.push(AddressRule::parse(&pattern).map_err(|e| format!("{}: {e}", path.display()))?);
    }
    if let Yaml::Array(accounts) = &doc["accounts"] {
        for a in accounts {
            let account = account(a).map_err(|e| format!("{}: {e}", path.display()))?;
            if state.accounts.contains_key(&account.access_key) {
                tracing::warn!(access_key = account.access_key, file = %path.display(), "the access key is repeated in several ACL files; the first is used");
                continue;
            }
            state.file_of.insert(account.access_key.clone(), path.to_owned());
            state.accounts.insert(account.access_key.clone(), account);
        }
    }
    let version = &doc["dataVersion"][0];
    let number = |y: &Yaml| scalar(y).and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
    state.versions.push((path.to_owned(), number(&version["counter"]), number(&version["timestamp"])));
    state.files.push(path.to_owned());
    Ok(())
}

/// Loads every ACL file of `home`.
pub fn load(home: &Path) -> Result<AclState, String> {
    let mut state = AclState::default();
    for file in files(home) {
        load_file(&file, &mut state)?;
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn javas_sample_file_loads_with_its_accounts_and_perms() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join("conf")).unwrap();
        std::fs::write(
            default_file(home.path()),
            "globalWhiteRemoteAddresses:\n  - 10.10.103.*\n  - 192.168.0.*\naccounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    whiteRemoteAddress:\n    admin: false\n    defaultTopicPerm: DENY\n    defaultGroupPerm: SUB\n    topicPerms:\n      - topicA=DENY\n      - topicB=PUB|SUB\n      - topicC=SUB\n    groupPerms:\n      - groupA=DENY\n      - groupB=PUB|SUB\n      - groupC=SUB\n  - accessKey: rocketmq2\n    secretKey: 12345678\n    whiteRemoteAddress: 192.168.1.*\n    admin: true\n",
        )
        .unwrap();
        let s = load(home.path()).unwrap();
        assert_eq!(s.global_white.len(), 2);
        let a = &s.accounts["RocketMQ"];
        assert_eq!((a.secret_key.as_str(), a.admin, a.default_topic_perm, a.default_group_perm), ("12345678", false, perm::DENY, perm::SUB));
        assert_eq!(a.perms["topicB"], perm::PUB | perm::SUB);
        assert_eq!(a.perms["%RETRY%groupA"], perm::DENY);
        assert_eq!(a.white, AddressRule::Nothing);
        assert!(s.accounts["rocketmq2"].admin);
    }

    #[test]
    fn short_keys_bad_perms_and_broken_yaml_fail_the_load() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join("conf")).unwrap();
        for bad in [
            "accounts:\n  - accessKey: short\n    secretKey: 12345678\n",
            "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerms:\n      - topicA\n",
            "accounts: [\n",
            "globalWhiteRemoteAddresses:\n  - 300.1.1.1\n",
        ] {
            std::fs::write(default_file(home.path()), bad).unwrap();
            assert!(load(home.path()).is_err(), "{bad}");
        }
        std::fs::write(default_file(home.path()), "").unwrap();
        assert!(load(home.path()).unwrap().accounts.is_empty());
    }
}
