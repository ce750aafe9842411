//! Handlers of the node operations: READ, DIRECTORY, DIRECTORY_PART,
//! GET_PERMS, WRITE, MKDIR, RM, SET_PERMS. Each runs on the store, or on
//! the view of the transaction it belongs to; changes fire watches now, or
//! at the transaction's commit.

use super::{Call, Daemon};
use crate::daemon::domain_registry::DOMID_FIRST_RESERVED;
use crate::daemon::quota::{Kind, Quotas};
use crate::store::node::NodeRef;
use crate::store::perms::{Identity, PermList, Perms};
use crate::store::tree::{self, Limits};
use crate::wire::error::{Fail, Reason};
use crate::wire::path;
use crate::wire::request;
use crate::wire::{XsError, PAYLOAD_MAX};
use std::borrow::Cow;
use std::io::Write;

pub(super) fn read(d: &mut Daemon, call: &Call, p: &[u8], reply: &mut Vec<u8>) -> Result<(), Fail> {
    let raw = request::path(p)?;
    reply_from(d, call, raw, NODE, |n| reply.extend_from_slice(n.value))
}

/// A listing too long for one reply is refused as handle() refuses any
/// such reply (E2BIG), without copying it first: libxenstore asks
/// DIRECTORY of a big directory before it pages it.
pub(super) fn directory(
    d: &mut Daemon,
    call: &Call,
    p: &[u8],
    reply: &mut Vec<u8>,
) -> Result<(), Fail> {
    let raw = request::path(p)?;
    let mut fits = true;
    reply_from(d, call, raw, CHILDREN, |n| {
        fits = n.children.len() <= PAYLOAD_MAX;
        if fits {
            n.children.extend_into(reply)
        }
    })?;
    if fits {
        Ok(())
    } else {
        Err(Fail::new(XsError::E2big, Reason::ReplyTooLong))
    }
}

pub(super) fn directory_part(
    d: &mut Daemon,
    call: &Call,
    p: &[u8],
    reply: &mut Vec<u8>,
) -> Result<(), Fail> {
    let req = request::directory_part(p)?;
    reply_from(d, call, req.path, CHILDREN, |n| {
        directory_part_reply(n, req.offset, reply)
    })
}

pub(super) fn get_perms(
    d: &mut Daemon,
    call: &Call,
    p: &[u8],
    reply: &mut Vec<u8>,
) -> Result<(), Fail> {
    let raw = request::path(p)?;
    if raw.starts_with(b"@") {
        return special_perms(d, raw, &call.who, reply);
    }
    reply_from(d, call, raw, NODE, |n| n.perms.write_to(reply))
}

/// GET_PERMS of @introduceDomain/@releaseDomain: their permissions, as C
/// xenstored answers from 4.18 on (4.17: EINVAL; DIFFERENCES.md). Any
/// other @ name stays EINVAL, as in both.
fn special_perms(d: &Daemon, name: &[u8], who: &Identity, reply: &mut Vec<u8>) -> Result<(), Fail> {
    let node = std::str::from_utf8(name)
        .ok()
        .and_then(|name| d.store.special(name))
        .ok_or(Fail::new(XsError::Einval, Reason::Path))?;
    if node.perms.for_identity(who) & crate::store::perms::READ == 0 {
        return Err(Fail::new(XsError::Eacces, Reason::Perm));
    }
    node.perms.write_to(reply);
    Ok(())
}

pub(super) fn write(d: &mut Daemon, call: &Call, p: &[u8]) -> Result<(), Fail> {
    let req = request::write(p)?;
    write_node(d, call, req.path, Some(req.value))
}

pub(super) fn mkdir(d: &mut Daemon, call: &Call, p: &[u8]) -> Result<(), Fail> {
    let raw = request::path(p)?;
    write_node(d, call, raw, None)
}

pub(super) fn rm(d: &mut Daemon, call: &Call, p: &[u8]) -> Result<(), Fail> {
    let raw = request::path(p)?;
    let path = node_path(d, call, raw)?;
    let changes = d.tree(call, |t, _, _| tree::remove(t, &path, &call.who))?;
    d.changed(call, changes);
    Ok(())
}

pub(super) fn set_perms(d: &mut Daemon, call: &Call, p: &[u8]) -> Result<(), Fail> {
    let req = request::set_perms(p)?;
    let domid = call.who.domid;
    if !call.who.privileged && req.count > d.quotas.get(Kind::Permissions, domid) as usize {
        return Err(Fail::new(XsError::Enospc, Reason::QuotaPermissions));
    }
    let perms = Perms::parse(req.perms, req.count).map_err(|e| Fail::new(e, Reason::Perms))?;
    if req.path.first() == Some(&b'@') {
        return set_special_perms(d, req.path, perms, &call.who);
    }
    let path = node_path(d, call, req.path)?;
    // Xen has no such domain (we cannot ask it about others).
    if perms.0.iter().any(|e| e.domid >= DOMID_FIRST_RESERVED) {
        return Err(Fail::new(XsError::Enoent, Reason::PermsNoSuchDomain));
    }
    let change = d.tree(call, |t, q, memory| {
        let limits = limits(q, call.who.domid, memory);
        tree::set_perms(t, &path, perms, &call.who, &limits)
    })?;
    d.changed(call, [change]);
    Ok(())
}

/// The absolute path a request names (relative paths are under the
/// connection's domain home).
fn node_path<'p>(d: &Daemon, call: &Call, raw: &'p [u8]) -> Result<Cow<'p, str>, Fail> {
    let domid = call.who.domid;
    let path_max = d.quotas.get(Kind::PathMax, domid) as usize;
    path::resolve(raw, domid, path_max).map_err(|e| Fail::new(e, Reason::Path))
}

