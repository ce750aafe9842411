//! VIRQ_DOM_EXC as the event loop's [`DomainMonitor`]: on each firing, ask
//! the hypervisor about every introduced domain (xenstored's check_domains).

use std::io;
use std::os::fd::RawFd;

use mio::event::Source;
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

use super::ctrl::{self, DomainInfoSource, Verdict};
use super::evtchn::DomExcVirq;
use crate::service::log;
use crate::transport::{DomainChanges, DomainMonitor};

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

/// What each domain's info means; a failed query keeps the domain (C
/// xenstored would take it for gone: one failing hypercall must not tear
/// down every guest's connection).
pub fn changes(info: &mut dyn DomainInfoSource, domains: &[(u32, bool)]) -> DomainChanges {
    let mut out = DomainChanges::default();
    for &(domid, announced) in domains {
        let state = match info.info(domid) {
            Ok(state) => state,
            Err(e) => {
                log::error(format_args!("domain {domid}: {e} (kept)"));
                continue;
            }
        };
        match ctrl::verdict(state, announced) {
            Verdict::Unchanged => {}
            Verdict::ShutDown => out.shut_down.push(domid),
            Verdict::Dead => out.dead.push(domid),
        }
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
}

struct VirqFd(RawFd);

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
    use crate::xen::ctrl::DomInfo;
    use std::collections::HashMap;

    struct Table(HashMap<u32, io::Result<Option<DomInfo>>>);

    impl DomainInfoSource for Table {
        fn info(&mut self, domid: u32) -> io::Result<Option<DomInfo>> {
            match self.0.get(&domid) {
                Some(Ok(i)) => Ok(*i),
                Some(Err(e)) => Err(io::Error::new(e.kind(), e.to_string())),
                None => Ok(None),
            }
        }
    }

    #[test]
    fn each_domain_gets_check_domains_verdict() {
        let info = |shutdown, dying| Ok(Some(DomInfo { shutdown, dying }));
        let mut table = Table(HashMap::from([
            (1, info(false, false)),
            (2, info(true, false)),
            (3, info(true, false)),
            (4, info(true, true)),
            (6, Err(io::Error::from_raw_os_error(libc::EPERM))),
        ]));
        // 5 is absent: gone. 3's shutdown was announced already.
        let domains = [
            (1, false),
            (2, false),
            (3, true),
            (4, true),
            (5, false),
            (6, false),
        ];
        let got = changes(&mut table, &domains);
        assert_eq!(
            got,
            DomainChanges {
                shut_down: vec![2],
                dead: vec![4, 5],
            }
        );
    }
}
