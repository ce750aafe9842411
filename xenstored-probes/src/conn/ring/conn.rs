//! A domain's ring as the daemon holds it: the [`Server`] end over the
//! guest's page plus the event channel that signals it. Where the page and
//! the channel come from is a [`RingBackend`]: simulated files and sockets
//! ([`super::sim`]) or, on a Xen dom0, grant mapping and /dev/xen/evtchn.

use mio::event::Source;
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use std::io;
use std::os::fd::RawFd;

use super::{Page, RingError, Server};
use crate::conn::transport::SharedChannels;

/// The notification half of a ring: Xen's event channel or a stand-in.
pub trait EventChannel: Send {
    /// Signals the guest.
    fn notify(&self) -> io::Result<()>;
    /// What the event loop polls: readable when the guest signals (or
    /// vanishes). A real channel's fd (`FdSource`), or a simulated one.
    fn source(&mut self) -> &mut dyn Source;
    /// The fd `source` polls, for a loop of its own (the bench's floor
    /// daemon, tests); -1 for the simulation's channel, which has none.
    fn fd(&self) -> RawFd;
    /// Consumes pending signals after `fd` polled readable.
    fn drain(&self) -> io::Result<Liveness>;
    /// Where the ring lives, for conn_open's peer string.
    fn describe(&self) -> String;
    /// Binds this channel's port on `shared` rather than its own fd (see
    /// `Transport::move_channel`); its local port there.
    fn move_to(&mut self, shared: &mut SharedChannels) -> io::Result<u32> {
        let _ = shared;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this ring's event channel cannot be handed over",
        ))
    }
    /// Undoes `move_to`, once `shared` is closed.
    fn move_back(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    Alive,
    /// The domain's page is gone: the domain died without a RELEASE.
    Gone,
}

/// A mapped page and a bound channel for an introduced domain.
pub struct Attached {
    pub page: Box<dyn Page>,
    pub channel: Box<dyn EventChannel>,
}

/// Turns XS_INTRODUCE's (domid, gfn, port) into a page and a channel.
pub trait RingBackend: Send + Sync {
    fn attach(&self, domid: u16, gfn: u64, port: u32) -> io::Result<Attached>;
}

/// What a wake-up of a ring's fd means for the daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Try reading requests and flushing queued responses.
    Ready,
    /// The guest asked for a reconnect: drop the connection's packets,
    /// watches and transactions, then call [`RingConn::finish_reconnect`].
    Reconnect,
    /// The domain vanished: tear the connection down.
    Gone,
}

/// The daemon's handle on one domain's ring, with socket-like non-blocking
/// reads and writes (WouldBlock when the ring has nothing / no room).
/// Ordered so that what writing reads (the channel, `gone`, the page's
/// address, whether the ring stopped) comes first, within the 64 bytes
/// `RingTransport` aligns: among a thousand domains the one an event goes
/// to is cold, and the compiler's order spread these over two lines.
#[repr(C)]
pub struct RingConn {
    channel: Box<dyn EventChannel>,
    gone: bool,
    server: Server,
}

// What writing reads ends where the server's request framing starts.
const _: () = assert!(std::mem::offset_of!(RingConn, server.framing) <= 64);

impl RingConn {
    pub fn attach(backend: &dyn RingBackend, domid: u16, gfn: u64, port: u32) -> io::Result<Self> {
        let Attached { page, channel } = backend.attach(domid, gfn, port)?;
        let server = Server::new(page);
        // Like xenstored on XS_INTRODUCE: the features are up, look again.
        channel.notify()?;
        Ok(RingConn {
            server,
            channel,
            gone: false,
        })
    }

    pub fn source(&mut self) -> &mut dyn Source {
        self.channel.source()
    }

    pub fn fd(&self) -> RawFd {
        self.channel.fd()
    }

    pub fn describe(&self) -> String {
        self.channel.describe()
    }

    pub fn move_channel(&mut self, shared: &mut SharedChannels) -> io::Result<u32> {
        self.channel.move_to(shared)
    }

    pub fn move_channel_back(&mut self) -> io::Result<()> {
        self.channel.move_back()
    }

    /// Call when `fd` polls readable (and once right after attaching: the
    /// guest may have queued requests before it was introduced).
    pub fn wake(&mut self) -> io::Result<Wake> {
        if self.gone || self.channel.drain()? == Liveness::Gone {
            self.gone = true;
            return Ok(Wake::Gone);
        }
        if self.server.reconnect_requested() {
            return Ok(Wake::Reconnect);
        }
        Ok(Wake::Ready)
    }

    /// Completes a reconnect: empty queues, no error, CONNECTED, signalled.
    pub fn finish_reconnect(&mut self) -> io::Result<()> {
        self.server.reset();
        self.channel.notify()
    }

    /// Why the ring stopped (error field set), if it did.
    pub fn stopped(&self) -> Option<RingError> {
        self.server.stopped()
    }

    /// Request bytes; Ok(0) once the domain is gone (end of stream),
    /// WouldBlock when none are queued, InvalidData when the guest broke
    /// the protocol (the ring's error field is then set).
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.gone {
            return Ok(0);
        }
        let n = self.server.read(buf)?;
        if n == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        // Room freed in the request queue: a blocked guest may go on.
        self.channel.notify()?;
        Ok(n)
    }

    /// Response bytes; WouldBlock when the queue is full (the guest
    /// signals once it has consumed some).
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.gone {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        if bytes.is_empty() {
            return Ok(0);
        }
        let n = self.server.write(bytes)?;
        if n == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.channel.notify()?;
        Ok(n)
    }
}

/// A channel's fd, registered with mio as it is.
pub struct FdSource(pub RawFd);

impl Source for FdSource {
    fn register(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        SourceFd(&self.0).register(registry, token, interests)
    }
    fn reregister(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        SourceFd(&self.0).reregister(registry, token, interests)
    }
    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        SourceFd(&self.0).deregister(registry)
    }
}
