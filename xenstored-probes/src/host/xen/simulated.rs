//! A simulated hypervisor beside the simulated rings (`ring::sim`): the
//! domain list Xen keeps and VIRQ_DOM_EXC, so that a simulated domain's
//! death reaches the daemon as a real one does (a signal that names no
//! domain, then queries about the introduced ones, [`super::monitor`])
//! and the queries can be counted. The files are xenstore-proto's `sim`
//! (`SimXen`), shared with the domain builder.
//!
//! The domain builder (`xenstore_guest::sim`) marks a prepared domain
//! running and a dying one dying. A domain the table does not know (one
//! introduced over a test socket, or adopted from another daemon) is not
//! asked about: it leaves by RELEASE or by its ring vanishing.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::Path;

use std::os::fd::AsRawFd;

use mio::event::Source;

use super::ctrl::{DomInfo, DomainInfoSource};
use super::monitor::{self, VirqFd};
use crate::conn::ring::sim::{bind_fresh, drain_socket, set_cloexec, share};
use crate::conn::transport::{DomainChanges, DomainMonitor, SharedChannels};
pub use xenstore_proto::sim::{Counters, SimXen, State};

/// What Xen's domain list says of a domain in `state`.
fn info(state: State) -> DomInfo {
    DomInfo {
        shutdown: state != State::Running,
        dying: state == State::Dying,
    }
}

impl DomainInfoSource for SimXen {
    fn list(&mut self, first: u32, max: usize) -> io::Result<Vec<(u32, DomInfo)>> {
        self.count_query()?;
        Ok(self
            .states(first)?
            .into_iter()
            .zip(first..)
            .filter_map(|(byte, domid)| Some((domid, info(State::from_byte(byte)?))))
            .take(max)
            .collect())
    }
}

/// The simulated VIRQ_DOM_EXC as the event loop's domain monitor.
pub struct SimDomExc {
    sock: UnixDatagram,
    fd: VirqFd,
    xen: SimXen,
}

impl SimDomExc {
    /// Binds the VIRQ's socket under `run_dir`.
    pub fn bind(run_dir: &Path) -> io::Result<SimDomExc> {
        let xen = SimXen::open(run_dir)?;
        let sock = bind_fresh(xen.virq_path())?;
        let fd = VirqFd(sock.as_raw_fd());
        Ok(SimDomExc { sock, fd, xen })
    }
}

impl DomainMonitor for SimDomExc {
    fn source(&mut self) -> &mut dyn Source {
        &mut self.fd
    }

    fn check(&mut self, domains: &[(u32, bool)]) -> io::Result<DomainChanges> {
        // Drained first: a change made while we ask fires again.
        drain_socket(&self.sock)?;
        self.xen.count_firing()?;
        let known = self.xen.states(0)?;
        let known: Vec<(u32, bool)> = domains
            .iter()
            .copied()
            .filter(|&(domid, _)| known.get(domid as usize).is_some_and(|&b| b != 0))
            .collect();
        Ok(monitor::changes(&mut self.xen, &known))
    }

    fn move_to(&mut self, shared: &mut SharedChannels) -> io::Result<u32> {
        share(shared, self.sock.as_raw_fd())
    }

    fn move_back(&mut self) -> io::Result<()> {
        set_cloexec(self.sock.as_raw_fd(), true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn run_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xss-simxen-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn the_table_lists_known_domains_in_order_and_counts_queries() {
        let dir = run_dir("list");
        let mut xen = SimXen::open(&dir).unwrap();
        xen.set(3, Some(State::Running)).unwrap();
        xen.set(9, Some(State::Dying)).unwrap();
        xen.set(12, Some(State::ShutDown)).unwrap();
        let listed: Vec<u32> = xen.list(0, 10).unwrap().iter().map(|d| d.0).collect();
        assert_eq!(listed, [3, 9, 12]);
        let listed = xen.list(4, 1).unwrap();
        assert_eq!(
            listed,
            [(
                9,
                DomInfo {
                    shutdown: true,
                    dying: true
                }
            )]
        );
        xen.set(9, None).unwrap();
        assert_eq!(xen.list(4, 10).unwrap().len(), 1);
        // Another opener (the toolstack) sees the daemon's counts.
        let other = SimXen::open(&dir).unwrap();
        assert_eq!(
            other.counters().unwrap(),
            Counters {
                queries: 3,
                firings: 0
            }
        );
        assert!(other.set(0x7ff0, Some(State::Running)).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_firing_asks_about_known_introduced_domains_only() {
        let dir = run_dir("fire");
        let mut monitor = SimDomExc::bind(&dir).unwrap();
        let xen = SimXen::open(&dir).unwrap();
        xen.set(1, Some(State::Running)).unwrap();
        xen.set(2, Some(State::Dying)).unwrap();
        xen.set(3, Some(State::ShutDown)).unwrap();
        xen.fire().unwrap();
        // 4 is unknown to the table (a socket domain): kept.
        let got = monitor
            .check(&[(1, false), (2, false), (3, false), (4, false)])
            .unwrap();
        assert_eq!(
            got,
            DomainChanges {
                shut_down: vec![3],
                dead: vec![2]
            }
        );
        assert_eq!(
            xen.counters().unwrap(),
            Counters {
                queries: 1,
                firings: 1
            }
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
