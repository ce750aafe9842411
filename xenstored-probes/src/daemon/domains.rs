//! Handlers of the domain operations (INTRODUCE, RELEASE, GET_DOMAIN_PATH,
//! IS_DOMAIN_INTRODUCED, RESUME, SET_TARGET) and a domain's teardown, on
//! RELEASE or when it dies unreleased.

use super::watches::special;
use super::{Call, Daemon};
use crate::conn::transport::DomainChanges;
use crate::daemon::domain_registry::Domain;
use crate::log;
use crate::log::notable::{Kind, Notable};
use crate::store::perms::Identity;
use crate::store::tree;
use crate::wire::error::{Fail, Reason};
use crate::wire::path;
use crate::wire::request;
use crate::wire::XsError;

pub(super) fn introduce(d: &mut Daemon, call: &Call, p: &[u8]) -> Result<(), Fail> {
    let req = request::introduce(p)?;
    if d.domains.get(req.domid).is_some() {
        return Ok(());
    }
    let attachment = d
        .backend
        .introduce(req.domid, req.gfn, req.port)
        .map_err(|e| {
            d.log
                .log(call.conn, format_args!("INTRODUCE {}: {e}", req.domid));
            Fail::new(XsError::Einval, Reason::Backend)
        })?;
    d.effects.attached.push((req.domid, attachment));
    let conn_slot = d.reserve_conn_id();
    d.domains.insert(
        req.domid,
        Domain {
            port: req.port,
            gfn: req.gfn,
            conn_slot,
            ..Domain::default()
        },
    );
    d.fire(call.serial, call.conn, &special(path::INTRODUCE_DOMAIN));
    log::notable(
        Notable::new(
            Kind::DomainIntroduced,
            format!("domain {} introduced", req.domid),
        )
        .domid(req.domid),
    );
    Ok(())
}

/// Replies before or after @releaseDomain fires, as upstream (see
/// `release_waits_for_reply`).
pub(super) fn release(d: &mut Daemon, call: &Call, p: &[u8]) -> Result<(), Fail> {
    let domid = request::domid(p)?;
    if domid == 0 {
        return Err(Fail::new(XsError::Einval, Reason::Domid));
    }
    d.domains
        .get(domid)
        .ok_or(Fail::new(XsError::Enoent, Reason::Domain))?;
    if d.release_waits_for_reply(call.conn, domid) {
        d.ack(call);
        d.release(domid, call.serial, call.conn, "released");
    } else {
        d.release(domid, call.serial, call.conn, "released");
        d.ack(call);
    }
    Ok(())
}

pub(super) fn get_domain_path(
    _: &mut Daemon,
    _: &Call,
    p: &[u8],
    reply: &mut Vec<u8>,
) -> Result<(), Fail> {
    let domid = request::domid(p)?;
    reply.extend_from_slice(path::domain_path(domid).as_bytes());
    reply.push(0);
    Ok(())
}

pub(super) fn is_introduced(
    d: &mut Daemon,
    _: &Call,
    p: &[u8],
    reply: &mut Vec<u8>,
) -> Result<(), Fail> {
    let domid = request::domid(p)?;
    reply.extend_from_slice(if d.domains.is_introduced(domid) {
        b"T\0"
    } else {
        b"F\0"
    });
    Ok(())
}

pub(super) fn resume(d: &mut Daemon, _: &Call, p: &[u8]) -> Result<(), Fail> {
    let domid = request::domid(p)?;
    if domid == 0 {
        return Err(Fail::new(XsError::Einval, Reason::Domid));
    }
    let dom = d
        .domains
        .get_mut(domid)
        .ok_or(Fail::new(XsError::Enoent, Reason::Domain))?;
    dom.shutdown = false;
    Ok(())
}

/// The (device-model) domain acts for its target from now on, on every
/// connection, present and future.
pub(super) fn set_target(d: &mut Daemon, _: &Call, p: &[u8]) -> Result<(), Fail> {
    let req = request::set_target(p)?;
    if d.domains.get(req.target).is_none() {
        return Err(Fail::new(XsError::Enoent, Reason::Target));
    }
    d.domains
        .set_target(req.domid, req.target)
        .ok_or(Fail::new(XsError::Enoent, Reason::Domain))?;
    for id in d.conns_of.get(&req.domid).into_iter().flatten() {
        if let Some(c) = d.conns.get_mut(id) {
            c.ident.target = Some(req.target);
        }
    }
    Ok(())
}

impl Daemon {
    /// Connection `id` was its domain's ring and the domain died without
    /// a RELEASE (its page vanished): released as if dom0 had asked.
    pub fn domain_gone(&mut self, id: u32) {
        let Some(domid) = self.conns.get(&id).map(|c| c.domid()) else {
            return;
        };
        self.queued_events.clear();
        self.close(id, 0, "domain gone");
        if domid != 0 && self.domains.get(domid).is_some() {
            self.release(domid, 0, id, "ring gone");
        }
    }

