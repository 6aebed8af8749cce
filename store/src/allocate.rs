//! Commit-log file allocation (Java `AllocateMappedFileService`): when the writer needs file N,
//! the service hands it N — pre-created in the background if it asked in time — and starts
//! creating N+1, so the writer rarely waits for a 1 GiB file to be created, warmed and locked.
//! A new file borrows a transient-pool buffer when the pool is in use.

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};
use tracing::{debug, info, warn};

use crate::mapped_file::{MappedFile, PREFAULT_WINDOW_BYTES};
use crate::transient_pool::TransientStorePool;

#[derive(Clone)]
pub struct AllocateConfig {
    pub dir: PathBuf,
    pub file_size: usize,
    pub pool: Option<Arc<TransientStorePool>>,
    /// Java's `fastFailIfNoBufferInStorePool`: refuse to create a file when no buffer is free.
    pub fast_fail_without_buffer: bool,
    /// Warm-up (`warmMapedFileEnable`): touch every page, then lock and advise the mapping;
    /// `Some(pages)` also syncs every that many pages (Java does under SYNC_FLUSH).
    pub warm_up: Option<Option<usize>>,
}

#[derive(Default)]
struct State {
    /// Offset requested for background creation, if any.
    wanted: Option<u64>,
    ready: HashMap<u64, io::Result<MappedFile>>,
    stopped: bool,
}

pub struct AllocateService {
    config: AllocateConfig,
    state: Mutex<State>,
    wake: Condvar,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl AllocateService {
    pub fn start(config: AllocateConfig) -> io::Result<Arc<AllocateService>> {
        let service = Arc::new(AllocateService { config, state: Mutex::new(State::default()), wake: Condvar::new(), thread: Mutex::new(None) });
        let me = service.clone();
        let handle = std::thread::Builder::new().name("AllocateMappedFileService".into()).spawn(move || me.run())?;
        *service.thread.lock() = Some(handle);
        Ok(service)
    }

    fn create(&self, offset: u64) -> io::Result<MappedFile> {
        let c = &self.config;
        let file = match &c.pool {
            Some(pool) => {
                if c.fast_fail_without_buffer && pool.available() == 0 {
                    return Err(io::Error::other("no buffer free in the transient store pool"));
                }
                MappedFile::create_with_pool(&c.dir, offset, c.file_size, pool)?
            }
            None => MappedFile::create(&c.dir, offset, c.file_size)?,
        };
        if let Some(flush_every) = c.warm_up {
            let started = std::time::Instant::now();
            file.warm_up(flush_every)?;
            info!(path = %file.path().display(), elapsed_ms = started.elapsed().as_millis() as u64, "warmed up");
        } else if let Err(e) = file.prefault_ahead(PREFAULT_WINDOW_BYTES) {
            // The first window of the next file, so the writer starts it without faults too (the
            // commit log's pre-fault service keeps the window ahead from there).
            debug!(path = %file.path().display(), error = %e, "pre-faulting a new commit-log file failed");
        }
        Ok(file)
    }

    /// The file starting at `offset`, then starts creating the one after it.
    pub fn allocate(&self, offset: u64) -> io::Result<MappedFile> {
        let ready = {
            let mut state = self.state.lock();
            // A background creation of this very file may be running: wait for it.
            while state.wanted == Some(offset) && !state.ready.contains_key(&offset) && !state.stopped {
                self.wake.wait(&mut state);
            }
            let ready = state.ready.remove(&offset);
            // In the same critical section: once this file is handed out, the background thread
            // must never see it wanted again, or it would map it a second time and, finding that
            // copy untaken at shutdown, delete the live file.
            if !state.stopped {
                state.wanted = Some(offset + self.config.file_size as u64);
                self.wake.notify_all();
            }
            ready
        };
        match ready {
            Some(result) => result,
            None => self.create(offset),
        }
    }

    fn run(&self) {
        loop {
            let offset = {
                let mut state = self.state.lock();
                loop {
                    if state.stopped {
                        return;
                    }
                    if let Some(offset) = state.wanted.filter(|o| !state.ready.contains_key(o)) {
                        break offset;
                    }
                    self.wake.wait(&mut state);
                }
            };
            let result = self.create(offset);
            if let Err(e) = &result {
                warn!(offset, error = %e, "pre-creating a commit-log file failed");
            }
            let mut state = self.state.lock();
            state.ready.insert(offset, result);
            self.wake.notify_all();
        }
    }

    /// Stops the thread and deletes files created ahead that nobody took (Java leaves no spare
    /// file after a clean shutdown).
    pub fn shutdown(&self) {
        {
            let mut state = self.state.lock();
            state.stopped = true;
            self.wake.notify_all();
        }
        if let Some(handle) = self.thread.lock().take() {
            let _ = handle.join();
        }
        for (_, result) in self.state.lock().ready.drain() {
            if let Ok(file) = result {
                file.release_write_buffer();
                let _ = file.delete_file();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file handed out survives the shutdown: the background thread never creates a
    /// second mapping of a file already taken (whose "untaken" copy the shutdown would delete).
    /// The writer asks for each next file while the thread still creates it (warm-up makes that
    /// take a moment), so the thread's insert and the writer's take race for the lock.
    #[test]
    fn files_handed_out_are_never_deleted_at_shutdown() {
        let dir = tempfile::tempdir().unwrap();
        let size = 1 << 20;
        let service = AllocateService::start(AllocateConfig {
            dir: dir.path().to_owned(),
            file_size: size,
            pool: None,
            fast_fail_without_buffer: false,
            warm_up: Some(None),
        })
        .unwrap();
        let taken: Vec<MappedFile> = (0..80u64).map(|i| service.allocate(i * size as u64).unwrap()).collect();
        service.shutdown();
        for file in &taken {
            assert!(file.path().exists(), "{} was deleted", file.path().display());
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), taken.len(), "no spare file is left");
    }
}
