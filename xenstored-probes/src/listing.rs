//! A big directory's list of children as the global store keeps it: the
//! NUL-terminated names in creation order (the DIRECTORY reply and the
//! migration record, as for every node), plus an index so that testing,
//! adding and removing a child cost O(log children) lookups and one move
//! of the bytes after it, not a search through the whole list.
//!
//! Only directories past `BIG` bytes of names have one (`/local/domain`,
//! `backend/vbd`, `/vm` on a host with a couple of thousand guests): the
//! index costs about 90 bytes a child (each name again in the hash map,
//! with its allocation, and two slots of lengths), which the rest of the
//! tree never pays.

use rustc_hash::FxHashMap;

/// Listings longer than this get an index. Below it a search and a copy
/// of the list cost about a µs, and an index would make the store bigger
/// than C xenstored's: at 4096 bytes every directory of 1000 short names
/// had one, and 100000 nodes in such directories took 1.35× C's memory
/// (BENCHMARKS.md section 6) instead of 0.99×. Two DIRECTORY_PART pages.
pub const BIG: usize = 8192;

#[derive(Debug)]
pub struct Listing {
    bytes: Vec<u8>,
    /// Each child's slot: slots number the names in list order, a removed
    /// name's slot stays empty until the slots are renumbered.
    slot: FxHashMap<Box<[u8]>, u32>,
    /// Byte length of each slot's entry, as a Fenwick tree: the sum over
    /// the slots before a name is where its entry starts.
    lengths: Vec<u32>,
    /// The next slot a new name takes.
    next: u32,
}

impl Listing {
    pub fn new(bytes: &[u8]) -> Listing {
        let mut l = Listing {
            bytes: bytes.to_vec(),
            slot: FxHashMap::default(),
            lengths: Vec::new(),
            next: 0,
        };
        l.renumber();
        l
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn has(&self, name: &str) -> bool {
        self.slot.contains_key(name.as_bytes())
    }

    /// Appends `name` (the caller checked it is not a child yet).
    pub fn add(&mut self, name: &str) {
        if self.next as usize == self.lengths.len() {
            self.bytes.reserve(name.len() + 1);
            self.renumber();
        }
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.append_slot(name.as_bytes());
    }

    /// Removes `name`'s entry; false when it is not a child.
    pub fn remove(&mut self, name: &str) -> bool {
        let Some(slot) = self.slot.remove(name.as_bytes()) else {
            return false;
        };
        let at = self.starts_at(slot);
        let len = name.len() + 1;
        self.bytes.drain(at..at + len);
        self.add_length(slot, (len as u32).wrapping_neg());
        true
    }

    /// Replaces the list with `bytes`. A transaction's commit gives the
    /// list less the children it removed, then those it made: those are
    /// found by walking both lists once, and only they touch the index.
    /// Any other change renumbers everything.
    pub fn replace(&mut self, bytes: &[u8]) {
        let before = std::mem::replace(&mut self.bytes, bytes.to_vec());
        let mut new = names(bytes).peekable();
        let mut removed = Vec::new();
        for o in names(&before) {
            if new.peek() == Some(&o) {
                new.next();
            } else {
                removed.push(o.to_vec());
            }
        }
        let made: Vec<Vec<u8>> = new.map(<[u8]>::to_vec).collect();
        let reordered = made.iter().any(|m| self.slot.contains_key(&m[..]))
            || removed.iter().any(|r| !self.slot.contains_key(&r[..]));
        if reordered || self.next as usize + made.len() > self.lengths.len() {
            self.renumber();
            return;
        }
        for r in removed {
            // a name listed twice (never made so) is gone after its first
            let Some(slot) = self.slot.remove(&r[..]) else {
                self.renumber();
                return;
            };
            self.add_length(slot, ((r.len() + 1) as u32).wrapping_neg());
        }
        for m in made {
            self.append_slot(&m);
        }
    }

    /// Gives every name a slot again, in list order, with room for as many
    /// more as there are (so renumbering costs O(1) an addition).
    fn renumber(&mut self) {
        let count = names(&self.bytes).count();
        self.slot = FxHashMap::with_capacity_and_hasher(count, Default::default());
        self.lengths = vec![0; (2 * count).max(64)];
        self.next = 0;
        let bytes = std::mem::take(&mut self.bytes);
        for name in names(&bytes) {
            self.append_slot(name);
        }
        self.bytes = bytes;
    }

    fn append_slot(&mut self, name: &[u8]) {
        let slot = self.next;
        self.next += 1;
        self.slot.insert(name.into(), slot);
        self.add_length(slot, name.len() as u32 + 1);
    }

    /// Adds `delta` (wrapping: negative as two's complement) to `slot`.
    fn add_length(&mut self, slot: u32, delta: u32) {
        let mut i = slot as usize + 1;
        while i <= self.lengths.len() {
            self.lengths[i - 1] = self.lengths[i - 1].wrapping_add(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// Bytes of the entries in the slots before `slot`.
    fn starts_at(&self, slot: u32) -> usize {
        let (mut i, mut sum) = (slot as usize, 0u32);
        while i > 0 {
            sum = sum.wrapping_add(self.lengths[i - 1]);
            i -= i & i.wrapping_neg();
        }
        sum as usize
    }
}

fn names(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|&b| b == 0).filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing_of(names: &[String]) -> Vec<u8> {
        names
            .iter()
            .flat_map(|n| [n.as_bytes(), b"\0"].concat())
            .collect()
    }

    /// Against a plain list of names: every operation keeps the bytes in
    /// creation order, through renumbering and replacements.
    #[test]
    fn keeps_the_bytes_of_a_plain_list() {
        let mut want: Vec<String> = (0..100).map(|i| format!("d{i}")).collect();
        let mut l = Listing::new(&listing_of(&want));
        let mut seed = 7u64;
        let mut rand = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        for step in 0..5000 {
            match rand(4) {
                0 | 1 => {
                    let name = format!("n{step}");
                    l.add(&name);
                    want.push(name);
                }
                2 if !want.is_empty() => {
                    let gone = want.remove(rand(want.len()));
                    assert!(l.remove(&gone));
                    assert!(!l.has(&gone) && !l.remove(&gone));
                }
                _ => {
                    // a commit's merge: some removed, some made at the end
                    for _ in 0..rand(3).min(want.len()) {
                        want.remove(rand(want.len()));
                    }
                    want.push(format!("m{step}"));
                    l.replace(&listing_of(&want));
                }
            }
            assert_eq!(l.bytes(), listing_of(&want), "step {step}");
        }
        for n in &want {
            assert!(l.has(n));
        }
        assert!(!l.has("d") && !l.has(""));
    }

    #[test]
    fn a_reordering_replacement_renumbers() {
        let mut l = Listing::new(b"a\0b\0c\0");
        l.replace(b"c\0a\0b\0");
        assert!(l.remove("a"));
        assert_eq!(l.bytes(), b"c\0b\0");
        assert!(l.remove("b") && l.remove("c"));
        assert_eq!(l.bytes(), b"");
    }
}
