//! A daemon driven directly, with no event loop: a domain backend and
//! client transports that touch nothing outside the process. The unit tests
//! and the fuzz targets call `Daemon::handle` and read what it queued.

use crate::conn::transport::{Attachment, DomainBackend, Listener, Transport};
use std::io;

/// INTRODUCE succeeds; the domain's connections are opened by the caller.
pub struct NoBackend;

impl DomainBackend for NoBackend {
    fn introduce(&mut self, _: u32, _: u64, _: u32) -> io::Result<Attachment> {
        Ok(Attachment::Listener(Box::new(NoListener)))
    }
    fn release(&mut self, _: u32) {}
}

struct NoListener;

impl Listener for NoListener {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        unreachable!("no event loop runs a detached daemon")
    }
    fn accept(&mut self) -> io::Result<Option<Box<dyn Transport>>> {
        Ok(None)
    }
}

/// A client whose transport is never read or written: its caller reads the
/// connection's output queue directly.
pub struct Idle {
    pub pid: u32,
    pub peer: &'static str,
}

impl Transport for Idle {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }
    fn source(&mut self) -> &mut dyn mio::event::Source {
        unreachable!("no event loop runs a detached daemon")
    }
    fn kind(&self) -> &'static str {
        "socket"
    }
    fn peer(&self) -> String {
        self.peer.to_string()
    }
    fn pid(&self) -> u32 {
        self.pid
    }
}
