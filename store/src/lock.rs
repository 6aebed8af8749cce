//! The `lock` file: Java takes a POSIX record (fcntl) write lock on byte 0 and writes "lock".
//! Only an fcntl lock excludes a Java broker on Linux (flock does not), so that is what we take.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;

use nix::fcntl::{fcntl, FcntlArg};

use crate::error::StoreError;

pub struct StoreLock {
    _file: File,
}

impl StoreLock {
    /// Locks `path`, failing at once if another process (Java or ours) holds it.
    pub fn acquire(path: &Path) -> Result<StoreLock, StoreError> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| StoreError::Locked(format!("{}: {e}", path.display())))?;
        let lock = nix::libc::flock { l_type: nix::libc::F_WRLCK as i16, l_whence: nix::libc::SEEK_SET as i16, l_start: 0, l_len: 1, l_pid: 0 };
        fcntl(file.as_raw_fd(), FcntlArg::F_SETLK(&lock)).map_err(|e| StoreError::Locked(format!("{}: {e}", path.display())))?;
        file.write_all(b"lock").map_err(|e| StoreError::Locked(format!("{}: {e}", path.display())))?;
        let _ = file.sync_data();
        // The lock lives as long as the file stays open.
        Ok(StoreLock { _file: file })
    }
}
