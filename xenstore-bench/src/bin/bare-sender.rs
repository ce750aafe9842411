//! The scale section's floor: the least a xenstore daemon can do for S2 and
//! S5, and nothing else. It answers WATCH (OK, then the watch's first event),
//! WRITE (the value kept in one hash map; the event sent to the watcher of
//! the written path or of its nearest watched parent, found in another) and
//! READ; MKDIR and SET_PERMS are answered OK and do nothing; INTRODUCE
//! attaches the domain's simulated ring (the shim's own ring code). One
//! thread: epoll_wait, one recv per wake-up of a socket, a send per message
//! out; a ring is read and written as the shim does, a doorbell for each.
//! No permissions, quotas, transactions or probes, and two map entries per
//! watcher: what its CPU per request grows with the number of idle watchers
//! is the price of reaching a cold watcher (its socket; a domain's ring
//! page and doorbell), which a daemon cannot avoid.
//!
//!   xsbench-bare-sender SOCKET RUN_DIR

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::os::unix::net::UnixListener;
use xenstore_proto::frame::take_messages;
use xenstore_proto::wire::{Header, MsgType};
use xenstored_probes::conn::ring::conn::{RingConn, Wake};
use xenstored_probes::conn::ring::sim::SimBackend;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [socket, run_dir] = args.as_slice() else {
        eprintln!("usage: xsbench-bare-sender SOCKET RUN_DIR");
        std::process::exit(2);
    };
    if let Err(e) = serve(socket, SimBackend::new(run_dir.as_ref())) {
        eprintln!("xsbench-bare-sender: {socket}: {e}");
        std::process::exit(1);
    }
}

enum Link {
    Socket(RawFd),
    /// A domain: its ring, and its home, which its relative paths are in.
    Ring(RingConn, String),
}

struct Client {
    link: Link,
    input: Vec<u8>,
    /// What a full ring could not take yet.
    output: Vec<u8>,
}

struct Watch {
    client: usize,
    token: Vec<u8>,
    /// Registered relative: events drop this much, the watcher's home.
    cut: usize,
}

#[derive(Default)]
struct Store {
    values: HashMap<Vec<u8>, Vec<u8>>,
    watches: HashMap<Vec<u8>, Watch>,
}

fn serve(socket: &str, rings: SimBackend) -> io::Result<()> {
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket)?;
    listener.set_nonblocking(true)?;
    // SAFETY: no pointers.
    let epoll = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    add(epoll, listener.as_raw_fd(), u64::MAX)?;
    let mut clients: Vec<Option<Client>> = Vec::new();
    let mut store = Store::default();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
    let mut buf = vec![0u8; 64 << 10];
    let mut woken: Vec<usize> = Vec::new();
    let mut ready: Vec<usize> = Vec::new();
    loop {
        // Rings just attached are woken once: the guest may have queued
        // requests before it was introduced.
        if woken.is_empty() {
            // SAFETY: `events` outlives the call and holds its length.
            let n =
                unsafe { libc::epoll_wait(epoll, events.as_mut_ptr(), events.len() as i32, -1) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            ready.extend(events[..n as usize].iter().map(|e| e.u64 as usize));
        } else {
            ready.append(&mut woken);
        }
        for i in ready.drain(..) {
            if i == usize::MAX {
                while let Ok((stream, _)) = listener.accept() {
                    stream.set_nonblocking(true)?;
                    let fd = stream.into_raw_fd();
                    add(epoll, fd, clients.len() as u64)?;
                    clients.push(Some(client(Link::Socket(fd))));
                }
                continue;
            }
            let Some(c) = clients[i].as_mut() else {
                continue;
            };
            if !receive(c, &mut buf) {
                if let Link::Socket(fd) = c.link {
                    // SAFETY: the fd is this client's, closed once.
                    unsafe { libc::close(fd) };
                }
                clients[i] = None;
                continue;
            }
            for (header, payload) in take_messages(&mut c.input) {
                if let Some((ring, domid)) =
                    execute(&mut store, &mut clients, i, header, &payload, &rings)
                {
                    add(epoll, ring.fd(), clients.len() as u64)?;
                    woken.push(clients.len());
                    let home = format!("/local/domain/{domid}");
                    clients.push(Some(client(Link::Ring(ring, home))));
                }
            }
            if let Some(c) = clients[i].as_mut() {
                flush(c);
            }
        }
    }
}

fn client(link: Link) -> Client {
    let (input, output) = (Vec::new(), Vec::new());
    Client {
        link,
        input,
        output,
    }
}

