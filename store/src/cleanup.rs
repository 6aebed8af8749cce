//! Expiry of old data (Java `CleanCommitLogService` / `CleanConsumeQueueService`): commit-log
//! files older than `fileReservedTime` go at `deleteWhen`, or whenever the disk is fuller than
//! `diskMaxUsedSpaceRatio`; above 85 % they go regardless of age; above 90 % writes are refused
//! until space comes back. Consume-queue and index files that only point below the commit log's
//! new minimum follow.

use std::path::Path;
use std::time::{Duration, SystemTime};

use tracing::{info, warn};

use crate::config::MessageStoreConfig;

/// What one cleaning pass should do.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CleanDecision {
    /// Delete expired files at all this pass.
    pub delete: bool,
    /// Delete regardless of age (disk above the forcible ratio).
    pub force: bool,
    /// Refuse writes (disk above the warning level).
    pub disk_full: bool,
    /// At most this many files go in one pass (`deleteFileBatchMax`).
    pub batch_max: usize,
}

/// The keys of the cleaning rules, which UPDATE_BROKER_CONFIG may change while the store runs.
#[derive(Clone, Debug, PartialEq)]
pub struct CleanPolicy {
    /// `deleteWhen`: the hours of day (`;`-separated) when expired files go.
    pub delete_when: String,
    /// `fileReservedTime`, in hours.
    pub file_reserved_time_hours: u64,
    /// `diskMaxUsedSpaceRatio`, in percent.
    pub disk_max_used_space_ratio: u32,
    /// `cleanFileForciblyEnable`: above the forcible ratio, files go whatever their age.
    pub clean_file_forcibly_enable: bool,
    /// `diskSpaceCleanForciblyRatio` and `diskSpaceWarningLevelRatio`, in percent.
    pub clean_forcibly_ratio: i32,
    pub warning_level_ratio: i32,
    /// `deleteFileBatchMax`.
    pub batch_max: usize,
}

impl CleanPolicy {
    pub fn of(config: &MessageStoreConfig) -> CleanPolicy {
        CleanPolicy {
            delete_when: config.delete_when.clone(),
            file_reserved_time_hours: config.file_reserved_time_hours,
            disk_max_used_space_ratio: config.disk_max_used_space_ratio,
            clean_file_forcibly_enable: config.clean_file_forcibly_enable,
            clean_forcibly_ratio: config.disk_space_clean_forcibly_ratio,
            warning_level_ratio: config.disk_space_warning_level_ratio,
            batch_max: config.delete_file_batch_max,
        }
    }
}

/// Java's rules, from the hour of day and the disk's used ratio.
pub fn decide(config: &CleanPolicy, hour: u32, disk_used_ratio: f64) -> CleanDecision {
    let time_up = crate::clock::hour_named(&config.delete_when, hour);
    let max_ratio = config.disk_max_used_space_ratio.clamp(10, 95) as f64 / 100.0;
    // Java clamps the two ratios to these ranges.
    let warning_level = (config.warning_level_ratio as f64 / 100.0).clamp(0.35, 0.90);
    let clean_forcibly = (config.clean_forcibly_ratio as f64 / 100.0).clamp(0.30, 0.85);
    let disk_full = disk_used_ratio > warning_level;
    let over = disk_used_ratio > clean_forcibly;
    CleanDecision {
        delete: time_up || disk_used_ratio > max_ratio || over,
        force: over && config.clean_file_forcibly_enable,
        disk_full,
        batch_max: config.batch_max,
    }
}

/// Used fraction of the filesystem holding `path`, as Java's `UtilAll.getDiskPartitionSpaceUsedPercent`
/// measures it for cleaning and for the runtime info: used / (used + available to us), rounded up
/// to whole percents; -1 when it cannot be measured (below every threshold, as in Java).
pub fn disk_used_ratio(path: &Path) -> f64 {
    match nix::sys::statvfs::statvfs(path) {
        Ok(s) if s.blocks() > 0 => {
            let fragment = s.fragment_size() as u128;
            let used = (s.blocks() as u128 - s.blocks_free() as u128) * fragment;
            let entire = used + s.blocks_available() as u128 * fragment;
            if entire == 0 {
                return -1.0;
            }
            (used * 100).div_ceil(entire) as f64 / 100.0
        }
        Ok(_) => -1.0,
        Err(e) => {
            warn!(path = %path.display(), error = %e, "cannot read disk usage");
            -1.0
        }
    }
}

