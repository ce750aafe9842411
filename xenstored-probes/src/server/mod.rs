//! The event loop: one thread, non-blocking transports polled with mio
//! (epoll, edge-triggered). It decides when each connection (owned by the
//! daemon, see conn/) reads, executes and writes: replies go
//! straight out when the transport accepts them and wait in the
//! connection's queue otherwise, so a slow or dead client only ever delays
//! itself. It owns the listeners, and carries out the daemon's Effects.

pub(crate) mod fair_turns;
#[cfg(any(test, feature = "simulation"))]
pub mod sim;

use crate::conn::poller::{MioPoller, Poller, Readiness};
use crate::conn::ring;
use crate::conn::transport::{Attachment, DomainMonitor, Listener, SharedChannels, Transport};
use crate::conn::Received;
use crate::daemon::{Daemon, Effects};
use crate::log;
use crate::log::notable::{Kind, Notable};
use crate::probes::stats_batch;
use crate::server::fair_turns::Turns;
use mio::{Interest, Registry, Token};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::io;
use std::time::Duration;

/// Tokens at and above this are listeners; below, connection ids.
const LISTENER_BASE: usize = 1 << 40;
/// The stop source's token (above every u32 connection id).
const STOP: usize = LISTENER_BASE - 1;
/// The domain monitor's token (likewise).
const DOMAIN_MONITOR: usize = LISTENER_BASE - 2;
/// Turns (one request each) served between two polls: a request that
/// arrives meanwhile waits for this many, not for every ready connection.
const TURNS_PER_POLL: usize = 8;
/// stats_batch's deadline timer's token (likewise).
const STATS_DEADLINE: usize = LISTENER_BASE - 3;
/// Connections one batch of effects writes to at once; a fan-out to more
/// (an @releaseDomain to a thousand xl monitors: ~2 ms of sends) writes
/// the rest FAN_OUT_PER_PASS a pass, so the other clients' requests are
/// served in between instead of waiting for every send.
const FAN_OUT_AT_ONCE: usize = 16;
const FAN_OUT_PER_PASS: usize = 64;

/// What a pass of the loop (`Server::step`) leaves the server doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Serving,
    /// The stop source fired or a live update is ready: `run` returns.
    Stopping,
}

struct Port {
    listener: Box<dyn Listener>,
    domid: u32,
}

pub struct Server {
    poller: Box<dyn Poller>,
    /// What the last poll reported (kept for its capacity).
    readiness: Vec<Readiness>,
    daemon: Daemon,
    ports: FxHashMap<usize, Port>,
    next_port: usize,
    /// Connections that may have unread input, least served first.
    ready: Turns,
    /// Connections of domains over a quota (outstanding requests, memory):
    /// not read from until deliveries bring them under (Daemon::may_read);
    /// `unstall` looks every pass and queues them again.
    stalled: Vec<u32>,
    /// Listeners whose accept failed (e.g. out of fds): edge-triggered
    /// polling will not report them again, so they are retried on a timer.
    retry_accept: Vec<usize>,
    /// apply_effects' other set of lists (see there).
    spare_effects: Effects,
    /// Connections with output a fan-out queued, not yet written, oldest
    /// first (each marked `dirty` until written; see FAN_OUT_AT_ONCE):
    /// every pass writes FAN_OUT_PER_PASS of them, and the poll does not
    /// wait while any is left.
    fan_out: VecDeque<u32>,
    /// Xen's VIRQ_DOM_EXC on a dom0 (see monitor_domains).
    monitor: Option<Box<dyn DomainMonitor>>,
}

/// How often a live update waiting for transactions looks again.
const LIVE_UPDATE_CHECK: Duration = Duration::from_secs(1);
/// How soon a failed accept is retried.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

impl Server {
    pub fn new(daemon: Daemon) -> io::Result<Server> {
        Server::with_poller(daemon, Box::new(MioPoller::new()?))
    }

    /// A server whose readiness comes from `poller` (the simulation's).
    pub fn with_poller(daemon: Daemon, poller: Box<dyn Poller>) -> io::Result<Server> {
        poll_stats_deadline(poller.registry())?;
        Ok(Server {
            poller,
            readiness: Vec::new(),
            daemon,
            ports: FxHashMap::default(),
            next_port: LISTENER_BASE,
            ready: Turns::default(),
            stalled: Vec::new(),
            retry_accept: Vec::new(),
            spare_effects: Effects::default(),
            fan_out: VecDeque::new(),
            monitor: None,
        })
    }

