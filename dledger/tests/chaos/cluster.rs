//! Five real `dledger server` processes on loopback, every directed link between them through a
//! [`Proxy`] the test owns: member a's peers string names a's own real address and, for every
//! other member b, the proxy of link a->b.
//!
//! Children are started from the test's own thread (never from a pool thread: they die with the
//! thread that started them, `PR_SET_PDEATHSIG`, so a killed test leaves none behind) and killed
//! by [`Cluster`]'s `Drop`, also when the test panics.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::proxy::{Mode, Proxy};
use super::rng::Rng;

pub const GROUP: &str = "chaos";

/// The member options beyond the group, id, peers and store: short timings (a leader is missed
/// after 3 x 250 ms), small segments so that the run rolls data and index files, a checkpoint
/// every 100 ms (the test reads it to see each member's end and commit index).
pub const MEMBER_OPTIONS: &[(&str, &str)] = &[
    ("--heart-beat-time-interval-ms", "250"),
    ("--max-heart-beat-leak", "3"),
    ("--min-vote-interval-ms", "100"),
    ("--max-vote-interval-ms", "300"),
    ("--mapped-file-size-for-entry-data", "131072"),
    ("--mapped-file-size-for-entry-index", "16384"),
    ("--check-point-interval", "100"),
];

pub struct Member {
    pub id: String,
    pub addr: SocketAddr,
    pub peers: String,
    pub log: PathBuf,
    child: Option<Child>,
    pub paused: bool,
    pub starts: u32,
}

impl Member {
    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    fn pid(&self) -> Option<Pid> {
        self.child.as_ref().map(|c| Pid::from_raw(c.id() as i32))
    }
}

/// An exit nobody asked for.
#[derive(Debug)]
pub struct Crash {
    pub member: String,
    pub status: String,
    pub log_tail: String,
}

pub struct Cluster {
    pub bin: PathBuf,
    pub dir: tempfile::TempDir,
    pub members: Vec<Member>,
    /// `links[a][b]`: the proxy of a->b (`None` on the diagonal).
    pub links: Vec<Vec<Option<Proxy>>>,
    pub crashes: Vec<Crash>,
    /// Restarts that had to wait for the member's port (another socket held it).
    pub bind_retries: u32,
}

/// A free loopback port below the ephemeral range, so that no outgoing connection takes it
/// while its member is down.
fn free_port(rng: &mut Rng, taken: &[u16]) -> u16 {
    let lo = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|p| p.parse::<u16>().ok()))
        .unwrap_or(32768);
    let (from, to) = if lo > 12_000 { (10_000u64, u64::from(lo) - 1) } else { (61_000, 65_000) };
    loop {
        let port = rng.range(from, to) as u16;
        if taken.contains(&port) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

pub fn tail(path: &Path, bytes: u64) -> String {
    let Ok(mut f) = File::open(path) else { return String::new() };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(bytes)));
    let mut s = String::new();
    let _ = f.read_to_string(&mut s);
    s
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        _ => format!("{status:?}"),
    }
}

impl Cluster {
    pub async fn start(bin: PathBuf, n: usize, rng: &mut Rng) -> Cluster {
        let dir = tempfile::Builder::new().prefix("dledger-chaos-").tempdir().unwrap();
        let mut ports = Vec::new();
        for _ in 0..n {
            let p = free_port(rng, &ports);
            ports.push(p);
        }
        let addrs: Vec<SocketAddr> = ports.iter().map(|p| SocketAddr::from(([127, 0, 0, 1], *p))).collect();
        let mut links: Vec<Vec<Option<Proxy>>> = Vec::new();
        for a in 0..n {
            let mut row = Vec::new();
            for (b, addr) in addrs.iter().enumerate() {
                row.push(if a == b { None } else { Some(Proxy::start(*addr).await) });
            }
            links.push(row);
        }
        let members = (0..n)
            .map(|a| {
                let peers = (0..n)
                    .map(|b| {
                        let addr = if a == b { addrs[b] } else { links[a][b].as_ref().unwrap().addr };
                        format!("n{b}-{addr}")
                    })
                    .collect::<Vec<_>>()
                    .join(";");
                Member { id: format!("n{a}"), addr: addrs[a], peers, log: dir.path().join(format!("n{a}.log")), child: None, paused: false, starts: 0 }
            })
            .collect();
        let mut cluster = Cluster { bin, dir, members, links, crashes: Vec::new(), bind_retries: 0 };
        for i in 0..n {
            cluster.spawn(i);
        }
        for i in 0..n {
            cluster.wait_listening(i).await;
        }
        cluster
    }

    pub fn n(&self) -> usize {
        self.members.len()
    }

    /// The peers string a client starts from: every member's real address.
    pub fn client_peers(&self) -> String {
        self.members.iter().map(|m| format!("{}-{}", m.id, m.addr)).collect::<Vec<_>>().join(";")
    }

    pub fn store_dir(&self) -> &Path {
        self.dir.path()
    }

