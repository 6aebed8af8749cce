//! The simulation's in-memory log (`dledger::sim::MemLog`) against the real `FileStore`: the
//! same seeded random sequences of `RaftLog` operations (appends as leader and as follower,
//! truncations, commit index updates, reads, clean restarts) run against both, and every answer
//! and every state after each step must be equal. The simulation's verdicts are only as good as
//! its log's likeness to the store the server runs.
//!
//! The follower's operations take their entries from a leader history that changes leader from
//! time to time (a new term continuing from a prefix of the old one), so truncations meet equal,
//! conflicting, missing and out-of-range entries. `DLEDGER_CONFORMANCE_SEEDS` runs more seeds.

use std::path::Path;

use bytes::Bytes;
use dledger::config::DLedgerConfig;
use dledger::entry::{Entry, CURRENT_MAGIC, MIN_BLANK_LEN};
use dledger::log::{LogError, RaftLog};
use dledger::sim::{MemLog, SimRng};
use dledger::store::{CurrentTerm, FileStore};

const INDEX_SEGMENT: usize = 32 * 16;
const STEPS: usize = 400;

fn config(dir: &Path, data_segment: usize) -> DLedgerConfig {
    DLedgerConfig {
        store_base_dir: dir.to_string_lossy().into_owned(),
        self_id: "n0".into(),
        peers: "n0-127.0.0.1:40911".into(),
        mapped_file_size_for_entry_data: data_segment,
        mapped_file_size_for_entry_index: INDEX_SEGMENT,
        ..Default::default()
    }
}

fn open(config: &DLedgerConfig, term: &CurrentTerm) -> FileStore {
    let store = FileStore::open(config, term.clone()).expect("open the file store");
    store.set_clean_space_enabled(false);
    store
}

/// The leaders' log as it grows and changes hands: entries placed by Java's rule (an entry of
/// `L` bytes starts the next segment when `L + 8` does not fit the rest of this one).
struct History {
    entries: Vec<Entry>,
    term: i64,
    segment: i64,
}

impl History {
    fn grow(&mut self, rng: &mut SimRng) {
        let body = Bytes::from(vec![b'a' + rng.below(26) as u8; rng.below(120) as usize]);
        let size = (48 + body.len()) as i64;
        let end = self.entries.last().map_or(0, |e| e.pos + e.size() as i64);
        let rest = self.segment - end % self.segment;
        let pos = if size + MIN_BLANK_LEN as i64 > rest { end + rest } else { end };
        let index = self.entries.len() as i64;
        self.entries.push(Entry { magic: CURRENT_MAGIC, index, term: self.term, pos, body, ..Entry::default() });
    }

    /// A new leader in a newer term, holding a prefix of the old log.
    fn new_leader(&mut self, rng: &mut SimRng) {
        self.term += rng.range(1, 2) as i64;
        let keep = rng.below(self.entries.len() as u64 + 1) as usize;
        self.entries.truncate(keep);
    }

    /// An entry of the history, or a variant that conflicts with it.
    fn pick(&self, rng: &mut SimRng, index: i64) -> Option<Entry> {
        let e = self.entries.get(usize::try_from(index).ok()?)?.clone();
        Some(match rng.below(10) {
            0 => Entry { term: e.term + 1, ..e },
            1 => Entry { pos: e.pos + 8, ..e },
            _ => e,
        })
    }
}

/// Mostly small bodies; now and then one the segment cannot hold with its blank, or at all.
fn body(rng: &mut SimRng, segment: i64) -> Bytes {
    let len = match rng.below(50) {
        0 => (segment - 48 - rng.below(8) as i64).max(0) as usize,
        1 => (segment - 48 + 1 + rng.below(20) as i64) as usize,
        _ => rng.below(120) as usize,
    };
    Bytes::from(vec![b'a' + rng.below(26) as u8; len])
}

/// What an operation answered, comparable across the two logs (errors by kind).
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Entry(Entry),
    Done,
    Refused(&'static str),
}

fn outcome<T>(result: Result<T, LogError>, ok: impl FnOnce(T) -> Outcome) -> Outcome {
    match result {
        Ok(v) => ok(v),
        Err(LogError::DiskFull) => Outcome::Refused("disk full"),
        Err(LogError::Io(_)) => Outcome::Refused("io"),
        Err(LogError::Inconsistent(_)) => Outcome::Refused("inconsistent"),
    }
}

/// Everything `RaftLog` shows of a log: its bounds, commit index and every entry around them.
fn state(log: &dyn RaftLog) -> (i64, i64, i64, i64, Vec<Option<Entry>>) {
    let (begin, end) = (log.begin_index(), log.end_index());
    let entries = (begin.max(0) - 2..=end + 2).map(|i| log.get(i)).collect();
    (begin, end, log.end_term(), log.committed_index(), entries)
}

