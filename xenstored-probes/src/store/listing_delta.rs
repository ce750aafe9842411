//! A transaction's copy of a big directory's children: the store's
//! listing as the transaction last saw it (shared, not copied: the store
//! copies its listing before changing it while a transaction holds it)
//! and the transaction's own additions and removals. Reads merge them on
//! the fly; a commit applies the removals and additions child by child to
//! the store's listing as it is then, so neither a transaction's first look
//! at the directory nor its commit costs the listing's length. A
//! DIRECTORY_PART page copies its own bytes: where the removed entries lie
//! in the store's listing is found once after a change (a search of each
//! one's chunk), and a page's offset maps through them by binary search.

use crate::store::listing::{find_child, Listing};
use rustc_hash::FxHashSet;
use std::cell::OnceCell;
use std::sync::Arc;

#[derive(Clone, Debug)]
pub struct ListingDelta {
    base: Arc<Listing>,
    /// Names hidden from `base`: removed here, or made again here (then
    /// also in `added`, at the end of the list).
    removed: FxHashSet<Box<str>>,
    /// Names made here, NUL-terminated, in the order made.
    added: Vec<u8>,
    /// Bytes of the merged list.
    len: usize,
    /// The entries of `base` that `removed` hides, in list order; found at
    /// the first page read after `removed` or `base` changed.
    holes: OnceCell<Vec<Hole>>,
}

/// An entry of the base hidden in the merged list.
#[derive(Clone, Copy, Debug)]
struct Hole {
    /// Where it starts in the base.
    at: usize,
    /// Its bytes, NUL included.
    len: usize,
    /// Bytes of the holes before it.
    hidden_before: usize,
}

impl Hole {
    /// Where the base's entry after it lands in the merged list.
    fn merged_at(&self) -> usize {
        self.at - self.hidden_before
    }
}

impl ListingDelta {
    pub fn new(base: Arc<Listing>) -> ListingDelta {
        ListingDelta {
            len: base.len(),
            base,
            removed: FxHashSet::default(),
            added: Vec::new(),
            holes: OnceCell::new(),
        }
    }

    /// The store's listing this copy merges over.
    pub fn base(&self) -> &Arc<Listing> {
        &self.base
    }

    /// Whether nothing was added or removed: the list is `base` itself.
    pub fn is_base(&self) -> bool {
        self.removed.is_empty() && self.added.is_empty()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn has(&self, name: &str) -> bool {
        find_child(&self.added, name).is_some()
            || (!self.removed.contains(name) && self.base.has(name))
    }

    /// Appends `name` (the caller checked it is not listed).
    pub fn add(&mut self, name: &str) {
        if self.base.has(name) && self.removed.insert(name.into()) {
            self.len -= name.len() + 1;
            self.holes.take();
        }
        self.added.extend_from_slice(name.as_bytes());
        self.added.push(0);
        self.len += name.len() + 1;
    }

    pub fn remove(&mut self, name: &str) {
        if let Some(at) = find_child(&self.added, name) {
            self.added.drain(at..at + name.len() + 1);
            self.len -= name.len() + 1;
        } else if self.base.has(name) && self.removed.insert(name.into()) {
            self.len -= name.len() + 1;
            self.holes.take();
        }
    }

    /// The same additions and removals over `base` (the store's listing
    /// now): a child made here that the store has too comes once, last.
    pub fn rebase(&mut self, base: Arc<Listing>) {
        self.holes.take();
        let made: Vec<Box<str>> = names(&self.added).map(Into::into).collect();
        self.removed.extend(made);
        self.base = base;
        let hidden: usize = (self.removed.iter())
            .filter(|n| self.base.has(n))
            .map(|n| n.len() + 1)
            .sum();
        self.len = self.base.len() - hidden + self.added.len();
    }

    /// The entries (each a name and its NUL) whose concatenation is the
    /// merged list.
    pub fn entries(&self) -> impl Iterator<Item = &[u8]> {
        let kept = self
            .base
            .chunks()
            .flat_map(|c| c.split_inclusive(|&b| b == 0))
            .filter(|e| {
                let name = std::str::from_utf8(&e[..e.len() - 1]).unwrap_or("");
                self.removed.is_empty() || !self.removed.contains(name)
            });
        kept.chain((!self.added.is_empty()).then_some(self.added.as_slice()))
    }

    /// Appends up to `max` bytes of the merged list from byte `offset`:
    /// the base's bytes between the holes from there, then what was added.
    pub fn copy_range(&self, offset: usize, max: usize, out: &mut Vec<u8>) {
        let kept = self.len - self.added.len();
        let mut left = max;
        if offset < kept {
            let holes = self.holes.get_or_init(|| self.find_holes());
            let passed = holes.partition_point(|h| h.merged_at() <= offset);
            let mut at = offset
                + holes[..passed]
                    .last()
                    .map_or(0, |h| h.hidden_before + h.len);
            let mut next = holes[passed..].iter();
            let mut hole = next.next();
            while left > 0 && at < self.base.len() {
                let end = hole.map_or(self.base.len(), |h| h.at);
                let n = (end - at).min(left);
                self.base.copy_range(at, n, out);
                (left, at) = (left - n, at + n);
                if let Some(h) = hole.filter(|h| h.at == at) {
                    at += h.len;
                    hole = next.next();
                }
            }
        }
        let rest = self.added.get(offset.saturating_sub(kept)..).unwrap_or(&[]);
        out.extend_from_slice(&rest[..rest.len().min(left)]);
    }

    fn find_holes(&self) -> Vec<Hole> {
        let mut found: Vec<(usize, usize)> = (self.removed.iter())
            .filter_map(|n| Some((self.base.offset_of(n)?, n.len() + 1)))
            .collect();
        found.sort_unstable();
        let mut hidden_before = 0;
        found
            .into_iter()
            .map(|(at, len)| {
                let hole = Hole {
                    at,
                    len,
                    hidden_before,
                };
                hidden_before += len;
                hole
            })
            .collect()
    }

    /// What a commit applies: the names to take out of the store's list
    /// (if there), then those to append, in order.
    pub fn changes(&self) -> (impl Iterator<Item = &str>, impl Iterator<Item = &str>) {
        (self.removed.iter().map(|n| &**n), names(&self.added))
    }
}

fn names(bytes: &[u8]) -> impl Iterator<Item = &str> {
    bytes
        .split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| std::str::from_utf8(n).unwrap_or(""))
}
