//! The global tree: every node as a packed record (packed_node.rs), a
//! generation counter bumped on every change (transactions use it to
//! detect conflicts), how many nodes each domain owns, and where each
//! domain is mentioned (domain_mentions.rs), so releasing one walks its own nodes.
//! A big directory's children live beside its record (listing.rs), where
//! adding or removing one does not rewrite the whole list.

pub(crate) mod children;
pub(crate) mod domain_mentions;
pub(crate) mod domid_map;
pub(crate) mod listing;
pub(crate) mod listing_delta;
pub(crate) mod node;
pub(crate) mod packed_node;
pub(crate) mod perms;
pub(crate) mod slab;
pub(crate) mod transaction;
pub(crate) mod tree;

use self::listing::Listing;
use self::tree::Tree;
use crate::store::children::Children;
use crate::store::domain_mentions::{mentioned, mentions, Mentions};
use crate::store::domid_map::DomidMap;
use crate::store::listing_delta::ListingDelta;
use crate::store::node::{Node, NodeRef};
use crate::store::packed_node::Record;
use crate::store::perms::{Perm, PermList, Perms, IGNORE};
use crate::wire::path;
use rustc_hash::{FxHashMap, FxHashSet};
use std::cell::Cell;
use std::sync::Arc;

/// The global tree.
pub struct Store {
    /// Every node, keyed by the path inside its record.
    nodes: FxHashSet<Record>,
    /// The children of nodes whose record has them detached: lists longer
    /// than `listing::BIG` bytes. Shared with transactions' copies
    /// (listing_delta.rs): changed in place unless one holds it.
    listings: FxHashMap<Box<str>, Arc<Listing>>,
    /// Upstream's global generation counter: bumped by every write and
    /// delete, transactions' included (hence a Cell: a transaction's view
    /// holds the store shared).
    generation: Cell<u64>,
    /// What each domain owns, its count and bytes side by side: a write
    /// updates both, and two maps missed the cache twice for a domain
    /// among a thousand.
    owned: DomidMap<Owned>,
    mentions: Mentions,
}

/// A domain's nodes: how many, and their bytes (the memory quota's share
/// of the tree, see `NodeRef::memory`).
#[derive(Debug, Default, Clone, Copy)]
struct Owned {
    nodes: usize,
    bytes: usize,
}

/// The nodes releasing some domains touches (see [`Store::mentioning`]).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Mentioning {
    /// Nodes the domains own, outermost first: each goes with its subtree.
    pub owned: Vec<String>,
    /// Nodes whose permission entries name them: those entries stop
    /// granting anything.
    pub named: Vec<String>,
}

impl Default for Store {
    fn default() -> Self {
        Store::new()
    }
}

impl Store {
    /// The tree upstream C xenstored 4.17 starts with: `/`, `/tool`,
    /// `/tool/xenstored` and the special nodes, all `n0`.
    pub fn new() -> Store {
        let mut s = Store {
            nodes: FxHashSet::default(),
            listings: FxHashMap::default(),
            generation: Cell::new(0),
            owned: DomidMap::default(),
            mentions: Mentions::default(),
        };
        let n0 = || Node::new(b"", Perms::owned_by(0));
        let mut root = n0();
        root.add_child("tool");
        let mut tool = n0();
        tool.add_child("xenstored");
        s.put("/", root);
        s.put("/tool", tool);
        s.put("/tool/xenstored", n0());
        // Not part of the tree: no generation, not counted.
        for special in [path::RELEASE_DOMAIN, path::INTRODUCE_DOMAIN] {
            s.nodes.insert(Record::new(special, n0().view()));
        }
        s
    }

