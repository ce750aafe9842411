//! The event loop: one thread, non-blocking transports polled with mio
//! (epoll, edge-triggered). Each connection has its own input buffer and
//! output queue; replies go straight out when the transport accepts them
//! and wait in the queue otherwise, so a slow or dead client only ever
//! delays itself.

use crate::daemon::{Daemon, Effects};
use crate::frame::InBuf;
use crate::ring;
use crate::transport::{Attachment, Listener, Transport};
use mio::{Events, Interest, Poll, Token};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::io;
use std::time::Duration;

/// Tokens at and above this are listeners; below, connection ids.
const LISTENER_BASE: usize = 1 << 40;
/// Reads per connection before others get a turn.
const READS_PER_TURN: usize = 16;
/// A connection with this much unsent output is not read from until it
/// has drained to a quarter of it (it is not reading its replies).
const OUT_THROTTLE: usize = 1 << 20;
/// A connection this far behind is dropped rather than grow without bound.
const OUT_LIMIT: usize = 64 << 20;

struct Link {
    transport: Box<dyn Transport>,
    input: InBuf,
    throttled: bool,
}

struct Port {
    listener: Box<dyn Listener>,
    domid: u32,
}

pub struct Server {
    poll: Poll,
    pub daemon: Daemon,
    links: FxHashMap<u32, Link>,
    ports: FxHashMap<usize, Port>,
    next_port: usize,
    /// Connections that may have unread input.
    ready: VecDeque<u32>,
    /// Listeners whose accept failed (e.g. out of fds): edge-triggered
    /// polling will not report them again, so they are retried on a timer.
    retry_accept: Vec<usize>,
    /// apply_effects' other set of lists (see there).
    spare_effects: Effects,
}

/// How soon a failed accept is retried.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

impl Server {
    pub fn new(daemon: Daemon) -> io::Result<Server> {
        Ok(Server {
            poll: Poll::new()?,
            daemon,
            links: FxHashMap::default(),
            ports: FxHashMap::default(),
            next_port: LISTENER_BASE,
            ready: VecDeque::new(),
            retry_accept: Vec::new(),
            spare_effects: Effects::default(),
        })
    }

    /// Accepts connections of `domid` (0: privileged dom0 clients) here.
    pub fn listen(&mut self, mut listener: Box<dyn Listener>, domid: u32) -> io::Result<()> {
        let token = self.next_port;
        self.next_port += 1;
        self.poll
            .registry()
            .register(listener.source(), Token(token), Interest::READABLE)?;
        self.ports.insert(token, Port { listener, domid });
        Ok(())
    }

    /// Adds a ready transport as a connection of `domid`.
    pub fn attach(&mut self, mut transport: Box<dyn Transport>, domid: u32) -> io::Result<u32> {
        let id = self
            .daemon
            .open(domid, transport.pid(), transport.kind(), &transport.peer());
        if let Err(e) = self.poll.registry().register(
            transport.source(),
            Token(id as usize),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            self.daemon.close(id, 0, "register failed");
            self.apply_effects();
            return Err(e);
        }
        self.links.insert(
            id,
            Link {
                transport,
                input: InBuf::default(),
                throttled: false,
            },
        );
        self.ready.push_back(id);
        Ok(id)
    }

