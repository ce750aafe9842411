//! VIRQ_DOM_EXC as the event loop's [`DomainMonitor`]: on each firing, ask
//! the hypervisor about every introduced domain (xenstored's check_domains),
//! a batch of domains a query rather than one query a domain as upstream
//! does: Xen does not say which domain changed, so a firing costs
//! ⌈domains / BATCH⌉ queries, not one per domain.

use std::io;
use std::os::fd::RawFd;

use mio::event::Source;
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

use super::ctrl::{self, DomainInfoSource, Verdict, BATCH};
use super::evtchn::DomExcVirq;
use crate::conn::transport::{DomainChanges, DomainMonitor, SharedChannels};
use crate::log;

pub struct DomExcMonitor<S> {
    virq: DomExcVirq,
    fd: VirqFd,
    info: S,
}

impl<S: DomainInfoSource> DomExcMonitor<S> {
    pub fn new(virq: DomExcVirq, info: S) -> Self {
        let fd = VirqFd(virq.fd());
        DomExcMonitor { virq, fd, info }
    }
}

/// What each domain's info means. `domains` (domid, shutdown announced)
/// come in domid order; each query lists the existing domains from the
/// first one not yet covered, and an introduced domain missing from a
/// listing that covers its domid is gone. A failed query keeps the domains
/// it was for (C xenstored would take them for gone: one failing hypercall
/// must not tear down every guest's connection).
pub fn changes(info: &mut dyn DomainInfoSource, domains: &[(u32, bool)]) -> DomainChanges {
    debug_assert!(domains.is_sorted_by_key(|&(domid, _)| domid));
    let mut out = DomainChanges::default();
    let mut rest = domains;
    while let Some(&(first, _)) = rest.first() {
        let listed = match info.list(first, BATCH) {
            Ok(listed) => listed,
            Err(e) => {
                log::error(format_args!(
                    "domains {first} to {}: {e} (kept)",
                    rest[rest.len() - 1].0
                ));
                break;
            }
        };
        // A full batch covers domids up to its last; a short one, all.
        let covered = match listed.last() {
            Some(&(last, _)) if listed.len() >= BATCH => last,
            _ => u32::MAX,
        };
        let split = rest.partition_point(|&(domid, _)| domid <= covered);
        let mut found = listed.iter().peekable();
        for &(domid, announced) in &rest[..split] {
            while found.next_if(|&&(d, _)| d < domid).is_some() {}
            let state = found.next_if(|&&(d, _)| d == domid).map(|&(_, i)| i);
            match ctrl::verdict(state, announced) {
                Verdict::Unchanged => {}
                Verdict::ShutDown => out.shut_down.push(domid),
                Verdict::Dead => out.dead.push(domid),
            }
        }
        rest = &rest[split..];
    }
    out
}

impl<S: DomainInfoSource> DomainMonitor for DomExcMonitor<S> {
    fn source(&mut self) -> &mut dyn Source {
        &mut self.fd
    }

    fn check(&mut self, domains: &[(u32, bool)]) -> io::Result<DomainChanges> {
        // Unmask first: a domain changing while we ask fires again.
        self.virq.drain()?;
        Ok(changes(&mut self.info, domains))
    }

    fn move_to(&mut self, shared: &mut SharedChannels) -> io::Result<u32> {
        self.virq.move_to(shared)
    }

    fn move_back(&mut self) -> io::Result<()> {
        self.virq.move_back()
    }
}

/// A descriptor the event loop polls for the VIRQ.
pub(super) struct VirqFd(pub(super) RawFd);

impl Source for VirqFd {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        SourceFd(&self.0).register(r, t, i)
    }
    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        SourceFd(&self.0).reregister(r, t, i)
    }
    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        SourceFd(&self.0).deregister(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::xen::ctrl::DomInfo;
    use std::collections::BTreeMap;

    /// The hypervisor's domains, and the queries asked of it.
    struct Table {
        domains: BTreeMap<u32, DomInfo>,
        /// Queries starting here fail.
        failing: Option<u32>,
        queries: Vec<u32>,
    }

    impl DomainInfoSource for Table {
        fn list(&mut self, first: u32, max: usize) -> io::Result<Vec<(u32, DomInfo)>> {
            self.queries.push(first);
            if self.failing == Some(first) {
                return Err(io::Error::from_raw_os_error(libc::EPERM));
            }
            Ok(self
                .domains
                .range(first..)
                .take(max)
                .map(|(&d, &i)| (d, i))
                .collect())
        }
    }

    fn table(domains: &[(u32, DomInfo)]) -> Table {
        Table {
            domains: domains.iter().copied().collect(),
            failing: None,
            queries: Vec::new(),
        }
    }

    #[test]
    fn each_domain_gets_check_domains_verdict() {
        // 5 is absent: gone. 3's shutdown was announced already; 7 is not
        // introduced and changes nothing.
        let mut xen = table(&[
            (0, DomInfo::RUNNING),
            (1, DomInfo::RUNNING),
            (2, DomInfo::SHUT),
            (3, DomInfo::SHUT),
            (4, DomInfo::DYING),
            (7, DomInfo::DYING),
        ]);
        let domains = [(1, false), (2, false), (3, true), (4, true), (5, false)];
        let got = changes(&mut xen, &domains);
        assert_eq!(
            got,
            DomainChanges {
                shut_down: vec![2],
                dead: vec![4, 5],
            }
        );
        assert_eq!(xen.queries, [1], "one query for a handful of domains");
    }

    /// A firing costs a query per BATCH domains, whatever the number dying.
    #[test]
    fn queries_go_by_batches_of_domains() {
        let n = 2 * BATCH as u32 + 10;
        let mut all: Vec<(u32, DomInfo)> = (1..=n).map(|d| (d, DomInfo::RUNNING)).collect();
        for d in (1..=n).step_by(10) {
            all[d as usize - 1].1 = DomInfo::DYING;
        }
        // Never introduced, between introduced ones: listed, not released.
        all.push((n + 5, DomInfo::DYING));
        let mut xen = table(&all);
        // The last one was destroyed whole: no longer listed.
        let domains: Vec<(u32, bool)> = (1..=n).chain([n + 7]).map(|d| (d, false)).collect();
        let got = changes(&mut xen, &domains);
        let dying: Vec<u32> = (1..=n).step_by(10).chain([n + 7]).collect();
        assert_eq!(got.dead, dying);
        assert!(got.shut_down.is_empty());
        assert_eq!(
            xen.queries,
            [1, BATCH as u32 + 1, 2 * BATCH as u32 + 1],
            "each query starts after the last domain the one before covered"
        );
    }

    /// A failing query keeps the domains it was for, and the ones after.
    #[test]
    fn a_failed_query_keeps_its_domains() {
        let mut xen = table(&[(1, DomInfo::DYING), (2, DomInfo::DYING)]);
        xen.failing = Some(1);
        let got = changes(&mut xen, &[(1, false), (2, false)]);
        assert_eq!(got, DomainChanges::default());
        assert_eq!(xen.queries, [1]);
    }
}
