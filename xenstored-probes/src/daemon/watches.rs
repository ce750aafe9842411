//! Handlers of WATCH, UNWATCH and RESET_WATCHES, and watch firing: which
//! connections a change sends an event to, and when (now, or at the
//! commit of the transaction that made it).

use super::{Call, Daemon};
use crate::conn::Connection;
use crate::daemon::quota::Kind;
use crate::daemon::quota::Quotas;
use crate::probes;
use crate::store::perms::{Identity, Perm, PermList, READ};
use crate::store::tree::Change;
use crate::store::Store;
use crate::watch::Watch;
use crate::wire::error::{Fail, Reason};
use crate::wire::path;
use crate::wire::request;
use crate::wire::{MsgType, XsError, HEADER_LEN};

/// Replies before the watch's initial event, as upstream.
pub(super) fn watch(d: &mut Daemon, call: &Call, p: &[u8]) -> Result<(), Fail> {
    let req = request::watch(p)?;
    let domid = call.who.domid;
    let path_max = d.quotas.get(Kind::PathMax, domid) as usize;
    let (abs, relative) =
        path::resolve_watch(req.path, domid, path_max).map_err(|e| Fail::new(e, Reason::Path))?;
    if !call.who.privileged {
        let ids = d.domain_conns(domid);
        let conns = ids.iter().filter_map(|id| d.conns.get(id));
        let used: usize = conns.map(|c| c.watches.count).sum();
        if used >= d.quotas.get(Kind::Watches, domid) as usize {
            return Err(Fail::new(XsError::E2big, Reason::QuotaWatches));
        }
        let cost = abs.len() + req.token.len();
        if d.memory(domid) + cost >= d.quotas.get(Kind::Memory, domid) as usize {
            return Err(Fail::new(XsError::Enomem, Reason::QuotaMemory));
        }
    }
    let w = Watch {
        path: abs,
        token: req.token.into(),
        relative,
    };
    let conn = super::caller_in(&mut d.conns, call)?;
    if d.watches.add(call.conn, &mut conn.watches, w).is_none() {
        return Err(Fail::new(XsError::Eexist, Reason::WatchExists));
    }
    d.ack(call);
    let Some(conn) = d.conns.get_mut(&call.conn) else {
        return Ok(()); // replied already
    };
    let who = conn.who();
    let room = event_room(&d.store, &d.quotas, conn);
    if let Some(w) = d.watches.of(call.conn).last() {
        let event_path = w.event_path(&w.path, domid);
        if event_cost(event_path, &w.token) < room {
            let out = conn.output(&mut d.spare_output);
            encode_event(out, &who, call.serial, call.conn, event_path, &w.token);
        }
    }
    if let Some(ticket) = &d.ticket {
        conn.charge(ticket);
    }
    Daemon::mark_dirty(&mut d.effects, conn);
    Ok(())
}

/// An invalid path is EINVAL, as C xenstored answers from 4.18 on (4.17
/// looked it up among the watches: ENOENT; DIFFERENCES.md).
pub(super) fn unwatch(d: &mut Daemon, call: &Call, p: &[u8]) -> Result<(), Fail> {
    let req = request::watch(p)?;
    let domid = call.who.domid;
    let path_max = d.quotas.get(Kind::PathMax, domid) as usize;
    let (abs, _) =
        path::resolve_watch(req.path, domid, path_max).map_err(|e| Fail::new(e, Reason::Path))?;
    let conn = super::caller_in(&mut d.conns, call)?;
    if !d
        .watches
        .remove(call.conn, &mut conn.watches, &abs, req.token)
    {
        return Err(Fail::new(XsError::Enoent, Reason::NoSuchWatch));
    }
    Ok(())
}

/// Drops the connection's watches and its transactions.
pub(super) fn reset_watches(d: &mut Daemon, call: &Call, _: &[u8]) -> Result<(), Fail> {
    let conn = super::caller_in(&mut d.conns, call)?;
    d.watches.clear(call.conn, &mut conn.watches);
    conn.drop_transactions(call.serial, "reset");
    Ok(())
}

/// A change to a special node (@introduceDomain, @releaseDomain).
pub(super) fn special(name: &str) -> Change {
    Change {
        path: name.to_string(),
        exact: true,
        old_perms: None,
    }
}

