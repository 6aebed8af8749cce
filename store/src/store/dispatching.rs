//! The dispatcher (Java's `ReputMessageService`): walks what the physical log made readable, in
//! order ([`crate::physical_log::PhysicalLog::dispatch_step`]), and hands each record to the
//! dispatcher list ([`crate::dispatch`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use remoting::service::ServiceContext;

use super::MessageStore;
use crate::config::BrokerRole;
use crate::dispatch::{AlreadyStarted, ArrivalListener, Dispatcher};
use crate::message::record::DecodedRecord;

impl MessageStore {
    /// Sets what the arrival notice (the last built-in dispatcher) tells of each queued record.
    pub fn set_arrival_listener(&self, listener: ArrivalListener) {
        self.arrival.set_listener(listener);
    }

    /// Adds a dispatcher after the others (Java's `addDispatcher`); refused once the store
    /// started. It sees every record dispatched from then on; recovery ran at open, before it.
    pub fn add_dispatcher(&self, dispatcher: Arc<dyn Dispatcher>) -> Result<(), AlreadyStarted> {
        self.dispatchers.add_last(dispatcher)
    }

    /// Adds a dispatcher before the others (as Java's broker puts its filter bitmap first).
    pub fn add_dispatcher_first(&self, dispatcher: Arc<dyn Dispatcher>) -> Result<(), AlreadyStarted> {
        self.dispatchers.add_first(dispatcher)
    }

    /// After a put: wakes the dispatcher if it sleeps. Only the first put to find it asleep
    /// wakes it (the flag is taken), so puts that follow before it runs cost no system call:
    /// one wake per batch of appends.
    pub(super) fn wake_dispatch(&self) {
        if self.reput_sleeping.load(Ordering::Relaxed) && self.reput_sleeping.swap(false, Ordering::SeqCst) {
            if let Some(reput) = self.reput_waker.get() {
                reput.wake();
            }
        }
    }

    /// The dispatcher: catches up, then sleeps at most 1 ms, woken early by a put that sees it
    /// sleeping (a put while it works costs nothing).
    ///
    /// Its thread is of the batch scheduling class: its wake-up does not preempt the thread that
    /// woke it. On a broker with one core the sender's thread would otherwise give the core to
    /// the dispatcher after every put, two context switches per message; now the dispatcher
    /// runs when that thread waits or its time slice ends (a few ms at most, Java's dispatcher
    /// polls every 1 ms) and dispatches what has come meanwhile in one pass.
    pub(super) fn run_reput(&self, cx: &ServiceContext) {
        crate::thread_policy::not_preempting_on_wake();
        loop {
            let seen = self.max_phy_offset();
            if self.dispatch_available() {
                continue;
            }
            self.reput_sleeping.store(true, Ordering::SeqCst);
            std::sync::atomic::fence(Ordering::SeqCst);
            // Re-check after raising the flag: a put that saw the flag clear has already appended.
            // A wake-up between here and the wait is not lost (the service keeps it). Bytes that
            // could not be dispatched (a slave's partial record, waiting for its next frame) are
            // not new: sleep rather than spin on them.
            let idle = self.max_phy_offset() <= self.reput_from.load(Ordering::Acquire).max(seen);
            let running = if idle { cx.wait(Duration::from_millis(1)) } else { !cx.is_stopped() };
            self.reput_sleeping.store(false, Ordering::Release);
            if !running {
                break;
            }
        }
    }

    /// Dispatches every complete record past the reput offset, walking the physical log.
    /// Returns whether the reput offset moved.
    pub(crate) fn dispatch_available(&self) -> bool {
        let mut did = false;
        loop {
            let from = self.reput_from.load(Ordering::Acquire);
            let to = self.log.dispatch_step(from, &mut |record, phy_offset| self.dispatch(record, phy_offset));
            if to <= from {
                return did;
            }
            did = true;
            self.reput_from.store(to, Ordering::Release);
            self.dispatchers.end_of_pass();
        }
    }

    /// Hands one new record to the dispatchers; a slave (not in DLedger mode) first notes its
    /// store time, which its checkpoint's physic time follows.
    pub(crate) fn dispatch(&self, record: &DecodedRecord<'_>, phy_offset: i64) {
        self.note_slave_store_time(record);
        self.dispatchers.dispatch(record, phy_offset);
    }

    pub(super) fn note_slave_store_time(&self, record: &DecodedRecord<'_>) {
        if self.log.follows_master_by_ha() && self.role() == BrokerRole::Slave {
            self.commit_log.note_store_timestamp(record.store_timestamp);
        }
    }

    /// Whether the dispatcher has caught up with everything readable.
    pub fn dispatched_all(&self) -> bool {
        self.dispatch_behind_bytes() == 0
    }

    /// Wakes the dispatcher (a DLedger commit made more readable).
    pub fn wake_dispatcher(&self) {
        if let Some(reput) = self.reput_waker.get() {
            reput.wake();
        }
    }

    /// How far the dispatcher is behind the commit log, in bytes.
    pub fn dispatch_behind_bytes(&self) -> i64 {
        (self.max_phy_offset() - self.reput_from.load(Ordering::Acquire)).max(0)
    }
}
