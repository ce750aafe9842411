//! Where each domain is mentioned in the tree, so that releasing a domain
//! costs its own nodes, not the store's size.
//!
//! A node mentions domain `d` (not dom0, which is never released) when it
//! is `d`'s or a live (not IGNORE'd) entry of its permissions names `d`.
//! Nodes inherit their parent's permissions, so mentions come in
//! subtrees: the index keeps, per domain, only the tops of those subtrees
//! (a mentioning node whose parent does not mention the domain). From
//! them, a walk that stops at nodes not mentioning the domain reaches
//! every node that does, and few others.
//!
//! Invariant (checked by `Store::check`): every node mentioning `d` is in
//! `tops[d]` or has a parent mentioning `d`. Entries may be stale (a top
//! whose parent came to mention `d` too, or that no longer mentions it);
//! the walk checks each node it visits.
//!
//! The alternative, upstream's lazy check against a domain generation on
//! every read, would need the domain registry in every permission
//! decision (tree operations, transactions, watch events) and still a
//! walk of the store to find a dead domain's nodes.

use crate::store::perms::{Perm, IGNORE};
use rustc_hash::{FxHashMap, FxHashSet};

/// Whether `perms` mention `domid` (see the module's doc).
pub fn mentions(perms: &[Perm], domid: u32) -> bool {
    perms
        .iter()
        .enumerate()
        .any(|(i, p)| p.domid == domid && (i == 0 || p.access & IGNORE == 0))
}

/// The domains (not dom0) `perms` mention; duplicates possible.
pub fn mentioned(perms: &[Perm]) -> impl Iterator<Item = u32> + '_ {
    perms
        .iter()
        .enumerate()
        .filter(|(i, p)| p.domid != 0 && (*i == 0 || p.access & IGNORE == 0))
        .map(|(_, p)| p.domid)
}

/// Per domain, the tops of the subtrees mentioning it.
#[derive(Default)]
pub struct Mentions {
    tops: FxHashMap<u32, FxHashSet<Box<str>>>,
}

impl Mentions {
    pub fn add_top(&mut self, domid: u32, path: &str) {
        let tops = self.tops.entry(domid).or_default();
        if !tops.contains(path) {
            tops.insert(path.into());
        }
    }

    /// `path` is no top of `domid` (gone, or reached through its parent).
    pub fn drop_top(&mut self, domid: u32, path: &str) {
        if let Some(tops) = self.tops.get_mut(&domid) {
            tops.remove(path);
            if tops.is_empty() {
                self.tops.remove(&domid);
            }
        }
    }

    pub fn is_top(&self, domid: u32, path: &str) -> bool {
        self.tops.get(&domid).is_some_and(|t| t.contains(path))
    }

    /// Where a walk for `domid` starts.
    pub fn tops(&self, domid: u32) -> impl Iterator<Item = &str> {
        self.tops.get(&domid).into_iter().flatten().map(|p| &**p)
    }

    /// `domid` is mentioned nowhere any more (it was released).
    pub fn forget(&mut self, domid: u32) {
        self.tops.remove(&domid);
    }

    /// Entries kept, for the memory check.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.tops.values().map(FxHashSet::len).sum()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.tops.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::perms::{Perms, READ};

    #[test]
    fn owner_and_live_entries_mention_ignored_ones_do_not() {
        let mut p = Perms::parse(b"n5\0r6\0b7\0", 3).unwrap();
        assert!(mentions(&p, 5) && mentions(&p, 6) && mentions(&p, 7));
        assert!(!mentions(&p, 8));
        p.0[1].access = READ | IGNORE;
        assert!(!mentions(&p, 6));
        assert_eq!(mentioned(&p).collect::<Vec<_>>(), [5, 7]);
        let dom0 = Perms::parse(b"n0\0r0\0", 2).unwrap();
        assert_eq!(mentioned(&dom0).count(), 0);
    }

    #[test]
    fn tops_are_kept_per_domain_and_forgotten() {
        let mut m = Mentions::default();
        m.add_top(5, "/a");
        m.add_top(5, "/a");
        m.add_top(6, "/a");
        assert_eq!(m.len(), 2);
        m.drop_top(5, "/a");
        assert!(!m.is_top(5, "/a") && m.is_top(6, "/a"));
        assert_eq!(m.tops(5).count(), 0);
        m.forget(6);
        assert!(m.is_empty());
    }
}
