//! The simulated Xen both ends of a simulated ring meet in, under a run
//! directory: the daemon's backend (xenstored-probes' `ring::sim`,
//! `xen::simulated`) and the guest's end (xenstore-guest's `sim`).
//!
//! A guest's "page" is a 4 KiB file both sides mmap MAP_SHARED, its event
//! channel a pair of Unix datagram sockets bound to paths, one byte per
//! notification. Layout under `<run-dir>/ring/<domid>/`:
//!
//! - `page-<gfn>`: the shared page (gfn as XS_INTRODUCE gives it, decimal);
//! - `evtchn-<port>`: the guest's end, bound by whichever guest process is
//!   running (guest processes take turns: they hold an flock on the page);
//! - `evtchn-<port>.xenstored`: the daemon's end, bound at XS_INTRODUCE.
//!
//! Datagrams sent by path survive either side restarting, and a full socket
//! buffer simply means a notification is already pending, like Xen's pending
//! bit. The domain is gone when its page file is unlinked.
//!
//! The hypervisor's domain list and VIRQ_DOM_EXC, under `<run-dir>/xen/`:
//!
//! - `domains`: two little-endian u64 counters the daemon keeps (state
//!   queries answered, firings handled), then one byte a domid below
//!   DOMID_FIRST_RESERVED: 0 unknown, then [`State`];
//! - `virq-dom-exc`: the daemon's datagram socket; the toolstack sends a
//!   byte after changing a domain's state, as Xen raises the VIRQ.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::RawFd;
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::wire::DOMID_FIRST_RESERVED;

/// Where one domain's simulated page and event channel live.
#[derive(Clone, Debug)]
pub struct SimPaths {
    pub dir: PathBuf,
}

impl SimPaths {
    pub fn new(run_dir: &Path, domid: u16) -> SimPaths {
        SimPaths {
            dir: run_dir.join("ring").join(domid.to_string()),
        }
    }
    pub fn page(&self, gfn: u64) -> PathBuf {
        self.dir.join(format!("page-{gfn}"))
    }
    pub fn guest_end(&self, port: u32) -> PathBuf {
        self.dir.join(format!("evtchn-{port}"))
    }
    pub fn daemon_end(&self, port: u32) -> PathBuf {
        self.dir.join(format!("evtchn-{port}.xenstored"))
    }

    /// The gfn and port a prepared domain uses, read back from the names.
    pub fn discover(&self) -> io::Result<(u64, u32)> {
        let mut gfn = None;
        let mut port = None;
        let entries = std::fs::read_dir(&self.dir).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("{}: {e} (run `xs-guest prepare` first)", self.dir.display()),
            )
        })?;
        for entry in entries {
            let name = entry?.file_name();
            let name = name.to_string_lossy();
            if let Some(n) = name.strip_prefix("page-") {
                gfn = n.parse().ok().or(gfn);
            } else if let Some(n) = name.strip_prefix("evtchn-") {
                port = n.parse().ok().or(port);
            }
        }
        match (gfn, port) {
            (Some(g), Some(p)) => Ok((g, p)),
            _ => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: no page-<gfn> and evtchn-<port>", self.dir.display()),
            )),
        }
    }
}

/// Sends one notification byte to `to`. Nobody bound there (yet) or a full
/// buffer both leave the peer to find the ring's state when it next looks.
pub fn ring_bell(sock: &UnixDatagram, to: &Path) -> io::Result<()> {
    match sock.send_to(&[1], to) {
        Ok(_) => Ok(()),
        Err(e) if quiet(&e) || e.kind() == io::ErrorKind::WouldBlock => Ok(()),
        Err(e) => Err(notify_error(to, e)),
    }
}

/// Nobody is bound at the path (yet, or any more).
pub fn quiet(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
    )
}

pub fn notify_error(to: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("notify {}: {e}", to.display()))
}

/// Reads every pending notification byte.
pub fn drain_socket(sock: &UnixDatagram) -> io::Result<()> {
    let mut buf = [0u8; 64];
    loop {
        match sock.recv(&mut buf) {
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// Binds a datagram socket at `path`, replacing a stale one, non-blocking.
pub fn bind_fresh(path: &Path) -> io::Result<UnixDatagram> {
    let _ = std::fs::remove_file(path);
    let sock = UnixDatagram::bind(path)
        .map_err(|e| io::Error::new(e.kind(), format!("bind {}: {e}", path.display())))?;
    sock.set_nonblocking(true)?;
    Ok(sock)
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Waits up to `timeout` for `fd` to become readable; true if it did.
pub fn wait_readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    loop {
        // SAFETY: one valid pollfd.
        match cvt(unsafe { libc::poll(&mut pfd, 1, ms) }) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return Ok(r? > 0),
        }
    }
}

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
    /// The state a table byte says; None for 0 (unknown) or garbage.
    pub fn from_byte(byte: u8) -> Option<State> {
        [State::Running, State::ShutDown, State::Dying]
            .into_iter()
            .find(|s| *s as u8 == byte)
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

    /// Where the daemon binds its VIRQ_DOM_EXC socket.
    pub fn virq_path(&self) -> &Path {
        &self.virq
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

    /// The daemon's side: one more state query answered.
    pub fn count_query(&self) -> io::Result<()> {
        self.count(QUERIES)
    }

    /// The daemon's side: one more VIRQ firing handled.
    pub fn count_firing(&self) -> io::Result<()> {
        self.count(FIRINGS)
    }

    fn count(&self, at: u64) -> io::Result<()> {
        let n = self.counter(at)? + 1;
        self.table.write_all_at(&n.to_le_bytes(), at)
    }

    /// The state bytes of domids `first` and up.
    pub fn states(&self, first: u32) -> io::Result<Vec<u8>> {
        let first = first.min(DOMID_FIRST_RESERVED);
        let mut bytes = vec![0u8; (DOMID_FIRST_RESERVED - first) as usize];
        self.table
            .read_exact_at(&mut bytes, HEADER + u64::from(first))?;
        Ok(bytes)
    }
}
