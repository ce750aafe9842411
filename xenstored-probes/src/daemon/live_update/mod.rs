//! Live update as the source: CONTROL `live-update` as C xenstored 4.17
//! takes it from `xenstore-control live-update -f <file>` (`-f <file>`,
//! `-c <cmdline>`, `-s [-t <timeout>] [-F]`, `-a`), and the migration
//! stream of this daemon's state for the image it execs. The exec itself,
//! which needs the process, is the binary's (update/handover.rs).
//!
//! As C, `-s` is answered only by the new image ("OK", in the stream), or
//! with why not; while transactions are open it waits up to `-t` seconds
//! (the event loop checks it every second). Into oxenstored, as oxenstored
//! does: every `-s` is answered "BUSY" until the exec, and the new image
//! answers the one xenstore-control repeats "OK"; it waits for bytes in
//! flight as for transactions, its dump holding none. Better than C: the
//! target is checked when named, read but never run (another shim, C
//! xenstored or oxenstored with live update; anything else is refused
//! before anything changes).

use super::{Call, Daemon};
use crate::conn::transport::SharedChannels;
use crate::migration::oxenstored::{self, DomChannel};
use crate::migration::stream::{self, ConnKind, Global, State};
use crate::store::perms::{IGNORE, READ, WRITE};
use crate::wire::frame;
use crate::wire::path;
use crate::wire::{Header, MsgType};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};
pub use target::Target;
use target::{program_run_by_loader, recognise_target};

mod target;

/// A live-update session: one privileged connection's, from `-f` to exec.
pub struct Session {
    conn: u32,
    pub target: PathBuf,
    /// The program's, when `target` is the loader and `-c` named it.
    kind: Target,
    /// `target` is the loader, running the program `-c` names.
    via_loader: bool,
    /// `-c`: the new image's arguments instead of this one's.
    pub cmdline: Option<String>,
    /// When `-s` first came: open transactions get `-t` seconds from then.
    started: Option<Instant>,
    /// The `-s` request, unanswered while transactions are open (into
    /// oxenstored: answered "BUSY", waiting all the same).
    held: Option<Held>,
    /// Into oxenstored: why the update did not happen, the answer to the
    /// next `-s`.
    result: Option<String>,
}

impl Session {
    /// `-f` named the loader (whatever program `-c` has named since).
    fn target_is_loader(&self) -> bool {
        self.kind == Target::Loader || self.via_loader
    }
}

#[derive(Clone, Copy)]
struct Held {
    serial: u64,
    header: Header,
    timeout: Duration,
    force: bool,
}

/// The update to carry out now: the `-s` request whose "OK" the new image
/// sends.
pub struct Ready {
    pub conn: u32,
    pub serial: u64,
    pub header: Header,
    pub target: PathBuf,
    pub kind: Target,
    pub cmdline: Option<String>,
}

