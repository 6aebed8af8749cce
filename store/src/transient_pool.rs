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
    /// How many leading bytes the last file may have written (zero beyond): erased before the
    /// buffer is lent again.
    dirty_bytes: usize,
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
            buffers.push(PoolBuffer { map, dirty_bytes: 0 });
        }
        Ok(TransientStorePool { buffers: Mutex::new(buffers), buffer_size })
    }

    /// Lends a buffer whose bytes are all zero. The commit service copies a file's whole buffer
    /// up to the file end, past the end-of-file marker, so bytes a previous file left there would
    /// land in the new file; only the part the previous file used is erased, here on the
    /// borrower (the allocation service, ahead of the writer) rather than on the committer.
    pub fn borrow(&self) -> Option<PoolBuffer> {
        let mut buffer = self.buffers.lock().pop()?;
        let dirty = buffer.dirty_bytes.min(buffer.len());
        // SAFETY: the buffer was just taken out of the pool, so nothing else refers to it, and
        // [0, dirty) lies inside its mapping.
        unsafe { std::ptr::write_bytes(buffer.as_mut_ptr(), 0, dirty) };
        buffer.dirty_bytes = 0;
        Some(buffer)
    }

    /// Takes a buffer back; its file wrote at most its first `used_bytes` bytes.
    pub fn give_back(&self, mut buffer: PoolBuffer, used_bytes: usize) {
        if buffer.len() == self.buffer_size {
            buffer.dirty_bytes = buffer.dirty_bytes.max(used_bytes);
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
        pool.give_back(a, 0);
        assert_eq!(pool.available(), 1);
    }

    #[test]
    fn a_returned_buffer_is_lent_again_zeroed_where_its_file_wrote() {
        let pool = TransientStorePool::new(1, 8192).unwrap();
        let buffer = pool.borrow().unwrap();
        // SAFETY: the buffer is ours alone and 8192 bytes long.
        unsafe { std::ptr::write_bytes(buffer.as_mut_ptr(), 0xAB, 5000) };
        pool.give_back(buffer, 5000);
        let again = pool.borrow().unwrap();
        // SAFETY: as above.
        let bytes = unsafe { std::slice::from_raw_parts(again.as_ptr(), again.len()) };
        assert!(bytes.iter().all(|b| *b == 0));
    }
}