    /// @introduceDomain or @releaseDomain (their permissions decide who
    /// gets those events).
    pub fn special(&self, name: &str) -> Option<NodeRef<'_>> {
        self.node(name).filter(|_| name.starts_with('@'))
    }

    pub fn set_special_perms(&mut self, name: &str, perms: Perms) {
        if let Some(mut n) = self.special(name).map(NodeRef::to_node) {
            n.perms = perms;
            self.nodes.replace(Record::new(name, n.view()));
        }
    }

    pub fn node(&self, path: &str) -> Option<NodeRef<'_>> {
        self.nodes.get(path).map(|r| self.joined(r))
    }

    /// A record's node with its children, wherever they are kept.
    fn joined<'s>(&'s self, record: &'s Record) -> NodeRef<'s> {
        let node = record.node();
        if !record.children_detached() {
            return node;
        }
        let children = self
            .listings
            .get(record.path())
            .map_or(Children::Flat(&[]), |l| Children::Listed(l));
        NodeRef { children, ..node }
    }

    /// The record for `node` at `path`: a big list of children is kept
    /// beside it (updated in place when it was already), a small one in it.
    fn pack(&mut self, path: &str, node: NodeRef<'_>) -> Record {
        if node.children.len() <= listing::BIG {
            self.listings.remove(path);
            return Record::new(path, node);
        }
        match self.listings.get_mut(path) {
            Some(l) if node.children == Children::Listed(l) => {}
            Some(l) => Arc::make_mut(l).replace(&node.children.to_vec()),
            None => {
                let listing = Listing::new(&node.children.to_vec());
                self.listings.insert(path.into(), Arc::new(listing));
            }
        }
        Record::detached(path, node)
    }

    /// Whether `name` is one of `path`'s children: an index lookup in a
    /// big directory.
    pub fn has_child(&self, path: &str, name: &str) -> bool {
        match self.nodes.get(path) {
            Some(r) if r.children_detached() => {
                self.listings.get(path).is_some_and(|l| l.has(name))
            }
            Some(r) => r.node().has_child(name),
            None => false,
        }
    }

    /// Edits a big directory's children in place (`edit` says by how many
    /// bytes they grew) and stamps the node with a new generation, as a
    /// rewrite would; false when `path` keeps its children in its record.
    fn edit_listing(&mut self, path: &str, edit: impl FnOnce(&mut Listing) -> isize) -> bool {
        let Some(listing) = self.listings.get_mut(path) else {
            return false;
        };
        let gain = edit(Arc::make_mut(listing));
        let old = self.nodes.take(path).expect("a listing's node exists");
        let node = NodeRef {
            generation: self.next_generation(),
            ..old.node()
        };
        let owner = node.perms.owner();
        self.nodes.insert(Record::detached(path, node));
        self.account(owner, 0, gain);
        true
    }

    /// A big directory's listing, shared: what a transaction's copy of the
    /// node holds instead of copying it. None for a list kept in its record.
    pub fn shared_listing(&self, path: &str) -> Option<Arc<Listing>> {
        self.listings.get(path).cloned()
    }

    /// A transaction's commit of a big directory's copy: its value and
    /// permissions, stamped once as a rewrite is, then the children it
    /// removed and made applied one by one to the list as it is now.
    pub fn commit_children(&mut self, path: &str, value: &[u8], perms: Perms, delta: ListingDelta) {
        self.rewrite(path, value, perms);
        let (removed, made) = delta.changes();
        let removed: Vec<Box<str>> = removed.map(Into::into).collect();
        let made: Vec<Box<str>> = made.map(Into::into).collect();
        // the base no longer shared, its edits stay in place
        drop(delta);
        for name in removed.iter().chain(&made) {
            if self.has_child(path, name) {
                self.splice_child(path, name, false);
            }
        }
        for name in &made {
            self.splice_child(path, name, true);
        }
    }

    /// Adds `name` to `path`'s children or removes it, keeping the node's
    /// generation (the caller stamped it).
    fn splice_child(&mut self, path: &str, name: &str, add: bool) {
        let entry = name.len() as isize + 1;
        if let Some(listing) = self.listings.get_mut(path) {
            let listing = Arc::make_mut(listing);
            let gain = match add {
                true => {
                    listing.add(name);
                    entry
                }
                false => -entry * isize::from(listing.remove(name)),
            };
            let owner = self.nodes.get(path).expect("listed").node().perms.owner();
            self.account(owner, 0, gain);
            return;
        }
        let Some(mut node) = self.nodes.get(path).map(Record::to_node) else {
            return;
        };
        match add {
            true => node.add_child(name),
            false => node.remove_child(name),
        }
        let bytes = node.view().memory(path);
        let record = self.pack(path, node.view());
        let old = self.nodes.replace(record);
        self.replaced(path, old, 0, &node.perms, bytes);
    }

    pub fn generation(&self) -> u64 {
        self.generation.get()
    }

    /// The next generation number.
    pub fn next_generation(&self) -> u64 {
        self.generation.set(self.generation.get() + 1);
        self.generation.get()
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every node of the tree (special nodes excluded), in no order.
    fn tree_nodes(&self) -> impl Iterator<Item = (&str, NodeRef<'_>)> {
        self.nodes
            .iter()
            .map(|r| (r.path(), self.joined(r)))
            .filter(|(p, _)| p.starts_with('/'))
    }

    /// The nodes that own or name one of `domids` (sorted): a walk from
    /// where each is mentioned (domain_mentions.rs), in the number of its nodes,
    /// not the store's.
    pub fn mentioning(&self, domids: &[u32]) -> Mentioning {
        let mut found = Mentioning::default();
        for &d in domids {
            // a top whose parent mentions `d` too is reached from there
            let mut stack: Vec<String> = self
                .mentions
                .tops(d)
                .filter(|&p| !self.parent_mentions(p, d))
                .map(str::to_string)
                .collect();
            while let Some(p) = stack.pop() {
                let Some(n) = self.node(&p) else { continue };
                if !mentions(n.perms, d) {
                    continue;
                }
                stack.extend(n.children().map(|c| path::child(&p, c)));
                if domids.binary_search(&n.perms.owner()).is_ok() {
                    found.owned.push(p);
                } else {
                    found.named.push(p);
                }
            }
        }
        for list in [&mut found.owned, &mut found.named] {
            list.sort_unstable();
            list.dedup();
        }
        found.owned.sort_by_key(|p| p.len());
        found
    }

    /// Released domains' (`domids`, sorted) entries in `named` (from
    /// [`Store::mentioning`]) and in the special nodes stop granting
    /// anything: a new domain reusing the id inherits no rights.
    pub fn ignore_released(&mut self, named: &[String], domids: &[u32]) {
        let specials = [path::RELEASE_DOMAIN, path::INTRODUCE_DOMAIN];
        let named = named.iter().map(String::as_str).chain(specials);
        let released = |p: &Perm| domids.binary_search(&{ p.domid }).is_ok();
        for path in named {
            let Some(node) = self.node(path) else {
                continue;
            };
            if !node.perms[1..].iter().any(released) {
                continue;
            }
            let mut n = node.to_node();
            for p in n.perms.0.iter_mut().skip(1).filter(|p| released(p)) {
                p.access |= IGNORE;
            }
            let record = self.pack(path, n.view());
            self.nodes.replace(record);
        }
        for &d in domids {
            // what still mentions a released domain: `/` if it owned it
            // (never removed), or a node whose removal failed
            let kept: Vec<String> = self
                .mentions
                .tops(d)
                .filter(|p| self.node(p).is_some_and(|n| mentions(n.perms, d)))
                .map(str::to_string)
                .collect();
            self.mentions.forget(d);
            for p in kept {
                self.mentions.add_top(d, &p);
            }
        }
    }

    fn parent_mentions(&self, path: &str, domid: u32) -> bool {
        path != "/"
            && self
                .node(path::parent(path))
                .is_some_and(|n| mentions(n.perms, domid))
    }

    /// Keeps the mentions index true after `path`'s permissions went from
    /// `old` to `new` (a new node: from none), the node stored. The usual
    /// write keeps the permissions and costs one comparison here; a change
    /// of the domains mentioned walks the node's children.
    fn track_mentions(&mut self, path: &str, old: &[Perm], new: &[Perm]) {
        if old == new {
            return;
        }
        // (stored by now: its children are the store's)
        let children: Vec<String> = self
            .node(path)
            .map(|n| n.children().map(|c| path::child(path, c)).collect())
            .unwrap_or_default();
        for d in mentioned(new).filter(|&d| !mentions(old, d)) {
            if !self.parent_mentions(path, d) {
                self.mentions.add_top(d, path);
            }
            // a node made after its children (create is bottom up)
            for c in &children {
                self.mentions.drop_top(d, c);
            }
        }
        for d in mentioned(old).filter(|&d| !mentions(new, d)) {
            self.mentions.drop_top(d, path);
            for c in &children {
                if self.node(c).is_some_and(|n| mentions(n.perms, d)) {
                    self.mentions.add_top(d, c);
                }
            }
        }
    }

    /// Accounts for `path`'s record, now `perms` and `bytes` of memory
    /// (see `NodeRef::memory`), having replaced `old` (whose detached list,
    /// if any, was `old_listing` bytes long) and keeps the mentions index
    /// true.
    fn replaced(
        &mut self,
        path: &str,
        old: Option<Record>,
        old_listing: usize,
        perms: &[Perm],
        bytes: usize,
    ) {
        let (owner, bytes) = (perms.owner(), bytes as isize);
        match &old {
            Some(old) => {
                let old_owner = old.node().perms.owner();
                let old_bytes = (old.node().memory(path) + old_listing) as isize;
                if old_owner != owner {
                    self.account(old_owner, -1, -old_bytes);
                    self.account(owner, 1, bytes);
                } else {
                    self.account(owner, 0, bytes - old_bytes);
                }
            }
            None => self.account(owner, 1, bytes),
        }
        let old_perms = old.as_ref().map_or(&[][..], |r| r.node().perms);
        self.track_mentions(path, old_perms, perms);
    }

    /// Consistency check (CONTROL check): every child exists, every node
    /// is its parent's child, the owner counts add up. Returns problems.
    pub fn check(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut counts: FxHashMap<u32, usize> = FxHashMap::default();
        let mut bytes: FxHashMap<u32, usize> = FxHashMap::default();
        for (p, n) in self.tree_nodes() {
            *counts.entry(n.perms.owner()).or_default() += 1;
            *bytes.entry(n.perms.owner()).or_default() += n.memory(p);
            for c in n.children() {
                if !self.nodes.contains(path::child(p, c).as_str()) {
                    problems.push(format!("{p}: child {c} missing"));
                }
            }
            for d in mentioned(n.perms) {
                if !self.parent_mentions(p, d) && !self.mentions.is_top(d, p) {
                    problems.push(format!("{p}: mentions domain {d}, not indexed"));
                }
            }
            if p != "/" && !self.has_child(path::parent(p), path::basename(p)) {
                problems.push(format!("{p}: not listed by its parent"));
            }
        }
        for (d, n) in &counts {
            if Tree::owned(self, *d) != *n {
                problems.push(format!(
                    "domain {d}: owns {n} nodes, accounted {}",
                    Tree::owned(self, *d)
                ));
            }
        }
        for (d, n) in &bytes {
            if self.memory(*d) != *n {
                problems.push(format!(
                    "domain {d}: owns {n} bytes of nodes, accounted {}",
                    self.memory(*d)
                ));
            }
        }
        problems
    }

    /// Removes a node without counting a generation (a transaction's
    /// commit does that, as upstream's does).
    pub fn unlink(&mut self, path: &str) -> bool {
        match self.nodes.take(path) {
            Some(old) => {
                let bytes = self.joined(&old).memory(path) as isize;
                self.listings.remove(path);
                self.account(old.node().perms.owner(), -1, -bytes);
                for d in mentioned(old.node().perms) {
                    self.mentions.drop_top(d, path);
                }
                true
            }
            None => false,
        }
    }

    /// Bytes of the nodes `domid` owns.
    pub fn memory(&self, domid: u32) -> usize {
        self.owned.get(domid).map_or(0, |o| o.bytes)
    }

    fn account(&mut self, domid: u32, nodes: isize, bytes: isize) {
        let o = self.owned.entry(domid);
        o.nodes = o.nodes.saturating_add_signed(nodes);
        o.bytes = o.bytes.saturating_add_signed(bytes);
    }
}

