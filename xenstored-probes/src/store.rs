//! The node tree: values, permissions, children, and a generation per node
//! (bumped on every change) that transactions use to detect conflicts.
//!
//! Tree operations are written once against [`Tree`], which both the
//! global store and a transaction's view implement. Every operation checks
//! everything (permissions, quotas, sizes) before it changes anything, so a
//! failed request never leaves the tree half-changed.

use crate::path;
use crate::perms::{Identity, Perm, PermList, Perms, OWNER, READ, WRITE};
use crate::record::Record;
use crate::wire::XsError;
use rustc_hash::{FxHashMap, FxHashSet};
use std::cell::Cell;

/// A node being edited: what tree operations build and `Tree::put` takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub value: Vec<u8>,
    pub perms: Perms,
    /// Child names, each NUL-terminated, in creation order (the DIRECTORY
    /// reply as is; DIRECTORY_PART offsets index into it).
    pub children: Vec<u8>,
    pub generation: u64,
}

/// A node as a tree holds it, borrowed: what `Tree::get` returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeRef<'a> {
    pub value: &'a [u8],
    pub perms: &'a [Perm],
    pub children: &'a [u8],
    pub generation: u64,
}

/// C xenstored's record header (generation, num_perms, datalen, childlen,
/// padded) counts towards the node-size quota like the rest of the record.
const RECORD_HEADER: usize = 24;
const RECORD_PERM: usize = 8;

impl Node {
    pub fn new(value: &[u8], perms: Perms) -> Node {
        Node {
            value: value.to_vec(),
            perms,
            children: Vec::new(),
            generation: 0,
        }
    }

    pub fn view(&self) -> NodeRef<'_> {
        NodeRef {
            value: &self.value,
            perms: &self.perms,
            children: &self.children,
            generation: self.generation,
        }
    }

    pub fn add_child(&mut self, name: &str) {
        self.children.extend_from_slice(name.as_bytes());
        self.children.push(0);
    }

    pub fn remove_child(&mut self, name: &str) {
        let mut at = 0;
        for c in self.children.split(|&b| b == 0) {
            if c == name.as_bytes() {
                self.children.drain(at..at + c.len() + 1);
                return;
            }
            at += c.len() + 1;
        }
    }
}

impl<'a> NodeRef<'a> {
    pub fn to_node(self) -> Node {
        Node {
            value: self.value.to_vec(),
            perms: Perms(self.perms.to_vec()),
            children: self.children.to_vec(),
            generation: self.generation,
        }
    }

    pub fn children(self) -> impl Iterator<Item = &'a str> {
        self.children
            .split(|&b| b == 0)
            .filter(|c| !c.is_empty())
            .map(|c| std::str::from_utf8(c).unwrap_or(""))
    }

    /// The size the node-size quota measures.
    pub fn record_size(self) -> usize {
        RECORD_HEADER + RECORD_PERM * self.perms.len() + self.value.len() + self.children.len()
    }
}

/// Read and write access to nodes by absolute path: the store itself, or a
/// transaction's view of it.
pub trait Tree {
    fn get(&mut self, path: &str) -> Option<NodeRef<'_>>;
    /// Stores `node` at `path` (created or replaced).
    fn put(&mut self, path: &str, node: Node);
    fn delete(&mut self, path: &str);
    /// Counts a write the tree does not need (upstream rewrites a removed
    /// node's parent even when the parent goes next): generations stay
    /// upstream's.
    fn bump(&mut self);
    /// Nodes owned by `domid` as this view sees them.
    fn owned(&self, domid: u32) -> usize;
}

