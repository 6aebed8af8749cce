//! The `checkpoint` file: 4096 bytes, of which Java reads physicMsgTimestamp @0,
//! logicsMsgTimestamp @8, indexMsgTimestamp @16 (and 5.x masterFlushedOffset @24,
//! confirmPhyOffset @32). The values live in memory and are written with an fsync when the
//! consume queues are flushed thoroughly, when an index file fills, and at shutdown.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};

const FILE_SIZE: u64 = 4096;

pub struct Checkpoint {
    file: File,
    physic_msg_timestamp: AtomicI64,
    logics_msg_timestamp: AtomicI64,
    index_msg_timestamp: AtomicI64,
    master_flushed_offset: AtomicI64,
    confirm_phy_offset: AtomicI64,
}

impl Checkpoint {
    /// Opens (or creates) the file. A missing file reads as all zeros, as in Java.
    pub fn open(path: &Path) -> io::Result<Checkpoint> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        if file.metadata()?.len() < FILE_SIZE {
            file.set_len(FILE_SIZE)?;
        }
        let mut head = [0u8; 40];
        file.read_exact_at(&mut head, 0)?;
        let at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&head[i..i + 8]);
            AtomicI64::new(i64::from_be_bytes(b))
        };
        Ok(Checkpoint {
            file,
            physic_msg_timestamp: at(0),
            logics_msg_timestamp: at(8),
            index_msg_timestamp: at(16),
            master_flushed_offset: at(24),
            confirm_phy_offset: at(32),
        })
    }

    pub fn physic_msg_timestamp(&self) -> i64 {
        self.physic_msg_timestamp.load(Ordering::Acquire)
    }
    pub fn set_physic_msg_timestamp(&self, t: i64) {
        self.physic_msg_timestamp.store(t, Ordering::Release);
    }
    pub fn logics_msg_timestamp(&self) -> i64 {
        self.logics_msg_timestamp.load(Ordering::Acquire)
    }
    pub fn set_logics_msg_timestamp(&self, t: i64) {
        self.logics_msg_timestamp.store(t, Ordering::Release);
    }
    pub fn index_msg_timestamp(&self) -> i64 {
        self.index_msg_timestamp.load(Ordering::Acquire)
    }
    pub fn set_index_msg_timestamp(&self, t: i64) {
        self.index_msg_timestamp.store(t, Ordering::Release);
    }

    /// 5.x `masterFlushedOffset` (@24): a slave's record of how far its master had flushed, set by
    /// RESET_MASTER_FLUSH_OFFSET; written with the other values.
    pub fn master_flushed_offset(&self) -> i64 {
        self.master_flushed_offset.load(Ordering::Acquire)
    }
    pub fn set_master_flushed_offset(&self, offset: i64) {
        self.master_flushed_offset.store(offset, Ordering::Release);
    }

    /// Java's `getMinTimestamp`: the older of physic and logics, less 3 s of slack.
    pub fn min_timestamp(&self) -> i64 {
        (self.physic_msg_timestamp().min(self.logics_msg_timestamp()) - 3000).max(0)
    }

    /// Java's `getMinTimestampIndex`.
    pub fn min_timestamp_index(&self) -> i64 {
        self.min_timestamp().min(self.index_msg_timestamp())
    }

    /// Writes the values and forces them to disk.
    pub fn flush(&self) -> io::Result<()> {
        let mut head = [0u8; 40];
        for (i, v) in [&self.physic_msg_timestamp, &self.logics_msg_timestamp, &self.index_msg_timestamp, &self.master_flushed_offset, &self.confirm_phy_offset]
            .iter()
            .enumerate()
        {
            head[i * 8..i * 8 + 8].copy_from_slice(&v.load(Ordering::Acquire).to_be_bytes());
        }
        self.file.write_all_at(&head, 0)?;
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_survive_a_reopen_at_javas_positions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoint");
        let cp = Checkpoint::open(&path).unwrap();
        cp.set_physic_msg_timestamp(0x0102030405060708);
        cp.set_logics_msg_timestamp(10_000);
        cp.set_index_msg_timestamp(5_000);
        cp.set_master_flushed_offset(0x1122);
        cp.flush().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 4096);
        assert_eq!(&bytes[0..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        let again = Checkpoint::open(&path).unwrap();
        assert_eq!(again.logics_msg_timestamp(), 10_000);
        assert_eq!(&bytes[24..32], &0x1122i64.to_be_bytes());
        assert_eq!(again.master_flushed_offset(), 0x1122);
        assert_eq!(again.min_timestamp(), 7_000);
        assert_eq!(again.min_timestamp_index(), 5_000);
    }
}
