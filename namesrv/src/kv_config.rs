//! The KV config store (namespaces of key/value pairs, e.g. `ORDER_TOPIC_CONFIG`), persisted to
//! `kvConfigPath` in Java's `KVConfigSerializeWrapper` format: `{"configTable":{ns:{k:v}}}`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

use crate::file::write_atomically;

type Table = BTreeMap<String, BTreeMap<String, String>>;

#[derive(Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct KvConfigFile {
    #[serde(default)]
    config_table: Table,
}

#[derive(Debug, thiserror::Error)]
pub enum KvConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path} is not a valid kvConfig.json: {source}")]
    Parse { path: PathBuf, source: serde_json::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

pub struct KvConfigManager {
    path: PathBuf,
    table: RwLock<Table>,
}

impl KvConfigManager {
    /// Loads the file if it exists. A file that exists but cannot be parsed is an error: starting
    /// with an empty table would overwrite the user's data at the next change.
    pub fn load(path: PathBuf) -> Result<KvConfigManager, KvConfigError> {
        let table = match std::fs::read(&path) {
            Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => Table::new(),
            Ok(bytes) => {
                let file: KvConfigFile = remoting::fastjson::from_slice(&bytes).map_err(|source| KvConfigError::Parse { path: path.clone(), source })?;
                file.config_table
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Table::new(),
            Err(source) => return Err(KvConfigError::Read { path, source }),
        };
        Ok(KvConfigManager { path, table: RwLock::new(table) })
    }

    pub fn put(&self, namespace: &str, key: &str, value: &str) -> Result<(), KvConfigError> {
        let mut table = self.table.write();
        table.entry(namespace.to_owned()).or_default().insert(key.to_owned(), value.to_owned());
        self.persist(&table)
    }

    pub fn delete(&self, namespace: &str, key: &str) -> Result<(), KvConfigError> {
        let mut table = self.table.write();
        let Some(entries) = table.get_mut(namespace) else { return Ok(()) };
        if entries.remove(key).is_none() {
            return Ok(());
        }
        self.persist(&table)
    }

    pub fn get(&self, namespace: &str, key: &str) -> Option<String> {
        self.table.read().get(namespace)?.get(key).cloned()
    }

    pub fn list(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.table.read().get(namespace).cloned()
    }

    fn persist(&self, table: &Table) -> Result<(), KvConfigError> {
        let file = KvConfigFile { config_table: table.clone() };
        let json = remoting::fastjson::to_vec(&file, remoting::fastjson::JsonStyle::Fastjson);
        write_atomically(&self.path, &json).map_err(|source| KvConfigError::Write { path: self.path.clone(), source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_survive_a_reload_in_javas_file_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kvConfig.json");
        let kv = KvConfigManager::load(path.clone()).unwrap();
        kv.put("ORDER_TOPIC_CONFIG", "T", "broker-a:4").unwrap();
        kv.put("ns", "k", "v").unwrap();
        kv.delete("ns", "k").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), r#"{"configTable":{"ORDER_TOPIC_CONFIG":{"T":"broker-a:4"},"ns":{}}}"#);
        let again = KvConfigManager::load(path).unwrap();
        assert_eq!(again.get("ORDER_TOPIC_CONFIG", "T").as_deref(), Some("broker-a:4"));
        assert_eq!(again.get("ns", "k"), None);
    }

    #[test]
    fn a_corrupt_file_refuses_to_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kvConfig.json");
        std::fs::write(&path, b"{not json").unwrap();
        assert!(matches!(KvConfigManager::load(path), Err(KvConfigError::Parse { .. })));
    }
}