/// The global tree.
pub struct Store {
    /// Every node, keyed by the path inside its record.
    nodes: FxHashSet<Record>,
    /// Upstream's global generation counter: bumped by every write and
    /// delete, transactions' included (hence a Cell: a transaction's view
    /// holds the store shared).
    generation: Cell<u64>,
    owned: FxHashMap<u32, usize>,
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
            generation: Cell::new(0),
            owned: FxHashMap::default(),
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
        self.nodes.get(path).map(Record::node)
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
            .map(|r| (r.path(), r.node()))
            .filter(|(p, _)| p.starts_with('/'))
    }

    /// Paths of every node owned by `domid`, outermost first.
    pub fn owned_paths(&self, domid: u32) -> Vec<String> {
        let mut v: Vec<String> = self
            .tree_nodes()
            .filter(|(_, n)| n.perms.owner() == domid)
            .map(|(p, _)| p.to_string())
            .collect();
        v.sort_by_key(|p| p.len());
        v
    }

    /// A released domain's permission entries stop granting anything.
    pub fn ignore_domain_in_perms(&mut self, domid: u32) {
        let listing: Vec<String> = self
            .nodes
            .iter()
            .filter(|r| r.node().perms[1..].iter().any(|p| p.domid == domid))
            .map(|r| r.path().to_string())
            .collect();
        for path in listing {
            let mut n = self.nodes.get(path.as_str()).unwrap().to_node();
            for p in n.perms.0.iter_mut().skip(1).filter(|p| p.domid == domid) {
                p.access |= crate::perms::IGNORE;
            }
            self.nodes.replace(Record::new(&path, n.view()));
        }
    }

    /// Consistency check (CONTROL check): every child exists, every node
    /// is its parent's child, the owner counts add up. Returns problems.
    pub fn check(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut counts: FxHashMap<u32, usize> = FxHashMap::default();
        for (p, n) in self.tree_nodes() {
            *counts.entry(n.perms.owner()).or_default() += 1;
            for c in n.children() {
                if !self.nodes.contains(path::child(p, c).as_str()) {
                    problems.push(format!("{p}: child {c} missing"));
                }
            }
            if p != "/" {
                let parent = self.node(path::parent(p));
                if !parent.is_some_and(|par| par.children().any(|c| c == path::basename(p))) {
                    problems.push(format!("{p}: not listed by its parent"));
                }
            }
        }
        for (d, n) in &counts {
            if self.owned.get(d).copied().unwrap_or(0) != *n {
                problems.push(format!(
                    "domain {d}: owns {n} nodes, accounted {:?}",
                    self.owned.get(d)
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
                self.account(old.node().perms.owner(), -1);
                true
            }
            None => false,
        }
    }

    fn account(&mut self, domid: u32, delta: isize) {
        let n = self.owned.entry(domid).or_default();
        *n = n.saturating_add_signed(delta);
    }
}

impl Tree for Store {
    fn get(&mut self, path: &str) -> Option<NodeRef<'_>> {
        self.node(path)
    }

    fn put(&mut self, path: &str, mut node: Node) {
        node.generation = self.next_generation();
        let owner = node.perms.owner();
        match self.nodes.replace(Record::new(path, node.view())) {
            Some(old) => {
                let old_owner = old.node().perms.owner();
                if old_owner != owner {
                    self.account(old_owner, -1);
                    self.account(owner, 1);
                }
            }
            None => self.account(owner, 1),
        }
    }

    fn delete(&mut self, path: &str) {
        if self.unlink(path) {
            self.next_generation();
        }
    }

    fn bump(&mut self) {
        self.next_generation();
    }

    fn owned(&self, domid: u32) -> usize {
        self.owned.get(&domid).copied().unwrap_or(0)
    }
}

/// Limits applied to unprivileged writers (see quota.rs for the values).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub nodes: usize,
    pub node_size: usize,
}

/// Why an operation failed: the wire error and a reason for the probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fail(pub XsError, pub &'static str);

impl From<XsError> for Fail {
    fn from(e: XsError) -> Fail {
        Fail(e, "")
    }
}

/// A change watches may fire for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    /// Only watches on exactly this path (descendants of a removed node).
    pub exact: bool,
    /// Permissions the node had when it went away (RM) or before the change
    /// (SET_PERMS): a watcher allowed to read them is allowed the event.
    pub old_perms: Option<Perms>,
}

impl Change {
    fn at(path: &str) -> Change {
        Change {
            path: path.to_string(),
            exact: false,
            old_perms: None,
        }
    }
}

/// The access `who` has to the nearest existing node at or above `path`.
fn access_from_ancestors<T: Tree + ?Sized>(t: &mut T, path: &str, who: &Identity) -> u8 {
    let mut p = path;
    loop {
        if let Some(n) = t.get(p) {
            return n.perms.for_identity(who);
        }
        if p == "/" || !p.starts_with('/') {
            return 0;
        }
        p = path::parent(p);
    }
}

