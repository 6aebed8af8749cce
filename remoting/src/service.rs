//! Background services: one named thread each, that sleeps until its interval passes or someone
//! wakes it, and that stops (and is joined) on request. Every periodic loop of the name server,
//! broker and store is one of these, so each can be woken, each stops promptly, and shutdown is a
//! list of `stop()` calls in order. (Java's `ServiceThread`, without its per-class copies.)

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

#[derive(Default)]
struct Flags {
    woken: bool,
    stopped: bool,
}

#[derive(Default)]
struct Signal {
    flags: Mutex<Flags>,
    changed: Condvar,
}

/// What a service's loop sees: waits that end early on a wake-up or a stop.
#[derive(Clone)]
pub struct ServiceContext {
    signal: Arc<Signal>,
}

impl ServiceContext {
    /// Sleeps until `timeout` passes, [`Service::wake`] is called or the service is stopped.
    /// Returns false once the service is stopped (the loop should end). A wake-up that came while
    /// the loop was busy is not lost: the next wait returns at once.
    pub fn wait(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut flags = self.signal.flags.lock();
        while !flags.woken && !flags.stopped {
            if self.signal.changed.wait_until(&mut flags, deadline).timed_out() {
                break;
            }
        }
        flags.woken = false;
        !flags.stopped
    }

    pub fn is_stopped(&self) -> bool {
        self.signal.flags.lock().stopped
    }

    /// A handle that wakes this loop from another thread.
    pub fn waker(&self) -> Waker {
        Waker { signal: self.signal.clone() }
    }
}

/// A handle that wakes a service from another thread; cheap to clone.
#[derive(Clone)]
pub struct Waker {
    signal: Arc<Signal>,
}

impl Waker {
    pub fn wake(&self) {
        self.signal.flags.lock().woken = true;
        self.signal.changed.notify_all();
    }
}

/// A running background service. Dropping it stops it.
pub struct Service {
    name: String,
    signal: Arc<Signal>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Service {
    /// Starts `body` on a thread named `name`; the body loops on [`ServiceContext::wait`].
    pub fn spawn(name: &str, body: impl FnOnce(&ServiceContext) + Send + 'static) -> std::io::Result<Service> {
        let signal = Arc::new(Signal::default());
        let context = ServiceContext { signal: signal.clone() };
        let thread = std::thread::Builder::new().name(name.to_owned()).spawn(move || body(&context))?;
        Ok(Service { name: name.to_owned(), signal, thread: Mutex::new(Some(thread)) })
    }

    /// Runs `tick` every `interval` (and whenever woken) until stopped; once more after the stop
    /// when `final_tick` (persisters write their last state that way).
    pub fn every(name: &str, interval: Duration, final_tick: bool, mut tick: impl FnMut() + Send + 'static) -> std::io::Result<Service> {
        Service::spawn(name, move |cx| {
            while cx.wait(interval) {
                tick();
            }
            if final_tick {
                tick();
            }
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn waker(&self) -> Waker {
        Waker { signal: self.signal.clone() }
    }

    pub fn wake(&self) {
        self.waker().wake();
    }

    /// Tells the loop to stop and waits for its thread to end. Idempotent.
    pub fn stop(&self) {
        self.signal.flags.lock().stopped = true;
        self.signal.changed.notify_all();
        let thread = self.thread.lock().take();
        if let Some(thread) = thread {
            if thread.thread().id() == std::thread::current().id() {
                return; // stopped from its own loop: the loop ends on its next wait
            }
            if thread.join().is_err() {
                tracing::error!(service = %self.name, "service thread panicked");
            }
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn a_service_ticks_when_woken_and_stops_promptly() {
        let ticks = Arc::new(AtomicUsize::new(0));
        let t = ticks.clone();
        let service = Service::every("t", Duration::from_secs(3600), true, move || {
            t.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        service.wake();
        let deadline = Instant::now() + Duration::from_secs(5);
        while ticks.load(Ordering::SeqCst) == 0 {
            assert!(Instant::now() < deadline, "a wake-up must run the tick before the interval");
            std::thread::yield_now();
        }
        let started = Instant::now();
        service.stop();
        assert!(started.elapsed() < Duration::from_secs(1), "stop must not wait out the interval");
        assert_eq!(ticks.load(Ordering::SeqCst), 2, "one tick for the wake-up and the final one");
        service.stop();
    }

    #[test]
    fn a_wake_up_during_work_is_not_lost() {
        let signal = Arc::new(Signal::default());
        let cx = ServiceContext { signal: signal.clone() };
        Waker { signal }.wake();
        let started = Instant::now();
        assert!(cx.wait(Duration::from_secs(3600)));
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
