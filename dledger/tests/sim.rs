//! The deterministic simulation of `dledger::sim`: seeded runs of 3- and 5-member groups under
//! loss, duplication, delay, partitions, crashes (process and power), clock jumps and disk faults,
//! checked after every event by the oracle (`dledger::sim::oracle`).
//!
//! - `DLEDGER_SIM_RUNS` (default 10 000): how many seeds `seeded_runs_keep_every_invariant` runs;
//!   `DLEDGER_SIM_BASE` shifts them; `DLEDGER_SIM_SECS` stops starting seeds after that many
//!   seconds (for long runs: `DLEDGER_SIM_RUNS=1000000 DLEDGER_SIM_SECS=600`).
//!
//! 10 000 runs cost about 5 s of CPU (the workspace builds this crate with opt-level 3 even in
//! the dev profile; unoptimised they took minutes), spread over the cores.
//! - `DLEDGER_SIM_SEED` (+ `DLEDGER_SIM_MEMBERS`, default 3 or 5 by the seed's parity): `replay`
//!   runs that one seed and prints every event; with `DLEDGER_SIM_HANDOVER=1`, the hand-over
//!   scenario's run of that seed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use dledger::engine::JavaQuirks;
use dledger::sim::{run, SimConfig, SimFailure, SimReport, Trace};

fn env_u64(key: &str) -> Option<u64> {
    std::env::var(key).ok().and_then(|v| v.trim().parse().ok())
}

fn members_for(seed: u64) -> usize {
    if seed.is_multiple_of(2) {
        3
    } else {
        5
    }
}

/// Runs `count` seeds from `base` on every core; the first failure, if any.
fn run_many(base: u64, count: u64, quirks: JavaQuirks) -> (Result<SimReport, SimFailure>, u64) {
    run_until(base, count, quirks, None)
}

/// As [`run_many`], but no seed starts after `deadline`; also returns how many seeds ran.
fn run_until(base: u64, count: u64, quirks: JavaQuirks, deadline: Option<Instant>) -> (Result<SimReport, SimFailure>, u64) {
    let next = AtomicU64::new(0);
    let ran = AtomicU64::new(0);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(8);
    let results: Vec<Result<SimReport, SimFailure>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut total = SimReport::default();
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if k >= count || deadline.is_some_and(|d| Instant::now() >= d) {
                            return Ok(total);
                        }
                        ran.fetch_add(1, Ordering::Relaxed);
                        let seed = base + k;
                        let cfg = SimConfig { quirks, ..SimConfig::new(seed, members_for(seed)) };
                        match run(&cfg) {
                            Ok(r) => add(&mut total, &r),
                            Err(f) => {
                                next.store(count, Ordering::Relaxed);
                                return Err(f);
                            }
                        }
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("simulation thread panicked")).collect()
    });
    let mut total = SimReport::default();
    let done = ran.load(Ordering::Relaxed);
    for r in results {
        match r {
            Ok(r) => add(&mut total, &r),
            Err(f) => return (Err(f), done),
        }
    }
    (Ok(total), done)
}

/// Runs the seeds of `seeds` on every core, in order, until one fails with a message for which
/// `enough` holds (no seed starts after that); the failures in seed order. Whether one is found
/// depends only on the seeds, not on how the threads interleave.
fn failures_in(seeds: std::ops::Range<u64>, quirks: JavaQuirks, enough: impl Fn(&SimFailure) -> bool + Sync) -> Vec<SimFailure> {
    let next = AtomicU64::new(seeds.start);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(8);
    let mut failures: Vec<SimFailure> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut failures = Vec::new();
                    loop {
                        let seed = next.fetch_add(1, Ordering::Relaxed);
                        if seed >= seeds.end {
                            return failures;
                        }
                        if let Err(f) = run(&SimConfig { quirks, ..SimConfig::new(seed, members_for(seed)) }) {
                            if enough(&f) {
                                next.store(seeds.end, Ordering::Relaxed);
                            }
                            failures.push(f);
                        }
                    }
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("simulation thread panicked")).collect()
    });
    failures.sort_by_key(|f| f.seed);
    failures
}

fn add(total: &mut SimReport, r: &SimReport) {
    total.events += r.events;
    total.proposals += r.proposals;
    total.acked += r.acked;
    total.committed += r.committed;
    total.leaders += r.leaders;
    total.crashes += r.crashes;
    total.power_losses += r.power_losses;
    total.forfeits += r.forfeits;
    total.forfeited_entries += r.forfeited_entries;
    total.transfers += r.transfers;
}

