//! Chaos against real processes: five `dledger server` members on loopback, every directed link
//! through a fault proxy of the test, clients appending all along through `DLedgerClient`, and a
//! seeded plan of faults for a bounded time: partitions (minority, majority, asymmetric, a
//! bridge), slow and blackholed links, kill -9 and restart on the same store, SIGSTOP/SIGCONT,
//! leader kills. Then everything heals and the test checks:
//!
//! - no member exited on its own (during the run, at start, or on SIGTERM at the end);
//! - no two members led in the same term (from the members' role-change log lines);
//! - no index was acknowledged for two bodies;
//! - a single leader emerges, and it reads back every acknowledged append at its index;
//! - every member reaches the same end, committed, and their stores agree entry by entry and
//!   byte by byte over the committed data, every acknowledged body in place and none twice.
//!
//! `DLEDGER_CHAOS_SEED` replays a run (the seed of a run is printed first); `DLEDGER_CHAOS_SECS`
//! sets the fault window (default 40 s, so that a run stays well under ~90 s).

mod chaos;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use chaos::cluster::{Cluster, GROUP};
use chaos::faults::{Applied, Fault};
use chaos::proxy::Mode;
use chaos::rng::Rng;
use dledger::client::DLedgerClient;
use dledger::config::DLedgerConfig;
use dledger::log::RaftLog;
use dledger::protocol::{Base, Code, MetadataRequest};
use dledger::rpc::{PeerClient, PeerClientConfig};
use dledger::store::{FileStore, TermFile};
use futures::stream::{self, StreamExt};
use parking_lot::Mutex;