/// Looks a node up for `who` needing `need`: EACCES when it exists without
/// that access; for a missing node ENOENT, or EACCES when the nearest
/// existing ancestor does not grant `need` (upstream's errno_from_parents).
pub fn lookup<'t, T: Tree + ?Sized>(
    t: &'t mut T,
    path: &str,
    who: &Identity,
    need: u8,
) -> Result<NodeRef<'t>, Fail> {
    if t.get(path).is_none() {
        let parent_access = access_from_ancestors(t, path, who);
        return Err(if parent_access & need == need {
            Fail(XsError::Enoent, "")
        } else {
            Fail(XsError::Eacces, "perm")
        });
    }
    let node = t.get(path).unwrap();
    if node.perms.for_identity(who) & need != need {
        return Err(Fail(XsError::Eacces, "perm"));
    }
    Ok(node)
}

fn check_size(node: &Node, who: &Identity, limits: &Limits) -> Result<(), Fail> {
    if !who.privileged && node.view().record_size() >= limits.node_size {
        return Err(Fail(XsError::Enospc, "quota:node-size"));
    }
    Ok(())
}

/// WRITE (value Some) or MKDIR (None: an existing node stays as it is).
/// Returns the change to fire watches for, if anything changed.
pub fn write<T: Tree + ?Sized>(
    t: &mut T,
    path: &str,
    value: Option<&[u8]>,
    who: &Identity,
    limits: &Limits,
) -> Result<Option<Change>, Fail> {
    match lookup(t, path, who, WRITE) {
        Ok(node) => {
            let Some(value) = value else {
                return Ok(None);
            };
            let node = NodeRef { value, ..node }.to_node();
            check_size(&node, who, limits)?;
            t.put(path, node);
            Ok(Some(Change::at(path)))
        }
        Err(Fail(XsError::Enoent, _)) => {
            create(t, path, value.unwrap_or(b""), who, limits)?;
            Ok(Some(Change::at(path)))
        }
        Err(e) => Err(e),
    }
}

/// Creates `path` and its missing ancestors; each inherits its parent's
/// permissions, and unprivileged creators own what they create.
fn create<T: Tree + ?Sized>(
    t: &mut T,
    path: &str,
    value: &[u8],
    who: &Identity,
    limits: &Limits,
) -> Result<(), Fail> {
    // Missing nodes, innermost first, down from the first existing ancestor.
    let mut missing = vec![path];
    let mut existing = path::parent(path);
    while t.get(existing).is_none() {
        missing.push(existing);
        existing = path::parent(existing);
    }
    let mut anchor = t.get(existing).unwrap().to_node();
    let mut perms = anchor.perms.clone();
    if !who.privileged {
        perms.0[0].domid = who.domid;
        let owner = who.domid;
        if t.owned(owner) + missing.len() > limits.nodes {
            return Err(Fail(XsError::Enospc, "quota:nodes"));
        }
    }
    anchor.add_child(path::basename(missing[missing.len() - 1]));
    check_size(&anchor, who, limits)?;
    let leaf = Node::new(value, perms.clone());
    check_size(&leaf, who, limits)?;
    // Bottom up, as upstream writes them: generations come out the same.
    t.put(path, leaf);
    for (i, p) in missing.iter().enumerate().skip(1) {
        let mut n = Node::new(b"", perms.clone());
        n.add_child(path::basename(missing[i - 1]));
        t.put(p, n);
    }
    t.put(existing, anchor);
    Ok(())
}

/// RM: the node and everything below it. A missing node whose parent
/// exists is fine (no change). Changes come deepest first, the node last.
pub fn remove<T: Tree + ?Sized>(
    t: &mut T,
    path: &str,
    who: &Identity,
) -> Result<Vec<Change>, Fail> {
    match lookup(t, path, who, WRITE) {
        Ok(_) => {}
        Err(Fail(XsError::Enoent, r)) => {
            return if t.get(path::parent(path)).is_some() {
                Ok(Vec::new())
            } else {
                Err(Fail(XsError::Enoent, r))
            };
        }
        Err(e) => return Err(e),
    }
    if path == "/" {
        return Err(Fail(XsError::Einval, "rm /"));
    }
    let parent = path::parent(path);
    // Only a transaction's view can lack the parent (it found it missing
    // earlier, then the node was created outside): upstream's _rm says EINVAL.
    if t.get(parent).is_none() {
        return Err(Fail(XsError::Einval, "rm:parent-missing-in-tx"));
    }
    let mut doomed = Vec::new();
    collect_post_order(t, path, &mut doomed);
    let mut changes = Vec::with_capacity(doomed.len());
    for (p, perms) in doomed {
        t.delete(&p);
        if p != path {
            // its parent is removed next; upstream still rewrites it first
            t.bump();
        }
        changes.push(Change {
            exact: p != path,
            path: p,
            old_perms: Some(perms),
        });
    }
    let mut pnode = t.get(parent).expect("parent checked above").to_node();
    if !pnode.view().children().any(|c| c == path::basename(path)) {
        // A transaction's copy of the parent predates the node's creation
        // outside: upstream's delete_child finds no entry and says EIO,
        // after deleting the node in the transaction (the commit conflicts).
        return Err(Fail(XsError::Eio, "rm:not-a-child-in-tx"));
    }
    pnode.remove_child(path::basename(path));
    t.put(parent, pnode);
    Ok(changes)
}

