//! The seeded fault plan: episodes drawn one after another until the fault window ends, each
//! applied, held for a while and undone. Episodes aimed at the leader take the leader as the test
//! last saw it (so a replayed seed draws the same plan; what it hits depends on timing).

use super::proxy::Mode;
use super::rng::Rng;

#[derive(Clone, Debug)]
pub enum Fault {
    /// Cuts `side` (1 or 2 members, with the leader if `with_leader`) from the others, both ways.
    Partition { size: usize, with_leader: bool },
    /// Two sides of two and one member bridging them (it reaches both, they do not reach each
    /// other).
    Bridge,
    /// Cuts every link out of (`outbound`) or into one member, the other direction still passes.
    OneWay { with_leader: bool, outbound: bool },
    /// Cuts a random set of directed links.
    RandomLinks { count: usize },
    /// Slows links (chunks wait `ms`), some of them blackholed.
    Slow { count: usize, ms: u64, blackholes: usize },
    /// kill -9 of one member (or the leader), started again on the same store at the end.
    Kill { with_leader: bool },
    /// kill -9 of two members.
    KillTwo,
    /// SIGSTOP of one member (or the leader), SIGCONT at the end.
    Pause { with_leader: bool },
    /// The leader is cut off with one follower, and a member of the majority is paused: no side
    /// has a quorum until the end.
    NoQuorum,
}

impl Fault {
    pub fn draw(rng: &mut Rng) -> Fault {
        match rng.below(100) {
            0..=14 => Fault::Partition { size: 1 + rng.below(2), with_leader: rng.chance(60) },
            15..=21 => Fault::Bridge,
            22..=31 => Fault::OneWay { with_leader: rng.chance(60), outbound: rng.chance(50) },
            32..=39 => Fault::RandomLinks { count: 3 + rng.below(6) },
            40..=47 => Fault::Slow { count: 2 + rng.below(8), ms: rng.range(5, 300), blackholes: rng.below(3) },
            48..=62 => Fault::Kill { with_leader: rng.chance(60) },
            63..=69 => Fault::KillTwo,
            70..=84 => Fault::Pause { with_leader: rng.chance(60) },
            _ => Fault::NoQuorum,
        }
    }

    /// How long the fault is held, in ms.
    pub fn hold_ms(&self, rng: &mut Rng) -> u64 {
        match self {
            Fault::Pause { .. } => rng.range(500, 4_000),
            Fault::NoQuorum => rng.range(1_000, 3_000),
            _ => rng.range(800, 5_000),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Partition { .. } => "partition",
            Fault::Bridge => "bridge",
            Fault::OneWay { .. } => "one-way",
            Fault::RandomLinks { .. } => "random-links",
            Fault::Slow { .. } => "slow",
            Fault::Kill { with_leader: true } => "leader-kill",
            Fault::Kill { .. } => "kill",
            Fault::KillTwo => "kill-two",
            Fault::Pause { .. } => "pause",
            Fault::NoQuorum => "no-quorum",
        }
    }
}

/// What one episode did, to be undone at its end.
#[derive(Default, Debug)]
pub struct Applied {
    pub links: Vec<(usize, usize, Mode)>,
    pub killed: Vec<usize>,
    pub paused: Vec<usize>,
    pub what: String,
}
