//! The simulated world the real event loop runs in: the network, the
//! clients and the schedule, behind one lock that the daemon's transports,
//! its poller and its domain backend share. Clients act between the loop's
//! passes and inside them: whenever the daemon reads a socket or drains a
//! doorbell, the schedule may first let clients act (bytes arriving after
//! the poll returned, a guest ringing between its drain and its read).

use super::choice::Choice;
use super::client::{Client, Role};
use super::net::{Kind, Net};
use crate::conn::poller::{Poller, Readiness};
use crate::conn::ring::conn::{Attached, EventChannel, Liveness, RingBackend};
use crate::conn::ring::transport::RingTransport;
use crate::conn::ring::{Interface, Mapping};
use crate::conn::transport::{Attachment, DomainBackend, Listener, Transport};
use mio::event::Source;
use mio::{Interest, Registry, Token};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub struct World {
    pub net: Net,
    pub clients: Vec<Client>,
    pub choice: Choice,
    /// Passes of the loop so far.
    pub pass: u64,
    /// The guests' pages, by domid (the daemon maps the same page).
    pub pages: Vec<(u32, Arc<Mapping>, usize)>,
    /// The dom0 listening socket's endpoint.
    pub listener: usize,
    /// The last poll would have slept: the daemon had nothing queued and
    /// no readiness was owed.
    pub slept: bool,
    /// The last poll's timeout: None when the daemon would sleep.
    pub last_timeout: Option<Duration>,
    /// `net.progress` at the last poll that did not sleep, and how many
    /// such polls in a row saw none.
    last_progress: u64,
    pub empty_turns: u32,
    pub busy_loops: u64,
    /// Everything set up (guests introduced, watchers watching): the
    /// workers and guests may act.
    pub started: bool,
}

pub type Shared = Arc<Mutex<World>>;

/// Passes in a row a loop that does not sleep may make no progress (turns
/// of connections that turn out to have nothing) before it is busy-looping.
pub const EMPTY_PASSES_MAX: u32 = 4;

pub fn lock(world: &Shared) -> MutexGuard<'_, World> {
    world.lock().unwrap_or_else(|e| e.into_inner())
}

impl World {
    pub fn new(choice: Choice) -> World {
        let mut net = Net::default();
        let listener = net.add(Kind::Listener, 0);
        World {
            net,
            clients: Vec::new(),
            choice,
            pass: 0,
            pages: Vec::new(),
            listener,
            slept: false,
            last_timeout: None,
            last_progress: 0,
            empty_turns: 0,
            busy_loops: 0,
            started: false,
        }
    }

    /// A few clients act (none, most of the time, inside a pass).
    pub fn interleave(&mut self) {
        if self.choice.percent(15) {
            let n = self.choice.between(1, 3) as usize;
            self.act(n);
        }
    }

    /// `n` actions by clients the schedule picks.
    pub fn act(&mut self, n: usize) {
        for _ in 0..n {
            if self.clients.is_empty() {
                return;
            }
            let i = self.choice.below(self.clients.len() as u64) as usize;
            let c = &mut self.clients[i];
            let may = match c.role {
                Role::Setup | Role::Watcher => true,
                Role::Worker | Role::Guest { .. } => self.started,
            };
            if may {
                c.act(&mut self.net, &mut self.choice, self.pass);
            }
        }
    }

    /// Every client reads what waits for it (the end of a run).
    pub fn drain_clients(&mut self) {
        for c in &mut self.clients {
            c.drain(&mut self.net, &mut self.choice, self.pass);
        }
    }

    /// Connects every client that has no endpoint yet (a guest gets its
    /// ring once introduced: see `SimDomains`).
    pub fn connect_clients(&mut self) {
        for c in &mut self.clients {
            if c.endpoint.is_none() && !matches!(c.role, Role::Guest { .. }) {
                c.endpoint = Some(self.net.connect(self.listener, c.capacity));
            }
        }
    }

    fn poll(&mut self, ready: &mut Vec<Readiness>, timeout: Option<Duration>) {
        self.last_timeout = timeout;
        let sleeping = timeout.is_none();
        self.net.poll(&mut self.choice, sleeping, ready);
        self.slept = sleeping && ready.is_empty();
        // A loop that does not sleep must be getting somewhere: a few
        // passes of nothing (turns of connections with nothing left) are
        // its bookkeeping, more is a busy loop.
        if timeout == Some(Duration::ZERO) {
            if self.net.progress == self.last_progress && ready.is_empty() {
                self.empty_turns += 1;
                if self.empty_turns > EMPTY_PASSES_MAX {
                    self.busy_loops += 1;
                    self.empty_turns = 0;
                }
            } else {
                self.empty_turns = 0;
            }
        } else {
            self.empty_turns = 0;
        }
        self.last_progress = self.net.progress;
    }
}

/// The daemon's poller: readiness the world owes, by its schedule. Sources
/// register with a real mio registry (the loop's API), which is never
/// polled: a simulated source keeps its token itself.
pub struct SimPoller {
    world: Shared,
    registry: mio::Poll,
}

impl SimPoller {
    pub fn new(world: Shared) -> io::Result<SimPoller> {
        Ok(SimPoller {
            world,
            registry: mio::Poll::new()?,
        })
    }
}

impl Poller for SimPoller {
    fn registry(&self) -> &Registry {
        self.registry.registry()
    }

