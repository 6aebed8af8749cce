//! Expiry of old data segments and the disk-full flag (Java's `CleanSpaceService` of
//! `DLedgerMmapFileStore`): every 100 ms the used ratio of the disk under `storeBaseDir` and under
//! the data directory is measured; above `diskSpaceRatioToForceClean + 0.05` (at most 0.95)
//! appends are refused; at a `deleteWhen` hour, or above `diskSpaceRatioToCheckExpired`, data
//! segments older than `fileReservedHours` go (oldest first, never the last one, at most 10 per
//! pass); above `diskSpaceRatioToForceClean` (when `enableDiskForceClean`) they go regardless
//! of age. Java's float arithmetic is kept, so the thresholds are the same to the last bit.

use std::path::Path;
use std::time::{Duration, SystemTime};

use tracing::warn;

use super::StoreError;
use crate::config::DLedgerConfig;

/// Java's `DELETE_FILES_BATCH_MAX`.
pub const DELETE_FILES_BATCH_MAX: usize = 10;

/// The cleaning settings of a [`DLedgerConfig`], checked.
#[derive(Clone, Debug, PartialEq)]
pub struct CleanConfig {
    pub delete_hours: Vec<u32>,
    pub reserved: Duration,
    pub check_expired_ratio: f64,
    pub force_clean_ratio: f64,
    pub disk_full_ratio: f64,
    pub enable_force_clean: bool,
}

impl CleanConfig {
    pub fn from_config(config: &DLedgerConfig) -> Result<CleanConfig, StoreError> {
        // Java parses each `;`-separated item with Integer.parseInt on every pass, and a bad one
        // silently stops all cleaning; here it refuses to open.
        let mut delete_hours = Vec::new();
        for item in config.delete_when.split(';') {
            let hour = item.trim().parse::<u32>().map_err(|_| StoreError::Config(format!("deleteWhen {:?}: {item:?} is not an hour", config.delete_when)))?;
            delete_hours.push(hour);
        }
        // At least an hour, as Java.
        let reserved = Duration::from_secs(config.file_reserved_hours.max(1).saturating_mul(3600));
        let check = config.disk_space_ratio_to_check_expired as f32;
        let force = config.disk_space_ratio_to_force_clean as f32;
        Ok(CleanConfig {
            delete_hours,
            reserved,
            check_expired_ratio: f64::from(check),
            force_clean_ratio: f64::from(force.max(0.50)),
            disk_full_ratio: f64::from((force + 0.05f32).min(0.95f32)),
            enable_force_clean: config.enable_disk_force_clean,
        })
    }
}

/// What one cleaning pass does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CleanDecision {
    /// Delete expired segments this pass.
    pub delete: bool,
    /// Regardless of their age.
    pub force: bool,
    /// Refuse appends.
    pub disk_full: bool,
}

/// Java's rules, from the local hour and the two used ratios (-1 when unknown).
pub fn decide(config: &CleanConfig, hour: u32, store_ratio: f64, data_ratio: f64) -> CleanDecision {
    let above = |limit: f64| store_ratio > limit || data_ratio > limit;
    let time_up = config.delete_hours.contains(&hour);
    let force = above(config.force_clean_ratio);
    CleanDecision { delete: time_up || above(config.check_expired_ratio), force: force && config.enable_force_clean, disk_full: above(config.disk_full_ratio) }
}

/// Used fraction of the filesystem holding `path` as Java's `getDiskPartitionSpaceUsedPercent`
/// measures it: used / (used + available to us), rounded up to whole percents; -1 when the path
/// does not exist or cannot be measured.
pub fn disk_used_ratio(path: &Path) -> f64 {
    match nix::sys::statvfs::statvfs(path) {
        Ok(s) if s.blocks() > 0 => {
            let fragment = u128::from(s.fragment_size());
            let used = (u128::from(s.blocks()) - u128::from(s.blocks_free())) * fragment;
            let entire = used + u128::from(s.blocks_available()) * fragment;
            if entire == 0 {
                return -1.0;
            }
            (used * 100).div_ceil(entire) as f64 / 100.0
        }
        Ok(_) => -1.0,
        Err(nix::errno::Errno::ENOENT) => -1.0,
        Err(e) => {
            warn!(path = %path.display(), error = %e, "cannot read disk usage");
            -1.0
        }
    }
}