/// How many of the oldest files (never the last) are expired: modified longer than `reserved` ago,
/// or any age when `force`; stops at the first one to keep, at most `batch_max`.
pub fn expired_prefix(modified: &[SystemTime], now: SystemTime, reserved: Duration, force: bool, batch_max: usize) -> usize {
    modified
        .iter()
        .take(modified.len().saturating_sub(1))
        .take(batch_max)
        .take_while(|m| force || now.duration_since(**m).is_ok_and(|age| age >= reserved))
        .count()
}

pub(crate) fn log_deleted(what: &str, count: usize) {
    if count > 0 {
        info!(count, "deleted expired {what} files");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_ratio_is_whole_percents_or_minus_one() {
        let ratio = disk_used_ratio(Path::new("."));
        assert!(ratio > 0.0 && ratio <= 1.0, "{ratio}");
        assert_eq!((ratio * 100.0).round() / 100.0, ratio);
        assert_eq!(disk_used_ratio(Path::new("/no/such/dir/at/all")), -1.0);
        assert_eq!(
            decide(&CleanPolicy::of(&MessageStoreConfig::default()), 12, -1.0),
            CleanDecision { delete: false, force: false, disk_full: false, batch_max: 10 }
        );
    }

    #[test]
    fn files_go_at_delete_when_or_when_the_disk_fills() {
        let c = CleanPolicy::of(&MessageStoreConfig::default());
        let d = |delete, force, disk_full| CleanDecision { delete, force, disk_full, batch_max: 10 };
        assert_eq!(decide(&c, 4, 0.1), d(true, false, false));
        assert_eq!(decide(&c, 5, 0.1), d(false, false, false));
        assert_eq!(decide(&c, 5, 0.80), d(true, false, false));
        assert_eq!(decide(&c, 5, 0.86), d(true, true, false));
        assert_eq!(decide(&c, 5, 0.95), d(true, true, true));
        let two_hours = CleanPolicy { delete_when: "03;04".into(), ..c.clone() };
        assert!(decide(&two_hours, 3, 0.0).delete);
        // cleanFileForciblyEnable=false: full disks still delete expired files, never young ones.
        let gentle = CleanPolicy { clean_file_forcibly_enable: false, ..c.clone() };
        assert_eq!(decide(&gentle, 5, 0.95), d(true, false, true));
        // The ratios as Java clamps them: 50 % forcibly, 99 % warning (kept at 90 %).
        let tight = CleanPolicy { clean_forcibly_ratio: 50, warning_level_ratio: 99, batch_max: 3, ..c };
        assert_eq!(decide(&tight, 5, 0.55), CleanDecision { delete: true, force: true, disk_full: false, batch_max: 3 });
        assert!(decide(&tight, 5, 0.91).disk_full);
    }

    #[test]
    fn only_old_files_go_and_never_the_last_one() {
        let now = SystemTime::now();
        let hours = |h: u64| now - Duration::from_secs(h * 3600);
        let reserved = Duration::from_secs(72 * 3600);
        assert_eq!(expired_prefix(&[hours(100), hours(80), hours(10), hours(1)], now, reserved, false, 10), 2);
        assert_eq!(expired_prefix(&[hours(100), hours(80), hours(10), hours(1)], now, reserved, false, 1), 1);
        assert_eq!(expired_prefix(&[hours(10), hours(100)], now, reserved, false, 10), 0);
        assert_eq!(expired_prefix(&[hours(1), hours(1), hours(1)], now, reserved, true, 10), 2);
        assert_eq!(expired_prefix(&[hours(100)], now, reserved, true, 10), 0);
    }
}
