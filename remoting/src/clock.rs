//! The wall clock, as Java's `System.currentTimeMillis()`: milliseconds since the Unix epoch.
//! Every store time, born time, data version and expiry check of the store, HA and broker reads
//! it here. (DLedger's engine keeps its own clock, which never moves back.)

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch; 0 for a clock set before 1970.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_clock_reads_milliseconds_since_the_epoch() {
        // 2020-01-01 and 2200-01-01: a reading in seconds or nanoseconds would fall outside.
        let now = super::now_ms();
        assert!((1_577_836_800_000..7_258_118_400_000).contains(&now), "{now}");
    }
}