/// Reads what the client sent into its input; false when it is gone.
fn receive(c: &mut Client, buf: &mut [u8]) -> bool {
    match &mut c.link {
        Link::Socket(fd) => {
            // SAFETY: `buf` is ours and as long as passed.
            let got = unsafe { libc::recv(*fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
            if got < 0 {
                return io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock;
            }
            c.input.extend_from_slice(&buf[..got as usize]);
            got > 0
        }
        Link::Ring(ring, _) => {
            match ring.wake() {
                Ok(Wake::Ready) => {}
                Ok(Wake::Reconnect) => return ring.finish_reconnect().is_ok(),
                Ok(Wake::Gone) | Err(_) => return false,
            }
            loop {
                match ring.read(buf) {
                    Ok(0) => return false,
                    Ok(n) => c.input.extend_from_slice(&buf[..n]),
                    Err(e) => return e.kind() == io::ErrorKind::WouldBlock,
                }
            }
        }
    }
}

/// INTRODUCE's domid, gfn and port.
fn introduce_args(payload: &[u8]) -> Option<(u16, u64, u32)> {
    let mut args = (payload.split(|&b| b == 0)).map(|a| std::str::from_utf8(a).ok());
    let mut next = || args.next().flatten();
    Some((
        next()?.parse().ok()?,
        next()?.parse().ok()?,
        next()?.parse().ok()?,
    ))
}

/// Executes one request of client `me`; the ring it introduced and its
/// domid, if any.
fn execute(
    store: &mut Store,
    clients: &mut [Option<Client>],
    me: usize,
    header: Header,
    payload: &[u8],
    rings: &SimBackend,
) -> Option<(RingConn, u16)> {
    let mut parts = payload.split(|&b| b == 0);
    let given = parts.next().unwrap_or_default();
    let home = match clients[me].as_ref().map(|c| &c.link) {
        Some(Link::Ring(_, home)) if !given.starts_with(b"/") && !given.starts_with(b"@") => {
            Some(home.clone())
        }
        _ => None,
    };
    let path = match &home {
        Some(home) => [home.as_bytes(), b"/", given].concat(),
        None => given.to_vec(),
    };
    let ids = (header.req_id, header.tx_id);
    let mut introduced = None;
    let (ty, reply): (MsgType, &[u8]) = match MsgType::from_u32(header.ty) {
        Some(MsgType::Watch) => {
            let token = parts.next().unwrap_or_default();
            send(clients, me, MsgType::Watch, ids, &[b"OK\0"]);
            send(
                clients,
                me,
                MsgType::WatchEvent,
                (0, 0),
                &[given, b"\0", token, b"\0"],
            );
            let watch = Watch {
                client: me,
                token: token.to_vec(),
                cut: home.as_ref().map_or(0, |h| h.len() + 1),
            };
            store.watches.insert(path, watch);
            return None;
        }
        Some(MsgType::Write) => {
            let value = &payload[(given.len() + 1).min(payload.len())..];
            fire(store, clients, &path);
            store.values.insert(path, value.to_vec());
            (MsgType::Write, b"OK\0")
        }
        Some(MsgType::Read) => match store.values.get(&path) {
            Some(v) => (MsgType::Read, v),
            None => (MsgType::Error, b"ENOENT\0"),
        },
        Some(ty @ (MsgType::Mkdir | MsgType::SetPerms)) => (ty, b"OK\0"),
        Some(MsgType::Introduce) => {
            let args = introduce_args(payload);
            match args.map(|(d, g, p)| (RingConn::attach(rings, d, g, p), d)) {
                Some((Ok(ring), domid)) => {
                    introduced = Some((ring, domid));
                    (MsgType::Introduce, b"OK\0")
                }
                _ => (MsgType::Error, b"EINVAL\0"),
            }
        }
        _ => (MsgType::Error, b"ENOSYS\0"),
    };
    send(clients, me, ty, ids, &[reply]);
    introduced
}

/// Sends the event for a write of `path` to the watcher of the path or of
/// its nearest watched parent.
fn fire(store: &Store, clients: &mut [Option<Client>], path: &[u8]) {
    let mut at = path;
    loop {
        if let Some(w) = store.watches.get(at) {
            let event = &path[w.cut.min(path.len())..];
            let parts: [&[u8]; 4] = [event, b"\0", &w.token, b"\0"];
            send(clients, w.client, MsgType::WatchEvent, (0, 0), &parts);
            return;
        }
        match at.iter().rposition(|&b| b == b'/') {
            Some(cut) if cut > 0 => at = &at[..cut],
            _ => return,
        }
    }
}

/// One message to client `to`: on a socket in one send (what it cannot
/// take now is dropped: the bench's clients read everything they are
/// sent); on a ring as far as it takes it, the rest when it wakes.
fn send(clients: &mut [Option<Client>], to: usize, ty: MsgType, ids: (u32, u32), parts: &[&[u8]]) {
    let Some(Some(c)) = clients.get_mut(to) else {
        return;
    };
    let start = c.output.len();
    xenstore_proto::frame::encode(&mut c.output, ty as u32, ids.0, ids.1, parts);
    if let Link::Socket(fd) = c.link {
        let out = &c.output[start..];
        // SAFETY: `out` is ours and as long as passed.
        unsafe { libc::send(fd, out.as_ptr().cast(), out.len(), libc::MSG_NOSIGNAL) };
        c.output.truncate(start);
        return;
    }
    flush(c);
}

/// Writes a ring's pending output as far as the ring takes it.
fn flush(c: &mut Client) {
    let Link::Ring(ring, _) = &mut c.link else {
        return;
    };
    let mut sent = 0;
    while sent < c.output.len() {
        match ring.write(&c.output[sent..]) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    c.output.drain(..sent);
}

fn add(epoll: RawFd, fd: RawFd, key: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: key,
    };
    // SAFETY: a valid epoll fd and event.
    cvt(unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, fd, &mut ev) }).map(drop)
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}