    /// Accepts connections of `domid` (0: privileged dom0 clients) here.
    pub fn listen(&mut self, mut listener: Box<dyn Listener>, domid: u32) -> io::Result<()> {
        let token = self.next_port;
        self.next_port += 1;
        self.poller
            .registry()
            .register(listener.source(), Token(token), Interest::READABLE)?;
        self.ports.insert(token, Port { listener, domid });
        Ok(())
    }

    /// Follows domain shutdowns and deaths the hypervisor reports.
    pub fn monitor_domains(&mut self, mut monitor: Box<dyn DomainMonitor>) -> io::Result<()> {
        self.poller.registry().register(
            monitor.source(),
            Token(DOMAIN_MONITOR),
            Interest::READABLE,
        )?;
        self.monitor = Some(monitor);
        Ok(())
    }

    /// For a live update into oxenstored: binds the domain monitor's
    /// VIRQ_DOM_EXC on `shared` instead (`DomainMonitor::move_to`); None
    /// when there is no monitor.
    pub fn move_monitor(&mut self, shared: &mut SharedChannels) -> Option<io::Result<u32>> {
        self.monitor.as_mut().map(|m| m.move_to(shared))
    }

    /// Undoes [`Server::move_monitor`], once `shared` is closed.
    pub fn move_monitor_back(&mut self) -> io::Result<()> {
        self.monitor.as_mut().map_or(Ok(()), |m| m.move_back())
    }

    pub fn daemon(&self) -> &Daemon {
        &self.daemon
    }

    /// The daemon, to restore a live update's state into before serving.
    pub fn daemon_mut(&mut self) -> &mut Daemon {
        &mut self.daemon
    }

    /// The monitor fired (or, after a live update, may have fired unseen):
    /// the daemon hears which domains shut down or died.
    pub fn check_domains(&mut self) {
        let Some(monitor) = self.monitor.as_mut() else {
            return;
        };
        match monitor.check(&self.daemon.guests()) {
            Ok(changes) => self.daemon.domains_changed(&changes),
            Err(e) => log::error(format_args!("domain exceptions: {e}")),
        }
        self.apply_effects();
    }

    /// Adds a ready transport as a connection of `domid`.
    pub fn attach(&mut self, transport: Box<dyn Transport>, domid: u32) -> io::Result<u32> {
        let id = self.daemon.open(domid, transport);
        let registry = self.poller.registry();
        let registered = self.daemon.conn_mut(id).map_or(Ok(()), |conn| {
            let interest = conn.interest();
            conn.polled = Some(interest);
            registry.register(conn.source(), Token(id as usize), interest)
        });
        if let Err(e) = registered {
            self.daemon.close(id, 0, "register failed");
            self.apply_effects();
            return Err(e);
        }
        self.queue(id);
        Ok(id)
    }

    /// Makes `run` return once `fd` is readable (e.g. a signalfd), after
    /// serving the rest of that poll's events; `run` may be called again.
    pub fn stop_when_readable(&mut self, fd: std::os::fd::RawFd) -> io::Result<()> {
        let mut source = mio::unix::SourceFd(&fd);
        self.poller
            .registry()
            .register(&mut source, Token(STOP), Interest::READABLE)
    }

    /// Serves until the stop source (if any) is readable, or a live update
    /// is ready (`Daemon::take_ready_update`).
    pub fn run(&mut self) -> io::Result<()> {
        // What was queued between two runs (a failed update's answer).
        self.apply_effects();
        while self.step()? == Step::Serving {}
        self.write_fan_out(usize::MAX);
        // Held counts reach the tracer before an exit or an exec.
        stats_batch::flush();
        Ok(())
    }