#[test]
fn seeded_runs_keep_every_invariant() {
    if std::env::var("DLEDGER_SIM_SEED").is_ok() {
        return; // replaying one seed instead
    }
    let runs = env_u64("DLEDGER_SIM_RUNS").unwrap_or(10_000);
    let base = env_u64("DLEDGER_SIM_BASE").unwrap_or(0);
    let started = Instant::now();
    let deadline = env_u64("DLEDGER_SIM_SECS").map(|s| started + std::time::Duration::from_secs(s));
    let (result, done) = run_until(base, runs, JavaQuirks::default(), deadline);
    match result {
        Ok(total) => println!("{done} runs (seeds {base}..) in {:.1?}: {total:?}", started.elapsed()),
        Err(f) => panic!("after {done} runs: {f}"),
    }
}

/// Seeds that once broke an invariant, with what they found.
const REGRESSIONS: &[(u64, usize, &str)] = &[
    // A duplicated TRUNCATE of the leader's first comparison arrived after the follower had
    // restarted (forgetting what it had verified) and cut its committed entries 1..=4.
    (361_861, 5, "a stale TRUNCATE cut committed entries"),
];

#[test]
fn regression_seeds() {
    for &(seed, members, what) in REGRESSIONS {
        if let Err(f) = run(&SimConfig::new(seed, members)) {
            panic!("seed {seed} ({what}) fails again: {f}");
        }
    }
}

#[test]
fn replay() {
    let Some(seed) = env_u64("DLEDGER_SIM_SEED") else { return };
    let members = env_u64("DLEDGER_SIM_MEMBERS").map_or(members_for(seed), |n| n as usize);
    let quirks = quirks_named(&std::env::var("DLEDGER_SIM_JAVA").unwrap_or_default());
    let base = if std::env::var("DLEDGER_SIM_HANDOVER").is_ok() { SimConfig::handover(seed, members) } else { SimConfig::new(seed, members) };
    let cfg = SimConfig { trace: Trace::Print, quirks, ..base };
    match run(&cfg) {
        Ok(r) => println!("seed {seed} passed: {r:?}"),
        Err(f) => panic!("{f}"),
    }
}

/// With one of 0.3.1.2's behaviours put back, the oracle must find a seed that breaks: proof
/// that the simulation reaches the situation the fix is for.
fn first_failure(quirks: JavaQuirks, budget: u64) -> Option<SimFailure> {
    let base = env_u64("DLEDGER_SIM_BASE").unwrap_or(0);
    run_many(base, budget, quirks).0.err()
}

/// `DLEDGER_SIM_JAVA` names the 0.3.1.2 behaviours to put back, comma-separated: `commit`,
/// `compare`, `append`, `truncate`, `compare-index`, `restart`, `handover`.
fn quirks_named(names: &str) -> JavaQuirks {
    let has = |n: &str| names.split(',').any(|x| x.trim() == n);
    JavaQuirks {
        commit_by_counting: has("commit"),
        compare_ignores_term: has("compare"),
        append_without_prefix: has("append"),
        truncate_below_acked: has("truncate"),
        keep_compare_index: has("compare-index"),
        same_term_after_restart: has("restart"),
        handover_forgotten: has("handover"),
    }
}

fn java_budget() -> u64 {
    env_u64("DLEDGER_SIM_JAVA_RUNS").unwrap_or(3_000)
}

#[test]
fn java_explore() {
    let Some(which) = std::env::var("DLEDGER_SIM_JAVA").ok() else { return };
    let quirks = quirks_named(&which);
    let started = Instant::now();
    match first_failure(quirks, java_budget()) {
        Some(f) => println!("{which}: found in {:.1?}\n{}", started.elapsed(), f.to_string().lines().take(2).collect::<Vec<_>>().join("\n")),
        None => println!("{which}: nothing in {} runs ({:.1?})", java_budget(), started.elapsed()),
    }
}

/// The seeds the truncation check may run. Measured over seeds 0..30 000 with 0.3.1.2's rule:
/// 31 fail, 25 of them by truncating an acknowledged entry (the first at seed 2 176, six below
/// 8 000), about one seed in 1 200. A change to the simulation draws other runs from the same
/// seeds; at that rate 10 000 seeds still find one with odds of about 4 000 to 1.
const TRUNCATION_SEEDS: std::ops::Range<u64> = 0..10_000;

