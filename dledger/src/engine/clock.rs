//! Time and chance, both handed in by the driver.
//!
//! Java reads `System.currentTimeMillis()` everywhere, so a wall clock that jumps back freezes
//! every timer of 0.3.1.2 (a follower stops timing its leader out, a leader stops sending
//! heartbeats) until the clock catches up. The engine instead keeps its own time that advances
//! by the forward steps of whatever clock the driver passes: a backward jump costs nothing, a
//! forward jump fires the timers it crosses (as in Java).

/// Engine time: milliseconds that only move forward.
#[derive(Clone, Debug)]
pub(super) struct Clock {
    /// The driver's clock at the last input.
    external_ms: u64,
    /// Engine time at the last input.
    now: u64,
}

impl Clock {
    pub fn new(external_ms: u64) -> Clock {
        Clock { external_ms, now: 0 }
    }

    /// Takes the driver's clock reading and returns engine time.
    pub fn advance(&mut self, external_ms: u64) -> u64 {
        self.now += external_ms.saturating_sub(self.external_ms);
        self.external_ms = external_ms;
        self.now
    }

    /// An engine-time deadline as a reading of the driver's clock.
    pub fn external(&self, deadline: u64) -> u64 {
        self.external_ms.saturating_add(deadline.saturating_sub(self.now))
    }
}

/// SplitMix64, seeded by the driver: the engine's only source of chance (vote intervals). The
/// simulation draws its faults from it too.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound` (`Random.nextInt(bound)`); 0 when `bound` is 0.
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            0
        } else {
            self.next_u64() % bound
        }
    }
}

/// `DLedgerUtils.elapsed`: how long ago `then` was; "never" is forever ago.
pub(super) fn elapsed(now: u64, then: Option<u64>) -> u64 {
    then.map_or(u64::MAX, |t| now.saturating_sub(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backward_jump_stops_time_and_a_forward_jump_moves_it() {
        let mut c = Clock::new(10_000);
        assert_eq!(c.advance(10_500), 500);
        assert_eq!(c.advance(2_000), 500);
        assert_eq!(c.advance(2_100), 600);
        assert_eq!(c.external(700), 2_200);
        assert_eq!(c.advance(60_000), 58_500);
    }
}
