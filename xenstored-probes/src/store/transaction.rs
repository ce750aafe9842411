//! Transactions: a transaction sees its own writes; reads repeat (a node
//! keeps the value, or the absence, it had when the transaction first
//! touched it; untouched nodes are read live); abort discards everything.
//! Every node it touches is remembered as the store had it at first touch,
//! and a commit fails with EAGAIN only when something the transaction
//! could have seen of one changed meanwhile: its existence or permissions,
//! its value when it read it, its list of children when it listed it
//! (DIRECTORY, or removing what is below). So transactions that create
//! different children of one parent, or write disjoint nodes, both commit
//! (C xenstored fails the later one: it compares whole nodes), and the
//! committed history stays serializable: each commit is as if its
//! transaction ran alone at that moment. A commit applies the children it
//! added and removed to the parent's current list. On commit, watches fire
//! once per changed node, in the order the transaction first touched them.
//! A big directory's copy shares the store's listing and keeps only the
//! children added and removed (listing_delta.rs).

use crate::store::children::Children;
use crate::store::listing_delta::ListingDelta;
use crate::store::node::{Node, NodeRef};
use crate::store::perms::{PermList, Perms};
use crate::store::tree::{self, Aspect, Change, Tree};
use crate::store::Store;
use crate::wire::error::Reason;
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

/// A transaction's copy of a node: a big directory's children (past
/// `listing::BIG`, kept beside the store's record) are the store's
/// listing and a delta, not in `node`.
#[derive(Clone, Debug)]
struct NodeCopy {
    node: Node,
    big: Option<Box<ListingDelta>>,
}

impl NodeCopy {
    fn whole(node: Node) -> NodeCopy {
        NodeCopy { node, big: None }
    }

    /// The store's node at `path` as a transaction first sees it.
    fn of(store: &Store, path: &str) -> Option<NodeCopy> {
        let now = store.node(path)?;
        Some(match store.shared_listing(path) {
            Some(listing) => NodeCopy {
                node: NodeRef {
                    children: Children::Flat(&[]),
                    ..now
                }
                .to_node(),
                big: Some(Box::new(ListingDelta::new(listing))),
            },
            None => NodeCopy::whole(now.to_node()),
        })
    }

    fn view(&self) -> NodeRef<'_> {
        let node = self.node.view();
        match &self.big {
            Some(delta) => NodeRef {
                children: Children::Delta(delta),
                ..node
            },
            None => node,
        }
    }

    /// Its children as bytes in `node` (a list no longer big in the store).
    fn flatten(&mut self) {
        if let Some(delta) = self.big.take() {
            self.node.children = Children::Delta(&delta).to_vec();
        }
    }
}

#[derive(Debug, Default)]
pub struct Transaction {
    /// Nodes as this transaction sees them; None = deleted here.
    overlay: FxHashMap<String, Option<NodeCopy>>,
    /// Every node touched, as the store had it at first access (None =
    /// missing; its generation is what commit checks), and the order of
    /// first access. Reads repeat, as in upstream, but commit never writes
    /// these back.
    read: FxHashMap<String, (Option<NodeCopy>, usize)>,
    /// Nodes whose value (read) or list of children (listed) an answer
    /// depended on.
    read_values: FxHashSet<String>,
    listed: FxHashSet<String>,
    /// Existing nodes whose value it set (or that it deleted).
    set_values: FxHashSet<String>,
    /// Nodes it deleted (if it made them again, they are new).
    deleted: FxHashSet<String>,
    owned_delta: FxHashMap<u32, isize>,
    /// Changes made, to fire watches for on commit.
    pub changes: Vec<Change>,
    /// Why a request in it was refused in a way C xenstored cannot undo
    /// (past the transaction-nodes quota, or a write past the memory
    /// quota): the commit fails (ENOMEM), as upstream's `trans->fail`.
    pub failed: Option<Reason>,
    /// Bytes of the node copies it keeps (C xenstored keeps one record per
    /// touched node, charged to the transaction's owner).
    bytes: usize,
    /// What C's key for a copy adds to the path: "<generation>/".
    key_prefix: usize,
}

/// A commit lost against a concurrent change to this node.
#[derive(Debug, PartialEq, Eq)]
pub struct Conflict(pub String);

impl Transaction {
    /// A transaction started at store generation `generation`: C xenstored
    /// keys its copies "<generation>/<path>", and charges the key.
    pub fn stamped(generation: u64) -> Transaction {
        Transaction {
            key_prefix: generation.to_string().len() + 1,
            ..Transaction::default()
        }
    }

    /// What keeping `node` as the copy of `path` costs.
    fn copy_cost(&self, path: &str, node: &NodeCopy) -> usize {
        self.key_prefix + node.view().memory(path)
    }

    pub fn view<'a>(&'a mut self, store: &'a Store) -> TxTree<'a> {
        self.view_limited(store, usize::MAX, 0)
    }

