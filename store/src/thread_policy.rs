//! Scheduling classes of the store's own threads.
#![allow(unsafe_code)]

/// Puts the calling thread in Linux's batch scheduling class (`SCHED_BATCH`, same priority as
/// any other thread): the kernel no longer lets its wake-up preempt the running thread, so a
/// background service woken by every request runs when the request threads wait or their slice
/// ends, on batches, instead of taking the core after each request. Unprivileged; a failure
/// (another kernel, a container that forbids it) only leaves the thread as it was.
pub fn not_preempting_on_wake() {
    let param = nix::libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread, `param` lives across the call and priority 0 is the
    // only one SCHED_BATCH takes; the call reads nothing else.
    let rc = unsafe { nix::libc::sched_setscheduler(0, nix::libc::SCHED_BATCH, &param) };
    if rc != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "could not put the thread in the batch scheduling class");
    }
}
