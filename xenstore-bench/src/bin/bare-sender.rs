//! The scale section's floor: the least a xenstore daemon can do for S2 and
//! S5, and nothing else. It answers WATCH (OK, then the watch's first event),
//! WRITE (the value kept in one hash map; the event sent to the watcher of
//! the written path or of its nearest watched parent, found in another) and
//! READ, on one thread: epoll_wait, one recv per wake-up, a send per message
//! out. No permissions, quotas, transactions, probes or rings, and two map
//! entries per watcher: what its CPU per request grows with the number of
//! idle watchers is nearly all the kernel's price of reaching a cold
//! watcher's socket, which a daemon cannot avoid.
//!
//!   xsbench-bare-sender SOCKET

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::os::unix::net::UnixListener;
use xenstore_proto::wire::{Header, MsgType, HEADER_LEN, PAYLOAD_MAX};

fn main() {
    let Some(socket) = std::env::args().nth(1) else {
        eprintln!("usage: xsbench-bare-sender SOCKET");
        std::process::exit(2);
    };
    if let Err(e) = serve(&socket) {
        eprintln!("xsbench-bare-sender: {socket}: {e}");
        std::process::exit(1);
    }
}

struct Client {
    fd: RawFd,
    input: Vec<u8>,
}

#[derive(Default)]
struct Store {
    values: HashMap<Vec<u8>, Vec<u8>>,
    /// Watched path -> (client index, token).
    watches: HashMap<Vec<u8>, (usize, Vec<u8>)>,
}

fn serve(socket: &str) -> io::Result<()> {
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
    loop {
        // SAFETY: `events` outlives the call and holds its length.
        let n = unsafe { libc::epoll_wait(epoll, events.as_mut_ptr(), events.len() as i32, -1) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        for ev in &events[..n as usize] {
            let key = ev.u64;
            if key == u64::MAX {
                while let Ok((stream, _)) = listener.accept() {
                    stream.set_nonblocking(true)?;
                    let fd = stream.into_raw_fd();
                    add(epoll, fd, clients.len() as u64)?;
                    clients.push(Some(Client {
                        fd,
                        input: Vec::new(),
                    }));
                }
                continue;
            }
            let i = key as usize;
            let Some(c) = clients[i].as_mut() else {
                continue;
            };
            // SAFETY: `buf` is ours and as long as passed.
            let got = unsafe { libc::recv(c.fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
            if got == 0
                || (got < 0 && io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock)
            {
                // SAFETY: the fd is this client's, closed once.
                unsafe { libc::close(c.fd) };
                clients[i] = None;
                continue;
            }
            if got < 0 {
                continue;
            }
            c.input.extend_from_slice(&buf[..got as usize]);
            let mut input = std::mem::take(&mut c.input);
            let mut used = 0;
            while let Some(len) = whole_message(&input[used..]) {
                let msg = &input[used..used + len];
                used += len;
                execute(&mut store, &clients, i, msg);
            }
            input.drain(..used);
            if let Some(c) = clients[i].as_mut() {
                c.input = input;
            }
        }
    }
}

/// The length of the message at the front of `input`, once it is whole.
fn whole_message(input: &[u8]) -> Option<usize> {
    let header = Header::decode(input.get(..HEADER_LEN)?.try_into().ok()?);
    let len = HEADER_LEN + (header.len as usize).min(PAYLOAD_MAX);
    (input.len() >= len).then_some(len)
}

fn execute(store: &mut Store, clients: &[Option<Client>], me: usize, msg: &[u8]) {
    let header = Header::decode(msg[..HEADER_LEN].try_into().unwrap());
    let payload = &msg[HEADER_LEN..];
    let mut parts = payload.split(|&b| b == 0);
    let path = parts.next().unwrap_or_default();
    let fd = |k: usize| clients.get(k).and_then(|c| c.as_ref()).map(|c| c.fd);
    let reply = |ty: MsgType, body: &[u8]| send(fd(me), ty, header.req_id, header.tx_id, &[body]);
    match header.ty {
        t if t == MsgType::Watch as u32 => {
            let token = parts.next().unwrap_or_default().to_vec();
            reply(MsgType::Watch, b"OK\0");
            send(
                fd(me),
                MsgType::WatchEvent,
                0,
                0,
                &[path, b"\0", &token, b"\0"],
            );
            store.watches.insert(path.to_vec(), (me, token));
        }
        t if t == MsgType::Write as u32 => {
            let value = &payload[(path.len() + 1).min(payload.len())..];
            store.values.insert(path.to_vec(), value.to_vec());
            let mut at = path;
            loop {
                if let Some((k, token)) = store.watches.get(at) {
                    send(
                        fd(*k),
                        MsgType::WatchEvent,
                        0,
                        0,
                        &[path, b"\0", token, b"\0"],
                    );
                    break;
                }
                match at.iter().rposition(|&b| b == b'/') {
                    Some(cut) if cut > 0 => at = &at[..cut],
                    _ => break,
                }
            }
            reply(MsgType::Write, b"OK\0");
        }
        t if t == MsgType::Read as u32 => match store.values.get(path) {
            Some(v) => reply(MsgType::Read, v),
            None => reply(MsgType::Error, b"ENOENT\0"),
        },
        _ => reply(MsgType::Error, b"ENOSYS\0"),
    }
}

/// One message in one send; what the socket cannot take now is dropped
/// (the bench's clients read everything they are sent).
fn send(fd: Option<RawFd>, ty: MsgType, req_id: u32, tx_id: u32, parts: &[&[u8]]) {
    let Some(fd) = fd else { return };
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let header = Header {
        ty: ty as u32,
        req_id,
        tx_id,
        len: len as u32,
    };
    let mut out = Vec::with_capacity(HEADER_LEN + len);
    out.extend_from_slice(&header.encode());
    for p in parts {
        out.extend_from_slice(p);
    }
    // SAFETY: `out` is ours and as long as passed.
    unsafe { libc::send(fd, out.as_ptr().cast(), out.len(), libc::MSG_NOSIGNAL) };
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