impl Tree for Store {
    fn get(&mut self, path: &str) -> Option<NodeRef<'_>> {
        self.node(path)
    }

    fn put(&mut self, path: &str, mut node: Node) {
        node.generation = self.next_generation();
        // (a detached list is replaced in place: its length, before)
        let old_listing = self.listings.get(path).map_or(0, |l| l.len());
        let bytes = node.view().memory(path);
        let record = self.pack(path, node.view());
        let old = self.nodes.replace(record);
        self.replaced(path, old, old_listing, &node.perms, bytes);
    }

    fn rewrite(&mut self, path: &str, value: &[u8], perms: Perms) {
        let Some(listing) = self.listings.get(path) else {
            return tree::edit_node(self, path, |n| {
                n.value = value.to_vec();
                n.perms = perms;
            });
        };
        let listing_len = listing.len();
        let node = NodeRef {
            value,
            perms: &perms,
            children: Children::Flat(&[]),
            generation: self.next_generation(),
        };
        let bytes = node.memory(path) + listing_len;
        let old = self.nodes.replace(Record::detached(path, node));
        self.replaced(path, old, listing_len, &perms, bytes);
    }

    fn delete(&mut self, path: &str) {
        if self.unlink(path) {
            self.next_generation();
        }
    }

    fn bump(&mut self) {
        self.next_generation();
    }

    fn has_child(&mut self, path: &str, name: &str) -> bool {
        Store::has_child(self, path, name)
    }

    fn add_child(&mut self, path: &str, name: &str) {
        let added = |l: &mut Listing| {
            l.add(name);
            name.len() as isize + 1
        };
        if !self.edit_listing(path, added) {
            tree::edit_node(self, path, |n| n.add_child(name));
        }
    }

    fn remove_child(&mut self, path: &str, name: &str) {
        let removed = |l: &mut Listing| {
            if l.remove(name) {
                -(name.len() as isize + 1)
            } else {
                0
            }
        };
        if !self.edit_listing(path, removed) {
            tree::edit_node(self, path, |n| n.remove_child(name));
        }
    }

    fn owned(&self, domid: u32) -> usize {
        self.owned.get(domid).map_or(0, |o| o.nodes)
    }

    fn memory(&self, domid: u32) -> usize {
        Store::memory(self, domid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::perms::Identity;
    use crate::store::tree::{read, remove, set_perms, write, Limits};
    use crate::wire::error::{Fail, Reason};
    use crate::wire::XsError;

    const LIMITS: Limits = Limits {
        nodes: 1000,
        node_size: 2048,
        memory: crate::store::tree::UNLIMITED_MEMORY,
    };

    fn guest(domid: u32) -> Identity {
        Identity {
            domid,
            privileged: false,
            target: None,
        }
    }

    fn dom0() -> Identity {
        Identity::dom0()
    }

    #[test]
    fn initial_tree_is_upstreams() {
        let mut s = Store::new();
        assert_eq!(s.get("/").unwrap().children, b"tool\0");
        assert_eq!(s.get("/tool").unwrap().children, b"xenstored\0");
        assert_eq!(s.get("/tool/xenstored").unwrap().value, b"");
        assert_eq!(s.owned(0), 3);
        assert_eq!(s.generation(), 3);
        assert!(s.check().is_empty());
    }

    /// A directory past `listing::BIG` bytes keeps its children beside its
    /// record: creating, removing and rewriting it answer and
    /// account exactly as a small one's list (check() recounts the bytes).
    #[test]
    fn a_big_directory_lists_and_accounts_as_a_small_one() {
        let mut s = Store::new();
        let mut want: Vec<String> = Vec::new();
        let listing = |names: &[String]| -> Vec<u8> {
            names
                .iter()
                .flat_map(|n| [n.as_bytes(), b"\0"].concat())
                .collect()
        };
        for i in 0..2500 {
            let name = format!("{i}");
            write(&mut s, &format!("/d/{name}"), Some(b"v"), &dom0(), &LIMITS).unwrap();
            want.push(name);
        }
        assert!(want.len() * 4 > listing::BIG && s.listings.contains_key("/d"));
        assert_eq!(s.get("/d").unwrap().children, listing(&want));
        for gone in ["0", "1200", "2499"] {
            let g = s.get("/d").unwrap().generation;
            remove(&mut s, &format!("/d/{gone}"), &dom0()).unwrap();
            want.retain(|n| n != gone);
            assert!(
                s.get("/d").unwrap().generation > g,
                "removing {gone} rewrote /d"
            );
            assert!(!s.has_child("/d", gone) && s.has_child("/d", "1"));
        }
        assert_eq!(s.get("/d").unwrap().children, listing(&want));
        write(&mut s, "/d", Some(b"a value"), &dom0(), &LIMITS).unwrap();
        set_perms(&mut s, "/d", Perms::owned_by(3), &dom0(), &LIMITS).unwrap();
        assert_eq!(s.get("/d").unwrap().children, listing(&want));
        assert!(s.check().is_empty(), "{:?}", s.check());
        remove(&mut s, "/d", &dom0()).unwrap();
        assert!(s.listings.is_empty() && s.check().is_empty());
    }

    #[test]
    fn write_creates_ancestors_inheriting_perms() {
        let mut s = Store::new();
        let ch = write(&mut s, "/a/b/c", Some(b"v"), &dom0(), &LIMITS).unwrap();
        assert_eq!(ch.unwrap().path, "/a/b/c");
        assert_eq!(s.get("/a/b").unwrap().children, b"c\0");
        assert_eq!(s.get("/a/b/c").unwrap().value, b"v");
        assert_eq!(s.get("/").unwrap().children, b"tool\0a\0");
        assert!(s.check().is_empty(), "{:?}", s.check());
        // MKDIR on an existing node changes nothing
        let g = s.generation();
        assert_eq!(write(&mut s, "/a/b", None, &dom0(), &LIMITS).unwrap(), None);
        assert_eq!(s.generation(), g);
    }

    #[test]
    fn guests_need_write_access_and_own_what_they_create() {
        let mut s = Store::new();
        write(&mut s, "/local/domain/6", None, &dom0(), &LIMITS).unwrap();
        let err = write(&mut s, "/local/domain/6/x", Some(b"1"), &guest(6), &LIMITS);
        assert_eq!(err, Err(Fail::new(XsError::Eacces, Reason::Perm)));
        set_perms(
            &mut s,
            "/local/domain/6",
            Perms::owned_by(6),
            &dom0(),
            &LIMITS,
        )
        .unwrap();
        write(
            &mut s,
            "/local/domain/6/x/y",
            Some(b"1"),
            &guest(6),
            &LIMITS,
        )
        .unwrap();
        assert_eq!(s.get("/local/domain/6/x").unwrap().perms.owner(), 6);
        assert_eq!(s.owned(6), 3);
        // reading someone else's missing node under an unreadable parent
        assert_eq!(
            read(&mut s, "/tool/nope", &guest(6)).err(),
            Some(Fail::new(XsError::Eacces, Reason::Perm))
        );
        assert_eq!(
            read(&mut s, "/local/domain/6/nope", &guest(6)).err(),
            Some(Fail(XsError::Enoent, None))
        );
        // unprivileged owners cannot give nodes away
        let p = Perms::parse(b"n7\0", 1).unwrap();
        assert_eq!(
            set_perms(&mut s, "/local/domain/6/x", p, &guest(6), &LIMITS),
            Err(Fail::new(XsError::Eperm, Reason::PermOwner))
        );
        assert!(s.check().is_empty(), "{:?}", s.check());
    }

    #[test]
    fn node_quota_is_all_or_nothing() {
        let mut s = Store::new();
        write(&mut s, "/d", None, &dom0(), &LIMITS).unwrap();
        set_perms(&mut s, "/d", Perms::owned_by(6), &dom0(), &LIMITS).unwrap();
        let small = Limits { nodes: 3, ..LIMITS };
        let before = s.generation();
        let err = write(&mut s, "/d/a/b/c", Some(b""), &guest(6), &small);
        assert_eq!(err, Err(Fail::new(XsError::Enospc, Reason::QuotaNodes)));
        assert_eq!(s.generation(), before);
        assert!(s.get("/d/a").is_none());
        write(&mut s, "/d/a/b", Some(b""), &guest(6), &small).unwrap();
        assert_eq!(s.owned(6), 3);
        // dom0 is exempt
        write(&mut s, "/d/a/b/c/d/e", Some(b""), &dom0(), &small).unwrap();
    }

    #[test]
    fn node_size_quota_counts_the_record() {
        let mut s = Store::new();
        write(&mut s, "/d", None, &dom0(), &LIMITS).unwrap();
        set_perms(&mut s, "/d", Perms::owned_by(6), &dom0(), &LIMITS).unwrap();
        let fits = vec![b'x'; 2048 - 24 - 8 - 1];
        write(&mut s, "/d/a", Some(&fits), &guest(6), &LIMITS).unwrap();
        let too_big = vec![b'x'; 2048 - 24 - 8];
        assert_eq!(
            write(&mut s, "/d/a", Some(&too_big), &guest(6), &LIMITS),
            Err(Fail::new(XsError::Enospc, Reason::QuotaNodeSize))
        );
        write(&mut s, "/d/a", Some(&[b'x'; 4000]), &dom0(), &LIMITS).unwrap();
    }

    #[test]
    fn remove_is_recursive_deepest_first() {
        let mut s = Store::new();
        write(&mut s, "/a/b/c", Some(b""), &dom0(), &LIMITS).unwrap();
        write(&mut s, "/a/d", Some(b""), &dom0(), &LIMITS).unwrap();
        let ch = remove(&mut s, "/a", &dom0()).unwrap();
        let paths: Vec<(&str, bool)> = ch.iter().map(|c| (c.path.as_str(), c.exact)).collect();
        assert_eq!(
            paths,
            [
                ("/a/b/c", true),
                ("/a/b", true),
                ("/a/d", true),
                ("/a", false)
            ]
        );
        assert!(s.get("/a").is_none() && s.get("/a/b/c").is_none());
        assert_eq!(s.get("/").unwrap().children, b"tool\0");
        // missing node with existing parent: fine; missing parent: ENOENT
        assert_eq!(remove(&mut s, "/zz", &dom0()).unwrap(), vec![]);
        assert_eq!(
            remove(&mut s, "/zz/y", &dom0()),
            Err(Fail(XsError::Enoent, None))
        );
        assert_eq!(
            remove(&mut s, "/", &dom0()).err().unwrap().0,
            XsError::Einval
        );
        assert!(s.check().is_empty(), "{:?}", s.check());
        assert_eq!(s.owned(0), 3);
    }

    /// Brute force: the nodes mentioning `d`, owned by it or not.
    fn walk_all(s: &Store, d: u32) -> (Vec<String>, Vec<String>) {
        let (mut owned, mut named): (Vec<String>, Vec<String>) = (vec![], vec![]);
        for (p, n) in s.tree_nodes().filter(|(_, n)| mentions(n.perms, d)) {
            if n.perms.owner() == d {
                owned.push(p.to_string());
            } else {
                named.push(p.to_string());
            }
        }
        owned.sort();
        named.sort();
        (owned, named)
    }

    /// Random writes, permission changes and removals by dom0 and guests
    /// over a small tree, with releases: after each step the mentions index
    /// holds its invariant (`check`), and a release finds exactly what a
    /// walk of the whole store finds.
    #[test]
    fn release_finds_what_a_whole_walk_finds() {
        let mut rnd = crate::test_rng::below(0x9e37_79b9_7f4a_7c15_u64);
        let mut s = Store::new();
        let names = ["a", "b", "c"];
        // how often a release found something of each kind, the tree's size
        let (mut owned_seen, mut named_seen, mut biggest) = (0, 0, 0);
        for step in 0..4000 {
            // `/` too: a domain may own it, and it is never removed
            let depth = rnd(5) as usize;
            let path: String = (0..depth)
                .map(|_| format!("/{}", names[rnd(3) as usize]))
                .collect();
            let path = if path.is_empty() { "/".into() } else { path };
            let d = rnd(5) as u32;
            let who = if d == 0 { dom0() } else { guest(d) };
            match rnd(6) {
                0 | 1 => drop(write(&mut s, &path, Some(b"v"), &who, &LIMITS)),
                2 | 3 => {
                    let entries = rnd(3);
                    let mut text = format!("n{}\0", rnd(5));
                    for _ in 0..entries {
                        text += &format!("r{}\0", rnd(5));
                    }
                    let p = Perms::parse(text.as_bytes(), entries as usize + 1).unwrap();
                    drop(set_perms(&mut s, &path, p, &dom0(), &LIMITS));
                }
                4 => drop(remove(&mut s, &path, &who)),
                _ => {
                    let dying = [1 + rnd(4) as u32];
                    let (mut owned, named) = walk_all(&s, dying[0]);
                    let mut found = s.mentioning(&dying);
                    assert_eq!(found.named, named, "step {step}");
                    found.owned.sort();
                    owned.sort();
                    assert_eq!(found.owned, owned, "step {step}");
                    owned_seen += usize::from(!owned.is_empty());
                    named_seen += usize::from(!named.is_empty());
                    for p in s.mentioning(&dying).owned {
                        if p != "/" && s.node(&p).is_some() {
                            remove(&mut s, &p, &dom0()).unwrap();
                        }
                    }
                    s.ignore_released(&found.named, &dying);
                    let left = walk_all(&s, dying[0]);
                    assert!(left.1.is_empty(), "step {step}: {left:?}");
                    assert!(left.0.iter().all(|p| p == "/"), "step {step}: {left:?}");
                }
            }
            assert!(s.check().is_empty(), "step {step}: {:?}", s.check());
            biggest = biggest.max(s.len());
        }
        assert!(
            owned_seen > 50 && named_seen > 50 && biggest > 20,
            "the walk saw too little: {owned_seen} {named_seen} {biggest}"
        );
    }

    #[test]
    fn a_released_domains_entries_grant_nothing_and_tops_go() {
        let mut s = Store::new();
        write(&mut s, "/vm/x/name", Some(b"g"), &dom0(), &LIMITS).unwrap();
        let p = Perms::parse(b"n0\0r7\0", 2).unwrap();
        set_perms(&mut s, "/vm/x", p, &dom0(), &LIMITS).unwrap();
        write(&mut s, "/vm/x/name/deeper", Some(b"g"), &dom0(), &LIMITS).unwrap();
        assert_eq!(read(&mut s, "/vm/x", &guest(7)).unwrap().value, b"");
        let found = s.mentioning(&[7]);
        assert_eq!(found.owned, Vec::<String>::new());
        assert_eq!(
            found.named,
            ["/vm/x"],
            "children made before the change keep their perms"
        );
        s.ignore_released(&found.named, &[7]);
        assert_eq!(
            read(&mut s, "/vm/x", &guest(7)).err(),
            Some(Fail::new(XsError::Eacces, Reason::Perm))
        );
        assert!(s.mentions.is_empty());
        assert!(s.check().is_empty(), "{:?}", s.check());
    }
}