    /// The view of one request of domain `owner` that may touch at most
    /// `limit` distinct nodes in all (the transaction-nodes quota, checked
    /// at each first access as upstream's access_node does).
    pub fn view_limited<'a>(
        &'a mut self,
        store: &'a Store,
        limit: usize,
        owner: u32,
    ) -> TxTree<'a> {
        TxTree {
            store,
            tx: self,
            limit,
            refused: false,
            owner,
        }
    }

    /// Nodes touched so far.
    pub fn accessed(&self) -> usize {
        self.read.len()
    }

    /// Bytes of node copies held (charged to its owner's memory quota).
    pub fn memory(&self) -> usize {
        self.bytes
    }

    /// The bytes `path`'s copy holds now.
    fn held(&self, path: &str) -> usize {
        let copy = match self.overlay.get(path) {
            Some(n) => n.as_ref(),
            None => self.read.get(path).and_then(|r| r.0.as_ref()),
        };
        copy.map_or(0, |n| self.copy_cost(path, n))
    }

    /// Applies the transaction to the store, or reports the first conflict.
    /// Returns the changes to fire watches for: one per node that existed
    /// before or after, in first-access order, with its pre-commit perms.
    pub fn commit(mut self, store: &mut Store) -> Result<Vec<Change>, Conflict> {
        for (path, (seen, _)) in &self.read {
            if self.stale(path, seen.as_ref().map(NodeCopy::view), store.node(path)) {
                return Err(Conflict(path.clone()));
            }
        }
        let order = |p: &str| self.read.get(p).map_or(usize::MAX, |a| a.1);
        let mut fires: Vec<(usize, Change)> = Vec::new();
        let mut seen: FxHashMap<&str, usize> = FxHashMap::default();
        for c in &self.changes {
            match seen.get(c.path.as_str()) {
                Some(&i) => fires[i].1.exact = c.exact,
                None => {
                    seen.insert(&c.path, fires.len());
                    let before = store.node(&c.path).map(|n| Perms(n.perms.to_vec()));
                    let change = Change {
                        path: c.path.clone(),
                        exact: c.exact,
                        old_perms: before,
                    };
                    fires.push((order(&c.path), change));
                }
            }
        }
        // The lists of children merged before the overlay is taken apart:
        // merging asks it what became of each child.
        let mut lists: FxHashMap<String, Vec<u8>> = FxHashMap::default();
        for (path, node) in &self.overlay {
            let seen = self.read.get(path).and_then(|r| r.0.as_ref());
            if let (Some(seen), Some(mine), Some(now)) = (seen, node, store.node(path)) {
                if mine.big.is_none() {
                    let merged = self.merged_children(path, &seen.view(), &mine.view(), now);
                    lists.insert(path.clone(), merged);
                }
            }
        }
        let mut writes: Vec<(usize, String, Option<NodeCopy>)> = std::mem::take(&mut self.overlay)
            .into_iter()
            .map(|(p, n)| (order(&p), p, n))
            .collect();
        writes.sort_by_key(|w| w.0);
        // its copies of the store's listings let go: edits stay in place
        self.read.clear();
        for (_, path, node) in writes {
            match node {
                Some(NodeCopy {
                    node: n,
                    big: Some(delta),
                }) => {
                    // a big copy exists in the store (else the commit
                    // conflicted): what it did not set is the store's now
                    let value = match self.set_values.contains(&path) {
                        true => n.value,
                        false => store.node(&path).expect("seen").value.to_vec(),
                    };
                    store.commit_children(&path, &value, n.perms, *delta);
                }
                Some(NodeCopy { node: mut n, .. }) => {
                    if let Some(children) = lists.remove(&path) {
                        // what it did not set is the store's now (the
                        // permissions are the same, or the commit failed)
                        if !self.set_values.contains(&path) {
                            let now = store.node(&path).expect("merged: it exists");
                            n.value = now.value.to_vec();
                        }
                        n.children = children;
                    }
                    store.put(&path, n)
                }
                None => {
                    store.unlink(&path);
                }
            }
        }
        fires.retain(|(_, c)| c.old_perms.is_some() || store.node(&c.path).is_some());
        fires.sort_by_key(|f| f.0);
        Ok(fires.into_iter().map(|f| f.1).collect())
    }
}

impl Transaction {
    /// Whether what the transaction may have seen of `path` (it saw
    /// `seen`) differs in the store's node `now`.
    fn stale(&self, path: &str, seen: Option<NodeRef<'_>>, now: Option<NodeRef<'_>>) -> bool {
        match (seen, now) {
            (None, None) => false,
            (Some(seen), Some(now)) => {
                seen.generation != now.generation
                    && (seen.perms != now.perms
                        || (seen.value != now.value && self.read_values.contains(path))
                        || (self.listed.contains(path) && seen.children != now.children))
            }
            _ => true,
        }
    }
}

/// What a transaction did to a child of a node it rewrote.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Left where it is in the list (maybe its value changed).
    Kept,
    Removed,
    /// Created, or removed and created again: at the end of the list.
    Made,
}