impl Daemon {
    /// CONTROL live-update's arguments; Some(text) is the reply, None means
    /// the request's reply waits for the update (the new image sends it).
    pub(super) fn live_update(&mut self, call: &Call, args: &[&[u8]]) -> Option<String> {
        let mine = self.live.as_ref().is_some_and(|s| s.conn == call.conn);
        let text = |s: &str| Some(s.to_string());
        match args {
            [b"-f", file] => {
                if self.live.is_some() && !mine {
                    return text("Live-update session already active.");
                }
                let target = PathBuf::from(String::from_utf8_lossy(file).into_owned());
                let kind = match recognise_target(&target) {
                    Ok(kind) => kind,
                    Err(why) => return Some(why),
                };
                // Said now, and again when -s finds no transaction open.
                if let Some(why) = self.cannot_take(kind) {
                    return Some(why);
                }
                self.live = Some(Session {
                    conn: call.conn,
                    target,
                    kind,
                    via_loader: false,
                    cmdline: None,
                    started: None,
                    held: None,
                    result: None,
                });
                text("OK")
            }
            [b"-c", cmdline] if mine => {
                let cmdline = String::from_utf8_lossy(cmdline).into_owned();
                let session = self.live.as_ref()?;
                // Through the loader the program -c names is the target.
                if session.target_is_loader() {
                    let kind = match program_run_by_loader(&cmdline) {
                        Ok(kind) => kind,
                        Err(why) => return Some(why),
                    };
                    if let Some(why) = self.cannot_take(kind) {
                        return Some(why);
                    }
                    if let Some(s) = self.live.as_mut() {
                        s.kind = kind;
                        s.via_loader = true;
                    }
                }
                if let Some(s) = self.live.as_mut() {
                    s.cmdline = Some(cmdline);
                }
                text("OK")
            }
            [b"-a"] if mine => {
                self.live = None;
                text("OK")
            }
            [b"-a"] => text("No live-update session active."),
            // oxenstored's client asks again after the exec: the new image
            // answers it.
            [b"-s", ..] if self.live.is_none() && self.live_completed => {
                self.live_completed = false;
                text("OK")
            }
            [b"-s", ..]
                if self
                    .live
                    .as_ref()
                    .is_some_and(|s| mine && s.result.is_some()) =>
            {
                self.live.take().and_then(|s| s.result)
            }
            [b"-s", opts @ ..] if mine => self.live_update_start(call, opts),
            _ => text("Not in live-update session."),
        }
    }

    fn live_update_start(&mut self, call: &Call, opts: &[&[u8]]) -> Option<String> {
        let mut timeout = 60;
        let mut force = false;
        let mut it = opts.iter();
        while let Some(o) = it.next() {
            match *o {
                b"-F" => force = true,
                b"-t" => match it
                    .next()
                    .and_then(|t| std::str::from_utf8(t).ok()?.parse().ok())
                {
                    Some(t) => timeout = t,
                    None => return Some("Bad -t argument.".to_string()),
                },
                _ => return Some(format!("Unknown option {}.", String::from_utf8_lossy(o))),
            }
        }
        let session = self.live.as_mut()?;
        if session.kind == Target::Loader {
            self.live = None;
            return Some(
                "The target is the dynamic loader: -c must name the program it runs \
                 (--library-path DIR PROGRAM ARGS...)."
                    .to_string(),
            );
        }
        if session.kind == Target::Oxenstored && session.held.is_some() {
            // xenstore-control asking again: the first -s's timeout holds.
            return Some("BUSY".to_string());
        }
        session.started.get_or_insert_with(Instant::now);
        session.held = Some(Held {
            serial: call.serial,
            header: call.header,
            timeout: Duration::from_secs(timeout),
            force,
        });
        if session.kind == Target::Oxenstored {
            // The event loop checks it after this pass, the BUSY written.
            return Some("BUSY".to_string());
        }
        self.live_update_check();
        None
    }

    /// True while a `-s` waits for open transactions (the event loop calls
    /// [`Daemon::live_update_check`] every second).
    pub fn live_update_held(&self) -> bool {
        self.live.as_ref().is_some_and(|s| s.held.is_some())
    }

    /// Carries a held `-s` on: ready once no transaction is open; after
    /// its timeout, refused, or with -F ready with the transactions dropped.
    pub fn live_update_check(&mut self) {
        let Some(session) = self.live.as_ref() else {
            return;
        };
        let Some(held) = session.held else {
            return;
        };
        let open: Vec<u32> = self
            .conn_ids()
            .iter()
            .filter_map(|id| self.conns.get(id))
            .filter(|c| !c.transactions.is_empty())
            .map(|c| c.domid())
            .collect();
        let in_flight = match session.kind {
            Target::Oxenstored => self.bytes_in_flight(session.conn),
            _ => Vec::new(),
        };
        let late = session.started.is_some_and(|t| t.elapsed() >= held.timeout);
        if (!open.is_empty() || !in_flight.is_empty()) && !late {
            return;
        }
        let session = self.live.take().expect("checked above");
        let refused = self.cannot_take(session.kind).or_else(|| {
            if !in_flight.is_empty() {
                Some(format!(
                    "Domains with bytes in flight: {in_flight:?} (oxenstored takes none)"
                ))
            } else if !open.is_empty() && !held.force {
                Some(format!(
                    "Domains with long running transactions: {open:?} (-F drops them)"
                ))
            } else {
                None
            }
        });
        if let Some(why) = refused {
            if session.kind == Target::Oxenstored {
                // -s was answered BUSY: the next one hears why.
                self.live = Some(Session {
                    held: None,
                    result: Some(why),
                    ..session
                });
                return;
            }
            let mut reply = why.into_bytes();
            reply.push(0);
            self.respond(session.conn, held.serial, &held.header, Ok(&reply));
            return;
        }
        for id in self.conn_ids() {
            if let Some(c) = self.conns.get_mut(&id) {
                c.drop_transactions(held.serial, "live update");
            }
        }
        self.ready_update = Some(Ready {
            conn: session.conn,
            serial: held.serial,
            header: held.header,
            target: session.target,
            kind: session.kind,
            cmdline: session.cmdline,
        });
    }

