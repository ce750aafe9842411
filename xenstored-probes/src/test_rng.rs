//! The unit tests' fixed pseudo-random sequence (xorshift64): the same
//! every run, so a failure replays.

/// Numbers below `n` for each call, from `seed` (non-zero).
pub fn below(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}