impl Daemon {
    /// Fires now, or records for the commit of the request's transaction.
    pub(super) fn changed(&mut self, call: &Call, changes: impl IntoIterator<Item = Change>) {
        match call.tx {
            Some(t) => {
                if let Some(tx) = self
                    .conns
                    .get_mut(&call.conn)
                    .and_then(|c| c.transactions.get_mut(&t))
                {
                    tx.changes.extend(changes);
                }
            }
            None => {
                for c in changes {
                    self.fire(call.serial, call.conn, &c);
                }
            }
        }
    }

    /// Queues a watch event for every watch `change` matches whose
    /// connection may read the node (or its parent, or the node as it was).
    pub(super) fn fire(&mut self, serial: u64, firer: u32, change: &Change) {
        // Each looked up once, and only when an unprivileged watcher needs
        // it: the parent only for one the node itself does not admit (a
        // lookup in a large store misses the cache).
        let store = &self.store;
        let node_perms = std::cell::OnceCell::new();
        let parent_perms = std::cell::OnceCell::new();
        let allowed = |who: &Identity| {
            if who.privileged {
                return true;
            }
            let node = *node_perms.get_or_init(|| store.node(&change.path).map(|n| n.perms));
            let can_read = |p: Option<&[Perm]>| p.is_some_and(|p| p.for_identity(who) & READ != 0);
            if can_read(change.old_perms.as_deref()) || can_read(node) {
                return true;
            }
            if node.is_none() && change.old_perms.is_none() {
                return false;
            }
            let parent = *parent_perms.get_or_init(|| {
                let has_parent = change.path.starts_with('/') && change.path != "/";
                has_parent
                    .then(|| store.node(path::parent(&change.path)).map(|n| n.perms))
                    .flatten()
            });
            can_read(parent)
        };
        let mut hits = std::mem::take(&mut self.watch_hits);
        self.watches.matching(change, &mut hits);
        for mine in hits.chunk_by(|a, b| a.0 .0 == b.0 .0) {
            let Some(conn) = self.conns.get_mut(&mine[0].0 .0) else {
                continue;
            };
            let (who, domid, ident) = (conn.who(), conn.domid(), conn.ident);
            if !allowed(&ident) {
                continue;
            }
            let mut queued = false;
            let mut room = event_room(store, &self.quotas, conn);
            for w in mine.iter().filter_map(|&(_, s)| self.watches.slot(s)) {
                let event_path = w.event_path(&change.path, domid);
                // As C xenstored, an event that would take an unprivileged
                // receiver to its memory quota is dropped.
                let cost = event_cost(event_path, &w.token);
                if cost >= room {
                    self.dropped_events += 1;
                    continue;
                }
                if !self.queued_events.insert(who.conn, event_path, &w.token) {
                    continue;
                }
                let out = conn.output(&mut self.spare_output);
                encode_event(out, &who, serial, firer, event_path, &w.token);
                room -= cost;
                queued = true;
            }
            if queued {
                if let Some(ticket) = &self.ticket {
                    conn.charge(ticket);
                }
                Self::mark_dirty(&mut self.effects, conn);
            }
        }
        self.watch_hits = hits;
    }
}

/// The bytes a watch event costs its receiver's memory quota.
fn event_cost(path: &str, token: &[u8]) -> usize {
    HEADER_LEN + path.len() + 1 + token.len() + 1
}

/// How many bytes of events `conn` may still be sent before its domain
/// reaches its memory quota (unlimited when privileged). Counts this
/// connection's share only: a domain has one ring.
fn event_room(store: &Store, quotas: &Quotas, conn: &Connection) -> usize {
    if conn.ident.privileged {
        return usize::MAX;
    }
    let used = store.memory(conn.domid()) + conn.memory() + conn.watches.bytes;
    (quotas.get(Kind::Memory, conn.domid()) as usize).saturating_sub(used)
}

/// A watch event for `who`, fired by request `serial` of connection `firer`.
fn encode_event(
    out: &mut Vec<u8>,
    who: &probes::Who,
    serial: u64,
    firer: u32,
    path: &str,
    token: &[u8],
) {
    let parts: [&[u8]; 4] = [path.as_bytes(), b"\0", token, b"\0"];
    crate::wire::frame::encode(out, MsgType::WatchEvent as u32, 0, 0, &parts);
    probes::watch_event(serial, who, firer, path.as_bytes(), token);
}
