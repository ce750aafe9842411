//! Live update as the source: CONTROL `live-update` as C xenstored 4.17
//! takes it from `xenstore-control live-update -f <file>` (`-f <file>`,
//! `-c <cmdline>`, `-s [-t <timeout>] [-F]`, `-a`), and the migration
//! stream of this daemon's state for the image it execs. The exec itself,
//! which needs the process, is the binary's (update/handover.rs).
//!
//! As C, `-s` is answered only by the new image ("OK", in the stream), or
//! with why not; while transactions are open it waits up to `-t` seconds
//! (the event loop checks it every second). Better than C: the target is
//! checked when named (it must be a xenstored-shim: only this reader takes
//! over guests' rings from per-ring event channels).

use super::{Call, Daemon};
use crate::migration::stream::{self, ConnKind, Global, State};
use crate::store::perms::{IGNORE, READ, WRITE};
use crate::wire::frame;
use crate::wire::path;
use crate::wire::{Header, MsgType};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A live-update session: one privileged connection's, from `-f` to exec.
pub struct Session {
    conn: u32,
    pub target: PathBuf,
    /// `-c`: the new image's arguments instead of this one's.
    pub cmdline: Option<String>,
    /// When `-s` first came: open transactions get `-t` seconds from then.
    started: Option<Instant>,
    /// The `-s` request, unanswered while transactions are open.
    held: Option<Held>,
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
    pub cmdline: Option<String>,
}

/// What every shim image carries, so `-f` recognises one by reading the
/// file rather than running it: a target that hangs or waits for input
/// would stall the event loop, and every guest with it. The stream version
/// is in it, so an image that cannot read this daemon's stream is refused.
const IMAGE_MARK: &str = "xenstored-shim image: migration stream v1\0";
const _: () = assert!(stream::VERSION == 1, "IMAGE_MARK names the stream version");

/// Why `target` cannot take this daemon's state, if it cannot.
fn refuse_target(target: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(target) else {
        return Some("File not accessible.".to_string());
    };
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Some("File not executable.".to_string());
    }
    let Ok(image) = std::fs::read(target) else {
        return Some("File not readable.".to_string());
    };
    // The mark is this function's own constant: any image that can carry
    // out a live update holds it.
    if memchr::memmem::find(&image, IMAGE_MARK.as_bytes()).is_none() {
        return Some(format!(
            "The target is not xenstored-shim{}: only the shim takes over this daemon's \
             rings (it binds an event channel per ring, where C xenstored and oxenstored \
             take every port bound on one /dev/xen/evtchn).",
            match upstream_flavor(&image) {
                Some(which) => format!(" but {which}, which cannot take this daemon's state yet"),
                None => " (or not one that reads this daemon's migration stream)".to_string(),
            }
        ));
    }
    None
}

/// Which upstream xenstored `image` is, by strings each carries.
fn upstream_flavor(image: &[u8]) -> Option<&'static str> {
    let has = |s: &str| memchr::memmem::find(image, s.as_bytes()).is_some();
    if has("xenstored_core.c") {
        Some("C xenstored")
    } else if has("Live reload: database loaded") {
        Some("oxenstored")
    } else {
        None
    }
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
                if let Some(why) = refuse_target(&target) {
                    return Some(why);
                }
                self.live = Some(Session {
                    conn: call.conn,
                    target,
                    cmdline: None,
                    started: None,
                    held: None,
                });
                text("OK")
            }
            [b"-c", cmdline] if mine => {
                if let Some(s) = self.live.as_mut() {
                    s.cmdline = Some(String::from_utf8_lossy(cmdline).into_owned());
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
        session.started.get_or_insert_with(Instant::now);
        session.held = Some(Held {
            serial: call.serial,
            header: call.header,
            timeout: Duration::from_secs(timeout),
            force,
        });
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
        let late = session.started.is_some_and(|t| t.elapsed() >= held.timeout);
        if !open.is_empty() && !late {
            return;
        }
        let session = self.live.take().expect("checked above");
        if !open.is_empty() && !held.force {
            let why = format!("Domains with long running transactions: {open:?} (-F drops them)");
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
            cmdline: session.cmdline,
        });
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
    /// request is answered with why.
    pub fn live_update_failed(&mut self, ready: &Ready, why: &str) {
        let mut reply = why.as_bytes().to_vec();
        reply.push(0);
        self.respond(ready.conn, ready.serial, &ready.header, Ok(&reply));
    }

    /// This daemon's state as the stream the new image reads: the socket
    /// listening on fd `listener`, every connection (its fd, or its domain's
    /// ring) with its watches and buffered bytes, the `-s` request's "OK"
    /// queued last on its connection, and every node, parents first.
    pub fn export_state(&self, listener: i32, ready: &Ready) -> State {
        let mut state = State {
            global: Some(Global {
                socket_fd: listener,
                // Rings' channels are per ring here, closed on exec; the
                // new image binds them again.
                evtchn_fd: -1,
            }),
            ..State::default()
        };
        for c in self.conn_ids().iter().filter_map(|id| self.conns.get(id)) {
            let kind = match c.transport().inherited_fd() {
                Some(fd) => ConnKind::Socket { fd },
                None if c.domid() != 0 || c.transport().kind() == "ring" => ConnKind::Ring {
                    domid: c.domid() as u16,
                    target: c.ident.target.map(|t| t as u16),
                    port: self.domains.get(c.domid()).map_or(0, |d| d.port),
                },
                // Nothing the next image could take over (a test domain's
                // socket): its clients connect again.
                None => continue,
            };
            let mut output = c.pending().to_vec();
            if c.id == ready.conn {
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
                partial: 0,
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
