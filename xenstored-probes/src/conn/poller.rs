//! The event loop's seam to readiness: the loop (server/) registers
//! sources through a mio `Registry` and asks a `Poller` which tokens became
//! ready. In the daemon that is epoll through mio (`MioPoller`); the
//! deterministic simulation (`sim/`) reports readiness of its own
//! sockets and rings, by an adversarial schedule, through the same seam.

use mio::{Events, Poll, Registry};
use std::io;
use std::time::Duration;

/// One source's readiness, as epoll reports it (edge-triggered: reported
/// once per change, never again until something changes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Readiness {
    pub token: usize,
    pub readable: bool,
    pub writable: bool,
    /// The peer hung up its writing side (EPOLLRDHUP or EPOLLHUP).
    pub read_closed: bool,
    pub error: bool,
}

pub trait Poller {
    /// Where sources are registered (a simulated source keeps the token and
    /// interest itself and ignores the registry).
    fn registry(&self) -> &Registry;
    /// Waits up to `timeout` (None: until something is ready) and replaces
    /// `ready` with what became ready.
    fn poll(&mut self, ready: &mut Vec<Readiness>, timeout: Option<Duration>) -> io::Result<()>;
}

/// epoll, through mio.
pub struct MioPoller {
    poll: Poll,
    events: Events,
}

impl MioPoller {
    pub fn new() -> io::Result<MioPoller> {
        Ok(MioPoller {
            poll: Poll::new()?,
            events: Events::with_capacity(1024),
        })
    }
}

impl Poller for MioPoller {
    fn registry(&self) -> &Registry {
        self.poll.registry()
    }

    fn poll(&mut self, ready: &mut Vec<Readiness>, timeout: Option<Duration>) -> io::Result<()> {
        ready.clear();
        self.poll.poll(&mut self.events, timeout)?;
        ready.extend(self.events.iter().map(|ev| Readiness {
            token: ev.token().0,
            readable: ev.is_readable(),
            writable: ev.is_writable(),
            read_closed: ev.is_read_closed(),
            error: ev.is_error(),
        }));
        Ok(())
    }
}
