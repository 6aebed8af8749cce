//! The KV config store (namespaces of key/value pairs, e.g. `ORDER_TOPIC_CONFIG`), persisted to
//! `kvConfigPath` in Java's `KVConfigSerializeWrapper` format: `{"configTable":{ns:{k:v}}}`.
//!
//! Bounded, where Java is not: namespaces, keys and values in length, and the table in bytes, as
//! the whole file is written again at every change.

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
    #[error("the KV config {what} is {bytes} bytes, more than {max_bytes}")]
    TooLong { what: &'static str, bytes: usize, max_bytes: usize },
    #[error("the KV config table would hold {bytes} bytes, more than {max_bytes}; delete entries first")]
    TableFull { bytes: usize, max_bytes: usize },
}

/// A namespace's length at most (ours; Java has no bound).
pub const MAX_NAMESPACE_BYTES: usize = 255;
/// A key's length at most (topic names, the keys Java's own namespaces use, are at most 127).
pub const MAX_KEY_BYTES: usize = 1024;
/// A value's length at most.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// The table's bytes (namespaces, keys and values) at most: 50,000 order-topic configs fit, and
/// the file rewritten at each change stays a few MiB.
pub const MAX_TABLE_BYTES: usize = 4 << 20;

pub struct KvConfigManager {
    path: PathBuf,
    table: RwLock<Table>,
    max_table_bytes: usize,
}

/// What an entry counts against [`MAX_TABLE_BYTES`].
fn entry_bytes(namespace: &str, key: &str, value: &str) -> usize {
    namespace.len() + key.len() + value.len()
}

fn table_bytes(table: &Table) -> usize {
    table.iter().map(|(ns, entries)| entries.iter().map(|(k, v)| entry_bytes(ns, k, v)).sum::<usize>()).sum()
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
        Ok(KvConfigManager { path, table: RwLock::new(table), max_table_bytes: MAX_TABLE_BYTES })
    }

    /// Another bound on the table's bytes than [`MAX_TABLE_BYTES`].
    pub fn with_max_table_bytes(self, max_table_bytes: usize) -> Self {
        KvConfigManager { max_table_bytes, ..self }
    }

    /// Puts an entry, unless it or the table would pass a bound (the table as loaded may be
    /// larger; then only changes that shrink it are taken).
    pub fn put(&self, namespace: &str, key: &str, value: &str) -> Result<(), KvConfigError> {
        for (what, text, max_bytes) in [("namespace", namespace, MAX_NAMESPACE_BYTES), ("key", key, MAX_KEY_BYTES), ("value", value, MAX_VALUE_BYTES)] {
            if text.len() > max_bytes {
                return Err(KvConfigError::TooLong { what, bytes: text.len(), max_bytes });
            }
        }
        let mut table = self.table.write();
        let old = table.get(namespace).and_then(|entries| entries.get(key)).map_or(0, |v| entry_bytes(namespace, key, v));
        let new = entry_bytes(namespace, key, value);
        if new > old {
            let bytes = table_bytes(&table) - old + new;
            if bytes > self.max_table_bytes {
                return Err(KvConfigError::TableFull { bytes, max_bytes: self.max_table_bytes });
            }
        }
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
    fn entries_and_the_table_are_bounded_in_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let max_table_bytes = 4 * MAX_VALUE_BYTES + 100;
        let kv = KvConfigManager::load(dir.path().join("kvConfig.json")).unwrap().with_max_table_bytes(max_table_bytes);
        let value = "v".repeat(MAX_VALUE_BYTES);
        assert!(matches!(kv.put("ns", "k", &format!("{value}v")), Err(KvConfigError::TooLong { what: "value", .. })));
        assert!(matches!(kv.put("ns", &"k".repeat(MAX_KEY_BYTES + 1), "v"), Err(KvConfigError::TooLong { what: "key", .. })));
        assert!(matches!(kv.put(&"n".repeat(MAX_NAMESPACE_BYTES + 1), "k", "v"), Err(KvConfigError::TooLong { what: "namespace", .. })));
        for i in 0..4 {
            kv.put("ns", &format!("k{i:05}"), &value).unwrap();
        }
        assert!(matches!(kv.put("ns", "one-more", &value), Err(KvConfigError::TableFull { .. })));
        kv.put("ns", "k00000", "small").unwrap();
        kv.put("ns", "one-more", "v").unwrap();
        assert!(std::fs::metadata(dir.path().join("kvConfig.json")).unwrap().len() < max_table_bytes as u64 + 200);
    }

    #[test]
    fn a_corrupt_file_refuses_to_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kvConfig.json");
        std::fs::write(&path, b"{not json").unwrap();
        assert!(matches!(KvConfigManager::load(path), Err(KvConfigError::Parse { .. })));
    }
}
