//! The simulated kernel: stream sockets, a listening socket and ring
//! doorbells, each an `Endpoint`, with epoll's edge-triggered contract as
//! the rules for when readiness is owed. What the schedule may do within
//! that contract: report an owed edge late (at most `MAX_DELAY` polls) or
//! coalesced with later ones, report readiness nobody owed, take a client's
//! bytes in any cuts, and give a socket any buffer size, so writes go
//! through in part or not at all.

use super::choice::Choice;
use crate::conn::poller::Readiness;
use mio::{Interest, Token};
use std::collections::VecDeque;

/// Polls an owed edge may wait before it is reported.
pub const MAX_DELAY: u32 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A client's stream socket (dom0's socket, or a domain's test socket).
    Socket,
    /// The listening socket dom0 clients connect to.
    Listener,
    /// A guest's ring: the page is shared memory, this is its doorbell.
    Ring,
}

/// Readiness owed to the daemon for one endpoint, not yet reported.
#[derive(Clone, Copy, Debug, Default)]
pub struct Owed {
    pub readable: bool,
    pub writable: bool,
    pub read_closed: bool,
    /// Polls since it was first owed.
    pub age: u32,
}

impl Owed {
    fn any(&self) -> bool {
        self.readable || self.writable || self.read_closed
    }
}

pub struct Endpoint {
    pub kind: Kind,
    /// As the daemon registered it: (token, interest).
    pub registered: Option<(Token, Interest)>,
    pub owed: Owed,
    /// Client to daemon bytes not yet read (a socket).
    pub to_daemon: VecDeque<u8>,
    /// Daemon to client bytes not yet read by the client (a socket).
    pub to_client: VecDeque<u8>,
    /// What `to_client` holds at most: the socket's buffer.
    pub capacity: usize,
    /// The client hung up.
    pub client_closed: bool,
    /// The daemon read the end of the stream.
    pub eof_read: bool,
    /// The daemon's transport is gone (closed, dropped).
    pub daemon_gone: bool,
    /// A write found no room: room freed later raises a writable edge.
    pub write_blocked: bool,
    /// Connections waiting to be accepted (a listener), by endpoint.
    pub backlog: VecDeque<usize>,
    /// Doorbell rings from the guest not yet drained (a ring).
    pub signals: u32,
    /// Doorbell rings from the daemon, not yet seen by the guest.
    pub to_guest_signals: u32,
}

impl Endpoint {
    fn new(kind: Kind, capacity: usize) -> Endpoint {
        Endpoint {
            kind,
            registered: None,
            owed: Owed::default(),
            to_daemon: VecDeque::new(),
            to_client: VecDeque::new(),
            capacity,
            client_closed: false,
            eof_read: false,
            daemon_gone: false,
            write_blocked: false,
            backlog: VecDeque::new(),
            signals: 0,
            to_guest_signals: 0,
        }
    }

    fn room(&self) -> usize {
        self.capacity.saturating_sub(self.to_client.len())
    }

    /// Readiness as it is now, for the interest the daemon asked for: what
    /// epoll reports when a registration is added or changed.
    fn level(&self) -> Owed {
        let readable = match self.kind {
            Kind::Socket => !self.to_daemon.is_empty() || self.client_closed,
            Kind::Listener => !self.backlog.is_empty(),
            Kind::Ring => self.signals > 0,
        };
        let writable = match self.kind {
            Kind::Socket => self.room() > 0 && !self.client_closed,
            Kind::Listener => false,
            // A datagram doorbell is writable whenever the guest keeps up.
            Kind::Ring => true,
        };
        Owed {
            readable,
            writable,
            read_closed: self.kind == Kind::Socket && self.client_closed,
            age: 0,
        }
    }

    /// Something changed: owe what the registered interest covers.
    fn raise(&mut self, readable: bool, writable: bool, read_closed: bool) {
        let Some((_, interest)) = self.registered else {
            return;
        };
        let readable = readable && interest.is_readable();
        let writable = writable && interest.is_writable();
        let read_closed = read_closed && interest.is_readable();
        self.owed.readable |= readable;
        self.owed.writable |= writable;
        self.owed.read_closed |= read_closed;
    }
}

/// How often a run took each adversarial turn: a budget of seeds must take
/// every one (the tests check), or the schedule has lost its teeth.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    /// Writes that went in part or not at all (a full socket buffer).
    pub blocked_writes: u64,
    /// Owed edges reported a poll or more late.
    pub late_edges: u64,
    /// Readiness reported that nobody owed.
    pub spurious: u64,
    /// Clients that hung up mid-burst.
    pub hangups: u64,
    /// Guests that found their request ring full.
    pub full_rings: u64,
    /// Transaction ends that conflicted (EAGAIN).
    pub conflicts: u64,
}

impl Tally {
    pub fn add(&mut self, o: &Tally) {
        self.blocked_writes += o.blocked_writes;
        self.late_edges += o.late_edges;
        self.spurious += o.spurious;
        self.hangups += o.hangups;
        self.full_rings += o.full_rings;
        self.conflicts += o.conflicts;
    }
}

/// Every endpoint, and what the daemon did with them.
#[derive(Default)]
pub struct Net {
    pub endpoints: Vec<Endpoint>,
    pub tally: Tally,
    /// Bytes and signals moved by the daemon: a pass that moves none made
    /// no progress.
    pub progress: u64,
    /// Violations of the contract by the daemon (a write after it read the
    /// end of a stream).
    pub violations: Vec<String>,
}

impl Net {
    pub fn add(&mut self, kind: Kind, capacity: usize) -> usize {
        self.endpoints.push(Endpoint::new(kind, capacity));
        self.endpoints.len() - 1
    }

