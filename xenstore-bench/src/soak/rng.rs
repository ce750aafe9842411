//! The soak's one source of randomness: SplitMix64, seeded from the printed
//! seed, one stream per thread, so a run can be replayed from its seed.

pub struct Rng(u64);

impl Rng {
    /// The stream of thread `stream` under `seed`.
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut r = Rng(seed ^ stream.wrapping_mul(0xa076_1d64_78bd_642f));
        r.next();
        r
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// A duration uniform in `lo_ms..hi_ms` milliseconds.
    pub fn millis(&mut self, lo_ms: u64, hi_ms: u64) -> std::time::Duration {
        std::time::Duration::from_millis(lo_ms + self.below(hi_ms - lo_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_replays_and_streams_differ() {
        let take = |seed, stream| {
            let mut r = Rng::new(seed, stream);
            (0..4).map(|_| r.next()).collect::<Vec<_>>()
        };
        assert_eq!(take(7, 1), take(7, 1));
        assert_ne!(take(7, 1), take(7, 2));
        assert_ne!(take(7, 1), take(8, 1));
        let mut r = Rng::new(1, 0);
        assert!((0..1000).all(|_| r.below(10) < 10));
    }
}