    /// Introduced guests (not dom0) and whether their shutdown was announced.
    pub fn guests(&self) -> Vec<(u32, bool)> {
        self.domains.guests()
    }

    /// The hypervisor's news (VIRQ_DOM_EXC), as xenstored's check_domains:
    /// dead domains are released as if dom0 had asked, their connections
    /// closed first; shutdowns are announced by one @releaseDomain unless a
    /// release just fired it. Unlike upstream, the domains that died
    /// together are released together: one @releaseDomain for all of
    /// them, so M deaths cost each watcher one
    /// event, not M (watchers of @releaseDomain look at every domain
    /// anyway, as xl's do).
    pub fn domains_changed(&mut self, changes: &DomainChanges) {
        self.queued_events.clear();
        let mut announce = false;
        for &d in &changes.shut_down {
            if let Some(dom) = self.domains.get_mut(d) {
                dom.shutdown = true;
                announce = true;
            }
        }
        let mut dead: Vec<u32> = changes
            .dead
            .iter()
            .copied()
            .filter(|&d| d != 0 && self.domains.get(d).is_some())
            .collect();
        dead.sort_unstable();
        dead.dedup();
        for &d in &dead {
            let ids = self.domain_conns(d).to_vec();
            for c in ids {
                self.close(c, 0, "domain died");
            }
        }
        if !dead.is_empty() {
            self.release_all(&dead, 0, 0, "died");
        } else if announce {
            self.fire(0, 0, &special(path::RELEASE_DOMAIN));
        }
    }

    /// Whether upstream tears domain `d` down only after answering the
    /// RELEASE from connection `id`. Its event loop holds a reference on the
    /// connection it serves and on the next one in creation order, so
    /// freeing the domain's connection is deferred past the reply when that
    /// connection is the releaser's own or the very next one; otherwise
    /// @releaseDomain fires before the reply.
    fn release_waits_for_reply(&self, id: u32, d: u32) -> bool {
        let slot_of = |domid: u32| self.domains.get(domid).map(|dom| dom.conn_slot);
        let Some(target) = slot_of(d) else {
            return false;
        };
        let releaser = match self.conns.get(&id) {
            Some(c) if c.domid() != 0 => slot_of(c.domid()).unwrap_or(id),
            _ => id,
        };
        if releaser == target {
            return true;
        }
        // dom0 clients are connections of their own (their ids ascend in
        // creation order); a guest's ring connection is its domain's slot
        let sockets = self.domain_conns(0);
        let next_socket = sockets.get(sockets.partition_point(|&s| s <= releaser));
        let next_ring = self.domains.slot_after(releaser);
        next_socket.copied().into_iter().chain(next_ring).min() == Some(target)
    }

    /// The domain's connections close (their transactions dropped, their
    /// watches gone, so its own nodes' removal fires nothing at it), the
    /// nodes it owns are removed as upstream does for a dead domain, and
    /// @releaseDomain fires.
    /// `why`: released by dom0, died, its ring gone.
    fn release(&mut self, domid: u32, serial: u64, firer: u32, why: &str) {
        self.release_all(&[domid], serial, firer, why);
    }

    /// [`Daemon::release`] for several domains (`domids` sorted), with one
    /// @releaseDomain. Costs their own connections and the nodes that
    /// mention them (the store's index, domain_mentions.rs), not the host's: no
    /// pass over all connections or nodes.
    fn release_all(&mut self, domids: &[u32], serial: u64, firer: u32, why: &str) {
        debug_assert!(domids.is_sorted());
        for &domid in domids {
            log::notable(
                Notable::new(Kind::DomainGone, format!("domain {domid} gone: {why}"))
                    .domid(domid)
                    .reason(why),
            );
            self.quota_log.remove(&domid);
            let ids = self.domain_conns(domid).to_vec();
            for c in ids {
                self.close(c, serial, "domain released");
            }
            self.domains.remove(domid);
            self.quotas.forget_domain(domid);
            self.outstanding.forget(domid);
            self.backend.release(domid);
            self.effects.released.push(domid);
        }
        for &t in domids {
            for x in self.domains.forget_target(t) {
                for id in self.conns_of.get(&x).into_iter().flatten() {
                    if let Some(c) = self.conns.get_mut(id) {
                        if c.ident.target == Some(t) {
                            c.ident.target = None;
                        }
                    }
                }
            }
        }
        let found = self.store.mentioning(domids);
        for p in &found.owned {
            if p == "/" || self.store.node(p).is_none() {
                continue;
            }
            if let Ok(changes) = tree::remove(&mut self.store, p, &Identity::dom0()) {
                for c in &changes {
                    self.fire(serial, firer, c);
                }
            }
        }
        self.store.ignore_released(&found.named, domids);
        self.fire(serial, firer, &special(path::RELEASE_DOMAIN));
    }
}
