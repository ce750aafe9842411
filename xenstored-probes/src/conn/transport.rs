//! The seams between the daemon and the outside world: a connection's byte
//! transport, a listener that yields new transports, and the domain backend
//! INTRODUCE/RELEASE go through. Unix sockets implement them here
//! (unix.rs); a shared-memory ring can implement them as well.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// The one event-channel fd a live update's target takes every ring's
/// channel on (C xenstored's evtchn handle, the GLOBAL record's evtchn_fd):
/// /dev/xen/evtchn on Xen, an epoll set of the rings' doorbell sockets in
/// the simulation (as tests/peer/xenstub.c's handle is). Open across exec.
pub struct SharedChannels {
    fd: OwnedFd,
    /// The simulation's local port numbers, handed out counting up.
    next_port: u32,
}

impl SharedChannels {
    pub fn new(fd: OwnedFd) -> SharedChannels {
        SharedChannels { fd, next_port: 1 }
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// A local port number not handed out yet (the simulation's).
    pub fn next_port(&mut self) -> u32 {
        self.next_port += 1;
        self.next_port - 1
    }
}

/// One connection's bytes. Non-blocking: `read`/`write` return
/// `ErrorKind::WouldBlock` when nothing can move now, and the daemon tries
/// again when `source` next becomes ready (edge-triggered: the transport
/// must report readiness for both directions through the one source).
pub trait Transport {
    /// `Ok(0)` means the peer is gone.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    fn write(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// What the event loop polls.
    fn source(&mut self) -> &mut dyn mio::event::Source;
    /// "socket", "ring", ... (the conn_open probe's str1).
    fn kind(&self) -> &'static str;
    /// Human-readable peer (conn_open's str2), e.g. "pid 123 uid 0 comm
    /// xl" (see xenstore_proto::peer); built only while conn_open is traced.
    fn peer(&self) -> String;
    /// The dom0 client's pid (SO_PEERCRED); 0 for domain transports.
    fn pid(&self) -> u32;
    /// True when a read that did not fill the buffer means nothing more is
    /// waiting (a stream socket: later data raises a new edge), which saves
    /// the read that would only say WouldBlock. False (the default) makes
    /// the daemon read until WouldBlock.
    fn short_read_drains(&self) -> bool {
        false
    }
    /// True when an event that does not say readable brought no input (a
    /// stream socket reports each direction apart): the event loop then
    /// skips the read, which at a thousand connections touched a cold
    /// socket for every event a watcher read. False (the default): any
    /// event may mean input (a ring's doorbell rings for both directions).
    fn readiness_names_direction(&self) -> bool {
        false
    }
    /// Takes the peer's signals without taking its data, for a connection
    /// that is not being read (over a quota, or its output backed up):
    /// what `read` would report of the peer being gone (Ok(0)) or of a
    /// session reset, else WouldBlock. A transport whose readiness needs no
    /// acknowledging (a socket) keeps the default.
    fn read_signals(&mut self) -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }
    /// True when `read` returning 0 means the domain behind the connection
    /// died unreleased (a ring ends no other way), not a client hanging up.
    fn eof_means_domain_gone(&self) -> bool {
        false
    }
    /// The socket whose send(2) is all this transport's `write` does, if
    /// so: the connection then sends on it itself, without reaching the
    /// transport's own state (among a thousand watchers, a cold line for
    /// each event).
    fn write_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
    /// The fd a live update hands to the next image, for a transport that
    /// survives an exec as it is (a dom0 client's socket).
    fn inherited_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
    /// For a live update whose target serves every ring through one fd:
    /// binds this transport's event channel on `shared` instead of its
    /// own, returning its local port there; None when it has none (a
    /// socket).
    fn move_channel(&mut self, shared: &mut SharedChannels) -> Option<io::Result<u32>> {
        let _ = shared;
        None
    }
    /// Undoes `move_channel` (the exec failed), once `shared` is closed.
    fn move_channel_back(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Something that accepts connections (the dom0 socket, a domain socket).
pub trait Listener {
    fn source(&mut self) -> &mut dyn mio::event::Source;
    /// The next waiting connection; `Ok(None)` when none is waiting.
    fn accept(&mut self) -> io::Result<Option<Box<dyn Transport>>>;
}

/// How an introduced domain reaches the daemon.
pub enum Attachment {
    /// One connection, ready now (a shared ring).
    Connection(Box<dyn Transport>),
    /// Every connection accepted here belongs to the domain (test sockets).
    Listener(Box<dyn Listener>),
}

/// INTRODUCE and RELEASE go through this.
pub trait DomainBackend {
    /// INTRODUCE(domid, gfn, port) for a domain not yet introduced.
    fn introduce(&mut self, domid: u32, gfn: u64, port: u32) -> io::Result<Attachment>;
    /// RELEASE (or teardown): drop whatever `introduce` set up. The daemon
    /// closes the domain's connections and listeners itself.
    fn release(&mut self, domid: u32);
}

/// The hypervisor's word on domains (Xen's VIRQ_DOM_EXC): polled by the
/// event loop, asked about the introduced domains when its source fires.
pub trait DomainMonitor {
    fn source(&mut self) -> &mut dyn mio::event::Source;
    /// After `source` fired: of `domains` (domid, shutdown already
    /// announced), which shut down since and which died.
    fn check(&mut self, domains: &[(u32, bool)]) -> io::Result<DomainChanges>;
    /// For a live update whose target takes VIRQ_DOM_EXC bound on its one
    /// evtchn fd (oxenstored): binds it on `shared` instead of here,
    /// returning its port there.
    fn move_to(&mut self, shared: &mut SharedChannels) -> io::Result<u32>;
    /// Undoes `move_to` (the exec failed), once `shared` is closed.
    fn move_back(&mut self) -> io::Result<()>;
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct DomainChanges {
    /// Newly shut down or crashed, still there: @releaseDomain fires.
    pub shut_down: Vec<u32>,
    /// Dying or gone: released, connections closed.
    pub dead: Vec<u32>,
}