    /// Why `kind` could not take this daemon's state now, if it could not.
    fn cannot_take(&self, kind: Target) -> Option<String> {
        match kind {
            Target::C => self.c_cannot_take(),
            Target::Oxenstored => self.oxenstored_cannot_take(),
            Target::Shim | Target::Loader => None,
        }
    }

    /// Why C xenstored (4.17 to 4.20) could not restore this store, if it
    /// could not: it accounts each node to its owner's domain, and knows
    /// only the domains the stream has a connection for (it dies on a node
    /// of any other, as it does restoring its own dump of such a store).
    fn c_cannot_take(&self) -> Option<String> {
        let mut todo = vec!["/".to_string()];
        while let Some(p) = todo.pop() {
            let Some(n) = self.store.node(&p) else {
                continue;
            };
            if let Some(owner) = n.perms.first().map(|p| p.domid) {
                if owner != 0 && self.domains.get(owner).is_none() {
                    return Some(format!(
                        "C xenstored cannot take this store: {p} is owned by domain \
                         {owner}, which has no connection (C restores only the domains \
                         it has one for)."
                    ));
                }
            }
            todo.extend(n.children().map(|c| path::child(&p, c)));
        }
        None
    }

    /// Domains whose connections hold bytes oxenstored's dump cannot carry:
    /// output not yet written (but `own`'s, the session's: its "BUSY" is
    /// written before the exec) or input not yet executed.
    fn bytes_in_flight(&self, own: u32) -> Vec<u32> {
        self.conn_ids()
            .iter()
            .filter_map(|id| self.conns.get(id))
            .filter(|c| (c.id != own && !c.pending().is_empty()) || !c.unexecuted().is_empty())
            .map(|c| c.domid())
            .collect()
    }

    /// Why oxenstored (4.17) could not take this daemon's state, if it
    /// could not: its dump has no SET_TARGET (it refuses its own update
    /// then).
    fn oxenstored_cannot_take(&self) -> Option<String> {
        let acting = self.conn_ids().into_iter().find_map(|id| {
            let c = self.conns.get(&id)?;
            c.ident.target.map(|t| (c.domid(), t))
        })?;
        Some(format!(
            "oxenstored cannot take this daemon's state: domain {} acts for domain {} \
             (SET_TARGET), which its dump cannot say.",
            acting.0, acting.1
        ))
    }

    /// This image took over from oxenstored, whose `xenstore-control`
    /// repeats `-s` until the new image answers "OK".
    pub fn live_update_completed(&mut self) {
        self.live_completed = true;
    }

    /// True when `-s` made an update ready (the event loop returns).
    pub fn live_update_ready(&self) -> bool {
        self.ready_update.is_some()
    }

    /// The update `-s` made ready, once: the caller writes the state and
    /// execs, or answers [`Daemon::live_update_failed`].
    pub fn take_ready_update(&mut self) -> Option<Ready> {
        self.ready_update.take()
    }

