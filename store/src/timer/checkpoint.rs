//! `config/timercheck`: Java 5.3.3's `TimerCheckpoint`, one 4 KiB page, big-endian: the read
//! time every slot before which was delivered (0), the flushed end of the timer log (8), the
//! timer-topic queue offset taken into the wheel (16), the master's (24, what a slave may take),
//! and a data version (state version 32, timestamp 40, counter 48). The rest of the page is left
//! as it is.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

const PAGE: u64 = 4096;

/// Java's `DataVersion` as the checkpoint keeps it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataVersion {
    pub state_version: i64,
    pub timestamp: i64,
    pub counter: i64,
}

impl DataVersion {
    /// Java's `nextVersion(stateVersion)`.
    pub fn next(&mut self, state_version: i64, now_ms: i64) {
        self.state_version = state_version;
        self.timestamp = now_ms;
        self.counter += 1;
    }
}

/// The checkpoint's values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointValues {
    pub last_read_time_ms: i64,
    pub last_timer_log_flush_pos: i64,
    pub last_timer_queue_offset: i64,
    pub master_timer_queue_offset: i64,
    pub data_version: DataVersion,
}

impl CheckpointValues {
    /// The 56 bytes Java's `TimerCheckpoint.encode` writes (GET_TIMER_CHECK_POINT's body).
    pub fn encode(&self) -> [u8; 56] {
        let mut b = [0u8; 56];
        let fields = [
            self.last_read_time_ms,
            self.last_timer_log_flush_pos,
            self.last_timer_queue_offset,
            self.master_timer_queue_offset,
            self.data_version.state_version,
            self.data_version.timestamp,
            self.data_version.counter,
        ];
        for (i, v) in fields.iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&v.to_be_bytes());
        }
        b
    }

    /// Java's `decode`: the four positions, and the data version when present.
    pub fn decode(b: &[u8]) -> Option<CheckpointValues> {
        let at = |i: usize| -> Option<i64> { Some(i64::from_be_bytes(b.get(i * 8..i * 8 + 8)?.try_into().ok()?)) };
        let version = if b.len() >= 56 { DataVersion { state_version: at(4)?, timestamp: at(5)?, counter: at(6)? } } else { DataVersion::default() };
        Some(CheckpointValues {
            last_read_time_ms: at(0)?,
            last_timer_log_flush_pos: at(1)?,
            last_timer_queue_offset: at(2)?,
            master_timer_queue_offset: at(3)?,
            data_version: version,
        })
    }
}

pub struct TimerCheckpoint {
    file: File,
    pub values: CheckpointValues,
}

impl TimerCheckpoint {
    /// Opens the checkpoint, creating a zeroed page when there is none (Java maps a page).
    pub fn open(path: &Path) -> io::Result<TimerCheckpoint> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        if file.metadata()?.len() < PAGE {
            file.set_len(PAGE)?;
        }
        let mut head = [0u8; 56];
        file.read_exact_at(&mut head, 0)?;
        let values = CheckpointValues::decode(&head).unwrap_or_default();
        Ok(TimerCheckpoint { file, values })
    }

    /// Writes the values, then syncs.
    pub fn flush(&self) -> io::Result<()> {
        self.file.write_all_at(&self.values.encode(), 0)?;
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_holds_javas_fields() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config").join("timercheck");
        let mut cp = TimerCheckpoint::open(&path).unwrap();
        assert_eq!(cp.values, CheckpointValues::default());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 4096);
        cp.values = CheckpointValues {
            last_read_time_ms: 1_700_000_000_000,
            last_timer_log_flush_pos: 520,
            last_timer_queue_offset: 10,
            master_timer_queue_offset: 10,
            data_version: DataVersion { state_version: 0, timestamp: 5, counter: 3 },
        };
        cp.flush().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[0..8], &1_700_000_000_000i64.to_be_bytes());
        assert_eq!(&bytes[48..56], &3i64.to_be_bytes());
        assert_eq!(TimerCheckpoint::open(&path).unwrap().values, cp.values);
        assert!(bytes[56..].iter().all(|b| *b == 0));
    }
}