impl Transaction {
    fn fate(&self, parent: &str, name: &str) -> Fate {
        let child = crate::wire::path::child(parent, name);
        let existed = self.read.get(&child).map(|r| r.0.is_some());
        match (self.overlay.get(&child), existed) {
            (Some(None), Some(true)) => Fate::Removed,
            (Some(Some(_)), Some(false)) => Fate::Made,
            (Some(Some(_)), Some(true)) if self.deleted.contains(&child) => Fate::Made,
            _ => Fate::Kept,
        }
    }

    /// The children of `path` it rewrote (it saw `seen`, made `mine`)
    /// after the commit: as it made them when nobody else changed them;
    /// else the store's list `now` less those it removed (or made again),
    /// then those it made, in its order, as if it ran now.
    fn merged_children(
        &self,
        path: &str,
        seen: &NodeRef<'_>,
        mine: &NodeRef<'_>,
        now: NodeRef<'_>,
    ) -> Vec<u8> {
        if now.children == seen.children {
            return mine.children.to_vec();
        }
        // Only a child it touched can be other than Kept: those are found
        // once each among its nodes, not looked up for every child of a big
        // directory (backend/vbd lists every domain's).
        let touched: FxHashMap<&str, Fate> = self
            .overlay
            .keys()
            .filter(|p| p.as_str() != "/" && crate::wire::path::parent(p) == path)
            .map(|p| crate::wire::path::basename(p))
            .map(|name| (name, self.fate(path, name)))
            .filter(|(_, fate)| *fate != Fate::Kept)
            .collect();
        let fate = |c: &str| touched.get(c).copied().unwrap_or(Fate::Kept);
        let mut merged = Vec::with_capacity(now.children.len() + mine.children.len());
        let mut push = |c: &str| {
            merged.extend_from_slice(c.as_bytes());
            merged.push(0);
        };
        for c in now.children().filter(|c| fate(c) == Fate::Kept) {
            push(c);
        }
        // Each made child where it last comes in its list: a copy of the
        // list older than a child's removal elsewhere still names it
        // before the transaction made it again.
        let mut seen_made = FxHashSet::default();
        let mut made: Vec<&str> = mine.children().collect();
        made.reverse();
        made.retain(|c| fate(c) == Fate::Made && seen_made.insert(*c));
        for c in made.into_iter().rev() {
            push(c);
        }
        merged
    }
}

/// The store as one transaction sees it.
pub struct TxTree<'a> {
    store: &'a Store,
    tx: &'a mut Transaction,
    limit: usize,
    refused: bool,
    /// The domain whose connection runs it (charged for its copies).
    owner: u32,
}

impl TxTree<'_> {
    /// Whether this request touched a node past the limit: it fails with
    /// ENOSPC, and nothing past that point was recorded or changed.
    pub fn refused(&self) -> bool {
        self.refused
    }

    fn visible_owner(&mut self, path: &str) -> Option<u32> {
        self.get(path).map(|n| n.perms.owner())
    }

    fn account(&mut self, domid: u32, delta: isize) {
        *self.tx.owned_delta.entry(domid).or_default() += delta;
    }
}

