//! A big directory's list of children as the global store keeps it: the
//! NUL-terminated names in creation order (the DIRECTORY reply and the
//! migration record, as for every node) cut into chunks of whole entries,
//! plus the chunk each name is in. Testing a child is a hash lookup;
//! adding one appends to the last chunk; removing one moves the rest of
//! its chunk only, at most `CHUNK` bytes, not the whole list. A reply,
//! DIRECTORY_PART page or migration record concatenates the chunks, which
//! it copies anyway; a Fenwick tree of the chunks' lengths finds where a
//! DIRECTORY_PART offset falls in O(log chunks).
//!
//! Only directories past `BIG` bytes of names have one (`/local/domain`,
//! `backend/vbd`, `/vm` on a host with a couple of thousand guests): the
//! index costs about 80 bytes a child (each name again in the hash map,
//! with its allocation, and its chunk's number), which the rest of the
//! tree never pays.

use rustc_hash::FxHashMap;

/// Listings longer than this get an index. Below it a search and a copy
/// of the list cost about a µs, and an index would make the store bigger
/// than C xenstored's: at 4096 bytes every directory of 1000 short names
/// had one, and 100000 nodes in such directories took 1.35× C's memory
/// (BENCHMARKS.md section 6) instead of 0.99×. Two DIRECTORY_PART pages.
pub const BIG: usize = 8192;

/// Bytes of entries a chunk holds (a longer entry gets a chunk alone): a
/// removal moves and searches at most this much, as in a small directory.
const CHUNK: usize = 4096;

#[derive(Clone, Debug)]
pub struct Listing {
    /// Whole entries, in list order; removals can leave a chunk short or
    /// empty until the next repacking.
    chunks: Vec<Vec<u8>>,
    chunk_of: FxHashMap<Box<[u8]>, u32>,
    /// Each chunk's byte length.
    sizes: Fenwick,
    /// Bytes of all entries.
    len: usize,
    /// Chunk room unused past which the chunks are repacked: what the last
    /// repacking left plus half its bytes, so its O(listing) cost comes at
    /// most once per half a listing's bytes of room left by removals (or by
    /// chunks closed short of a long name).
    slack_limit: usize,
}

