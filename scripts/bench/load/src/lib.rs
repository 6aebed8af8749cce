//! What scripts/bench.sh's native load generators share: reading a process's and a core's costs
//! from /proc.

pub mod procfs {
    use serde_json::{json, Value};

    /// utime + stime of a process, in clock ticks.
    pub fn cpu_ticks(pid: i32) -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let rest = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
    }

    pub fn status_kb(pid: i32, key: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status.lines().find_map(|l| l.strip_prefix(key)?.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// Busy and total ticks of one core, from /proc/stat.
    pub fn core_ticks(cpu: usize) -> Option<(u64, u64)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let name = format!("cpu{cpu}");
        let line = stat.lines().find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
        let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
        let total: u64 = v.iter().take(8).sum();
        let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
        Some((total - idle, total))
    }

    /// How busy a core was between two readings of [`core_ticks`] (0..1), or null.
    pub fn core_busy(a: Option<(u64, u64)>, b: Option<(u64, u64)>) -> Value {
        match (a, b) {
            (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => json!((b1 - b0) as f64 / (t1 - t0) as f64),
            _ => Value::Null,
        }
    }
}