impl TxTree<'_> {
    /// `path`'s list of children is about to be answered for the first
    /// time: the transaction's copy takes the store's list as it is now
    /// (with its own additions and removals), not as it was when the
    /// transaction first touched the node (adding or removing a child
    /// reads the parent). Nothing answered so far depended on the list, and
    /// the commit checks it from here on, so the history stays serializable
    /// while a conflict needs a change between this listing and the commit,
    /// not since the first touch: libxl's path cleanup removes a domain's
    /// `backend/<type>/<domid>`, reads the parent, then lists it.
    fn list_from_now(&mut self, path: &str) {
        // removed here: the listing fails, and the commit checks existence
        if matches!(self.tx.overlay.get(path), Some(None)) || self.rebase_listing(path) {
            return;
        }
        let (Some((Some(seen), _)), Some(now)) = (self.tx.read.get(path), self.store.node(path))
        else {
            return;
        };
        if now.children == seen.view().children {
            return;
        }
        let merged = match self.tx.overlay.get(path) {
            Some(Some(mine)) => {
                let merged = self
                    .tx
                    .merged_children(path, &seen.view(), &mine.view(), now);
                Some(merged)
            }
            _ => None,
        };
        let held = self.tx.held(path);
        if let (Some(list), Some(Some(mine))) = (merged, self.tx.overlay.get_mut(path)) {
            mine.node.children = list;
        }
        if let Some((Some(seen), _)) = self.tx.read.get_mut(path) {
            seen.node.children = now.children.to_vec();
        }
        self.tx.bytes = self.tx.bytes - held + self.tx.held(path);
    }

    /// `list_from_now` for a big directory's copies while the store keeps
    /// its list beside the record: they merge over the store's listing of
    /// now, nothing copied. False when the general way is to do it (the
    /// copies are made contiguous for it).
    fn rebase_listing(&mut self, path: &str) -> bool {
        let Some((Some(seen), _)) = self.tx.read.get(path) else {
            return false;
        };
        let Some(base) = seen.big.as_ref().map(|d| d.base().clone()) else {
            return false;
        };
        let mine_whole = matches!(self.tx.overlay.get(path), Some(Some(m)) if m.big.is_none());
        let Some(now) = self.store.shared_listing(path).filter(|_| !mine_whole) else {
            if let Some((Some(seen), _)) = self.tx.read.get_mut(path) {
                seen.flatten();
            }
            if let Some(Some(mine)) = self.tx.overlay.get_mut(path) {
                mine.flatten();
            }
            return false;
        };
        if Arc::ptr_eq(&base, &now) {
            return true;
        }
        let held = self.tx.held(path);
        if let Some(Some(NodeCopy {
            big: Some(mine), ..
        })) = self.tx.overlay.get_mut(path)
        {
            mine.rebase(now.clone());
        }
        if let Some((Some(seen), _)) = self.tx.read.get_mut(path) {
            seen.big = Some(Box::new(ListingDelta::new(now)));
        }
        self.tx.bytes = self.tx.bytes - held + self.tx.held(path);
        true
    }

    /// Whether `path`'s copy as this transaction sees it is a big
    /// directory's (shared listing and delta).
    fn big_copy(&mut self, path: &str) -> bool {
        self.get(path)
            .is_some_and(|n| matches!(n.children, Children::Delta(_)))
            && !self.refused
    }

    /// Edits the visible big copy of `path` in place (`big_copy` said so):
    /// nothing of its listing copied.
    fn edit_big(&mut self, path: &str, edit: impl FnOnce(&mut NodeCopy)) {
        let (old, held) = (self.visible_owner(path), self.tx.held(path));
        let mut copy = match self.tx.overlay.remove(path) {
            Some(Some(copy)) => copy,
            _ => (self.tx.read[path].0.clone()).expect("a visible copy"),
        };
        edit(&mut copy);
        self.store_copy(path, copy, old, held);
    }

    /// Keeps `copy` as the transaction's node at `path`, which was owned by
    /// `old` (if visible) and held `held` bytes.
    fn store_copy(&mut self, path: &str, mut copy: NodeCopy, old: Option<u32>, held: usize) {
        let owner = copy.node.perms.owner();
        if old != Some(owner) {
            if let Some(o) = old {
                self.account(o, -1);
            }
            self.account(owner, 1);
        }
        // upstream stamps the transaction's copy with a generation too
        copy.node.generation = self.store.next_generation();
        self.tx.bytes = self.tx.bytes - held + self.tx.copy_cost(path, &copy);
        self.tx.overlay.insert(path.to_string(), Some(copy));
    }
}

