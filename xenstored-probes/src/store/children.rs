//! A node's list of children wherever the tree keeps it: NUL-terminated
//! names in creation order, contiguous in a record or a node being
//! edited, in chunks beside the record of a big directory (listing.rs).
//! Readers see one list of bytes either way; only a reply or a copy
//! concatenates the chunks. A transaction's copy of a big directory is
//! the store's listing merged with its own changes (listing_delta.rs).

use crate::store::listing::{find_child, Listing};
use crate::store::listing_delta::ListingDelta;
use std::fmt;

#[derive(Clone, Copy)]
pub enum Children<'a> {
    Flat(&'a [u8]),
    Listed(&'a Listing),
    Delta(&'a ListingDelta),
}

impl<'a> Children<'a> {
    /// Bytes of the whole list.
    pub fn len(self) -> usize {
        match self {
            Children::Flat(bytes) => bytes.len(),
            Children::Listed(l) => l.len(),
            Children::Delta(d) => d.len(),
        }
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    pub fn has(self, name: &str) -> bool {
        match self {
            Children::Flat(bytes) => find_child(bytes, name).is_some(),
            Children::Listed(l) => l.has(name),
            Children::Delta(d) => d.has(name),
        }
    }

    /// Pieces of whole entries whose concatenation is the list.
    pub fn chunks(self) -> impl Iterator<Item = &'a [u8]> {
        let (flat, listed, delta) = match self {
            Children::Flat(bytes) => (Some(bytes), None, None),
            Children::Listed(l) => (None, Some(l.chunks()), None),
            Children::Delta(d) => (None, None, Some(d.entries())),
        };
        let listed = listed.into_iter().flatten();
        (flat.into_iter().chain(listed)).chain(delta.into_iter().flatten())
    }

    /// The child names, in list order.
    pub fn names(self) -> impl Iterator<Item = &'a str> {
        self.chunks().flat_map(|c| {
            c.split(|&b| b == 0)
                .filter(|n| !n.is_empty())
                .map(|n| std::str::from_utf8(n).unwrap_or(""))
        })
    }

    pub fn to_vec(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        self.extend_into(&mut out);
        out
    }

    pub fn extend_into(self, out: &mut Vec<u8>) {
        for c in self.chunks() {
            out.extend_from_slice(c);
        }
    }

    /// Appends up to `max` bytes of the list from byte `offset` to `out`.
    pub fn copy_range(self, offset: usize, max: usize, out: &mut Vec<u8>) {
        match self {
            Children::Flat(bytes) => {
                let rest = bytes.get(offset..).unwrap_or(&[]);
                out.extend_from_slice(&rest[..rest.len().min(max)]);
            }
            Children::Listed(l) => l.copy_range(offset, max, out),
            Children::Delta(d) => d.copy_range(offset, max, out),
        }
    }

    /// Whether the list is exactly `bytes`, compared piece by piece.
    fn is(self, bytes: &[u8]) -> bool {
        if self.len() != bytes.len() {
            return false;
        }
        let mut rest = bytes;
        self.chunks().all(|c| {
            let (head, tail) = rest.split_at(c.len());
            rest = tail;
            head == c
        })
    }
}

impl PartialEq for Children<'_> {
    fn eq(&self, other: &Children<'_>) -> bool {
        match (*self, *other) {
            (a, Children::Flat(b)) | (Children::Flat(b), a) => a.is(b),
            (Children::Listed(a), Children::Listed(b)) => {
                std::ptr::eq(a, b) || self.to_vec() == other.to_vec()
            }
            // a transaction's untouched copy of the store's listing
            (Children::Delta(d), Children::Listed(l))
            | (Children::Listed(l), Children::Delta(d))
                if d.is_base() && std::ptr::eq(&**d.base(), l) =>
            {
                true
            }
            (a, b) => a.len() == b.len() && a.to_vec() == b.to_vec(),
        }
    }
}

impl Eq for Children<'_> {}