/// How many of the oldest segments may go: modified at least `reserved` ago (or any age when
/// `force`), never the last one, at most [`DELETE_FILES_BATCH_MAX`]; stops at the first to keep.
/// `committed` says whether a segment's entries are all committed: unlike Java, nothing else
/// goes, even when forced.
pub fn expired_prefix(modified: &[Option<SystemTime>], committed: impl Fn(usize) -> bool, now: SystemTime, reserved: Duration, force: bool) -> usize {
    let old = |m: &Option<SystemTime>| force || m.is_some_and(|m| now.duration_since(m).is_ok_and(|age| age >= reserved));
    modified.iter().enumerate().take(modified.len().saturating_sub(1)).take(DELETE_FILES_BATCH_MAX).take_while(|(i, m)| committed(*i) && old(m)).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> CleanConfig {
        CleanConfig::from_config(&DLedgerConfig::default()).unwrap()
    }

    #[test]
    fn thresholds_are_javas_floats() {
        let c = config();
        assert_eq!(c.delete_hours, vec![4]);
        assert_eq!(c.reserved, Duration::from_secs(72 * 3600));
        assert_eq!(c.check_expired_ratio, f64::from(0.70f32));
        assert_eq!(c.disk_full_ratio, f64::from(0.85f32 + 0.05f32));
        assert!(c.disk_full_ratio > 0.90, "0.85f + 0.05f is a little above 0.90");
        let low = CleanConfig::from_config(&DLedgerConfig { disk_space_ratio_to_force_clean: 0.3, ..Default::default() }).unwrap();
        assert_eq!(low.force_clean_ratio, 0.5);
        assert_eq!(low.disk_full_ratio, f64::from(0.3f32 + 0.05f32), "Java's full ratio uses the raw value");
        assert!(CleanConfig::from_config(&DLedgerConfig { delete_when: "04;x".into(), ..Default::default() }).is_err());
        assert_eq!(CleanConfig::from_config(&DLedgerConfig { delete_when: "03;04".into(), ..Default::default() }).unwrap().delete_hours, vec![3, 4]);
    }

    #[test]
    fn decisions_follow_the_hour_and_the_ratios() {
        let c = config();
        let d = |hour, store, data| decide(&c, hour, store, data);
        assert_eq!(d(12, -1.0, -1.0), CleanDecision { delete: false, force: false, disk_full: false });
        assert_eq!(d(4, 0.1, 0.1), CleanDecision { delete: true, force: false, disk_full: false });
        assert_eq!(d(12, 0.71, 0.1), CleanDecision { delete: true, force: false, disk_full: false });
        assert_eq!(d(12, 0.1, 0.86), CleanDecision { delete: true, force: true, disk_full: false });
        assert_eq!(d(12, 0.90, 0.1), CleanDecision { delete: true, force: true, disk_full: false });
        assert_eq!(d(12, 0.91, 0.1), CleanDecision { delete: true, force: true, disk_full: true });
        let no_force = CleanConfig { enable_force_clean: false, ..config() };
        assert!(!decide(&no_force, 12, 0.95, 0.0).force);
    }

    #[test]
    fn only_old_committed_segments_go_and_never_the_last() {
        let now = SystemTime::now();
        let hours = |h: u64| Some(now - Duration::from_secs(h * 3600));
        let reserved = Duration::from_secs(72 * 3600);
        let all = |_| true;
        assert_eq!(expired_prefix(&[hours(100), hours(80), hours(10), hours(1)], all, now, reserved, false), 2);
        assert_eq!(expired_prefix(&[hours(10), hours(100)], all, now, reserved, false), 0);
        assert_eq!(expired_prefix(&[hours(1), hours(1), hours(1)], all, now, reserved, true), 2);
        assert_eq!(expired_prefix(&[hours(100)], all, now, reserved, true), 0);
        assert_eq!(expired_prefix(&[hours(100), hours(100), hours(100)], |i| i < 1, now, reserved, true), 1);
        assert_eq!(expired_prefix(&[None, hours(100)], all, now, reserved, false), 0, "an unknown age is kept");
        assert_eq!(expired_prefix(&vec![hours(100); 30], all, now, reserved, false), DELETE_FILES_BATCH_MAX);
    }
}
