//! Tree operations written once against [`Tree`], which both the global
//! store (mod.rs) and a transaction's view (transaction.rs) implement.
//! Every operation checks everything (permissions, quotas, sizes) before
//! it changes anything, so a failed request never leaves the tree
//! half-changed.

use crate::store::node::{Node, NodeRef};
use crate::store::perms::{Identity, PermList, Perms, OWNER, READ, WRITE};
use crate::wire::error::{Fail, Reason};
use crate::wire::path;
use crate::wire::XsError;

/// Read and write access to nodes by absolute path: the store itself, or a
/// transaction's view of it.
pub trait Tree {
    fn get(&mut self, path: &str) -> Option<NodeRef<'_>>;
    /// Stores `node` at `path` (created or replaced).
    fn put(&mut self, path: &str, node: Node);
    fn delete(&mut self, path: &str);
    /// Whether `name` is a child of the node at `path`.
    fn has_child(&mut self, path: &str, name: &str) -> bool {
        self.get(path).is_some_and(|n| n.has_child(name))
    }
    /// Appends `name` to the existing node's children (a write of it).
    fn add_child(&mut self, path: &str, name: &str) {
        edit_node(self, path, |n| n.add_child(name));
    }
    /// Removes `name` from the existing node's children (a write of it).
    fn remove_child(&mut self, path: &str, name: &str) {
        edit_node(self, path, |n| n.remove_child(name));
    }
    /// Sets the existing node's value and permissions (a write of it),
    /// keeping its children as they are: a big directory's own WRITE or
    /// SET_PERMS need not copy its list.
    fn rewrite(&mut self, path: &str, value: &[u8], perms: Perms) {
        edit_node(self, path, |n| {
            n.value = value.to_vec();
            n.perms = perms;
        });
    }
    /// Counts a write the tree does not need (upstream rewrites a removed
    /// node's parent even when the parent goes next): generations stay
    /// upstream's.
    fn bump(&mut self);
    /// The caller's answer depends on `aspect` of `path` (beyond its
    /// existence and permissions, which every access depends on): a
    /// transaction then conflicts when another commit changed it.
    fn depends_on(&mut self, _path: &str, _aspect: Aspect) {}
    /// The request is about to answer from `path`'s list of children
    /// (before it looks the node up): it depends on the list from here on.
    fn lists(&mut self, path: &str) {
        self.depends_on(path, Aspect::Children);
    }
    /// The request sets `path`'s value (a transaction's commit then keeps
    /// its value, not one another commit wrote since).
    fn sets_value(&mut self, _path: &str) {}
    /// Nodes owned by `domid` as this view sees them.
    fn owned(&self, domid: u32) -> usize;
    /// Bytes of nodes charged to `domid` as this view sees them (the
    /// memory quota's share of the tree).
    fn memory(&self, domid: u32) -> usize;
    /// Who pays for a node owned by `owner` written through this view: the
    /// owner in the store; a transaction's owner for the copies it keeps,
    /// as C xenstored charges its per-transaction records.
    fn charged(&self, owner: u32) -> u32 {
        owner
    }
}

/// Rewrites the node at `path` (if any) as `edit` changes it.
pub fn edit_node<T: Tree + ?Sized>(t: &mut T, path: &str, edit: impl FnOnce(&mut Node)) {
    if let Some(mut node) = t.get(path).map(NodeRef::to_node) {
        edit(&mut node);
        t.put(path, node);
    }
}

/// What of a node a request's answer may depend on besides its existence
/// and permissions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aspect {
    /// Its value (READ).
    Value,
    /// Its list of children (DIRECTORY, or removing what is below).
    Children,
}

/// Limits applied to unprivileged writers (see quota.rs for the values).
#[derive(Clone, Copy)]
pub struct Limits<'a> {
    pub nodes: usize,
    pub node_size: usize,
    /// The bytes of nodes a domain may reach (its memory quota less what
    /// it uses outside the tree); None: not limited (privileged domains).
    /// Any domain charged for a write is checked, whoever writes.
    pub memory: &'a dyn Fn(u32) -> Option<usize>,
}

/// No domain's memory is limited.
pub const UNLIMITED_MEMORY: &dyn Fn(u32) -> Option<usize> = &|_| None;

/// Why a write was refused on the memory quota. C xenstored 4.17 answers
/// EIO: its write_node_raw turns the quota's ENOMEM into EIO.
pub const MEMORY_QUOTA: Fail = Fail::new(XsError::Eio, Reason::QuotaMemory);

/// Refuses a change that would take a charged domain to its memory quota
/// or past it (C's `domain_memory_add`: used + new >= quota). `gains` are
/// bytes by charged domain; shrinking is always allowed.
fn check_memory<T: Tree + ?Sized>(
    t: &T,
    limits: &Limits,
    gains: &[(u32, isize)],
) -> Result<(), Fail> {
    for (i, &(domid, _)) in gains.iter().enumerate() {
        if gains[..i].iter().any(|g| g.0 == domid) {
            continue;
        }
        let gain: isize = gains.iter().filter(|g| g.0 == domid).map(|g| g.1).sum();
        if gain <= 0 {
            continue;
        }
        if let Some(max) = (limits.memory)(domid) {
            if t.memory(domid) + gain as usize >= max {
                return Err(MEMORY_QUOTA);
            }
        }
    }
    Ok(())
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
            Fail(XsError::Enoent, None)
        } else {
            Fail::new(XsError::Eacces, Reason::Perm)
        });
    }
    let node = t.get(path).unwrap();
    if node.perms.for_identity(who) & need != need {
        return Err(Fail::new(XsError::Eacces, Reason::Perm));
    }
    Ok(node)
}