fn collect_post_order<T: Tree + ?Sized>(t: &mut T, path: &str, out: &mut Vec<(String, Perms)>) {
    let Some(node) = t.get(path) else { return };
    let perms = Perms(node.perms.to_vec());
    let kids: Vec<String> = node.children().map(|c| path::child(path, c)).collect();
    for k in kids {
        collect_post_order(t, &k, out);
    }
    out.push((path.to_string(), perms));
}

/// SET_PERMS: the caller must own the node (or be privileged);
/// unprivileged callers may not give it away.
pub fn set_perms<T: Tree + ?Sized>(
    t: &mut T,
    path: &str,
    perms: Perms,
    who: &Identity,
) -> Result<Change, Fail> {
    let node = lookup(t, path, who, WRITE | OWNER)?;
    if !who.privileged && perms.owner() != node.perms.owner() {
        return Err(Fail(XsError::Eperm, "perm:owner"));
    }
    let mut node = node.to_node();
    let old = std::mem::replace(&mut node.perms, perms);
    t.put(path, node);
    Ok(Change {
        path: path.to_string(),
        exact: false,
        old_perms: Some(old),
    })
}

/// READ-type lookups.
pub fn read<'t, T: Tree + ?Sized>(
    t: &'t mut T,
    path: &str,
    who: &Identity,
) -> Result<NodeRef<'t>, Fail> {
    lookup(t, path, who, READ)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        nodes: 1000,
        node_size: 2048,
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
        assert_eq!(err, Err(Fail(XsError::Eacces, "perm")));
        set_perms(&mut s, "/local/domain/6", Perms::owned_by(6), &dom0()).unwrap();
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
            Some(Fail(XsError::Eacces, "perm"))
        );
        assert_eq!(
            read(&mut s, "/local/domain/6/nope", &guest(6)).err(),
            Some(Fail(XsError::Enoent, ""))
        );
        // unprivileged owners cannot give nodes away
        let p = Perms::parse(b"n7\0", 1).unwrap();
        assert_eq!(
            set_perms(&mut s, "/local/domain/6/x", p, &guest(6)),
            Err(Fail(XsError::Eperm, "perm:owner"))
        );
        assert!(s.check().is_empty(), "{:?}", s.check());
    }

    #[test]
    fn node_quota_is_all_or_nothing() {
        let mut s = Store::new();
        write(&mut s, "/d", None, &dom0(), &LIMITS).unwrap();
        set_perms(&mut s, "/d", Perms::owned_by(6), &dom0()).unwrap();
        let small = Limits { nodes: 3, ..LIMITS };
        let before = s.generation();
        let err = write(&mut s, "/d/a/b/c", Some(b""), &guest(6), &small);
        assert_eq!(err, Err(Fail(XsError::Enospc, "quota:nodes")));
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
        set_perms(&mut s, "/d", Perms::owned_by(6), &dom0()).unwrap();
        let fits = vec![b'x'; 2048 - 24 - 8 - 1];
        write(&mut s, "/d/a", Some(&fits), &guest(6), &LIMITS).unwrap();
        let too_big = vec![b'x'; 2048 - 24 - 8];
        assert_eq!(
            write(&mut s, "/d/a", Some(&too_big), &guest(6), &LIMITS),
            Err(Fail(XsError::Enospc, "quota:node-size"))
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
            Err(Fail(XsError::Enoent, ""))
        );
        assert_eq!(
            remove(&mut s, "/", &dom0()).err().unwrap().0,
            XsError::Einval
        );
        assert!(s.check().is_empty(), "{:?}", s.check());
        assert_eq!(s.owned(0), 3);
    }
}
