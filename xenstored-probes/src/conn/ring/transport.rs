//! A domain's ring as one of the daemon's transports, and the domain
//! backend that attaches rings on XS_INTRODUCE.
//!
//! The daemon sees a socket-like stream: WouldBlock when the ring is empty
//! or full, Ok(0) when the domain vanished (its page is gone). Two ring
//! events have no socket equivalent and arrive as `ConnectionReset` from
//! `read`, meaning "drop this connection's packets, watches and
//! transactions, keep the transport": the guest's reconnect request (the
//! ring is already reset and the guest signalled when the error arrives),
//! and a protocol violation (the ring's error field is set; it stays
//! stopped, reading nothing, until the guest asks for a reconnect).

use std::io;
use std::path::Path;

use mio::event::Source;

use super::conn::{RingBackend, RingConn, Wake};
use super::sim::SimBackend;
use crate::conn::transport::{Attachment, DomainBackend, SharedChannels, Transport};

/// Aligned so that what writing reads (`RingConn`'s first fields) is in
/// one cache line.
#[repr(C, align(64))]
pub struct RingTransport {
    conn: RingConn,
    domid: u32,
    /// The current stop was already reported as a reset.
    stop_reported: bool,
}

impl RingTransport {
    pub fn attach(backend: &dyn RingBackend, domid: u32, gfn: u64, port: u32) -> io::Result<Self> {
        let id = u16::try_from(domid)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("domid {domid}")))?;
        let conn = RingConn::attach(backend, id, gfn, port)?;
        Ok(RingTransport {
            conn,
            domid,
            stop_reported: false,
        })
    }

    fn reset(why: String) -> io::Error {
        io::Error::new(io::ErrorKind::ConnectionReset, SessionReset(why))
    }
}

/// The error `read` returns for a ring reset (see the module comment).
#[derive(Debug)]
pub struct SessionReset(pub String);

impl std::fmt::Display for SessionReset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SessionReset {}

/// True for a ring reset, as opposed to a socket's ECONNRESET.
pub fn is_session_reset(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<SessionReset>())
}

impl Transport for RingTransport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Doorbell first, ring after: a signal arriving in between is a
        // fresh edge for the (edge-triggered) event loop.
        match self.conn.wake()? {
            Wake::Gone => return Ok(0),
            Wake::Reconnect => {
                // Resetting the ring before the daemon drops the connection's
                // state is safe: the daemon is single-threaded and drops it
                // on this very error, before it reads or writes this ring again.
                self.conn.finish_reconnect()?;
                self.stop_reported = false;
                return Err(Self::reset(format!(
                    "domain {} asked for a ring reconnect",
                    self.domid
                )));
            }
            Wake::Ready => {}
        }
        match self.conn.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                if std::mem::replace(&mut self.stop_reported, true) {
                    Err(io::ErrorKind::WouldBlock.into())
                } else {
                    Err(Self::reset(format!("ring error: {e}")))
                }
            }
            r => r,
        }
    }

    /// The doorbell is drained (or it fills, and the guest's later
    /// signals raise no edge), the ring's requests stay where they are.
    fn read_signals(&mut self) -> io::Result<usize> {
        self.read(&mut [])
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // A stopped ring takes nothing until the guest reconnects (a
        // reconnect in progress is already WouldBlock from RingConn::write).
        if self.conn.stopped().is_some() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.conn.write(buf)
    }

    fn source(&mut self) -> &mut dyn Source {
        self.conn.source()
    }

    fn kind(&self) -> &'static str {
        "ring"
    }

    fn peer(&self) -> String {
        format!("domain {} {}", self.domid, self.conn.describe())
    }

    fn pid(&self) -> u32 {
        0
    }

    fn eof_means_domain_gone(&self) -> bool {
        true
    }

    fn move_channel(&mut self, shared: &mut SharedChannels) -> Option<io::Result<u32>> {
        Some(self.conn.move_channel(shared))
    }

    fn move_channel_back(&mut self) -> io::Result<()> {
        self.conn.move_channel_back()
    }
}

/// Rings for domains whose page the simulated backend finds under the run
/// directory (`ring/<domid>/page-<gfn>`, see [`super::sim`]); any other
/// domain goes to `fallback` (the per-domain socket backend).
pub struct SimRingDomains {
    rings: SimBackend,
    fallback: Box<dyn DomainBackend>,
}

impl SimRingDomains {
    pub fn new(run_dir: &Path, fallback: Box<dyn DomainBackend>) -> SimRingDomains {
        SimRingDomains {
            rings: SimBackend::new(run_dir),
            fallback,
        }
    }
}

impl DomainBackend for SimRingDomains {
    fn introduce(&mut self, domid: u32, gfn: u64, port: u32) -> io::Result<Attachment> {
        if !self.rings.prepared(domid) {
            return self.fallback.introduce(domid, gfn, port);
        }
        let ring = RingTransport::attach(&self.rings, domid, gfn, port)?;
        Ok(Attachment::Connection(Box::new(ring)))
    }

    fn release(&mut self, domid: u32) {
        // A ring is unmapped when the daemon drops its transport.
        self.fallback.release(domid);
    }
}