/// `record_size` is the node's as it would be written.
fn check_size(record_size: usize, who: &Identity, limits: &Limits) -> Result<(), Fail> {
    if !who.privileged && record_size >= limits.node_size {
        return Err(Fail::new(XsError::Enospc, Reason::QuotaNodeSize));
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
            let old = node.memory(path) as isize;
            let new = NodeRef { value, ..node };
            let (size, gain) = (new.record_size(), new.memory(path) as isize - old);
            let perms = Perms(node.perms.to_vec());
            check_size(size, who, limits)?;
            let charged = t.charged(perms.owner());
            check_memory(t, limits, &[(charged, gain)])?;
            t.sets_value(path);
            t.rewrite(path, value, perms);
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
    let added = path::basename(missing[missing.len() - 1]);
    // Not copied: a big directory's listing is added to in place.
    let anchor = t.get(existing).unwrap();
    let anchor_size = anchor.record_size() + added.len() + 1;
    let anchor_owner = anchor.perms.owner();
    let mut perms = Perms(anchor.perms.to_vec());
    if !who.privileged {
        perms.0[0].domid = who.domid;
        let owner = who.domid;
        if t.owned(owner) + missing.len() > limits.nodes {
            return Err(Fail::new(XsError::Enospc, Reason::QuotaNodes));
        }
    }
    check_size(anchor_size, who, limits)?;
    let leaf = Node::new(value, perms.clone());
    check_size(leaf.view().record_size(), who, limits)?;
    // Every new node as an empty directory, the leaf's value and one
    // child entry each (the leaf has none), and the anchor's new entry.
    let empty = Node::new(b"", perms.clone());
    let new_bytes: usize = missing
        .iter()
        .map(|p| empty.view().memory(p) + path::basename(p).len() + 1)
        .sum::<usize>()
        + value.len()
        - added.len()
        - 1;
    let gains = [
        (t.charged(perms.owner()), new_bytes as isize),
        (t.charged(anchor_owner), added.len() as isize + 1),
    ];
    check_memory(t, limits, &gains)?;
    // Bottom up, as upstream writes them: generations come out the same.
    t.put(path, leaf);
    for (i, p) in missing.iter().enumerate().skip(1) {
        let mut n = Node::new(b"", perms.clone());
        n.add_child(path::basename(missing[i - 1]));
        t.put(p, n);
    }
    t.add_child(existing, added);
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
        return Err(Fail::new(XsError::Einval, Reason::RmRoot));
    }
    let parent = path::parent(path);
    // Only a transaction's view can lack the parent (it found it missing
    // earlier, then the node was created outside): upstream's _rm says EINVAL.
    if t.get(parent).is_none() {
        return Err(Fail::new(XsError::Einval, Reason::RmParentMissingInTx));
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
    let name = path::basename(path);
    if !t.has_child(parent, name) {
        // A transaction's copy of the parent predates the node's creation
        // outside: upstream's delete_child finds no entry and says EIO,
        // after deleting the node in the transaction (the commit conflicts:
        // this answer depends on the listing).
        t.depends_on(parent, Aspect::Children);
        return Err(Fail::new(XsError::Eio, Reason::RmNotAChildInTx));
    }
    t.remove_child(parent, name);
    Ok(changes)
}

fn collect_post_order<T: Tree + ?Sized>(t: &mut T, path: &str, out: &mut Vec<(String, Perms)>) {
    t.lists(path);
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
    limits: &Limits,
) -> Result<Change, Fail> {
    let node = lookup(t, path, who, WRITE | OWNER)?;
    if !who.privileged && perms.owner() != node.perms.owner() {
        return Err(Fail::new(XsError::Eperm, Reason::PermOwner));
    }
    let after = NodeRef {
        perms: &perms.0,
        ..node
    }
    .memory(path);
    let before = node.memory(path);
    let (old, value) = (Perms(node.perms.to_vec()), node.value.to_vec());
    let before = (t.charged(old.owner()), before);
    let after = (t.charged(perms.owner()), after);
    let gains = [
        (before.0, -(before.1 as isize)),
        (after.0, after.1 as isize),
    ];
    check_memory(t, limits, &gains)?;
    t.rewrite(path, &value, perms);
    Ok(Change {
        path: path.to_string(),
        exact: false,
        old_perms: Some(old),
    })
}

/// DIRECTORY-type lookups: READ's, and the answer holds the children.
pub fn list<'t, T: Tree + ?Sized>(
    t: &'t mut T,
    path: &str,
    who: &Identity,
) -> Result<NodeRef<'t>, Fail> {
    t.lists(path);
    lookup(t, path, who, READ)
}

/// READ-type lookups (the answer may hold the value).
pub fn read<'t, T: Tree + ?Sized>(
    t: &'t mut T,
    path: &str,
    who: &Identity,
) -> Result<NodeRef<'t>, Fail> {
    t.depends_on(path, Aspect::Value);
    lookup(t, path, who, READ)
}