impl Listing {
    pub fn new(bytes: &[u8]) -> Listing {
        let mut l = Listing {
            chunks: Vec::new(),
            chunk_of: FxHashMap::default(),
            sizes: Fenwick::default(),
            len: 0,
            slack_limit: 0,
        };
        l.chunk_of.reserve(names(bytes).count());
        for name in names(bytes) {
            let chunk = l.append(name);
            l.chunk_of.insert(name.into(), chunk);
        }
        l.slack_limit = l.slack() + (l.len / 2).max(2 * CHUNK);
        l
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entries, chunk after chunk: their concatenation is the list.
    pub fn chunks(&self) -> impl Iterator<Item = &[u8]> {
        self.chunks.iter().map(Vec::as_slice)
    }

    pub fn has(&self, name: &str) -> bool {
        self.chunk_of.contains_key(name.as_bytes())
    }

    /// Where `name`'s entry starts in the list, if it is listed: its
    /// chunk's place (O(log chunks)) and a search of that chunk.
    pub fn offset_of(&self, name: &str) -> Option<usize> {
        let chunk = *self.chunk_of.get(name.as_bytes())? as usize;
        Some(self.sizes.before(chunk) + find_child(&self.chunks[chunk], name)?)
    }

    /// Appends up to `max` bytes of the list from byte `offset` to `out`.
    pub fn copy_range(&self, offset: usize, max: usize, out: &mut Vec<u8>) {
        if offset >= self.len {
            return;
        }
        let (mut chunk, before) = self.sizes.find(offset);
        let mut skip = offset - before;
        let mut left = max.min(self.len - offset);
        while left > 0 {
            let bytes = &self.chunks[chunk][skip..];
            let n = bytes.len().min(left);
            out.extend_from_slice(&bytes[..n]);
            (left, skip, chunk) = (left - n, 0, chunk + 1);
        }
    }

    /// Appends `name` (the caller checked it is not a child yet).
    pub fn add(&mut self, name: &str) {
        let chunk = self.append(name.as_bytes());
        self.chunk_of.insert(name.as_bytes().into(), chunk);
    }

    /// Removes `name`'s entry; false when it is not a child.
    pub fn remove(&mut self, name: &str) -> bool {
        let Some(chunk) = self.chunk_of.remove(name.as_bytes()) else {
            return false;
        };
        let bytes = &mut self.chunks[chunk as usize];
        let at = find_child(bytes, name).expect("a child's entry is in its chunk");
        bytes.drain(at..at + name.len() + 1);
        if bytes.is_empty() {
            *bytes = Vec::new();
        }
        self.sizes.add(chunk as usize, -(name.len() as isize + 1));
        self.len -= name.len() + 1;
        if self.slack() > self.slack_limit {
            self.repack();
        }
        true
    }

    /// Replaces the list with `bytes`. A transaction's commit gives the
    /// list less the children it removed, then those it made: those are
    /// found by walking both lists once, and only they touch the index.
    /// Any other change rebuilds everything.
    pub fn replace(&mut self, bytes: &[u8]) {
        let mut new = names(bytes).peekable();
        let mut removed = Vec::new();
        for o in self.chunks().flat_map(names) {
            if new.peek() == Some(&o) {
                new.next();
            } else {
                removed.push(o.to_vec());
            }
        }
        let made: Vec<&[u8]> = new.collect();
        let reordered = made.iter().any(|m| self.chunk_of.contains_key(*m));
        if reordered {
            *self = Listing::new(bytes);
            return;
        }
        for r in removed {
            // a name listed twice (never made so) is gone after its first
            if !self.remove(std::str::from_utf8(&r).unwrap_or("")) {
                *self = Listing::new(bytes);
                return;
            }
        }
        for m in made {
            let chunk = self.append(m);
            self.chunk_of.insert(m.into(), chunk);
        }
    }

    /// Puts `name`'s entry at the end, in a new chunk when the last is
    /// full; returns its chunk.
    fn append(&mut self, name: &[u8]) -> u32 {
        let entry = name.len() + 1;
        match self.chunks.last() {
            Some(last) if last.len() + entry <= CHUNK || last.is_empty() => {}
            _ => {
                self.chunks.push(Vec::with_capacity(CHUNK.max(entry)));
                self.sizes.grow_to(self.chunks.len());
            }
        }
        let chunk = self.chunks.len() - 1;
        let bytes = &mut self.chunks[chunk];
        bytes.extend_from_slice(name);
        bytes.push(0);
        self.sizes.add(chunk, entry as isize);
        self.len += entry;
        u32::try_from(chunk).expect("fewer than 2^32 chunks")
    }

    /// Room in the chunks that no entry uses (an estimate: an emptied
    /// chunk counts though its room was freed).
    fn slack(&self) -> usize {
        (self.chunks.len() * CHUNK).saturating_sub(self.len)
    }

    /// Packs the entries into as few chunks as they fill, renumbering
    /// each name's chunk.
    fn repack(&mut self) {
        let old = std::mem::take(&mut self.chunks);
        self.sizes = Fenwick::default();
        self.len = 0;
        for name in old.iter().flat_map(|c| names(c)) {
            let chunk = self.append(name);
            *self
                .chunk_of
                .get_mut(name)
                .expect("a listed name is indexed") = chunk;
        }
        self.slack_limit = self.slack() + (self.len / 2).max(2 * CHUNK);
    }
}

/// Where `name`'s entry starts in a NUL-terminated listing: one memmem
/// over the bytes (a domain's listing is thousands of names long).
pub fn find_child(children: &[u8], name: &str) -> Option<usize> {
    let name = name.as_bytes();
    if name.is_empty() || name.contains(&0) {
        return None;
    }
    if children.starts_with(name) && children.get(name.len()) == Some(&0) {
        return Some(0);
    }
    let mut needle = Vec::with_capacity(name.len() + 2);
    needle.push(0);
    needle.extend_from_slice(name);
    needle.push(0);
    memchr::memmem::find(children, &needle).map(|at| at + 1)
}

fn names(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|&b| b == 0).filter(|n| !n.is_empty())
}

/// Sums of lengths over a prefix of slots, each O(log slots); its size is
/// a power of two so that `find` can descend it.
#[derive(Clone, Debug, Default)]
struct Fenwick(Vec<usize>);

impl Fenwick {
    /// Makes room for `slots` slots (doubling: rebuilt O(1) a slot).
    fn grow_to(&mut self, slots: usize) {
        if slots <= self.0.len() {
            return;
        }
        let lengths: Vec<usize> = (0..self.0.len()).map(|i| self.at(i)).collect();
        *self = Fenwick(vec![0; slots.next_power_of_two().max(64)]);
        for (i, len) in lengths.into_iter().enumerate() {
            self.add(i, len as isize);
        }
    }

