//! The simulated ring backend: the daemon's end of xenstore-proto's `sim`
//! rendezvous (the guest's end is xenstore-guest's `sim`), where the
//! layout under `<run-dir>/ring/<domid>/` is described. The domain is gone
//! when its page file is unlinked: the domain builder's destroy raises the
//! simulated VIRQ_DOM_EXC (`xen::simulated`), as Xen does, and a wake-up
//! finds the page's link count 0. (An inotify watch a ring did that before,
//! but closing an inotify instance waits for the kernel's SRCU grace
//! period, ~10 ms, in the daemon's one thread, for each domain released.)

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

use super::conn::{Attached, EventChannel, FdSource, Liveness, RingBackend};
use super::{Mapping, PAGE_SIZE};
use crate::conn::transport::SharedChannels;
use mio::event::Source;
use std::os::fd::{FromRawFd, OwnedFd};
pub use xenstore_proto::sim::{
    bind_fresh, drain_socket, notify_error, quiet, ring_bell, wait_readable, SimPaths,
};

/// An epoll set that survives exec, for a live update's target to take
/// every ring's doorbell on, each under its local port (the upstream
/// stub's event-channel handle, tests/peer/xenstub.c).
pub fn open_shared() -> io::Result<SharedChannels> {
    // SAFETY: epoll_create1 returns a new fd or -1.
    let fd = cvt(unsafe { libc::epoll_create1(0) })?;
    // SAFETY: the fd is new and nothing else owns it.
    Ok(SharedChannels::new(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// A doorbell socket (a ring's, the simulated VIRQ_DOM_EXC's) joins
/// `shared`'s epoll set under a fresh port, kept open across exec; the
/// stub finds it there by that port. Undone by closing `shared` and
/// `set_cloexec(fd, true)`.
pub fn share(shared: &mut SharedChannels, fd: RawFd) -> io::Result<u32> {
    let port = shared.next_port();
    let mut event = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: port as u64,
    };
    // SAFETY: both fds are open; the event is a valid epoll_event.
    cvt(unsafe { libc::epoll_ctl(shared.fd(), libc::EPOLL_CTL_ADD, fd, &mut event) })?;
    set_cloexec(fd, false)?;
    Ok(port)
}

pub fn set_cloexec(fd: RawFd, on: bool) -> io::Result<()> {
    let flags = if on { libc::FD_CLOEXEC } else { 0 };
    // SAFETY: fcntl on an fd number.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFD, flags) }).map(drop)
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Simulated domains under a daemon's run directory.
pub struct SimBackend {
    run_dir: PathBuf,
}

impl SimBackend {
    pub fn new(run_dir: &Path) -> SimBackend {
        SimBackend {
            run_dir: run_dir.to_path_buf(),
        }
    }

    /// A guest prepared this domain's directory (`xs-guest prepare`).
    pub fn prepared(&self, domid: u32) -> bool {
        u16::try_from(domid).is_ok_and(|id| SimPaths::new(&self.run_dir, id).dir.exists())
    }
}

impl RingBackend for SimBackend {
    fn attach(&self, domid: u16, gfn: u64, port: u32) -> io::Result<Attached> {
        let paths = SimPaths::new(&self.run_dir, domid);
        let page_path = paths.page(gfn);
        let context = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("domain {domid} page {}: {e}", page_path.display()),
            )
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&page_path)
            .map_err(context)?;
        if file.metadata().map_err(context)?.len() != PAGE_SIZE as u64 {
            return Err(context(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not a {PAGE_SIZE}-byte page"),
            )));
        }
        let guest_end = paths.guest_end(port);
        if !guest_end.exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "domain {domid} has no event channel port {port} ({} missing)",
                    guest_end.display()
                ),
            ));
        }
        let page = Mapping::of_fd(&file, 0).map_err(context)?;
        let channel = SimChannel::open(&paths, port, file)?;
        Ok(Attached {
            page: Box::new(page),
            channel: Box::new(channel),
        })
    }
}

/// The daemon's end of a simulated event channel.
pub struct SimChannel {
    sock: UnixDatagram,
    own: PathBuf,
    guest: PathBuf,
    /// What notifications are sent from: not `sock`, which the event loop
    /// polls, so a guest draining its bell does not wake the daemon for
    /// room to write. Made with the channel, so the channel's descriptors
    /// never change (the soak counts them), and connected to the guest's
    /// end once a guest has bound it, then again in place whenever that
    /// guest's socket has gone: sending by path walked the run directory
    /// for every notification, 1.4 µs a send at 10 domains and 2.1 µs at
    /// 1000 (bpftrace, sys_enter/exit_sendto, S2 on rings).
    bell: UnixDatagram,
    page: File,
    /// `sock`, as the event loop polls it.
    source: FdSource,
}

impl SimChannel {
    fn open(paths: &SimPaths, port: u32, page: File) -> io::Result<SimChannel> {
        let own = paths.daemon_end(port);
        let sock = bind_fresh(&own)?;
        // Pending from the start: the guest may have queued requests before
        // it was introduced, and an edge-triggered loop needs an edge.
        ring_bell(&sock, &own)?;
        let bell = UnixDatagram::unbound()?;
        bell.set_nonblocking(true)?;
        Ok(SimChannel {
            source: FdSource(sock.as_raw_fd()),
            sock,
            own,
            guest: paths.guest_end(port),
            bell,
            page,
        })
    }

    /// Rings the guest through the connected bell, connecting it first
    /// (again, if the guest socket it reached has closed: a successor binds
    /// a fresh one at the same path). What a guest that is not there (yet)
    /// or a full buffer cannot take, it finds on the ring when it next
    /// looks, as with `ring_bell`.
    fn ring(&self) -> io::Result<()> {
        for first in [true, false] {
            match self.bell.send(&[1]) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                // Not connected yet, or its guest socket closed (the send
                // disconnected it): whoever bound the path now.
                Err(e) if first && (quiet(&e) || e.kind() == io::ErrorKind::NotConnected) => {
                    match self.bell.connect(&self.guest) {
                        Ok(()) => {}
                        Err(e) if quiet(&e) => return Ok(()),
                        Err(e) => return Err(notify_error(&self.guest, e)),
                    }
                }
                Err(e) => return Err(notify_error(&self.guest, e)),
            }
        }
        Ok(())
    }

    fn page_linked(&self) -> io::Result<bool> {
        Ok(std::os::unix::fs::MetadataExt::nlink(&self.page.metadata()?) > 0)
    }
}

impl EventChannel for SimChannel {
    fn notify(&self) -> io::Result<()> {
        self.ring()
    }

    fn source(&mut self) -> &mut dyn Source {
        &mut self.source
    }

    fn fd(&self) -> RawFd {
        self.source.0
    }

    fn drain(&self) -> io::Result<Liveness> {
        drain_socket(&self.sock)?;
        Ok(if self.page_linked()? {
            Liveness::Alive
        } else {
            Liveness::Gone
        })
    }

    fn describe(&self) -> String {
        format!("ring {}", self.own.parent().unwrap_or(&self.own).display())
    }

    fn move_to(&mut self, shared: &mut SharedChannels) -> io::Result<u32> {
        share(shared, self.sock.as_raw_fd())
    }

    fn move_back(&mut self) -> io::Result<()> {
        set_cloexec(self.sock.as_raw_fd(), true)
    }
}

impl Drop for SimChannel {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.own);
    }
}
