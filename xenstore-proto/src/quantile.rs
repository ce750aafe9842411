//! One definition of a percentile for every figure the project prints
//! (the snooper's summaries and `--top`; the bench's tables).

/// The nearest-rank `q` quantile of `v` (0 < q <= 1): the smallest value
/// that at least a `q` share of the values are at or below. None when `v`
/// is empty. Reorders `v` (selection, not a sort: O(n)).
pub fn nearest_rank<T: Copy + Ord>(v: &mut [T], q: f64) -> Option<T> {
    if v.is_empty() {
        return None;
    }
    let rank = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len());
    Some(*v.select_nth_unstable(rank - 1).1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_the_nearest_above() {
        let mut v: Vec<u32> = (1..=100).rev().collect();
        assert_eq!(nearest_rank(&mut v, 0.5), Some(50));
        assert_eq!(nearest_rank(&mut v, 0.99), Some(99));
        assert_eq!(nearest_rank(&mut v, 1.0), Some(100));
        assert_eq!(nearest_rank(&mut v, 0.0), Some(1));
        assert_eq!(nearest_rank(&mut [7u64], 0.99), Some(7));
        assert_eq!(nearest_rank(&mut [3, 1], 0.5), Some(1));
        assert_eq!(nearest_rank::<u8>(&mut [], 0.5), None);
    }
}