    fn spawn(&mut self, i: usize) {
        let store = self.dir.path().to_string_lossy().into_owned();
        let m = &mut self.members[i];
        let log = OpenOptions::new().create(true).append(true).open(&m.log).unwrap();
        let mut cmd = Command::new(&self.bin);
        cmd.arg("server").args(["--group", GROUP, "--id", &m.id, "--peers", &m.peers, "--store-base-dir", &store]);
        for (k, v) in MEMBER_OPTIONS {
            cmd.args([k, v]);
        }
        cmd.env("RUST_LOG", "info").stdin(Stdio::null()).stdout(log.try_clone().unwrap()).stderr(log);
        // SAFETY: prctl only, between fork and exec (async-signal-safe, touches no memory).
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(|| nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from));
        }
        m.child = Some(cmd.spawn().expect("cannot start the dledger binary"));
        m.paused = false;
        m.starts += 1;
    }

    /// Waits until member `i` accepts connections; restarts it while its port is still held.
    async fn wait_listening(&mut self, i: usize) {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if tokio::net::TcpStream::connect(self.members[i].addr).await.is_ok() {
                return;
            }
            let exited = self.members[i].child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                let tail = tail(&self.members[i].log, 2000);
                self.members[i].child = None;
                let held = tail.lines().rev().take(5).any(|l| l.contains("cannot listen") && l.contains("in use"));
                if !held {
                    self.crashes.push(Crash { member: self.members[i].id.clone(), status: format!("at start: {}", describe(status)), log_tail: tail });
                    return;
                }
                self.bind_retries += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
                self.spawn(i);
            }
            assert!(Instant::now() < deadline, "{} never listened on {}", self.members[i].id, self.members[i].addr);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Notes every member that exited without being asked to (and forgets its process).
    pub fn check(&mut self) {
        for m in &mut self.members {
            if let Some(status) = m.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                m.child = None;
                self.crashes.push(Crash { member: m.id.clone(), status: describe(status), log_tail: tail(&m.log, 4000) });
            }
        }
    }

    pub fn kill9(&mut self, i: usize) {
        self.check();
        if let Some(mut child) = self.members[i].child.take() {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
            let _ = child.wait();
        }
        self.members[i].paused = false;
    }

    pub async fn restart(&mut self, i: usize) {
        self.check();
        if self.members[i].running() {
            return;
        }
        self.spawn(i);
        self.wait_listening(i).await;
    }

    pub fn pause(&mut self, i: usize) {
        if let Some(pid) = self.members[i].pid() {
            let _ = kill(pid, Signal::SIGSTOP);
            self.members[i].paused = true;
        }
    }

    pub fn resume(&mut self, i: usize) {
        if let Some(pid) = self.members[i].pid() {
            let _ = kill(pid, Signal::SIGCONT);
        }
        self.members[i].paused = false;
    }

    pub fn link(&self, a: usize, b: usize) -> &Proxy {
        self.links[a][b].as_ref().expect("no link to self")
    }

    pub fn set_link(&self, a: usize, b: usize, mode: Mode) {
        if a != b {
            self.link(a, b).set(mode);
        }
    }

    /// Both directions between every member of `side` and every member not in it.
    pub fn cut_between(&self, side: &[usize]) {
        for a in 0..self.n() {
            for b in 0..self.n() {
                if side.contains(&a) != side.contains(&b) {
                    self.set_link(a, b, Mode::Cut);
                }
            }
        }
    }

    pub fn heal_links(&self) {
        for a in 0..self.n() {
            for b in 0..self.n() {
                self.set_link(a, b, Mode::Pass);
            }
        }
    }

    /// Every link passes, every paused member continues, every stopped member is started again.
    pub async fn heal_all(&mut self) {
        self.heal_links();
        for i in 0..self.n() {
            if self.members[i].paused {
                self.resume(i);
            }
        }
        for i in 0..self.n() {
            self.restart(i).await;
        }
    }

    /// SIGTERM to every member; each must exit by itself with status 0 within `grace`.
    /// Returns the members that did not (what they did instead).
    pub fn stop_all(&mut self, grace: Duration) -> Vec<String> {
        self.check();
        let mut failures = Vec::new();
        for m in &mut self.members {
            if let Some(pid) = m.pid() {
                let _ = kill(pid, Signal::SIGCONT);
                let _ = kill(pid, Signal::SIGTERM);
            }
        }
        let deadline = Instant::now() + grace;
        for m in &mut self.members {
            let Some(mut child) = m.child.take() else { continue };
            loop {
                match child.try_wait() {
                    Ok(Some(status)) => {
                        if !status.success() {
                            failures.push(format!("{} stopped with {} on SIGTERM; log tail:\n{}", m.id, describe(status), tail(&m.log, 3000)));
                        }
                        break;
                    }
                    Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                    _ => {
                        let _ = child.kill();
                        let _ = child.wait();
                        failures.push(format!("{} did not stop within {grace:?} of SIGTERM", m.id));
                        break;
                    }
                }
            }
        }
        failures
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Some(mut child) = m.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if std::thread::panicking() {
            eprintln!("chaos: member logs kept in {}", self.dir.path().display());
            // Keep the logs and stores of a failed run for a look.
            let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
            let _ = dir.keep();
        }
    }
}