    fn add(&mut self, slot: usize, delta: isize) {
        let mut i = slot + 1;
        while i <= self.0.len() {
            self.0[i - 1] = self.0[i - 1].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// Sum over the slots before `slot`.
    fn before(&self, slot: usize) -> usize {
        let (mut i, mut sum) = (slot, 0);
        while i > 0 {
            sum += self.0[i - 1];
            i -= i & i.wrapping_neg();
        }
        sum
    }

    fn at(&self, slot: usize) -> usize {
        self.before(slot + 1) - self.before(slot)
    }

    /// The slot holding byte `offset` (less than the total) and the sum
    /// before it.
    fn find(&self, offset: usize) -> (usize, usize) {
        let (mut slot, mut before) = (0, 0);
        let mut step = self.0.len();
        while step > 0 {
            let next = slot + step;
            if next <= self.0.len() && before + self.0[next - 1] <= offset {
                slot = next;
                before += self.0[next - 1];
            }
            step /= 2;
        }
        (slot, before)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing_of(names: &[String]) -> Vec<u8> {
        let mut out = Vec::new();
        for n in names {
            out.extend_from_slice(n.as_bytes());
            out.push(0);
        }
        out
    }

    fn bytes_of(l: &Listing) -> Vec<u8> {
        l.chunks().flatten().copied().collect()
    }

    /// Against a plain list of names: every operation keeps the bytes in
    /// creation order and the chunks whole and bounded, through
    /// repacking and replacements; any range copies as the plain list's.
    #[test]
    fn keeps_the_bytes_of_a_plain_list() {
        let mut want: Vec<String> = (0..1000).map(|i| format!("d{i}")).collect();
        let mut l = Listing::new(&listing_of(&want));
        let mut seed = 7u64;
        let mut rand = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        let mut repacked = 0;
        for step in 0..3000 {
            let chunks = l.chunks.len();
            match rand(8) {
                0..=2 => {
                    // names of every length up to a path component's
                    let long = if rand(8) == 0 { rand(2100) } else { 0 };
                    let name = format!("n{step}-{}", "x".repeat(long));
                    l.add(&name);
                    want.push(name);
                }
                3..=5 if !want.is_empty() => {
                    // mostly the oldest, as guests come and go
                    let at = if rand(2) == 0 { 0 } else { rand(want.len()) };
                    let gone = want.remove(at);
                    assert!(l.remove(&gone));
                    assert!(!l.has(&gone) && !l.remove(&gone));
                }
                6 => {
                    // a commit's merge: some removed, some made at the end
                    for _ in 0..rand(3).min(want.len()) {
                        want.remove(rand(want.len()));
                    }
                    want.push(format!("m{step}"));
                    l.replace(&listing_of(&want));
                }
                _ => {
                    let all = listing_of(&want);
                    let (offset, max) = (rand(all.len() + 2), rand(2 * CHUNK + 2));
                    let mut got = Vec::new();
                    l.copy_range(offset, max, &mut got);
                    let end = (offset + max).min(all.len());
                    assert_eq!(got, all.get(offset..end).unwrap_or(&[]), "step {step}");
                }
            }
            repacked += usize::from(l.chunks.len() < chunks);
            let all = listing_of(&want);
            assert_eq!(bytes_of(&l), all, "step {step}");
            assert_eq!(l.len(), all.len());
            for c in &l.chunks {
                assert!(c.len() <= CHUNK && (c.is_empty() || c.ends_with(b"\0")));
            }
        }
        assert!(repacked > 0, "the run never repacked");
        for n in &want {
            assert!(l.has(n));
        }
        assert!(!l.has("d") && !l.has(""));
    }

    /// Removing children leaves at most about twice the chunks their
    /// bytes fill: repacking bounds the room removals leave.
    #[test]
    fn removals_keep_the_chunks_bounded() {
        let want: Vec<String> = (0..30000).map(|i| format!("{i}")).collect();
        let mut l = Listing::new(&listing_of(&want));
        for n in &want[..29000] {
            assert!(l.remove(n));
            assert!(l.chunks.len() * CHUNK <= 2 * l.len() + 4 * CHUNK + l.len / 2);
        }
        assert_eq!(bytes_of(&l), listing_of(&want[29000..]));
    }

    #[test]
    fn a_reordering_replacement_rebuilds() {
        let mut l = Listing::new(b"a\0b\0c\0");
        l.replace(b"c\0a\0b\0");
        assert!(l.remove("a"));
        assert_eq!(bytes_of(&l), b"c\0b\0");
        assert!(l.remove("b") && l.remove("c"));
        assert_eq!(bytes_of(&l), b"");
    }
}