/// One seeded sequence; panics at the first step where the logs differ.
fn run(seed: u64) {
    let mut rng = SimRng::new(seed);
    let segment = rng.range(256, 1_024) as usize;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = config(dir.path(), segment);
    let term = CurrentTerm::new(1);
    let mut file = Some(open(&config, &term));
    let mut mem = MemLog::new(segment);
    let mut history = History { entries: Vec::new(), term: 1, segment: segment as i64 };
    let mut done: Vec<String> = Vec::new();
    for step in 0..STEPS {
        let f = file.as_mut().expect("the file store is open");
        let end = mem.end_index();
        let (what, a, b) = match rng.below(100) {
            0..=24 => {
                history.grow(&mut rng);
                (format!("history grows to {}", history.entries.len()), Outcome::Done, Outcome::Done)
            }
            25..=27 => {
                history.new_leader(&mut rng);
                term.set(history.term);
                (format!("new leader in term {} from {} entries", history.term, history.entries.len()), Outcome::Done, Outcome::Done)
            }
            28..=39 => {
                // As a leader: our term, or now and then an older one than the last entry's.
                let t = if rng.chance(100) { mem.end_term() - 1 } else { history.term.max(mem.end_term()) };
                let body = body(&mut rng, segment as i64);
                let what = format!("append as leader: term {t}, {} bytes", body.len());
                (what, outcome(mem.append_as_leader(t, body.clone()), Outcome::Entry), outcome(f.append_as_leader(t, body), Outcome::Entry))
            }
            40..=69 => {
                // As a follower: mostly the next entry, sometimes another one.
                let index = if rng.chance(800) { end + 1 } else { rng.below(history.entries.len() as u64 + 2) as i64 - 1 };
                let Some(e) = history.pick(&mut rng, index) else { continue };
                let what = format!("append as follower: {:?}", (e.index, e.term, e.pos, e.body.len()));
                (what, outcome(mem.append_as_follower(&e), |()| Outcome::Done), outcome(f.append_as_follower(&e), |()| Outcome::Done))
            }
            70..=84 => {
                let index = if rng.chance(600) { rng.below((end + 2).max(1) as u64) as i64 } else { rng.below(history.entries.len() as u64 + 1) as i64 };
                let Some(e) = history.pick(&mut rng, index) else { continue };
                let what = format!("truncate at {:?}", (e.index, e.term, e.pos, e.body.len()));
                (what, outcome(mem.truncate(&e), |()| Outcome::Done), outcome(f.truncate(&e), |()| Outcome::Done))
            }
            85..=95 => {
                // The engine's commit index comes from the current term's leader.
                let index = rng.below((end + 3).max(1) as u64) as i64 - 1;
                mem.update_committed(term.get(), index);
                f.update_committed(term.get(), index);
                (format!("commit {index} in term {}", term.get()), Outcome::Done, Outcome::Done)
            }
            97..=98 => {
                // A clean restart: the store flushes, writes its checkpoint and recovers.
                let store = file.take().expect("the file store is open");
                store.shutdown().expect("clean shutdown");
                drop(store);
                file = Some(open(&config, &term));
                mem.flush();
                mem.reopen();
                ("clean restart".to_owned(), Outcome::Done, Outcome::Done)
            }
            _ => {
                // The process dies right after a checkpoint: nothing flushed, the written bytes
                // are in the page cache, and recovery must find every entry again.
                let store = file.take().expect("the file store is open");
                store.persist_checkpoint().expect("checkpoint");
                store.abandon();
                file = Some(open(&config, &term));
                mem.reopen();
                ("process crash".to_owned(), Outcome::Done, Outcome::Done)
            }
        };
        let f = file.as_ref().expect("the file store is open");
        let before = || done.iter().rev().take(12).rev().cloned().collect::<Vec<_>>().join("\n  ");
        assert_eq!(a, b, "seed {seed} step {step}: {what}: the in-memory log and the file store answer differently; before:\n  {}", before());
        assert_eq!(
            state(&mem),
            state(f),
            "seed {seed} step {step}: after {what}, the in-memory log (left) and the file store (right) differ; before:\n  {}",
            before()
        );
        done.push(format!("{step}: {what} -> {a:?}; log {:?}", (mem.begin_index(), mem.end_index(), mem.end_term(), mem.committed_index())));
    }
}

/// Seeds run at once: the store's syncs wait on the disk, not the CPU.
const THREADS: u64 = 4;

#[test]
fn the_in_memory_log_answers_every_operation_as_the_file_store_does() {
    let seeds = std::env::var("DLEDGER_CONFORMANCE_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(32u64);
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            scope.spawn(move || (t..seeds).step_by(THREADS as usize).for_each(run));
        }
    });
}