const MEMBERS: usize = 5;
const APPENDERS: usize = 3;

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// What every member says its leader is, polled with METADATA on its real address.
struct Monitor {
    views: Arc<Mutex<Vec<Option<String>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Monitor {
    fn start(addrs: Vec<String>) -> Monitor {
        let views = Arc::new(Mutex::new(vec![None; addrs.len()]));
        let shared = views.clone();
        let task = tokio::spawn(async move {
            let rpc = PeerClient::new(PeerClientConfig { timeout: Duration::from_millis(250), ..Default::default() });
            loop {
                let answers = futures::future::join_all(addrs.iter().enumerate().map(|(i, addr)| {
                    let rpc = &rpc;
                    async move {
                        let base = Base { group: GROUP.into(), remote_id: Some(format!("n{i}")), ..Base::default() };
                        rpc.call(addr, &MetadataRequest { base }).await.ok().and_then(|r| r.base.leader_id)
                    }
                }))
                .await;
                *shared.lock() = answers;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Monitor { views, task }
    }

    fn views(&self) -> Vec<Option<String>> {
        self.views.lock().clone()
    }

    /// The member that says it leads and that most members name; `None` if none says so.
    fn leader(&self) -> Option<usize> {
        let views = self.views();
        (0..views.len())
            .filter(|&i| views[i].as_deref() == Some(format!("n{i}").as_str()))
            .max_by_key(|&i| views.iter().filter(|v| v.as_deref() == Some(format!("n{i}").as_str())).count())
    }

    /// Waits until every member names the same leader, which names itself, twice in a row.
    async fn stable_leader(&self, timeout: Duration) -> Result<usize, Vec<Option<String>>> {
        let deadline = Instant::now() + timeout;
        let mut last = None;
        loop {
            let views = self.views();
            let now = match &views[0] {
                Some(l) if views.iter().all(|v| v.as_ref() == Some(l)) => l.strip_prefix('n').and_then(|i| i.parse::<usize>().ok()),
                _ => None,
            };
            if let Some(l) = now.filter(|_| now == last) {
                return Ok(l);
            }
            last = now;
            if Instant::now() > deadline {
                return Err(views);
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Default)]
struct Stats {
    /// (index, body) of every append answered SUCCESS.
    acked: Vec<(i64, Bytes)>,
    attempts: u64,
    errors: u64,
    codes: BTreeMap<i32, u64>,
}

fn new_client(peers: &str) -> DLedgerClient {
    DLedgerClient::with_config(GROUP, peers, PeerClientConfig { timeout: Duration::from_secs(2), ..Default::default() }).unwrap()
}

/// Appends new bodies one after another until `stop`; a client that failed three times running
/// is replaced by a fresh one (METADATA teaches a client the answering member's peers, here
/// proxies of that member's links, which a fault may have cut).
async fn appender(k: usize, peers: String, stop: Arc<AtomicBool>, stats: Arc<Mutex<Stats>>, mut rng: Rng) {
    let mut client = new_client(&peers);
    let mut fails = 0;
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        seq += 1;
        let body = Bytes::from(format!("a{k}-{seq}-{}", "x".repeat(rng.below(200))));
        stats.lock().attempts += 1;
        match tokio::time::timeout(Duration::from_secs(4), client.append(body.clone())).await {
            Ok(Ok(r)) if r.base.code == Code::SUCCESS => {
                stats.lock().acked.push((r.index, body));
                fails = 0;
            }
            Ok(Ok(r)) => {
                *stats.lock().codes.entry(r.base.code.0).or_default() += 1;
                fails += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(Err(_)) | Err(_) => {
                stats.lock().errors += 1;
                fails += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        if fails >= 3 {
            client.shutdown();
            client = new_client(&peers);
            fails = 0;
        }
    }
    client.shutdown();
}

/// Sleeps `ms`, noting members that exit meanwhile.
async fn hold(cluster: &mut Cluster, ms: u64) {
    let end = Instant::now() + Duration::from_millis(ms);
    while Instant::now() < end {
        cluster.check();
        tokio::time::sleep(Duration::from_millis(50).min(end.saturating_duration_since(Instant::now()))).await;
    }
}

fn names(members: &[usize]) -> String {
    members.iter().map(|m| format!("n{m}")).collect::<Vec<_>>().join(",")
}

fn cut_links(cluster: &Cluster, side: &[usize], applied: &mut Applied) {
    cluster.cut_between(side);
    for a in 0..cluster.n() {
        for b in 0..cluster.n() {
            if side.contains(&a) != side.contains(&b) {
                applied.links.push((a, b, Mode::Cut));
            }
        }
    }
}

/// The leader the monitor sees, else a random member.
/// (Draws from `rng` either way, so that the rest of the plan does not depend on the leader.)
fn target(monitor: &Monitor, with_leader: bool, rng: &mut Rng) -> (usize, bool) {
    let random = rng.below(MEMBERS);
    match monitor.leader() {
        Some(l) if with_leader => (l, true),
        _ => (random, false),
    }
}

async fn apply(cluster: &mut Cluster, fault: &Fault, monitor: &Monitor, rng: &mut Rng) -> Applied {
    let mut applied = Applied::default();
    match *fault {
        Fault::Partition { size, with_leader } => {
            let (first, is_leader) = target(monitor, with_leader, rng);
            let mut side = vec![first];
            side.extend(rng.pick(MEMBERS, MEMBERS).into_iter().filter(|&m| m != first).take(size - 1));
            cut_links(cluster, &side, &mut applied);
            applied.what = format!("{} cut off{}", names(&side), if is_leader { " (with the leader)" } else { "" });
        }
        Fault::Bridge => {
            let p = rng.pick(MEMBERS, MEMBERS);
            for &a in &p[0..2] {
                for &b in &p[2..4] {
                    for (x, y) in [(a, b), (b, a)] {
                        cluster.set_link(x, y, Mode::Cut);
                        applied.links.push((x, y, Mode::Cut));
                    }
                }
            }
            applied.what = format!("{} | n{} | {}", names(&p[0..2]), p[4], names(&p[2..4]));
        }
        Fault::OneWay { with_leader, outbound } => {
            let (m, is_leader) = target(monitor, with_leader, rng);
            for o in (0..MEMBERS).filter(|&o| o != m) {
                let (a, b) = if outbound { (m, o) } else { (o, m) };
                cluster.set_link(a, b, Mode::Cut);
                applied.links.push((a, b, Mode::Cut));
            }
            applied.what = format!("every link {} n{m}{} cut", if outbound { "out of" } else { "into" }, if is_leader { " (leader)" } else { "" });
        }
        Fault::RandomLinks { count } => {
            for _ in 0..count {
                let ab = rng.pick(MEMBERS, 2);
                cluster.set_link(ab[0], ab[1], Mode::Cut);
                applied.links.push((ab[0], ab[1], Mode::Cut));
            }
            applied.what = applied.links.iter().map(|(a, b, _)| format!("n{a}->n{b}")).collect::<Vec<_>>().join(" ") + " cut";
        }
        Fault::Slow { count, ms, blackholes } => {
            for j in 0..count {
                let ab = rng.pick(MEMBERS, 2);
                let mode = if j < blackholes { Mode::Blackhole } else { Mode::Delay(ms) };
                cluster.set_link(ab[0], ab[1], mode);
                applied.links.push((ab[0], ab[1], mode));
            }
            applied.what = format!("{count} links slowed by {ms} ms, {blackholes} blackholed");
        }
        Fault::Kill { with_leader } => {
            let (m, is_leader) = target(monitor, with_leader, rng);
            cluster.kill9(m);
            applied.killed.push(m);
            applied.what = format!("kill -9 n{m}{}", if is_leader { " (leader)" } else { "" });
        }
        Fault::KillTwo => {
            let two = rng.pick(MEMBERS, 2);
            for &m in &two {
                cluster.kill9(m);
            }
            applied.what = format!("kill -9 {}", names(&two));
            applied.killed = two;
        }
        Fault::Pause { with_leader } => {
            let (m, is_leader) = target(monitor, with_leader, rng);
            cluster.pause(m);
            applied.paused.push(m);
            applied.what = format!("SIGSTOP n{m}{}", if is_leader { " (leader)" } else { "" });
        }
        Fault::NoQuorum => {
            let (l, _) = target(monitor, true, rng);
            let others: Vec<usize> = rng.pick(MEMBERS, MEMBERS).into_iter().filter(|&m| m != l).collect();
            let side = vec![l, others[0]];
            cut_links(cluster, &side, &mut applied);
            cluster.pause(others[1]);
            applied.paused.push(others[1]);
            applied.what = format!("{} cut off, n{} stopped", names(&side), others[1]);
        }
    }
    applied
}

async fn undo(cluster: &mut Cluster, applied: Applied) {
    for (a, b, _) in applied.links {
        cluster.set_link(a, b, Mode::Pass);
    }
    for m in applied.paused {
        cluster.resume(m);
    }
    for m in applied.killed {
        cluster.restart(m).await;
    }
}

fn store_config(cluster: &Cluster, i: usize) -> DLedgerConfig {
    let mut config = DLedgerConfig {
        group: GROUP.into(),
        self_id: format!("n{i}"),
        peers: cluster.members[i].peers.clone(),
        store_base_dir: cluster.store_dir().to_string_lossy().into_owned(),
        ..Default::default()
    };
    for (k, v) in chaos::cluster::MEMBER_OPTIONS {
        match *k {
            "--mapped-file-size-for-entry-data" => config.mapped_file_size_for_entry_data = v.parse().unwrap(),
            "--mapped-file-size-for-entry-index" => config.mapped_file_size_for_entry_index = v.parse().unwrap(),
            _ => {}
        }
    }
    config
}

/// `(endIndex, committedIndex)` of a running member's checkpoint.
fn checkpoint(cluster: &Cluster, i: usize) -> Option<(i64, i64)> {
    let text = std::fs::read_to_string(store_config(cluster, i).node_dir().join("checkpoint")).ok()?;
    let value = |key: &str| text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix('=')?.trim().parse::<i64>().ok());
    Some((value("endIndex")?, value("committedIndex")?))
}

/// Terms in which a member logged becoming leader, and who.
fn leaders_by_term(cluster: &Cluster) -> BTreeMap<i64, BTreeSet<String>> {
    let mut terms: BTreeMap<i64, BTreeSet<String>> = BTreeMap::new();
    for m in &cluster.members {
        let log = std::fs::read_to_string(&m.log).unwrap_or_default();
        for line in log.lines().filter(|l| l.contains("dledger role changed") && l.contains("role=Leader")) {
            let term = line.split("term=").nth(1).and_then(|s| s.split(|c: char| !c.is_ascii_digit() && c != '-').next()).and_then(|t| t.parse::<i64>().ok());
            if let Some(term) = term {
                terms.entry(term).or_default().insert(m.id.clone());
            }
        }
    }
    terms
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_real_members_survive_seeded_partitions_kills_and_pauses() {
    let started = Instant::now();
    let seed = env_u64("DLEDGER_CHAOS_SEED").unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
        Rng::new(nanos ^ u64::from(std::process::id())).next_u64()
    });
    let window = Duration::from_secs(env_u64("DLEDGER_CHAOS_SECS").unwrap_or(40));
    eprintln!("chaos: seed {seed} (replay with DLEDGER_CHAOS_SEED={seed}), fault window {window:?}");
    let mut rng = Rng::new(seed);
    let mut plan = rng.fork(1);
    let mut ports = rng.fork(2);
    let mut cluster = Cluster::start(PathBuf::from(env!("CARGO_BIN_EXE_dledger")), MEMBERS, &mut ports).await;
    let monitor = Monitor::start(cluster.members.iter().map(|m| m.addr.to_string()).collect());
    let mut failures: Vec<String> = Vec::new();

    let first = monitor.stable_leader(Duration::from_secs(20)).await.unwrap_or_else(|views| panic!("no first leader: {views:?}"));
    eprintln!("chaos: t={:.1}s first leader n{first}", started.elapsed().as_secs_f64());

    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(Mutex::new(Stats::default()));
    let appenders: Vec<_> =
        (0..APPENDERS).map(|k| tokio::spawn(appender(k, cluster.client_peers(), stop.clone(), stats.clone(), rng.fork(10 + k as u64)))).collect();

    // The faults.
    let mut injected: BTreeMap<&'static str, u32> = BTreeMap::new();
    let fault_start = Instant::now();
    hold(&mut cluster, 1_000).await;
    while fault_start.elapsed() < window {
        let fault = Fault::draw(&mut plan);
        // No episode outlasts the window by more than its gap.
        let left = window.saturating_sub(fault_start.elapsed()).as_millis() as u64;
        let ms = fault.hold_ms(&mut plan).min(left.max(300));
        let gap = plan.range(200, 1_500);
        let applied = apply(&mut cluster, &fault, &monitor, &mut plan).await;
        *injected.entry(fault.kind()).or_default() += 1;
        eprintln!("chaos: t={:.1}s {} for {ms} ms: {}", started.elapsed().as_secs_f64(), fault.kind(), applied.what);
        hold(&mut cluster, ms).await;
        undo(&mut cluster, applied).await;
        hold(&mut cluster, gap).await;
    }

    // Heal, let the appenders go on a little, stop them.
    cluster.heal_all().await;
    eprintln!("chaos: t={:.1}s healed", started.elapsed().as_secs_f64());
    hold(&mut cluster, 1_500).await;
    stop.store(true, Ordering::Relaxed);
    for a in appenders {
        a.await.unwrap();
    }
    let stats = std::mem::take(&mut *stats.lock());

    // One leader, which acknowledges a last append and reads back every acknowledged one.
    let leader = match monitor.stable_leader(Duration::from_secs(20)).await {
        Ok(l) => Some(l),
        Err(views) => {
            failures.push(format!("no single leader after healing: {views:?}"));
            None
        }
    };
    let client = new_client(&cluster.client_peers());
    let mut barrier = None;
    let deadline = Instant::now() + Duration::from_secs(20);
    while barrier.is_none() && Instant::now() < deadline {
        match client.append(Bytes::from_static(b"barrier")).await {
            Ok(r) if r.base.code == Code::SUCCESS => barrier = Some(r.index),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    if barrier.is_none() {
        failures.push("the healed group never acknowledged an append".into());
    }

    let mut by_index: BTreeMap<i64, Bytes> = BTreeMap::new();
    for (index, body) in &stats.acked {
        if let Some(other) = by_index.insert(*index, body.clone()) {
            failures.push(format!("index {index} acknowledged twice: {other:?} and {body:?}"));
        }
    }
    if let Some(l) = leader {
        let bad: Vec<String> = stream::iter(by_index.iter())
            .map(|(index, body)| {
                let client = &client;
                async move {
                    for _ in 0..20 {
                        match client.get(*index).await {
                            Ok(r) if r.base.code == Code::SUCCESS => {
                                return match r.entries.first() {
                                    Some(e) if e.index == *index && e.body == *body => None,
                                    other => Some(format!("GET {index} from the leader: {other:?}, acknowledged {body:?}")),
                                };
                            }
                            Ok(r) if r.base.code == Code::NOT_LEADER => tokio::time::sleep(Duration::from_millis(100)).await,
                            Ok(r) => return Some(format!("GET {index}: code {:?}", r.base.code)),
                            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                        }
                    }
                    Some(format!("GET {index}: no answer from a leader"))
                }
            })
            .buffer_unordered(16)
            .filter_map(|r| async move { r })
            .collect()
            .await;
        // Not a failure by itself (a loaded machine may miss a heartbeat): every GET above went
        // to whichever member led when it was asked.
        if let Some(now) = client.leader_id().filter(|now| *now != format!("n{l}")) {
            eprintln!("chaos: the leader changed from n{l} to {now} while reading back");
        }
        failures.extend(bad.into_iter().take(20));
    }
    client.shutdown();

    // Every member reaches the same end, all of it committed.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last: Vec<Option<(i64, i64)>> = Vec::new();
    let converged = loop {
        let now: Vec<Option<(i64, i64)>> = (0..MEMBERS).map(|i| checkpoint(&cluster, i)).collect();
        let same = now[0].is_some_and(|(e, c)| e == c && e >= barrier.unwrap_or(0)) && now.iter().all(|p| *p == now[0]);
        if same && now == last {
            break now[0].map(|(e, _)| e);
        }
        if Instant::now() > deadline {
            failures.push(format!("members never converged: (end, committed) {now:?}, barrier {barrier:?}"));
            break None;
        }
        last = now;
        hold(&mut cluster, 300).await;
    };

    // Every member stops on SIGTERM by itself, and none exited on its own before.
    cluster.check();
    failures.extend(cluster.stop_all(Duration::from_secs(10)));
    for c in &cluster.crashes {
        failures.push(format!("{} exited on its own ({}); log tail:\n{}", c.member, c.status, c.log_tail));
    }
    let terms = leaders_by_term(&cluster);
    for (term, who) in &terms {
        if who.len() > 1 {
            failures.push(format!("term {term} had {} leaders: {who:?}", who.len()));
        }
    }

    // The stores agree over the committed prefix, entry by entry and byte by byte.
    let stores: Vec<FileStore> = (0..MEMBERS)
        .map(|i| {
            let config = store_config(&cluster, i);
            let terms = TermFile::open(&config).unwrap();
            FileStore::open(&config, terms.current_term()).unwrap()
        })
        .collect();
    let ends: Vec<(i64, i64, i64)> = stores.iter().map(|s| (s.begin_index(), s.end_index(), s.committed_index())).collect();
    if let Some(end) = converged {
        if ends.iter().any(|&(b, e, c)| b != 0 || e != end || c != end) {
            failures.push(format!("reopened stores (begin, end, committed) {ends:?}, expected (0, {end}, {end})"));
        }
        let mut seen: HashMap<Bytes, i64> = HashMap::new();
        let mut mismatches = 0;
        for index in 0..=end {
            let entries: Vec<_> = stores.iter().map(|s| s.get(index)).collect();
            let Some(e0) = &entries[0] else {
                failures.push(format!("n0 cannot read committed entry {index}"));
                break;
            };
            if entries.iter().any(|e| e.as_ref() != Some(e0)) {
                mismatches += 1;
                if mismatches <= 5 {
                    failures.push(format!("entry {index} differs between members: {entries:?}"));
                }
            }
            if let Some(acked) = by_index.get(&index) {
                if *acked != e0.body {
                    failures.push(format!("store entry {index} is {:?}, acknowledged {acked:?}", e0.body));
                }
            }
            if let Some(before) = seen.insert(e0.body.clone(), index) {
                failures.push(format!("body {:?} at {before} and {index}", e0.body));
            }
        }
        if mismatches > 0 {
            failures.push(format!("{mismatches} committed entries differ between members"));
        }
        let committed_pos: Vec<i64> = stores.iter().map(FileStore::committed_pos).collect();
        if committed_pos.iter().any(|p| *p != committed_pos[0]) {
            failures.push(format!("committed positions differ: {committed_pos:?}"));
        }
        let mut offset = stores[0].data_min_offset();
        while (offset as i64) < committed_pos[0] {
            let want = (committed_pos[0] - offset as i64).min(64 * 1024) as usize;
            let Some(chunk) = stores[0].read_data(offset, want) else {
                failures.push(format!("n0 cannot read data at {offset}"));
                break;
            };
            for (i, s) in stores.iter().enumerate().skip(1) {
                if s.read_data(offset, chunk.len()).as_ref() != Some(&chunk) {
                    failures.push(format!("n{i}'s data differs from n0's in the {} bytes at {offset}", chunk.len()));
                }
            }
            offset += chunk.len() as u64;
        }
    }
    drop(stores);

    let restarts: u32 = cluster.members.iter().map(|m| m.starts - 1).sum();
    let faults: u32 = injected.values().sum();
    eprintln!(
        "chaos summary: seed={seed} faults={faults} {injected:?} restarts={restarts} appends: attempted={} acked={} errors={} codes={:?} \
         committed_end={converged:?} elections={} (terms with a leader) bind_retries={} time={:.1}s",
        stats.attempts,
        stats.acked.len(),
        stats.errors,
        stats.codes,
        terms.len(),
        cluster.bind_retries,
        started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "chaos seed {seed} (replay with DLEDGER_CHAOS_SEED={seed}) found:\n{}", failures.join("\n"));
}