    /// Serves forever.
    pub fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        loop {
            let timeout = if !self.ready.is_empty() {
                Some(Duration::ZERO)
            } else if !self.retry_accept.is_empty() {
                Some(ACCEPT_RETRY)
            } else {
                None
            };
            match self.poll.poll(&mut events, timeout) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => r?,
            }
            for token in std::mem::take(&mut self.retry_accept) {
                self.accept(token);
            }
            for ev in events.iter() {
                let token = ev.token().0;
                if token >= LISTENER_BASE {
                    self.accept(token);
                    continue;
                }
                let id = token as u32;
                // Any readiness may mean room to write: a ring signals both
                // directions through one event source.
                if ev.is_writable()
                    || self
                        .daemon
                        .conn(id)
                        .is_some_and(|c| !c.pending().is_empty())
                {
                    self.flush(id);
                }
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    self.ready.push_back(id);
                }
            }
            for _ in 0..self.ready.len() {
                let Some(id) = self.ready.pop_front() else {
                    break;
                };
                self.serve(id);
                self.apply_effects();
            }
            self.apply_effects();
        }
    }

    fn accept(&mut self, token: usize) {
        loop {
            let Some(port) = self.ports.get_mut(&token) else {
                return;
            };
            let domid = port.domid;
            match port.listener.accept() {
                Ok(Some(t)) => {
                    if let Err(e) = self.attach(t, domid) {
                        eprintln!("xenstored-shim: registering a connection: {e}");
                    }
                }
                Ok(None) => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    eprintln!("xenstored-shim: accept: {e} (retrying)");
                    if !self.retry_accept.contains(&token) {
                        self.retry_accept.push(token);
                    }
                    return;
                }
            }
        }
    }

    /// Reads and executes what connection `id` sent, a bounded amount.
    fn serve(&mut self, id: u32) {
        for _ in 0..READS_PER_TURN {
            let Some(link) = self.links.get_mut(&id) else {
                return;
            };
            if link.throttled {
                return;
            }
            let transport = &mut link.transport;
            let mut offered = 0;
            let filled = link.input.fill(|buf| {
                offered = buf.len();
                transport.read(buf)
            });
            let drained = matches!(filled, Ok(n) if n < offered) && transport.short_read_drains();
            match filled {
                Ok(0) if link.transport.eof_means_domain_gone() => {
                    self.daemon.domain_gone(id);
                    return;
                }
                Ok(0) => {
                    self.daemon.close(id, 0, "eof");
                    return;
                }
                Err(e) if ring::transport::is_session_reset(&e) => {
                    self.reset(id, &e.to_string());
                    return;
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let reason = format!("read error: {e}");
                    self.daemon.close(id, 0, &reason);
                    return;
                }
            }
            loop {
                match link.input.next_message() {
                    Ok(Some((header, payload))) => self.daemon.handle(id, header, payload),
                    Ok(None) => break,
                    Err(big) => {
                        self.daemon.log_bad(
                            id,
                            format_args!("message length {} > 4096: dropping the client", big.0),
                        );
                        self.daemon.close(id, 0, "oversized message");
                        return;
                    }
                }
                if self.daemon.conn(id).is_none() {
                    return;
                }
            }
            if self
                .daemon
                .conn(id)
                .is_some_and(|c| c.pending().len() >= OUT_THROTTLE)
            {
                link.throttled = true;
                return;
            }
            if drained {
                return;
            }
        }
        // More may be waiting: come back after the others had a turn.
        self.ready.push_back(id);
    }

    /// A ring reconnect or ring error: the connection's packets, watches
    /// and transactions go (conn_close), the transport stays and serves a
    /// fresh connection of the same domain (conn_open).
    fn reset(&mut self, id: u32, reason: &str) {
        let Some(mut link) = self.links.remove(&id) else {
            return;
        };
        let _ = self.poll.registry().deregister(link.transport.source());
        let Some(domid) = self.daemon.conn(id).map(|c| c.domid) else {
            return;
        };
        self.daemon.close(id, 0, reason);
        self.apply_effects();
        if let Err(e) = self.attach(link.transport, domid) {
            eprintln!("xenstored-shim: re-attaching domain {domid}'s ring: {e}");
        }
    }

    /// Writes what connection `id` has queued, as far as it goes now.
    fn flush(&mut self, id: u32) {
        let (Some(conn), Some(link)) = (self.daemon.conn_mut(id), self.links.get_mut(&id)) else {
            return;
        };
        let mut failure = None;
        while !conn.pending().is_empty() {
            match link.transport.write(conn.pending()) {
                Ok(0) => {
                    failure = Some("write returned 0".to_string());
                    break;
                }
                Ok(n) => conn.consumed(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    failure = Some(format!("write error: {e}"));
                    break;
                }
            }
        }
        let backlog = conn.pending().len();
        if failure.is_none() && backlog > OUT_LIMIT {
            failure = Some("output backlog over limit".to_string());
        }
        if let Some(reason) = failure {
            self.daemon.close(id, 0, &reason);
            return;
        }
        if link.throttled && backlog <= OUT_THROTTLE / 4 {
            link.throttled = false;
            self.ready.push_back(id);
        }
    }

    /// Carries out what the daemon asked for: closing, attaching, flushing.
    /// Two sets of lists take turns with the daemon, so their capacity is
    /// kept instead of allocated again for every request.
    fn apply_effects(&mut self) {
        let mut fx = std::mem::take(&mut self.spare_effects);
        loop {
            self.daemon.swap_effects(&mut fx);
            if fx.dirty.is_empty()
                && fx.closed.is_empty()
                && fx.attached.is_empty()
                && fx.released.is_empty()
            {
                break;
            }
            for id in fx.closed.drain(..) {
                if let Some(mut link) = self.links.remove(&id) {
                    let _ = self.poll.registry().deregister(link.transport.source());
                }
            }
            for domid in fx.released.drain(..) {
                let tokens: Vec<usize> = self
                    .ports
                    .iter()
                    .filter(|(_, p)| p.domid == domid)
                    .map(|(t, _)| *t)
                    .collect();
                for t in tokens {
                    if let Some(mut p) = self.ports.remove(&t) {
                        let _ = self.poll.registry().deregister(p.listener.source());
                    }
                }
            }
            for (domid, a) in fx.attached.drain(..) {
                let r = match a {
                    Attachment::Connection(t) => self.attach(t, domid).map(|_| ()),
                    Attachment::Listener(l) => self.listen(l, domid),
                };
                if let Err(e) = r {
                    eprintln!("xenstored-shim: attaching domain {domid}: {e}");
                }
            }
            for id in fx.dirty.drain(..) {
                if let Some(c) = self.daemon.conn_mut(id) {
                    c.dirty = false;
                }
                self.flush(id);
            }
        }
        self.spare_effects = fx;
    }
}
