//! TransientStorePool: off-heap buffers, each as large as a commit-log file and locked in memory.
//! With `transientStorePoolEnable` (ASYNC_FLUSH master only), a new commit-log file borrows one;
//! appends go into the buffer, the commit service copies them into the file, and the buffer
//! returns to the pool once its file is fully committed. Readers see only committed bytes.

#![allow(unsafe_code)]

use std::io;

use memmap2::{MmapOptions, MmapRaw};
use parking_lot::Mutex;
use tracing::warn;

/// One buffer; the memory is an anonymous mapping so it never moves.
pub struct PoolBuffer {
    map: MmapRaw,
}

impl PoolBuffer {
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    pub(crate) fn as_mut_ptr(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.map.as_ptr()
    }
}

pub struct TransientStorePool {
    buffers: Mutex<Vec<PoolBuffer>>,
    buffer_size: usize,
}

impl TransientStorePool {
    /// Allocates `count` buffers of `buffer_size` bytes and locks them (as Java's `mlock`; failure
    /// to lock, e.g. over RLIMIT_MEMLOCK, is logged and tolerated).
    pub fn new(count: usize, buffer_size: usize) -> io::Result<TransientStorePool> {
        let mut buffers = Vec::with_capacity(count);
        for _ in 0..count {
            let map: MmapRaw = MmapOptions::new().len(buffer_size).map_anon()?.into();
            if let Err(e) = map.lock() {
                warn!(error = %e, "cannot lock a transient store pool buffer in memory");
            }
            buffers.push(PoolBuffer { map });
        }
        Ok(TransientStorePool { buffers: Mutex::new(buffers), buffer_size })
    }

    pub fn borrow(&self) -> Option<PoolBuffer> {
        self.buffers.lock().pop()
    }

    pub fn give_back(&self, buffer: PoolBuffer) {
        if buffer.len() == self.buffer_size {
            self.buffers.lock().push(buffer);
        }
    }

    pub fn available(&self) -> usize {
        self.buffers.lock().len()
    }
}

// SAFETY: a PoolBuffer is plain memory; the MappedFile that holds it enforces the single-writer,
// read-below-the-published-position discipline for every access.
unsafe impl Send for PoolBuffer {}
unsafe impl Sync for PoolBuffer {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_lent_and_returned() {
        let pool = TransientStorePool::new(2, 4096).unwrap();
        let a = pool.borrow().unwrap();
        let _b = pool.borrow().unwrap();
        assert!(pool.borrow().is_none());
        pool.give_back(a);
        assert_eq!(pool.available(), 1);
    }
}
