//! A simulated hypervisor beside the simulated rings (`ring::sim`): the
//! domain list Xen keeps and VIRQ_DOM_EXC, so that a simulated domain's
//! death reaches the daemon as a real one does (a signal that names no
//! domain, then queries about the introduced ones, [`super::monitor`])
//! and the queries can be counted. Under `<run-dir>/xen/`:
//!
//! - `domains`: two little-endian u64 counters the daemon keeps (state
//!   queries answered, firings handled), then one byte a domid below
//!   DOMID_FIRST_RESERVED: 0 unknown, then [`State`];
//! - `virq-dom-exc`: the daemon's datagram socket; the toolstack sends a
//!   byte after changing a domain's state, as Xen raises the VIRQ.
//!
//! The domain builder (`xenstore_guest::sim`) marks a prepared domain
//! running and a dying one dying. A domain the table does not know (one
//! introduced over a test socket, or adopted from another daemon) is not
//! asked about: it leaves by RELEASE or by its ring vanishing.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

use std::os::fd::AsRawFd;

use mio::event::Source;

use super::ctrl::{DomInfo, DomainInfoSource};
use super::monitor::{self, VirqFd};
use crate::conn::ring::sim::{bind_fresh, drain_socket, ring_bell};
use crate::conn::transport::{DomainChanges, DomainMonitor};
use crate::daemon::domain_registry::DOMID_FIRST_RESERVED;

/// The counters before the state bytes.
const HEADER: u64 = 16;
const QUERIES: u64 = 0;
const FIRINGS: u64 = 8;
const TABLE_LEN: u64 = HEADER + DOMID_FIRST_RESERVED as u64;

/// A domain's state as the simulated hypervisor keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum State {
    Running = 1,
    ShutDown = 2,
    Dying = 3,
}

impl State {
    fn info(byte: u8) -> Option<DomInfo> {
        match byte {
            1 => Some(DomInfo {
                shutdown: false,
                dying: false,
            }),
            2 => Some(DomInfo {
                shutdown: true,
                dying: false,
            }),
            3 => Some(DomInfo {
                shutdown: true,
                dying: true,
            }),
            _ => None,
        }
    }
}

/// What the daemon counted: a query is one xc_domain_getinfolist's worth.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub queries: u64,
    pub firings: u64,
}

/// One run directory's simulated hypervisor.
pub struct SimXen {
    table: File,
    virq: PathBuf,
}

impl SimXen {
    /// Opens (creating) the domain table under `run_dir`.
    pub fn open(run_dir: &Path) -> io::Result<SimXen> {
        let dir = run_dir.join("xen");
        let context = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", dir.display()));
        std::fs::create_dir_all(&dir).map_err(context)?;
        let table = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join("domains"))
            .map_err(context)?;
        if table.metadata().map_err(context)?.len() < TABLE_LEN {
            table.set_len(TABLE_LEN).map_err(context)?;
        }
        Ok(SimXen {
            table,
            virq: dir.join("virq-dom-exc"),
        })
    }

    /// The toolstack's side: domain `domid` is now in `state`.
    pub fn set(&self, domid: u16, state: Option<State>) -> io::Result<()> {
        if u32::from(domid) >= DOMID_FIRST_RESERVED {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("domain {domid} is a reserved domid"),
            ));
        }
        let byte = state.map_or(0, |s| s as u8);
        self.table.write_all_at(&[byte], HEADER + u64::from(domid))
    }

    /// Xen raising VIRQ_DOM_EXC (nobody listening: nothing happens).
    pub fn fire(&self) -> io::Result<()> {
        let sock = UnixDatagram::unbound()?;
        ring_bell(&sock, &self.virq)
    }

    pub fn counters(&self) -> io::Result<Counters> {
        Ok(Counters {
            queries: self.counter(QUERIES)?,
            firings: self.counter(FIRINGS)?,
        })
    }

    fn counter(&self, at: u64) -> io::Result<u64> {
        let mut b = [0u8; 8];
        self.table.read_exact_at(&mut b, at)?;
        Ok(u64::from_le_bytes(b))
    }

    fn count(&self, at: u64) -> io::Result<()> {
        let n = self.counter(at)? + 1;
        self.table.write_all_at(&n.to_le_bytes(), at)
    }

    /// The state bytes of domids `first` and up.
    fn states(&self, first: u32) -> io::Result<Vec<u8>> {
        let first = first.min(DOMID_FIRST_RESERVED);
        let mut bytes = vec![0u8; (DOMID_FIRST_RESERVED - first) as usize];
        self.table
            .read_exact_at(&mut bytes, HEADER + u64::from(first))?;
        Ok(bytes)
    }
}

impl DomainInfoSource for SimXen {
    fn list(&mut self, first: u32, max: usize) -> io::Result<Vec<(u32, DomInfo)>> {
        self.count(QUERIES)?;
        Ok(self
            .states(first)?
            .into_iter()
            .zip(first..)
            .filter_map(|(byte, domid)| Some((domid, State::info(byte)?)))
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
        let sock = bind_fresh(&xen.virq)?;
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
        self.xen.count(FIRINGS)?;
        let known = self.xen.states(0)?;
        let known: Vec<(u32, bool)> = domains
            .iter()
            .copied()
            .filter(|&(domid, _)| known.get(domid as usize).is_some_and(|&b| b != 0))
            .collect();
        Ok(monitor::changes(&mut self.xen, &known))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