impl Tree for TxTree<'_> {
    fn get(&mut self, path: &str) -> Option<NodeRef<'_>> {
        if self.tx.overlay.contains_key(path) {
            return self
                .tx
                .overlay
                .get(path)
                .unwrap()
                .as_ref()
                .map(NodeCopy::view);
        }
        // The key is allocated on first touch only, not on every read.
        if !self.tx.read.contains_key(path) {
            if self.refused || self.tx.read.len() >= self.limit {
                self.refused = true;
                return None;
            }
            let node = NodeCopy::of(self.store, path);
            self.tx.bytes += node.as_ref().map_or(0, |n| self.tx.copy_cost(path, n));
            let order = self.tx.read.len();
            self.tx.read.insert(path.to_string(), (node, order));
        }
        self.tx.read[path].0.as_ref().map(NodeCopy::view)
    }

    fn put(&mut self, path: &str, node: Node) {
        let old = self.visible_owner(path);
        if self.refused {
            return;
        }
        let held = self.tx.held(path);
        self.store_copy(path, NodeCopy::whole(node), old, held);
    }

    fn add_child(&mut self, path: &str, name: &str) {
        match self.big_copy(path) {
            true => self.edit_big(path, |c| c.big.as_mut().expect("big").add(name)),
            false => tree::edit_node(self, path, |n| n.add_child(name)),
        }
    }

    fn remove_child(&mut self, path: &str, name: &str) {
        match self.big_copy(path) {
            true => self.edit_big(path, |c| c.big.as_mut().expect("big").remove(name)),
            false => tree::edit_node(self, path, |n| n.remove_child(name)),
        }
    }

    fn rewrite(&mut self, path: &str, value: &[u8], perms: Perms) {
        let set = |n: &mut Node| {
            n.value = value.to_vec();
            n.perms = perms;
        };
        match self.big_copy(path) {
            true => self.edit_big(path, |c| set(&mut c.node)),
            false => tree::edit_node(self, path, set),
        }
    }

    fn delete(&mut self, path: &str) {
        let old = self.visible_owner(path);
        if self.refused {
            return;
        }
        if let Some(o) = old {
            self.account(o, -1);
        }
        self.tx.bytes -= self.tx.held(path);
        // recreated later in the transaction, it is wholly its own
        self.sets_value(path);
        if !self.tx.deleted.contains(path) {
            self.tx.deleted.insert(path.to_string());
        }
        self.tx.overlay.insert(path.to_string(), None);
        self.store.next_generation();
    }

    fn bump(&mut self) {
        self.store.next_generation();
    }

    fn sets_value(&mut self, path: &str) {
        if !self.tx.set_values.contains(path) {
            self.tx.set_values.insert(path.to_string());
        }
    }

    fn depends_on(&mut self, path: &str, aspect: Aspect) {
        let set = match aspect {
            Aspect::Value => &mut self.tx.read_values,
            Aspect::Children => &mut self.tx.listed,
        };
        if !set.contains(path) {
            set.insert(path.to_string());
        }
    }

    fn lists(&mut self, path: &str) {
        if !self.tx.listed.contains(path) {
            self.list_from_now(path);
            self.tx.listed.insert(path.to_string());
        }
    }

    fn owned(&self, domid: u32) -> usize {
        let delta = self.tx.owned_delta.get(&domid).copied().unwrap_or(0);
        self.store.owned(domid).saturating_add_signed(delta)
    }

    fn memory(&self, domid: u32) -> usize {
        let own = if domid == self.owner {
            self.tx.bytes
        } else {
            0
        };
        self.store.memory(domid) + own
    }

    fn charged(&self, _owner: u32) -> u32 {
        self.owner
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::perms::Identity;
    use crate::store::tree::{self, Limits};
    use crate::wire::XsError;

    const LIMITS: Limits = Limits {
        nodes: 1000,
        node_size: 2048,
        memory: crate::store::tree::UNLIMITED_MEMORY,
    };

    fn w(t: &mut impl Tree, p: &str, v: &str) {
        tree::write(t, p, Some(v.as_bytes()), &Identity::dom0(), &LIMITS).unwrap();
    }

    fn r(t: &mut impl Tree, p: &str) -> Option<Vec<u8>> {
        tree::read(t, p, &Identity::dom0())
            .ok()
            .map(|n| n.value.to_vec())
    }

    #[test]
    fn own_writes_visible_others_not_until_commit() {
        let mut s = Store::new();
        w(&mut s, "/a", "1");
        let mut tx = Transaction::default();
        w(&mut tx.view(&s), "/a", "2");
        w(&mut tx.view(&s), "/b/c", "3");
        assert_eq!(r(&mut tx.view(&s), "/a").unwrap(), b"2");
        assert_eq!(r(&mut s, "/a").unwrap(), b"1");
        assert_eq!(r(&mut s, "/b/c"), None);
        let changes = tx.commit(&mut s).unwrap();
        assert_eq!(changes.len(), 0, "changes are recorded by the caller");
        assert_eq!(r(&mut s, "/a").unwrap(), b"2");
        assert_eq!(r(&mut s, "/b/c").unwrap(), b"3");
        assert!(s.check().is_empty(), "{:?}", s.check());
    }

    #[test]
    fn concurrent_change_to_a_read_node_conflicts() {
        let mut s = Store::new();
        w(&mut s, "/a", "1");
        let mut tx = Transaction::default();
        assert_eq!(r(&mut tx.view(&s), "/a").unwrap(), b"1");
        w(&mut tx.view(&s), "/other", "x");
        w(&mut s, "/a", "changed");
        assert_eq!(tx.commit(&mut s), Err(Conflict("/a".into())));
        assert_eq!(r(&mut s, "/other"), None, "nothing applied");
    }

    #[test]
    fn creation_of_a_node_the_transaction_saw_missing_conflicts() {
        let mut s = Store::new();
        let mut tx = Transaction::default();
        assert_eq!(r(&mut tx.view(&s), "/n"), None);
        w(&mut s, "/n", "x");
        assert!(tx.commit(&mut s).is_err());
    }

    #[test]
    fn disjoint_transactions_both_commit_and_rm_inside() {
        let mut s = Store::new();
        w(&mut s, "/x/a", "1");
        w(&mut s, "/y/b", "1");
        let mut t1 = Transaction::default();
        let mut t2 = Transaction::default();
        w(&mut t1.view(&s), "/x/a", "2");
        tree::remove(&mut t2.view(&s), "/y/b", &Identity::dom0()).unwrap();
        assert_eq!(r(&mut t2.view(&s), "/y/b"), None);
        t1.commit(&mut s).unwrap();
        t2.commit(&mut s).unwrap();
        assert_eq!(r(&mut s, "/x/a").unwrap(), b"2");
        assert_eq!(r(&mut s, "/y/b"), None);
        assert!(s.check().is_empty(), "{:?}", s.check());
    }

    #[test]
    fn siblings_created_by_two_transactions_both_commit() {
        let mut s = Store::new();
        w(&mut s, "/p", "");
        let mut t1 = Transaction::default();
        let mut t2 = Transaction::default();
        w(&mut t1.view(&s), "/p/a", "1");
        w(&mut t2.view(&s), "/p/b/c", "2");
        w(&mut s, "/p/outside", "3");
        t1.commit(&mut s).unwrap();
        t2.commit(&mut s).unwrap();
        let listing = s.node("/p").unwrap().children.to_vec();
        assert_eq!(listing, b"outside\0a\0b\0");
        assert!(s.check().is_empty(), "{:?}", s.check());
    }

    /// The same merge into a directory past `listing::BIG`, whose
    /// children the store keeps beside its record.
    #[test]
    fn siblings_commit_into_a_big_directory() {
        let mut s = Store::new();
        let names: Vec<String> = (0..2500).map(|i| i.to_string()).collect();
        for n in &names {
            w(&mut s, &format!("/p/{n}"), "");
        }
        let mut t1 = Transaction::default();
        let mut t2 = Transaction::default();
        w(&mut t1.view(&s), "/p/a", "1");
        tree::remove(&mut t2.view(&s), "/p/7", &Identity::dom0()).unwrap();
        w(&mut s, "/p/outside", "3");
        t1.commit(&mut s).unwrap();
        t2.commit(&mut s).unwrap();
        let want: Vec<u8> = names
            .iter()
            .map(String::as_str)
            .filter(|&n| n != "7")
            .chain(["outside", "a"])
            .flat_map(|n| [n.as_bytes(), b"\0"].concat())
            .collect();
        assert_eq!(s.node("/p").unwrap().children, want);
        assert!(s.has_child("/p", "a") && !s.has_child("/p", "7"));
        assert!(s.check().is_empty(), "{:?}", s.check());
    }

    #[test]
    fn a_listing_or_a_removal_conflicts_with_a_new_child() {
        let dom0 = Identity::dom0();
        let mut s = Store::new();
        w(&mut s, "/p/x", "");
        let mut listed = Transaction::default();
        tree::list(&mut listed.view(&s), "/p", &dom0).unwrap();
        w(&mut listed.view(&s), "/q", "");
        let mut removed = Transaction::default();
        tree::remove(&mut removed.view(&s), "/p", &dom0).unwrap();
        w(&mut s, "/p/y", "");
        assert_eq!(listed.commit(&mut s), Err(Conflict("/p".into())));
        assert_eq!(removed.commit(&mut s), Err(Conflict("/p".into())));
        assert!(s.node("/p/y").is_some());
    }

    #[test]
    fn a_first_listing_shows_the_children_of_now_and_conflicts_only_after() {
        let dom0 = Identity::dom0();
        let list = |tx: &mut Transaction, s: &Store| {
            let v = tx.view(s).get("/p").map(|n| n.children.to_vec());
            tree::list(&mut tx.view(s), "/p", &dom0).unwrap();
            (v, tx.view(s).get("/p").unwrap().children.to_vec())
        };
        for outside_after_listing in [false, true] {
            let mut s = Store::new();
            w(&mut s, "/p/a", "");
            w(&mut s, "/p/b", "");
            let mut tx = Transaction::default();
            // removing a child reads the parent: its copy dates from here
            tree::remove(&mut tx.view(&s), "/p/a", &dom0).unwrap();
            w(&mut tx.view(&s), "/p/mine", "");
            w(&mut s, "/p/c", "");
            let (before, listed) = list(&mut tx, &s);
            assert_eq!(before.unwrap(), b"b\0mine\0", "the copy, until listed");
            assert_eq!(listed, b"b\0c\0mine\0", "the list as it is now");
            let bytes = tx.memory();
            assert_eq!(list(&mut tx, &s).1, listed, "and then it repeats");
            assert_eq!(tx.memory(), bytes);
            if outside_after_listing {
                w(&mut s, "/p/d", "");
                assert_eq!(tx.commit(&mut s), Err(Conflict("/p".into())));
            } else {
                tx.commit(&mut s).unwrap();
                assert_eq!(s.node("/p").unwrap().children, b"b\0c\0mine\0");
                assert!(s.check().is_empty(), "{:?}", s.check());
            }
        }
    }

    #[test]
    fn a_permission_change_conflicts_with_a_write_it_allowed() {
        let dom0 = Identity::dom0();
        let mut s = Store::new();
        w(&mut s, "/p", "");
        let mut tx = Transaction::default();
        w(&mut tx.view(&s), "/p/a", "1");
        let perms = Perms::owned_by(5);
        tree::set_perms(&mut s, "/p", perms, &dom0, &LIMITS).unwrap();
        assert_eq!(tx.commit(&mut s), Err(Conflict("/p".into())));
    }

    #[test]
    fn reads_repeat_and_a_missing_node_stays_missing() {
        let mut s = Store::new();
        w(&mut s, "/a", "old");
        let mut tx = Transaction::default();
        assert_eq!(r(&mut tx.view(&s), "/a").unwrap(), b"old");
        assert_eq!(r(&mut tx.view(&s), "/n"), None);
        w(&mut s, "/a", "new");
        w(&mut s, "/n/c", "v");
        w(&mut s, "/later", "l");
        assert_eq!(r(&mut tx.view(&s), "/a").unwrap(), b"old");
        assert_eq!(r(&mut tx.view(&s), "/n"), None);
        assert_eq!(
            r(&mut tx.view(&s), "/n/c").unwrap(),
            b"v",
            "untouched: live"
        );
        assert_eq!(r(&mut tx.view(&s), "/later").unwrap(), b"l");
        assert!(tx.commit(&mut s).is_err());
    }

    #[test]
    fn commit_writes_back_nothing_merely_read() {
        let mut s = Store::new();
        w(&mut s, "/a", "1");
        let generation = s.node("/a").unwrap().generation;
        let mut tx = Transaction::default();
        r(&mut tx.view(&s), "/a");
        w(&mut tx.view(&s), "/b", "2");
        tx.commit(&mut s).unwrap();
        assert_eq!(s.node("/a").unwrap().generation, generation);
    }

    #[test]
    fn rm_of_a_node_created_outside_as_upstream() {
        let dom0 = Identity::dom0();
        let mut s = Store::new();
        let mut tx = Transaction::default();
        w(&mut tx.view(&s), "/p", "");
        w(&mut s, "/p/x", "");
        let e = tree::remove(&mut tx.view(&s), "/p/x", &dom0).unwrap_err();
        assert_eq!(e.0, XsError::Eio, "its parent's copy lacks it");
        // the parent existed: an EIO answered from its old list conflicts
        let mut tx = Transaction::default();
        w(&mut tx.view(&s), "/p/y", "");
        w(&mut s, "/p/z", "");
        let e = tree::remove(&mut tx.view(&s), "/p/z", &dom0).unwrap_err();
        assert_eq!(e.0, XsError::Eio);
        assert_eq!(tx.commit(&mut s), Err(Conflict("/p".into())));
        let mut tx = Transaction::default();
        assert_eq!(r(&mut tx.view(&s), "/f"), None);
        w(&mut s, "/f/a/c", "");
        let e = tree::remove(&mut tx.view(&s), "/f/a", &dom0).unwrap_err();
        assert_eq!(e.0, XsError::Einval, "its parent stays missing");
    }

    #[test]
    fn node_counts_include_the_transaction() {
        let mut s = Store::new();
        let mut tx = Transaction::default();
        w(&mut tx.view(&s), "/a/b", "");
        assert_eq!(tx.view(&s).owned(0), 5);
        assert_eq!(s.owned(0), 3);
        tx.commit(&mut s).unwrap();
        assert_eq!(s.owned(0), 5);
    }

    /// A directory past `listing::BIG`, its value written and permissions
    /// set in and out of transactions, grown by one transaction and shrunk
    /// by another: the listing is the expected one, the accounting adds
    /// up, and the store's listing stays the same one (edited in place: no
    /// transaction copied it, no commit rebuilt it) unless changed outside
    /// while a transaction shared it.
    #[test]
    fn a_big_directory_grows_and_shrinks_in_transactions_in_place() {
        let dom0 = Identity::dom0();
        let mut s = Store::new();
        let mut want: Vec<String> = (0..2500).map(|i| format!("{i}")).collect();
        for n in &want {
            w(&mut s, &format!("/d/{n}"), "");
        }
        let listing = |names: &[String]| -> Vec<u8> {
            names
                .iter()
                .flat_map(|n| [n.as_bytes(), b"\0"].concat())
                .collect()
        };
        w(&mut s, "/d", "own value");
        let mut grow = Transaction::default();
        w(&mut grow.view(&s), "/d", "set in a transaction");
        let perms = Perms::parse(b"n0\0r5\0", 2).unwrap();
        tree::set_perms(&mut grow.view(&s), "/d", perms.clone(), &dom0, &LIMITS).unwrap();
        for i in 0..100 {
            w(&mut grow.view(&s), &format!("/d/new{i}"), "");
            want.push(format!("new{i}"));
        }
        // (a change outside while a transaction holds the list copies it)
        w(&mut s, "/d/outside", "");
        want.push("outside".into());
        let shared = Arc::as_ptr(&s.shared_listing("/d").expect("big"));
        grow.commit(&mut s).unwrap();
        let mut shrink = Transaction::default();
        for gone in ["0", "1234", "new7", "outside"] {
            tree::remove(&mut shrink.view(&s), &format!("/d/{gone}"), &dom0).unwrap();
            want.retain(|n| n != gone);
        }
        let mut view = shrink.view(&s);
        let listed = tree::list(&mut view, "/d", &dom0)
            .unwrap()
            .children
            .to_vec();
        assert_eq!(listed, listing(&want));
        shrink.commit(&mut s).unwrap();
        let d = s.node("/d").unwrap();
        assert_eq!(
            (d.value, d.perms),
            (&b"set in a transaction"[..], &perms.0[..])
        );
        assert_eq!(d.children, listing(&want));
        assert_eq!(Arc::as_ptr(&s.shared_listing("/d").unwrap()), shared);
        assert!(s.check().is_empty(), "{:?}", s.check());
    }

    /// One step of the differential test below, and what it answered.
    fn step(s: &mut Store, txs: &mut [Transaction; 2], op: u64, name: &str) -> String {
        let dom0 = Identity::dom0();
        let child = format!("/p/{name}");
        let shown = |l: Vec<u8>| -> String {
            let names = l.split(|&b| b == 0).filter(|n| !n.is_empty());
            let kept = names.filter(|n| !n.starts_with(b"pad"));
            kept.map(|n| String::from_utf8_lossy(n) + " ").collect()
        };
        let (t, op) = ((op % 2) as usize, op / 2);
        match op {
            0 => format!(
                "{:?}",
                tree::write(s, &child, Some(b"o"), &dom0, &LIMITS).is_ok()
            ),
            1 => format!("{:?}", tree::remove(s, &child, &dom0).map(|_| ())),
            2 => {
                let v = &mut txs[t].view(s);
                format!(
                    "{:?}",
                    tree::write(v, &child, Some(b"t"), &dom0, &LIMITS).is_ok()
                )
            }
            3 => format!(
                "{:?}",
                tree::remove(&mut txs[t].view(s), &child, &dom0).map(|_| ())
            ),
            4 => match tree::list(&mut txs[t].view(s), "/p", &dom0) {
                Ok(n) => shown(n.children.to_vec()),
                Err(e) => format!("{e:?}"),
            },
            5 => format!("{:?}", r(&mut txs[t].view(s), &child)),
            6 => {
                let v = &mut txs[t].view(s);
                format!(
                    "{:?}",
                    tree::write(v, "/p", Some(name.as_bytes()), &dom0, &LIMITS)
                )
            }
            7 => {
                let perms = Perms::parse(format!("n0\0r{}\0", name.len()).as_bytes(), 2).unwrap();
                let v = &mut txs[t].view(s);
                format!(
                    "{:?}",
                    tree::set_perms(v, "/p", perms, &dom0, &LIMITS).is_ok()
                )
            }
            8 => {
                let listed = r(&mut txs[t].view(s), "/p");
                format!("{listed:?}")
            }
            _ => {
                let tx = std::mem::take(&mut txs[t]);
                let got = tx.commit(s).map(|_| ());
                format!("{got:?} {}", shown(s.node("/p").unwrap().children.to_vec()))
            }
        }
    }

    /// A directory past `listing::BIG` (padded with children nobody
    /// touches) answers every transactional step as a small one does:
    /// random writes, removals, listings, value and permission writes of
    /// the directory in two transactions, with changes outside, commits
    /// and conflicts; the padding is left out of what is compared.
    #[test]
    fn a_big_directory_transacts_as_a_small_one() {
        let mut rnd = crate::test_rng::below(0x2545_f491_4f6c_dd1d_u64);
        let (mut small, mut big) = (Store::new(), Store::new());
        for s in [&mut small, &mut big] {
            w(s, "/p", "");
        }
        for i in 0..600 {
            w(&mut big, &format!("/p/pad-{i:020}"), "");
        }
        assert!(big.shared_listing("/p").is_some() && small.shared_listing("/p").is_none());
        let mut txs = [
            [Transaction::default(), Transaction::default()],
            Default::default(),
        ];
        let names = ["c0", "c1", "c2", "c3", "c44"];
        let (mut commits, mut conflicts, mut doomed_seen) = (0, 0, 0);
        // A transaction whose copy of the directory lists a child it then
        // finds missing (removed outside in between) and makes again lists
        // the name twice in a small directory, once (last) in a big one.
        // Such a transaction cannot commit (its copy of the list, or the
        // child's absence, changed), so its answers may differ from the first
        // difference on; its commit must fail in both, and the stores agree.
        let mut doomed = [false; 2];
        for i in 0..6000 {
            let (op, name) = (rnd(20), names[rnd(5) as usize]);
            let [a, b] = &mut txs;
            let want = step(&mut small, a, op, name);
            let got = step(&mut big, b, op, name);
            let t = (op % 2) as usize;
            if op >= 18 {
                commits += usize::from(want.starts_with("Ok"));
                conflicts += usize::from(want.starts_with("Err"));
            }
            if op >= 18 && doomed[t] {
                assert!(
                    want.starts_with("Err") && got.starts_with("Err"),
                    "{want} | {got}"
                );
                assert_eq!(
                    got.split_once(' ').unwrap().1,
                    want.split_once(' ').unwrap().1
                );
                doomed[t] = false;
            } else if (4..18).contains(&op) && got != want {
                doomed_seen += usize::from(!doomed[t]);
                doomed[t] = true;
            } else if !(op >= 4 && doomed[t]) {
                assert_eq!(got, want, "step {i}: op {op} on {name}");
            }
        }
        assert!(
            commits > 100 && conflicts > 100,
            "{commits} commits, {conflicts} conflicts"
        );
        assert!(
            doomed_seen < commits / 10,
            "{doomed_seen} doomed of {commits}"
        );
        for s in [&small, &big] {
            assert!(s.check().is_empty(), "{:?}", s.check());
        }
        assert!(big.shared_listing("/p").is_some());
    }
}
