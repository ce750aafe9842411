//! Domains the daemon knows: dom0 from the start, others from INTRODUCE
//! until RELEASE. Which connections belong to a domain is the daemon's
//! business (daemon.rs); this is the registry.

use std::collections::BTreeMap;

/// First domid Xen reserves (DOMID_FIRST_RESERVED).
pub const DOMID_FIRST_RESERVED: u32 = 0x7ff0;
/// DOMID_SELF, which IS_DOMAIN_INTRODUCED answers "T" for.
pub const DOMID_SELF: u32 = 0x7ff0;

#[derive(Clone, Debug, Default)]
pub struct Domain {
    pub gfn: u64,
    pub port: u32,
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
pub struct Domains(BTreeMap<u32, Domain>);

impl Default for Domains {
    fn default() -> Self {
        let mut m = BTreeMap::new();
        m.insert(0, Domain::default());
        Domains(m)
    }
}

impl Domains {
    pub fn get(&self, domid: u32) -> Option<&Domain> {
        self.0.get(&domid)
    }

    pub fn get_mut(&mut self, domid: u32) -> Option<&mut Domain> {
        self.0.get_mut(&domid)
    }

    pub fn is_introduced(&self, domid: u32) -> bool {
        domid == DOMID_SELF || self.0.contains_key(&domid)
    }

    pub fn insert(&mut self, domid: u32, d: Domain) {
        self.0.insert(domid, d);
    }

    pub fn remove(&mut self, domid: u32) -> Option<Domain> {
        self.0.remove(&domid)
    }

    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.keys().copied()
    }

    /// Introduced guests (not dom0) and whether their shutdown was announced.
    pub fn guests(&self) -> Vec<(u32, bool)> {
        self.0
            .iter()
            .filter(|(&id, _)| id != 0)
            .map(|(&id, d)| (id, d.shutdown))
            .collect()
    }
}