    /// The exec did not happen: this daemon goes on serving, and the `-s`
    /// request is answered with why (into oxenstored, whose `-s` was
    /// answered BUSY, the next one).
    pub fn live_update_failed(&mut self, ready: &Ready, why: &str) {
        if ready.kind == Target::Oxenstored {
            self.live = Some(Session {
                conn: ready.conn,
                target: ready.target.clone(),
                kind: ready.kind,
                via_loader: false,
                cmdline: ready.cmdline.clone(),
                started: None,
                held: None,
                result: Some(why.to_string()),
            });
            return;
        }
        let mut reply = why.as_bytes().to_vec();
        reply.push(0);
        self.respond(ready.conn, ready.serial, &ready.header, Ok(&reply));
    }

    /// For a target that takes every ring's event channel on one fd (C
    /// xenstored): binds each ring's on `shared` instead of its own; the
    /// local ports there by connection id. On an error, why and the ones
    /// moved already: close `shared`, then move those back.
    pub fn move_ring_channels(
        &mut self,
        shared: &mut SharedChannels,
    ) -> Result<HashMap<u32, u32>, (String, HashMap<u32, u32>)> {
        let mut moved = HashMap::new();
        for id in self.conn_ids() {
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            let domid = c.domid();
            match c.transport_mut().move_channel(shared) {
                None => {}
                Some(Ok(port)) => {
                    moved.insert(id, port);
                }
                Some(Err(e)) => {
                    let why = format!("domain {domid}'s ring's event channel: {e}");
                    return Err((why, moved));
                }
            }
        }
        Ok(moved)
    }

    /// Undoes [`Daemon::move_ring_channels`] for connections `ids`, once
    /// the shared fd is closed; what cannot be rebound is logged (that
    /// ring waits for its guest's next request to be noticed).
    pub fn move_ring_channels_back(&mut self, ids: impl Iterator<Item = u32>) {
        for id in ids {
            if let Some(c) = self.conns.get_mut(&id) {
                if let Err(e) = c.transport_mut().move_channel_back() {
                    crate::log::error(format_args!(
                        "live update: domain {}'s event channel not bound back: {e}",
                        c.domid()
                    ));
                }
            }
        }
    }