/// 0.3.1.2's TRUNCATE rule (a follower cuts right after the TRUNCATE's entry; the leader
/// truncates where a COMPARE matched, below what the follower acknowledged) loses acknowledged
/// writes. The oracle must say so within a fixed range of seeds, and the seeds that fail must
/// pass with our rule: proof that the simulation still reaches the situation the fix is for, and
/// that the oracle still sees it.
#[test]
fn the_oracle_catches_0_3_1_2_truncation_losing_an_acknowledged_write() {
    let java = JavaQuirks { truncate_below_acked: true, ..JavaQuirks::default() };
    let lost_acknowledged = |f: &SimFailure| f.message.contains("acknowledged entry") || f.message.contains("lacks acknowledged");
    let started = Instant::now();
    let failures = failures_in(TRUNCATION_SEEDS, java, lost_acknowledged);
    for f in &failures {
        println!("seed {}: {}", f.seed, f.message);
    }
    println!("0.3.1.2's truncation rule: {} failing seeds found in {:.1?}", failures.len(), started.elapsed());
    assert!(failures.iter().any(lost_acknowledged), "no seed of {TRUNCATION_SEEDS:?} lost an acknowledged write with 0.3.1.2's truncation rule");
    for f in &failures {
        if let Err(ours) = run(&SimConfig::new(f.seed, f.members)) {
            panic!("seed {} fails with our truncation rule too: {ours}", f.seed);
        }
    }
}

/// `DLEDGER_SIM_HANDOVER_RUNS` (default 2 000) seeds of the hand-over scenario
/// ([`SimConfig::handover`]): the member that handed over never takes the leadership back.
#[test]
fn handovers_hold() {
    let runs = env_u64("DLEDGER_SIM_HANDOVER_RUNS").unwrap_or(2_000);
    let base = env_u64("DLEDGER_SIM_BASE").unwrap_or(0);
    let started = Instant::now();
    let mut total = SimReport::default();
    let mut failures = Vec::new();
    let quirks = quirks_named(&std::env::var("DLEDGER_SIM_JAVA").unwrap_or_default());
    for seed in base..base + runs {
        match run(&SimConfig { quirks, ..SimConfig::handover(seed, 3) }) {
            Ok(r) => add(&mut total, &r),
            Err(f) => failures.push(f),
        }
    }
    for f in &failures {
        println!("seed {}: {}", f.seed, f.message);
    }
    if let Some(f) = failures.first() {
        panic!("{} of {runs} hand-over runs failed; the first: {f}", failures.len());
    }
    println!("{runs} hand-over runs in {:.1?}: {total:?}", started.elapsed());
}

/// Hand-over seeds that once showed the member that handed over pushing the transferee out
/// (with `handover_forgotten`: 10 of seeds 0..2 000 fail, the first at 392).
const HANDOVER_SEEDS: std::ops::Range<u64> = 0..2_000;

/// The leader that handed over and then forgot it (0.3.1.2's rules after our early step-down):
/// it votes for the transferee, still runs its own round (its own vote refused), and moves to
/// the next term before the transferee's heartbeat reaches it; or it answers that heartbeat
/// TERM_NOT_READY and campaigns. The oracle must catch it within a fixed range of seeds, and
/// those seeds must pass with our rule.
#[test]
fn the_oracle_catches_a_leader_that_campaigns_after_handing_over() {
    let java = JavaQuirks { handover_forgotten: true, ..JavaQuirks::default() };
    let started = Instant::now();
    let failing: Vec<SimFailure> = HANDOVER_SEEDS.filter_map(|seed| run(&SimConfig { quirks: java, ..SimConfig::handover(seed, 3) }).err()).collect();
    for f in &failing {
        println!("seed {}: {}", f.seed, f.message);
    }
    println!("a forgotten hand-over: {} failing seeds of {HANDOVER_SEEDS:?} in {:.1?}", failing.len(), started.elapsed());
    assert!(failing.iter().any(|f| f.message.contains("pushes")), "no seed of {HANDOVER_SEEDS:?} shows a forgotten hand-over");
    for f in &failing {
        if let Err(ours) = run(&SimConfig::handover(f.seed, 3)) {
            panic!("seed {} fails with our rule too: {ours}", f.seed);
        }
    }
}