impl<T: AsRef<[u8]> + ?Sized> PartialEq<T> for Children<'_> {
    fn eq(&self, other: &T) -> bool {
        self.is(other.as_ref())
    }
}

impl fmt::Debug for Children<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(&self.to_vec()))
    }
}

/// The delta's own tests, here because they read it through `Children`
/// (which is built on it).
#[cfg(test)]
mod delta_tests {
    use super::Children;
    use crate::store::listing::Listing;
    use crate::store::listing_delta::ListingDelta;
    use rustc_hash::FxHashSet;
    use std::sync::Arc;

    fn listing(names: &[String]) -> Vec<u8> {
        names
            .iter()
            .flat_map(|n| [n.as_bytes(), b"\0"].concat())
            .collect()
    }

    /// Random additions, removals and rebases against a model: the list
    /// is the base less what was removed or made here, then what was made,
    /// in order; every name's presence, the length, and pages from every
    /// offset agree.
    #[test]
    fn merges_as_the_model_does() {
        let mut rnd = crate::test_rng::below(0x9e37_79b9_7f4a_7c15_u64);
        let pool: Vec<String> = (0..40)
            .map(|i| format!("n{i}{}", "x".repeat(i % 7)))
            .collect();
        let mut base: Vec<String> = pool[..20].to_vec();
        let mut delta = ListingDelta::new(Arc::new(Listing::new(&listing(&base))));
        let (mut removed, mut made) = (FxHashSet::<String>::default(), Vec::<String>::new());
        for step in 0..3000 {
            let name = &pool[rnd(40) as usize];
            let view: Vec<String> = (base.iter())
                .filter(|n| !removed.contains(*n) && !made.contains(n))
                .chain(&made)
                .cloned()
                .collect();
            match rnd(10) {
                0..=3 if !view.contains(name) => {
                    delta.add(name);
                    made.push(name.clone());
                }
                // (a tree removes a child its parent lists)
                4..=6 if view.contains(name) => {
                    delta.remove(name);
                    made.retain(|m| m != name);
                    removed.insert(name.clone());
                }
                7 => {
                    // the store changed meanwhile: a child gone, one made
                    base.retain(|n| n != name);
                    let new = &pool[rnd(40) as usize];
                    if !base.contains(new) {
                        base.push(new.clone());
                    }
                    delta.rebase(Arc::new(Listing::new(&listing(&base))));
                }
                _ => {}
            }
            let view: Vec<String> = (base.iter())
                .filter(|n| !removed.contains(*n) && !made.contains(n))
                .chain(&made)
                .cloned()
                .collect();
            let want = listing(&view);
            let got = Children::Delta(&delta);
            assert_eq!(got.to_vec(), want, "step {step}");
            assert_eq!(got.len(), want.len(), "step {step}");
            for n in &pool {
                assert_eq!(got.has(n), view.contains(n), "step {step}: {n}");
            }
            let offset = rnd(want.len() as u64 + 2) as usize;
            let max = [1, 13, want.len() + 1][rnd(3) as usize];
            let mut page = Vec::new();
            got.copy_range(offset, max, &mut page);
            let rest = want.get(offset..).unwrap_or(&[]);
            assert_eq!(
                page,
                &rest[..rest.len().min(max)],
                "step {step} at {offset}"
            );
        }
        assert!(!made.is_empty() && !removed.is_empty());
    }

    #[test]
    fn an_untouched_copy_is_the_stores_list_without_comparing() {
        let shared = Arc::new(Listing::new(b"a\0b\0"));
        let mut delta = ListingDelta::new(shared.clone());
        assert_eq!(Children::Delta(&delta), Children::Listed(&shared));
        assert!(delta.is_base());
        delta.add("c");
        delta.remove("c");
        assert_eq!(Children::Delta(&delta), Children::Listed(&shared));
        delta.remove("a");
        assert_ne!(Children::Delta(&delta), Children::Listed(&shared));
        assert_eq!(Children::Delta(&delta), *b"b\0");
    }
}
