//! Values by domain id: a direct index for the ids Xen gives domains
//! (below DOMID_FIRST_RESERVED), a hash map for any other number a client
//! names. State a domain's every event reads (the store's accounting, its
//! home's watch filter) is then one cache line away, not a hash table's
//! control bytes and then its bucket, each a miss among a thousand domains.

use rustc_hash::FxHashMap;

/// Xen's first reserved domid (DOMID_FIRST_RESERVED, 0x7FF0): the direct
/// index never grows past it.
const DENSE_LIMIT: u32 = 0x7ff0;

/// An absent id reads as `T::default()`; the direct index is as long as the
/// largest id below the limit ever given a value.
#[derive(Debug, Default)]
pub struct DomidMap<T> {
    dense: Vec<T>,
    sparse: FxHashMap<u32, T>,
}

impl<T: Default> DomidMap<T> {
    pub fn get(&self, domid: u32) -> Option<&T> {
        if domid < DENSE_LIMIT {
            self.dense.get(domid as usize)
        } else {
            self.sparse.get(&domid)
        }
    }

    pub fn get_mut(&mut self, domid: u32) -> Option<&mut T> {
        if domid < DENSE_LIMIT {
            self.dense.get_mut(domid as usize)
        } else {
            self.sparse.get_mut(&domid)
        }
    }

    /// `domid`'s value, made (as the default) if it had none.
    pub fn entry(&mut self, domid: u32) -> &mut T {
        if domid >= DENSE_LIMIT {
            return self.sparse.entry(domid).or_default();
        }
        let i = domid as usize;
        if i >= self.dense.len() {
            self.dense.resize_with(i + 1, T::default);
        }
        &mut self.dense[i]
    }

    /// Puts `domid` back to the default (the direct index keeps its room).
    pub fn clear(&mut self, domid: u32) {
        if domid < DENSE_LIMIT {
            if let Some(v) = self.dense.get_mut(domid as usize) {
                *v = T::default();
            }
        } else {
            self.sparse.remove(&domid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_below_and_above_the_limit_keep_their_values() {
        let mut m: DomidMap<u32> = DomidMap::default();
        for d in [0, 7, DENSE_LIMIT - 1, DENSE_LIMIT, u32::MAX] {
            assert_eq!(m.get(d).copied().unwrap_or_default(), 0);
            *m.entry(d) += d % 1000 + 1;
            assert_eq!(m.get(d), Some(&(d % 1000 + 1)));
        }
        assert_eq!(m.get(6), Some(&0));
        assert_eq!(m.dense.len(), DENSE_LIMIT as usize);
        assert_eq!(m.sparse.len(), 2);
        m.clear(7);
        m.clear(u32::MAX);
        assert_eq!((m.get(7), m.get(u32::MAX)), (Some(&0), None));
        *m.get_mut(DENSE_LIMIT).unwrap() = 3;
        assert_eq!(m.get(DENSE_LIMIT), Some(&3));
    }
}
