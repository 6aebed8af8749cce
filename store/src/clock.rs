//! The wall clock the store stamps records with: the one clock of the project.

pub use remoting::clock::now_ms;

/// The hour of day on the local clock, as Java's `Calendar.getInstance()` gives it.
pub fn local_hour() -> u32 {
    chrono::Timelike::hour(&chrono::Local::now())
}

/// Whether `hour` is one of the `;`-separated hours of `when` (Java `UtilAll.isItTimeToDo`, for
/// `deleteWhen` and `timerCheckMetricsWhen`).
pub fn hour_named(when: &str, hour: u32) -> bool {
    when.split(';').filter_map(|h| h.trim().parse::<u32>().ok()).any(|h| h == hour)
}