    // ---- the daemon's side ----

    /// The daemon registered (or changed) `id`: epoll checks readiness now.
    pub fn register(&mut self, id: usize, token: Token, interest: Interest) {
        let e = &mut self.endpoints[id];
        e.registered = Some((token, interest));
        let now = e.level();
        e.raise(now.readable, now.writable, now.read_closed);
    }

    pub fn deregister(&mut self, id: usize) {
        let e = &mut self.endpoints[id];
        e.registered = None;
        e.owed = Owed::default();
    }

    /// A socket's read: everything waiting up to `buf`'s size (a stream
    /// socket never returns less while more waits), the end once the
    /// client hung up and all was read, else WouldBlock.
    pub fn daemon_read(&mut self, id: usize, buf: &mut [u8]) -> std::io::Result<usize> {
        let e = &mut self.endpoints[id];
        if e.to_daemon.is_empty() {
            if e.client_closed {
                e.eof_read = true;
                return Ok(0);
            }
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        let n = buf.len().min(e.to_daemon.len());
        for (b, v) in buf.iter_mut().zip(e.to_daemon.drain(..n)) {
            *b = v;
        }
        self.progress += n as u64;
        Ok(n)
    }

    /// A socket's write: what fits in its buffer.
    pub fn daemon_write(&mut self, id: usize, buf: &[u8]) -> std::io::Result<usize> {
        let e = &mut self.endpoints[id];
        if e.eof_read {
            self.violations.push(format!(
                "endpoint {id}: written after the daemon read its end"
            ));
        }
        if e.client_closed {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
        let n = buf.len().min(e.room());
        if n < buf.len() {
            e.write_blocked = true;
            self.tally.blocked_writes += 1;
        }
        if n == 0 {
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        e.to_client.extend(&buf[..n]);
        self.progress += n as u64;
        Ok(n)
    }

    /// A doorbell's signals taken (a ring's `drain`).
    pub fn drain_signals(&mut self, id: usize) {
        let e = &mut self.endpoints[id];
        if e.signals > 0 {
            self.progress += 1;
        }
        e.signals = 0;
    }

    /// The daemon rings a guest.
    pub fn ring_guest(&mut self, id: usize) {
        self.endpoints[id].to_guest_signals += 1;
    }

    pub fn accept(&mut self, listener: usize) -> Option<usize> {
        let id = self.endpoints[listener].backlog.pop_front()?;
        self.progress += 1;
        Some(id)
    }

    // ---- the clients' side ----

    /// A client connects through `listener`: a new socket endpoint.
    pub fn connect(&mut self, listener: usize, capacity: usize) -> usize {
        let id = self.add(Kind::Socket, capacity);
        let l = &mut self.endpoints[listener];
        l.backlog.push_back(id);
        l.raise(true, false, false);
        id
    }

    /// A client's bytes arrive: every arrival is an edge.
    pub fn client_send(&mut self, id: usize, bytes: &[u8]) {
        let e = &mut self.endpoints[id];
        e.to_daemon.extend(bytes);
        e.raise(true, false, false);
    }

    /// A client reads up to `most` bytes; room freed after a blocked write
    /// is an edge.
    pub fn client_recv(&mut self, id: usize, most: usize) -> Vec<u8> {
        let e = &mut self.endpoints[id];
        let n = most.min(e.to_client.len());
        let bytes: Vec<u8> = e.to_client.drain(..n).collect();
        if n > 0 && e.write_blocked {
            e.write_blocked = false;
            e.raise(false, true, false);
        }
        bytes
    }

    pub fn client_close(&mut self, id: usize) {
        self.tally.hangups += 1;
        let e = &mut self.endpoints[id];
        e.client_closed = true;
        e.to_client.clear();
        e.raise(true, false, true);
    }

    /// A guest rings the daemon.
    pub fn ring_daemon(&mut self, id: usize) {
        let e = &mut self.endpoints[id];
        e.signals += 1;
        e.raise(true, false, false);
    }

    // ---- epoll_wait ----

    /// What a poll reports: every owed edge once it is `MAX_DELAY` polls
    /// old, or when the daemon would otherwise sleep (`must`), else as the
    /// schedule chooses; now and then readiness nobody owed.
    pub fn poll(&mut self, choice: &mut Choice, must: bool, out: &mut Vec<Readiness>) {
        out.clear();
        let spurious = choice.percent(5);
        for e in &mut self.endpoints {
            let Some((token, interest)) = e.registered else {
                continue;
            };
            if !e.owed.any() {
                if spurious && e.kind != Kind::Listener && choice.percent(10) {
                    self.tally.spurious += 1;
                    out.push(Readiness {
                        token: token.0,
                        readable: interest.is_readable(),
                        ..Readiness::default()
                    });
                }
                continue;
            }
            if must || e.owed.age >= MAX_DELAY || choice.percent(60) {
                let o = std::mem::take(&mut e.owed);
                // A ring's doorbell edge may come as "writable" alone.
                let only_writable = e.kind == Kind::Ring && choice.percent(20);
                out.push(Readiness {
                    token: token.0,
                    readable: o.readable && !only_writable,
                    writable: o.writable || only_writable,
                    read_closed: o.read_closed,
                    error: false,
                });
            } else {
                if e.owed.age == 0 {
                    self.tally.late_edges += 1;
                }
                e.owed.age += 1;
            }
        }
        // epoll reports in no promised order.
        for i in (1..out.len()).rev() {
            out.swap(i, choice.below(i as u64 + 1) as usize);
        }
    }
}