/// Whether a READ-type request's answer holds the node's children
/// (`tree::list`) or not (`tree::read`).
const CHILDREN: bool = true;
const NODE: bool = false;

/// A READ-type request: `emit` puts into the reply what it takes of the
/// node at `raw`.
fn reply_from(
    d: &mut Daemon,
    call: &Call,
    raw: &[u8],
    children: bool,
    emit: impl FnOnce(NodeRef<'_>),
) -> Result<(), Fail> {
    let path = node_path(d, call, raw)?;
    d.tree(call, |t, _, _| {
        let node = if children {
            tree::list(t, &path, &call.who)
        } else {
            tree::read(t, &path, &call.who)
        };
        node.map(emit)
    })
}

/// WRITE (a value) or MKDIR (None).
fn write_node(d: &mut Daemon, call: &Call, raw: &[u8], value: Option<&[u8]>) -> Result<(), Fail> {
    let path = node_path(d, call, raw)?;
    let change = d.tree(call, |t, q, memory| {
        let limits = limits(q, call.who.domid, memory);
        tree::write(t, &path, value, &call.who, &limits)
    })?;
    d.changed(call, change);
    Ok(())
}

/// The limits on a request of domain `caller` (each applies only to
/// unprivileged writers but the memory quota, see `Limits::memory`).
fn limits<'m>(q: &Quotas, caller: u32, memory: &'m dyn Fn(u32) -> Option<usize>) -> Limits<'m> {
    Limits {
        nodes: q.get(Kind::Nodes, caller) as usize,
        node_size: q.get(Kind::NodeSize, caller) as usize,
        memory,
    }
}

/// SET_PERMS on @introduceDomain/@releaseDomain: not nodes of the tree
/// (special_perms() reads them), outside transactions, no watch fires.
fn set_special_perms(
    d: &mut Daemon,
    name: &[u8],
    perms: Perms,
    who: &Identity,
) -> Result<(), Fail> {
    let name =
        std::str::from_utf8(name).map_err(|_| Fail::new(XsError::Enoent, Reason::Special))?;
    let node = d
        .store
        .special(name)
        .ok_or(Fail::new(XsError::Enoent, Reason::Special))?;
    let need = crate::store::perms::WRITE | crate::store::perms::OWNER;
    if node.perms.for_identity(who) & need != need {
        return Err(Fail::new(XsError::Eacces, Reason::Perm));
    }
    d.store.set_special_perms(name, perms);
    Ok(())
}

/// DIRECTORY_PART as C xenstored: the node's generation, then as many
/// whole children from byte `offset` as fit, and an empty string once the
/// list is complete.
fn directory_part_reply(n: NodeRef<'_>, offset: usize, reply: &mut Vec<u8>) {
    write!(reply, "{}\0", n.generation).expect("writing to a Vec");
    let gen_len = reply.len();
    if offset >= n.children.len() {
        reply.push(0);
        return;
    }
    let max = PAYLOAD_MAX - gen_len - 1;
    let rest = n.children.len() - offset;
    n.children.copy_range(offset, max, reply);
    // Up to the last name ending within `max` bytes: one memrchr, not a
    // walk over a 2000-name listing.
    let len = if rest <= max {
        rest
    } else {
        memchr::memrchr(0, &reply[gen_len..]).map_or(0, |nul| nul + 1)
    };
    reply.truncate(gen_len + len);
    if offset + len == n.children.len() {
        reply.push(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::children::Children;
    use crate::store::listing::Listing;
    use crate::store::perms::Perm;

    /// Paging a long listing from offset 0 gives it back whole, each page
    /// as many whole names as fit one reply, the last one ending with an
    /// empty name: from contiguous bytes and from a big directory's chunks.
    #[test]
    fn directory_part_pages_are_whole_names_filling_each_reply() {
        let mut children = Vec::new();
        for i in 0..3000 {
            let len = 1 + (i * 7) % 40;
            children.extend(format!("{i}").bytes());
            children.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, len));
            children.push(0);
        }
        let listing = Listing::new(&children);
        for children in [Children::Flat(&children), Children::Listed(&listing)] {
            assert_eq!(pages(children), children.to_vec(), "{children:?}");
        }
    }

    fn pages(children: Children<'_>) -> Vec<u8> {
        let all = children.to_vec();
        let perms = [Perm {
            domid: 0,
            access: 0,
        }];
        let n = NodeRef {
            value: b"",
            perms: &perms,
            children,
            generation: 42,
        };
        let (mut offset, mut got) = (0, Vec::new());
        loop {
            let mut reply = Vec::new();
            directory_part_reply(n, offset, &mut reply);
            assert!(reply.len() <= PAYLOAD_MAX);
            let page = reply.strip_prefix(b"42\0").expect("generation first");
            if let Some(last) = page
                .strip_suffix(b"\0\0")
                .or(page.strip_suffix(b"\0").filter(|p| p.is_empty()))
            {
                got.extend_from_slice(last);
                if !last.is_empty() {
                    got.push(0);
                }
                return got;
            }
            // the next name would not have fitted
            let next = all[offset + page.len()..]
                .iter()
                .position(|&b| b == 0)
                .unwrap()
                + 1;
            assert!(reply.len() + next + 1 > PAYLOAD_MAX);
            got.extend_from_slice(page);
            offset += page.len();
        }
    }
}