    fn poll(&mut self, ready: &mut Vec<Readiness>, timeout: Option<Duration>) -> io::Result<()> {
        lock(&self.world).poll(ready, timeout);
        Ok(())
    }
}

/// An endpoint as the event loop polls it.
pub struct SimSource {
    world: Shared,
    endpoint: usize,
}

impl Source for SimSource {
    fn register(&mut self, _: &Registry, token: Token, interest: Interest) -> io::Result<()> {
        lock(&self.world)
            .net
            .register(self.endpoint, token, interest);
        Ok(())
    }
    fn reregister(&mut self, _: &Registry, token: Token, interest: Interest) -> io::Result<()> {
        lock(&self.world)
            .net
            .register(self.endpoint, token, interest);
        Ok(())
    }
    fn deregister(&mut self, _: &Registry) -> io::Result<()> {
        lock(&self.world).net.deregister(self.endpoint);
        Ok(())
    }
}

/// A client's stream socket, the daemon's end.
pub struct SimSocket {
    source: SimSource,
}

impl Transport for SimSocket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut w = lock(&self.source.world);
        w.interleave();
        w.net.daemon_read(self.source.endpoint, buf)
    }
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut w = lock(&self.source.world);
        w.interleave();
        w.net.daemon_write(self.source.endpoint, buf)
    }
    fn source(&mut self) -> &mut dyn Source {
        &mut self.source
    }
    fn kind(&self) -> &'static str {
        "socket"
    }
    fn peer(&self) -> String {
        format!("simulated client {}", self.source.endpoint)
    }
    fn pid(&self) -> u32 {
        1000 + self.source.endpoint as u32
    }
    fn short_read_drains(&self) -> bool {
        true
    }
    fn readiness_names_direction(&self) -> bool {
        true
    }
}

impl Drop for SimSocket {
    fn drop(&mut self) {
        lock(&self.source.world).net.endpoints[self.source.endpoint].daemon_gone = true;
    }
}

/// dom0's listening socket.
pub struct SimListener {
    source: SimSource,
}

impl SimListener {
    pub fn new(world: &Shared) -> SimListener {
        let endpoint = lock(world).listener;
        SimListener {
            source: SimSource {
                world: world.clone(),
                endpoint,
            },
        }
    }
}

impl Listener for SimListener {
    fn source(&mut self) -> &mut dyn Source {
        &mut self.source
    }
    fn accept(&mut self) -> io::Result<Option<Box<dyn Transport>>> {
        let Some(endpoint) = lock(&self.source.world).net.accept(self.source.endpoint) else {
            return Ok(None);
        };
        let world = self.source.world.clone();
        Ok(Some(Box::new(SimSocket {
            source: SimSource { world, endpoint },
        })))
    }
}

/// A guest's doorbell, the daemon's end.
struct SimChannel {
    source: SimSource,
}

impl EventChannel for SimChannel {
    fn notify(&self) -> io::Result<()> {
        lock(&self.source.world)
            .net
            .ring_guest(self.source.endpoint);
        Ok(())
    }
    fn source(&mut self) -> &mut dyn Source {
        &mut self.source
    }
    fn fd(&self) -> std::os::fd::RawFd {
        -1
    }
    fn drain(&self) -> io::Result<Liveness> {
        let mut w = lock(&self.source.world);
        w.interleave();
        w.net.drain_signals(self.source.endpoint);
        Ok(Liveness::Alive)
    }
    fn describe(&self) -> String {
        format!("simulated ring {}", self.source.endpoint)
    }
}

/// XS_INTRODUCE maps the guest's page the world made for it and binds its
/// doorbell; the guest then gets its end of the ring.
pub struct SimDomains {
    pub world: Shared,
}

impl RingBackend for SimDomains {
    fn attach(&self, domid: u16, _gfn: u64, _port: u32) -> io::Result<Attached> {
        let w = lock(&self.world);
        let Some((_, page, endpoint)) = w.pages.iter().find(|p| p.0 == domid as u32) else {
            return Err(io::Error::new(io::ErrorKind::NotFound, "no such guest"));
        };
        Ok(Attached {
            page: Box::new(page.clone()),
            channel: Box::new(SimChannel {
                source: SimSource {
                    world: self.world.clone(),
                    endpoint: *endpoint,
                },
            }),
        })
    }
}

impl DomainBackend for SimDomains {
    fn introduce(&mut self, domid: u32, gfn: u64, port: u32) -> io::Result<Attachment> {
        let ring = RingTransport::attach(self, domid, gfn, port)?;
        let mut w = lock(&self.world);
        let World { pages, clients, .. } = &mut *w;
        let page = pages.iter().find(|p| p.0 == domid);
        let guest = clients.iter_mut().find(|c| c.role == Role::Guest { domid });
        if let (Some((_, page, endpoint)), Some(c)) = (page, guest) {
            c.endpoint = Some(*endpoint);
            c.ring = Some(Interface::new(Box::new(page.clone())));
        }
        Ok(Attachment::Connection(Box::new(ring)))
    }
    fn release(&mut self, _: u32) {}
}

/// Makes guest `domid`'s page and doorbell (before its introduction).
pub fn prepare_guest(world: &mut World, domid: u32) -> io::Result<()> {
    let page = Arc::new(Mapping::anonymous()?);
    let endpoint = world.net.add(Kind::Ring, 0);
    world.pages.push((domid, page, endpoint));
    Ok(())
}
