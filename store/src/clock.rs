//! The wall clock the store stamps records with.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (Java's `System.currentTimeMillis()`); 0 if the clock is
/// before the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
