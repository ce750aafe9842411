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

use crate::error::Reason;
use crate::node::{Node, NodeRef};
use crate::perms::{PermList, Perms};
use crate::store::Store;
use crate::tree::{Aspect, Change, Tree};
use rustc_hash::{FxHashMap, FxHashSet};

#[derive(Debug, Default)]
pub struct Transaction {
    /// Nodes as this transaction sees them; None = deleted here.
    overlay: FxHashMap<String, Option<Node>>,
    /// Every node touched, as the store had it at first access (None =
    /// missing; its generation is what commit checks), and the order of
    /// first access. Reads repeat, as in upstream, but commit never writes
    /// these back.
    read: FxHashMap<String, (Option<Node>, usize)>,
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
    fn copy_cost(&self, path: &str, node: &Node) -> usize {
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
            if self.stale(path, seen.as_ref(), store.node(path)) {
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
                let merged = self.merged_children(path, seen, mine, now);
                lists.insert(path.clone(), merged);
            }
        }
        let mut writes: Vec<(usize, String, Option<Node>)> = std::mem::take(&mut self.overlay)
            .into_iter()
            .map(|(p, n)| (order(&p), p, n))
            .collect();
        writes.sort_by_key(|w| w.0);
        for (_, path, node) in writes {
            match node {
                Some(mut n) => {
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
    fn stale(&self, path: &str, seen: Option<&Node>, now: Option<NodeRef<'_>>) -> bool {
        match (seen, now) {
            (None, None) => false,
            (Some(seen), Some(now)) => {
                let seen = seen.view();
                seen.generation != now.generation
                    && (seen.perms != now.perms
                        || (seen.value != now.value && self.read_values.contains(path))
                        || (seen.children != now.children && self.listed.contains(path)))
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
        let child = crate::path::child(parent, name);
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
    fn merged_children(&self, path: &str, seen: &Node, mine: &Node, now: NodeRef<'_>) -> Vec<u8> {
        if now.children == seen.children {
            return mine.children.clone();
        }
        // Only a child it touched can be other than Kept: those are found
        // once each among its nodes, not looked up for every child of a big
        // directory (backend/vbd lists every domain's).
        let touched: FxHashMap<&str, Fate> = self
            .overlay
            .keys()
            .filter(|p| p.as_str() != "/" && crate::path::parent(p) == path)
            .map(|p| crate::path::basename(p))
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
        let mut made: Vec<&str> = mine.view().children().collect();
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
        let (Some((Some(seen), _)), Some(now)) = (self.tx.read.get(path), self.store.node(path))
        else {
            return;
        };
        if now.children == seen.children {
            return;
        }
        let merged = match self.tx.overlay.get(path) {
            Some(Some(mine)) => Some(self.tx.merged_children(path, seen, mine, now)),
            // removed here: the listing fails, and the commit checks existence
            Some(None) => return,
            None => None,
        };
        let held = self.tx.held(path);
        if let (Some(list), Some(Some(mine))) = (merged, self.tx.overlay.get_mut(path)) {
            mine.children = list;
        }
        if let Some((Some(seen), _)) = self.tx.read.get_mut(path) {
            seen.children = now.children.to_vec();
        }
        self.tx.bytes = self.tx.bytes - held + self.tx.held(path);
    }
}

impl Tree for TxTree<'_> {
    fn get(&mut self, path: &str) -> Option<NodeRef<'_>> {
        if self.tx.overlay.contains_key(path) {
            return self.tx.overlay.get(path).unwrap().as_ref().map(Node::view);
        }
        // The key is allocated on first touch only, not on every read.
        if !self.tx.read.contains_key(path) {
            if self.refused || self.tx.read.len() >= self.limit {
                self.refused = true;
                return None;
            }
            let node = self.store.node(path).map(NodeRef::to_node);
            self.tx.bytes += node.as_ref().map_or(0, |n| self.tx.copy_cost(path, n));
            let order = self.tx.read.len();
            self.tx.read.insert(path.to_string(), (node, order));
        }
        self.tx.read[path].0.as_ref().map(Node::view)
    }

    fn put(&mut self, path: &str, node: Node) {
        let old = self.visible_owner(path);
        if self.refused {
            return;
        }
        let owner = node.perms.owner();
        if old != Some(owner) {
            if let Some(o) = old {
                self.account(o, -1);
            }
            self.account(owner, 1);
        }
        // upstream stamps the transaction's copy with a generation too
        let mut node = node;
        node.generation = self.store.next_generation();
        self.tx.bytes = self.tx.bytes - self.tx.held(path) + self.tx.copy_cost(path, &node);
        self.tx.overlay.insert(path.to_string(), Some(node));
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
    use crate::perms::Identity;
    use crate::tree::{self, Limits};
    use crate::wire::XsError;

    const LIMITS: Limits = Limits {
        nodes: 1000,
        node_size: 2048,
        memory: crate::tree::UNLIMITED_MEMORY,
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
}