    /// This daemon's state as the stream the new image reads: the socket
    /// listening on fd `listener`, every connection (its fd, or its domain's
    /// ring) with its watches and buffered bytes, the `-s` request's "OK"
    /// queued last on its connection, and every node, parents first.
    /// `channels`: the shared event-channel fd and each ring's local port
    /// on it, for a target that takes them so (else each ring is named by
    /// its domain's port, which the next shim binds again). Into
    /// oxenstored the rings name their domain's port all the same (the
    /// local ones go in [`Daemon::oxenstored_dump`]), and no "OK" waits:
    /// oxenstored answers the next `-s` itself.
    pub fn export_state(
        &self,
        listener: i32,
        ready: &Ready,
        channels: Option<(i32, &HashMap<u32, u32>)>,
    ) -> State {
        let mut state = State {
            global: Some(Global {
                socket_fd: listener,
                evtchn_fd: channels.map_or(-1, |(fd, _)| fd),
            }),
            ..State::default()
        };
        let port_of = |id: u32, domid: u32| match channels {
            Some((_, ports)) if ready.kind != Target::Oxenstored => {
                ports.get(&id).copied().unwrap_or(0)
            }
            _ => self.domains.get(domid).map_or(0, |d| d.port),
        };
        for c in self.conn_ids().iter().filter_map(|id| self.conns.get(id)) {
            let kind = match c.transport().inherited_fd() {
                Some(fd) => ConnKind::Socket { fd },
                None if c.domid() != 0 || c.transport().kind() == "ring" => ConnKind::Ring {
                    domid: c.domid() as u16,
                    target: c.ident.target.map(|t| t as u16),
                    port: port_of(c.id, c.domid()),
                },
                // Nothing the next image could take over (a test domain's
                // socket): its clients connect again.
                None => continue,
            };
            let mut output = c.pending().to_vec();
            if c.id == ready.conn && ready.kind != Target::Oxenstored {
                let h = &ready.header;
                frame::encode(
                    &mut output,
                    MsgType::Control as u32,
                    h.req_id,
                    h.tx_id,
                    &[b"OK\0"],
                );
            }
            state.connections.push(stream::Connection {
                id: c.id,
                kind,
                input: c.unexecuted().to_vec(),
                output,
                // A message the peer has part of: the stream says where it
                // ends, so the next image resumes it rather than reading
                // its middle as a header.
                partial: c.pending_partial() as u16,
            });
            for w in self.watches.of(c.id) {
                let home = path::domain_path(c.domid());
                let given = match w.path.strip_prefix(&home) {
                    Some(rest) if w.relative => rest.trim_start_matches('/'),
                    _ => w.path.as_str(),
                };
                state.watches.push(stream::Watch {
                    conn_id: c.id,
                    path: given.as_bytes().to_vec(),
                    token: w.token.to_vec(),
                });
            }
        }
        // C introduces domain 0 only at a fresh start, from the stream on
        // a live update: without it, it dereferences a null domain. Port 0
        // (no ring served here, in the simulation) it takes as a ring to
        // ignore; so does oxenstored, which reads dom0's own port from
        // /proc/xen/xsd_port.
        let has_dom0 = state
            .connections
            .iter()
            .any(|c| matches!(c.kind, ConnKind::Ring { domid: 0, .. }));
        if channels.is_some() && !has_dom0 {
            let id = self.conn_ids().into_iter().max().unwrap_or(0) + 1;
            state.connections.insert(
                0,
                stream::Connection {
                    id,
                    kind: ConnKind::Ring {
                        domid: 0,
                        target: None,
                        port: 0,
                    },
                    input: Vec::new(),
                    output: Vec::new(),
                    partial: 0,
                },
            );
        }
        for name in [path::RELEASE_DOMAIN, path::INTRODUCE_DOMAIN] {
            if let Some(n) = self.store.special(name) {
                state.nodes.push(node_record(name, n.perms, b""));
            }
        }
        let mut todo = vec!["/".to_string()];
        while let Some(p) = todo.pop() {
            let Some(n) = self.store.node(&p) else {
                continue;
            };
            state.nodes.push(node_record(&p, n.perms, n.value));
            let mut kids: Vec<String> = n.children().map(|c| path::child(&p, c)).collect();
            kids.reverse();
            todo.extend(kids);
        }
        state
    }
}

impl Daemon {
    /// `state` (from [`Daemon::export_state`]) as oxenstored's dump:
    /// every ring's channel bound on `state`'s evtchn fd at its port in
    /// `local` (by connection id), VIRQ_DOM_EXC at `virq_port`.
    pub fn oxenstored_dump(
        &self,
        state: &State,
        virq_port: u32,
        local: &HashMap<u32, u32>,
    ) -> Result<String, String> {
        let channels = state
            .connections
            .iter()
            .filter_map(|c| match c.kind {
                ConnKind::Ring { domid, .. } => Some((
                    c.id,
                    DomChannel {
                        mfn: self.domains.get(domid.into()).map_or(0, |d| d.gfn),
                        local_port: local.get(&c.id).copied().unwrap_or(0),
                    },
                )),
                ConnKind::Socket { .. } => None,
            })
            .collect();
        oxenstored::write(state, virq_port, &channels)
    }
}

fn node_record(path: &str, perms: &[crate::store::perms::Perm], value: &[u8]) -> stream::Node {
    stream::Node {
        conn_id: 0,
        tx_id: 0,
        access: 0,
        perms: perms
            .iter()
            .map(|p| {
                let (domid, bits) = (p.domid, p.access);
                stream::Perm {
                    access: match bits & (READ | WRITE) {
                        READ => b'r',
                        WRITE => b'w',
                        b if b == READ | WRITE => b'b',
                        _ => b'n',
                    },
                    ignore: bits & IGNORE != 0,
                    domid: domid as u16,
                }
            })
            .collect(),
        path: path.as_bytes().to_vec(),
        value: value.to_vec(),
    }
}
