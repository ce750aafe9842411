//! Where the simulation's choices come from: a seeded generator (a seed
//! replays bit for bit) or a fuzzer's bytes (the schedule is the input).

/// The source of every choice a simulated run makes.
pub struct Choice {
    source: Source,
    /// Choices made so far (a run's length in choices, for its report).
    pub made: u64,
}

enum Source {
    Seeded(u64),
    /// A fuzzer's input (two bytes a choice), then a generator seeded
    /// from it: every input makes a run that ends.
    Bytes(Vec<u8>, usize, u64),
}

impl Choice {
    pub fn seeded(seed: u64) -> Choice {
        // xorshift64 must not start at 0.
        Choice {
            source: Source::Seeded(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
            made: 0,
        }
    }

    pub fn from_bytes(bytes: &[u8]) -> Choice {
        let seed = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        });
        Choice {
            source: Source::Bytes(bytes.to_vec(), 0, seed | 1),
            made: 0,
        }
    }

    fn next(&mut self) -> u64 {
        self.made += 1;
        match &mut self.source {
            Source::Seeded(x) => xorshift(x),
            Source::Bytes(bytes, at, _) if *at + 2 <= bytes.len() => {
                *at += 2;
                u16::from_le_bytes([bytes[*at - 2], bytes[*at - 1]]) as u64
            }
            Source::Bytes(_, _, x) => xorshift(x),
        }
    }

    /// A number in `0..n` (0 when n is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        self.next() % n
    }

    /// A number in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True `percent` times in a hundred.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}
