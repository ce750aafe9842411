//! Domains the daemon knows: dom0 from the start, others from INTRODUCE
//! until RELEASE. Which connections belong to a domain is the daemon's
//! business (daemon.rs); this is the registry.

use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};

pub use xenstore_proto::wire::DOMID_FIRST_RESERVED;
/// DOMID_SELF, which IS_DOMAIN_INTRODUCED answers "T" for.
pub const DOMID_SELF: u32 = 0x7ff0;

#[derive(Clone, Debug, Default)]
pub struct Domain {
    pub port: u32,
    /// INTRODUCE's page frame (oxenstored maps the ring again by it).
    pub gfn: u64,
    /// SET_TARGET: this (device-model) domain acts for `target`.
    pub target: Option<u32>,
    /// Features set by SET_FEATURE (newest xenstore.txt).
    pub features: u32,
    /// Where its ring connection sits in the order connections were
    /// created (a connection id, reserved at INTRODUCE; 0 for dom0):
    /// upstream's event loop decides the @releaseDomain order by it.
    pub conn_slot: u32,
    /// Its shutdown was announced (@releaseDomain); XS_RESUME clears it.
    pub shutdown: bool,
    /// Over its soft memory quota, as last logged.
    pub soft_quota_reported: bool,
    /// Over its hard memory quota (not read from), as last logged.
    pub hard_quota_reported: bool,
}

#[derive(Debug)]
pub struct Domains {
    all: BTreeMap<u32, Domain>,
    /// The domains whose `target` is the key, so a target's release finds
    /// the connections acting for it without a pass over all of them.
    targeted_by: FxHashMap<u32, Vec<u32>>,
    /// Guests' `conn_slot`s, ordered: where each ring connection sits in
    /// creation order (see `Daemon::release_waits_for_reply`).
    slots: BTreeSet<u32>,
}

impl Default for Domains {
    fn default() -> Self {
        let mut all = BTreeMap::new();
        all.insert(0, Domain::default());
        Domains {
            all,
            targeted_by: FxHashMap::default(),
            slots: BTreeSet::new(),
        }
    }
}

impl Domains {
    pub fn get(&self, domid: u32) -> Option<&Domain> {
        self.all.get(&domid)
    }

    /// Its `target` is changed through [`Domains::set_target`] only.
    pub fn get_mut(&mut self, domid: u32) -> Option<&mut Domain> {
        self.all.get_mut(&domid)
    }

    /// SET_TARGET; None when `domid` is unknown.
    pub fn set_target(&mut self, domid: u32, target: u32) -> Option<()> {
        let old = self.all.get_mut(&domid)?.target.replace(target);
        self.untarget(domid, old);
        self.targeted_by.entry(target).or_default().push(domid);
        Some(())
    }

    /// The domains acting for `target` (kept after `target` is removed,
    /// until [`Domains::forget_target`]).
    #[cfg(test)]
    pub fn targeting(&self, target: u32) -> impl Iterator<Item = u32> + '_ {
        self.targeted_by.get(&target).into_iter().flatten().copied()
    }

    /// `target` is released: the domains acting for it act for nobody (a
    /// new domain reusing the id is not theirs); returns them.
    pub fn forget_target(&mut self, target: u32) -> Vec<u32> {
        let acting = self.targeted_by.remove(&target).unwrap_or_default();
        for x in &acting {
            if let Some(d) = self.all.get_mut(x) {
                d.target = None;
            }
        }
        acting
    }

    fn untarget(&mut self, domid: u32, target: Option<u32>) {
        let Some(t) = target else { return };
        if let Some(v) = self.targeted_by.get_mut(&t) {
            v.retain(|&x| x != domid);
            if v.is_empty() {
                self.targeted_by.remove(&t);
            }
        }
    }

    pub fn is_introduced(&self, domid: u32) -> bool {
        domid == DOMID_SELF || self.all.contains_key(&domid)
    }

    pub fn insert(&mut self, domid: u32, d: Domain) {
        let target = d.target;
        if domid != 0 {
            self.slots.insert(d.conn_slot);
        }
        if let Some(old) = self.all.insert(domid, d) {
            self.untarget(domid, old.target);
            if old.conn_slot != self.all[&domid].conn_slot {
                self.slots.remove(&old.conn_slot);
            }
        }
        if let Some(t) = target {
            self.targeted_by.entry(t).or_default().push(domid);
        }
    }

    pub fn remove(&mut self, domid: u32) -> Option<Domain> {
        let d = self.all.remove(&domid)?;
        self.untarget(domid, d.target);
        if domid != 0 {
            self.slots.remove(&d.conn_slot);
        }
        Some(d)
    }

    /// The first guest's ring slot after `slot`, in creation order.
    pub fn slot_after(&self, slot: u32) -> Option<u32> {
        self.slots.range(slot.saturating_add(1)..).next().copied()
    }

    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.all.keys().copied()
    }

    /// Introduced guests (not dom0) and whether their shutdown was announced.
    pub fn guests(&self) -> Vec<(u32, bool)> {
        self.all
            .iter()
            .filter(|(&id, _)| id != 0)
            .map(|(&id, d)| (id, d.shutdown))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest(conn_slot: u32, target: Option<u32>) -> Domain {
        Domain {
            conn_slot,
            target,
            ..Domain::default()
        }
    }

    #[test]
    fn slots_and_targets_follow_insert_set_target_and_remove() {
        let mut d = Domains::default();
        d.insert(5, guest(3, None));
        d.insert(6, guest(9, Some(5)));
        d.insert(7, guest(4, None));
        assert_eq!(d.slot_after(0), Some(3));
        assert_eq!(d.slot_after(3), Some(4));
        assert_eq!(d.slot_after(4), Some(9));
        assert_eq!(d.slot_after(9), None);
        assert_eq!(d.targeting(5).collect::<Vec<_>>(), [6]);
        d.set_target(7, 5).unwrap();
        d.set_target(6, 7).unwrap();
        assert_eq!(d.targeting(5).collect::<Vec<_>>(), [7]);
        assert_eq!(d.targeting(7).collect::<Vec<_>>(), [6]);
        assert!(d.set_target(8, 5).is_none());
        // a removed target's followers stay listed, as their own target is
        d.remove(7);
        assert_eq!(d.targeting(7).collect::<Vec<_>>(), [6]);
        assert_eq!(d.targeting(5).count(), 0);
        assert_eq!(d.slot_after(3), Some(9));
        d.remove(6);
        assert_eq!(d.targeting(7).count(), 0);
        assert_eq!(d.slot_after(3), None);
        // a released target's followers act for nobody
        d.insert(6, guest(9, Some(5)));
        assert_eq!(d.forget_target(5), [6]);
        assert_eq!(d.get(6).unwrap().target, None);
        assert_eq!(d.targeting(5).count(), 0);
    }
}
