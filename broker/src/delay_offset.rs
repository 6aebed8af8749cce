//! `config/delayOffset.json`: for each delay level (1-based), the next consume-queue offset the
//! schedule service will deliver from queue `level - 1` of `SCHEDULE_TOPIC_XXXX`:
//! `{"dataVersion":..,"offsetTable":{1:0,2:15}}`. 4.9 writes no `dataVersion` and ignores ours;
//! 5.x reads it back.
//!
//! Only the table and its file live here; the schedule service that moves the offsets comes
//! later and calls [`DelayOffsets::persist`] on its own timer (`flushDelayOffsetInterval`).

use std::collections::BTreeMap;
use std::path::Path;

use parking_lot::RwLock;
use remoting::protocol::topic::DataVersion;
use serde::{Deserialize, Serialize};

use crate::config_file::{self, ConfigFile, ConfigFileError};

pub const DELAY_OFFSET_FILE: &str = "delayOffset.json";

/// The file (Java's `DelayOffsetSerializeWrapper`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DelayOffsetFile {
    #[serde(default = "config_file::new_data_version")]
    pub data_version: DataVersion,
    /// Delay level -> consume-queue offset.
    #[serde(default)]
    pub offset_table: BTreeMap<i32, i64>,
}

pub struct DelayOffsets {
    file: ConfigFile,
    table: RwLock<DelayOffsetFile>,
}

impl DelayOffsets {
    /// Loads `<storePathRootDir>/config/delayOffset.json` (or its backup).
    pub fn open(store_root_dir: &Path) -> Result<DelayOffsets, ConfigFileError> {
        let file = ConfigFile::new(config_file::config_dir(store_root_dir).join(DELAY_OFFSET_FILE));
        let table =
            file.load::<DelayOffsetFile>()?.unwrap_or_else(|| DelayOffsetFile { data_version: config_file::new_data_version(), offset_table: BTreeMap::new() });
        Ok(DelayOffsets { file, table: RwLock::new(table) })
    }

    pub fn get(&self, level: i32) -> Option<i64> {
        self.table.read().offset_table.get(&level).copied()
    }

    pub fn set(&self, level: i32, offset: i64) {
        let mut table = self.table.write();
        table.offset_table.insert(level, offset);
        config_file::next_version(&mut table.data_version);
    }

    pub fn data_version(&self) -> DataVersion {
        self.table.read().data_version.clone()
    }

    /// Everything, as the file holds it (the GET_ALL_DELAY_OFFSET body).
    pub fn snapshot(&self) -> DelayOffsetFile {
        self.table.read().clone()
    }

    /// A slave takes its master's delay progress as a whole (Java writes the master's file text
    /// over its own; we take the table, which the persister writes).
    pub fn replace_from_master(&self, master: DelayOffsetFile) {
        *self.table.write() = master;
    }

    pub fn persist(&self) -> Result<(), ConfigFileError> {
        let json = remoting::fastjson::to_vec(&*self.table.read(), remoting::fastjson::JsonStyle::FastjsonPretty);
        self.file.persist_bytes(&json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_survive_persist_and_reopen_in_javas_format() {
        let dir = tempfile::tempdir().unwrap();
        let d = DelayOffsets::open(dir.path()).unwrap();
        assert_eq!(d.get(1), None);
        d.set(2, 15);
        d.set(1, 0);
        d.persist().unwrap();
        let text = std::fs::read_to_string(dir.path().join("config").join(DELAY_OFFSET_FILE)).unwrap();
        assert!(text.ends_with("\"offsetTable\":{1:0,2:15\n\t}\n}"), "{text}");
        let again = DelayOffsets::open(dir.path()).unwrap();
        assert_eq!((again.get(1), again.get(2)), (Some(0), Some(15)));
        assert_eq!(again.data_version().counter, 2);
    }

    #[test]
    fn a_4_9_file_without_data_version_loads() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        std::fs::write(dir.path().join("config").join(DELAY_OFFSET_FILE), "{\n\t\"offsetTable\":{1:0,2:15,18:100\n\t}\n}").unwrap();
        let d = DelayOffsets::open(dir.path()).unwrap();
        assert_eq!(d.get(18), Some(100));
        assert_eq!(d.data_version().counter, 0);
    }
}