    /// One pass of the loop: poll (without waiting while work is queued),
    /// take in what became ready, serve a few turns, write what waits.
    ///
    /// Liveness: at the end of every pass, a connection with a complete
    /// request in its buffer, or with input that may wait in its transport
    /// (`Connection::may_have_more`), is in one of these places, each
    /// with its way back:
    /// - queued in `ready` (fair_turns.rs): the next passes serve it (the poll
    ///   does not wait while anything is queued);
    /// - `stalled` (its domain over a quota): `unstall`, every pass, queues
    ///   it once deliveries bring the domain back under;
    /// - throttled (its own output backed up): `flush` queues it when the
    ///   output drains to a quarter, on the writable edge that room raises.
    ///
    /// Every other connection waits on the kernel, and is owed an edge: any
    /// byte that arrives after its last read raises one, and the pass that
    /// reports it marks the connection (`note_readiness`) before queueing
    /// it, so a wake-up that finds it already queued is not lost.
    /// Output likewise: it is written at once, or waits for a writable
    /// edge (polled for while it waits, `repoll`), or is queued in
    /// `fan_out`, which every pass writes from.
    pub fn step(&mut self) -> io::Result<Step> {
        let timeout = if !self.ready.is_empty() || !self.fan_out.is_empty() {
            Some(Duration::ZERO)
        } else if !self.retry_accept.is_empty() {
            Some(ACCEPT_RETRY)
        } else if self.daemon.live_update_held() {
            Some(LIVE_UPDATE_CHECK)
        } else {
            None
        };
        let mut readiness = std::mem::take(&mut self.readiness);
        match self.poller.poll(&mut readiness, timeout) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                self.readiness = readiness;
                return Ok(Step::Serving);
            }
            r => r?,
        }
        let mut stop = false;
        for token in std::mem::take(&mut self.retry_accept) {
            self.accept(token);
        }
        for ev in &readiness {
            match ev.token {
                STOP => stop = true,
                DOMAIN_MONITOR => self.check_domains(),
                STATS_DEADLINE => stats_batch::on_deadline(),
                token if token >= LISTENER_BASE => self.accept(token),
                token => self.take_in(token as u32, ev),
            }
        }
        self.readiness = readiness;
        self.serve_ready();
        self.daemon.live_update_check();
        self.apply_effects();
        self.write_fan_out(FAN_OUT_PER_PASS);
        self.unstall();
        if stop || self.daemon.live_update_ready() {
            return Ok(Step::Stopping);
        }
        Ok(Step::Serving)
    }

    /// Connection `id` became ready (`ev`).
    fn take_in(&mut self, id: u32, ev: &Readiness) {
        // Signals first, output after: a ring's guest that frees room right
        // after this raises a fresh edge, so a backlog never waits on a
        // signal already taken.
        //
        // The signals taken may be newer than this event: a guest that
        // queued a request and rang after the poll returned has its ring's
        // edge consumed here. The event may say only "writable" (a datagram
        // doorbell is writable whenever the guest reads the daemon's own
        // notifications) and the next poll reports the fd writable, not
        // readable, so the connection is read whatever this event said.
        self.take_signals(id);
        // Any readiness may mean room to write: a ring signals both
        // directions through one event source.
        if ev.writable
            || self
                .daemon
                .conn(id)
                .is_some_and(|c| !c.pending().is_empty())
        {
            self.flush(id);
        }
        let Some(conn) = self.daemon.conn_mut(id) else {
            return;
        };
        if ev.read_closed {
            conn.peer_closed = true;
        }
        if conn.note_readiness(ev) {
            self.wake(id);
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
                        let why = format!("registering a connection: {e}");
                        let event = Notable::new(Kind::ConnectionRefused, why).domid(domid);
                        log::notable(event.reason("register"));
                    }
                }
                Ok(None) => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let why = format!("accept: {e} (retrying)");
                    let event = Notable::new(Kind::ConnectionRefused, why).domid(domid);
                    log::notable(event.reason("accept"));
                    if !self.retry_accept.contains(&token) {
                        self.retry_accept.push(token);
                    }
                    return;
                }
            }
        }
    }

    /// Stalled connections whose domains are back under their quotas get
    /// their turn again (their input was left waiting).
    fn unstall(&mut self) {
        let mut i = 0;
        while i < self.stalled.len() {
            let id = self.stalled[i];
            if self.daemon.conn(id).is_none() {
                self.stalled.swap_remove(i);
            } else if self.daemon.may_read(id) {
                self.stalled.swap_remove(i);
                self.queue(id);
            } else {
                i += 1;
            }
        }
    }

    /// True (and `id` set aside) when its domain is over a quota.
    fn stall_if_over_quota(&mut self, id: u32) -> bool {
        if self.daemon.may_read(id) {
            return false;
        }
        if !self.stalled.contains(&id) {
            self.stalled.push(id);
        }
        true
    }

    /// Connection `id` may have input to serve (see fair_turns.rs).
    fn queue(&mut self, id: u32) {
        let in_transaction = self.in_transaction(id);
        self.ready.push(id, in_transaction);
    }

    /// Connection `id` may have new input: a transaction's goes first.
    fn wake(&mut self, id: u32) {
        let in_transaction = self.in_transaction(id);
        self.ready.wake(id, in_transaction);
    }

    fn in_transaction(&self, id: u32) -> bool {
        self.daemon
            .conn(id)
            .is_some_and(|c| !c.transactions.is_empty())
    }

    /// Serves up to TURNS_PER_POLL turns, least served connection first
    /// (fair_turns.rs), and returns to the poll for new arrivals. What a
    /// connection's turns queued goes out when another's turn begins, so
    /// a client that sent many requests gets their replies in one write.
    fn serve_ready(&mut self) {
        let mut last = None;
        for _ in 0..TURNS_PER_POLL {
            // Once a live update is ready (the `-s` just served) no other
            // request runs before the exec: a transaction started now would
            // be lost with this image. What is queued waits in its buffer,
            // which the update hands on, or, should the exec fail, for the
            // next pass.
            if self.daemon.live_update_ready() {
                break;
            }
            let Some(id) = self.ready.pop() else {
                break;
            };
            if let Some(prev) = last.filter(|&prev| prev != id) {
                self.end_turns(prev);
            }
            if self.turn(id) {
                self.queue(id);
            }
            last = Some(id);
        }
        if let Some(prev) = last {
            self.end_turns(prev);
        }
        let daemon = &self.daemon;
        self.ready
            .forget_closed(daemon.conn_count(), |id| daemon.conn(id).is_some());
    }

    /// Reading took the transport's signals, and a signal meaning "room to
    /// write" taken there is one the event loop will never report (its
    /// readiness is re-checked, and gone): queued output is tried now.
    /// The watchers' events go out before the replies (connections are
    /// flushed in the order their output was queued): a client that has
    /// its reply finds the events it caused delivered, and one sharing a
    /// CPU with the daemon is woken once, not once for each.
    fn end_turns(&mut self, id: u32) {
        self.apply_effects();
        if self
            .daemon
            .conn(id)
            .is_some_and(|c| !c.pending().is_empty())
        {
            self.flush(id);
        }
    }

    /// Connection `id`'s turn: its next request is executed, read first
    /// if none is waiting. True when it may have more.
    fn turn(&mut self, id: u32) -> bool {
        let Some(conn) = self.daemon.conn(id) else {
            return false;
        };
        let held = conn.throttled();
        let waiting = conn.has_request();
        if held || self.stall_if_over_quota(id) {
            self.take_signals(id);
            return false;
        }
        if !waiting && self.receive(id).is_none() {
            return false;
        }
        if !self.daemon.execute_input(id, 1) {
            return false;
        }
        let Some(conn) = self.daemon.conn_mut(id) else {
            return false;
        };
        if conn.throttle_if_backed_up() {
            return false;
        }
        // Not only what this turn read: a ring whose requests came in one
        // read is served to its end, not left until the guest signals.
        conn.may_have_more()
    }

    /// Reads once from connection `id`: Some(drained) when bytes came,
    /// None when nothing did (or it ended, and is closed).
    fn receive(&mut self, id: u32) -> Option<bool> {
        loop {
            let conn = self.daemon.conn_mut(id)?;
            match conn.receive() {
                Ok(Received::Bytes { drained }) => return Some(drained),
                Ok(Received::End) if conn.end_means_domain_gone() => {
                    self.daemon.domain_gone(id);
                }
                Ok(Received::End) => self.daemon.close(id, 0, "eof"),
                Err(e) if ring::transport::is_session_reset(&e) => {
                    self.reset(id, &e.to_string());
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let reason = format!("read error: {e}");
                    self.daemon.close(id, 0, &reason);
                }
            }
            return None;
        }
    }

    /// Connection `id` is not being read (stalled or throttled), but its
    /// peer's signals are taken: its death or ring reset is acted on now,
    /// and its transport can raise the next edge.
    fn take_signals(&mut self, id: u32) {
        let Some(conn) = self.daemon.conn_mut(id) else {
            return;
        };
        match conn.receive_signals() {
            Ok(Received::End) if conn.end_means_domain_gone() => self.daemon.domain_gone(id),
            Ok(Received::End) => self.daemon.close(id, 0, "eof"),
            Err(e) if ring::transport::is_session_reset(&e) => self.reset(id, &e.to_string()),
            _ => {}
        }
    }

    /// A ring reconnect or ring error: the connection's packets, watches
    /// and transactions go (conn_close), the transport stays and serves a
    /// fresh connection of the same domain (conn_open).
    fn reset(&mut self, id: u32, reason: &str) {
        let Some(domid) = self.daemon.conn(id).map(|c| c.domid()) else {
            return;
        };
        let Some(mut transport) = self.daemon.detach(id, 0, reason) else {
            return;
        };
        let _ = self.poller.registry().deregister(transport.source());
        self.apply_effects();
        if let Err(e) = self.attach(transport, domid) {
            log::error(format_args!("re-attaching domain {domid}'s ring: {e}"));
        }
    }

    /// Writes what connection `id` has queued, as far as it goes now.
    fn flush(&mut self, id: u32) {
        let Some(flushed) = self.daemon.flush(id) else {
            return;
        };
        match flushed {
            Ok(true) => self.queue(id),
            Ok(false) => {}
            Err(reason) => return self.daemon.close(id, 0, &reason),
        }
        self.repoll(id);
    }

    /// Polls connection `id` for what it needs now (`Connection::interest`):
    /// room to write only while its output waits. Changing that re-checks
    /// readiness, so room that came before it is still reported: output
    /// the transport did not take is written on that writable edge.
    fn repoll(&mut self, id: u32) {
        let Some(conn) = self.daemon.conn_mut(id) else {
            return;
        };
        let want = conn.interest();
        if conn.polled == Some(want) {
            return;
        }
        conn.polled = Some(want);
        let registry = self.poller.registry();
        if let Err(e) = registry.reregister(conn.source(), Token(id as usize), want) {
            self.daemon.close(id, 0, &format!("poll: {e}"));
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
            for mut transport in fx.closed.drain(..) {
                let _ = self.poller.registry().deregister(transport.source());
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
                        let _ = self.poller.registry().deregister(p.listener.source());
                    }
                }
            }
            for (domid, a) in fx.attached.drain(..) {
                let r = match a {
                    Attachment::Connection(t) => self.attach(t, domid).map(|_| ()),
                    Attachment::Listener(l) => self.listen(l, domid),
                };
                if let Err(e) = r {
                    log::error(format_args!("attaching domain {domid}: {e}"));
                }
            }
            let later = fx.dirty.len().min(FAN_OUT_AT_ONCE);
            self.fan_out.extend(fx.dirty.drain(later..));
            for id in fx.dirty.drain(..) {
                if let Some(c) = self.daemon.conn_mut(id) {
                    c.dirty = false;
                }
                self.flush(id);
            }
        }
        self.spare_effects = fx;
    }

    /// Writes the output of up to `most` connections a big fan-out left
    /// waiting (FAN_OUT_AT_ONCE), oldest first; one written meanwhile
    /// (its own turn, a writable event) costs nothing here.
    fn write_fan_out(&mut self, most: usize) {
        let mut written = 0;
        while written < most {
            let Some(id) = self.fan_out.pop_front() else {
                return;
            };
            let Some(c) = self.daemon.conn_mut(id) else {
                continue;
            };
            c.dirty = false;
            if !c.pending().is_empty() {
                self.flush(id);
                written += 1;
            }
        }
    }
}

/// Polls `stats_batch`'s deadline timer, so an idle daemon still fires the
/// records it holds within their bound (events: [`STATS_DEADLINE`]).
fn poll_stats_deadline(registry: &Registry) -> io::Result<()> {
    match stats_batch::deadline_fd() {
        Some(fd) => registry.register(
            &mut mio::unix::SourceFd(&fd),
            Token(STATS_DEADLINE),
            Interest::READABLE,
        ),
        // No timerfd: batches fire when full, at a CONTROL and at exit.
        None => Ok(()),
    }
}
