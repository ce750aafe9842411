//! A blocking xenstore client: what a guest kernel's xenbus does over its
//! ring, usable over the simulated ring (a guest domain) or a Unix socket
//! (a dom0 tool), so tests and the demo can play both sides.
//!
//! Requests go out whole (split across the ring as room appears), replies
//! are matched by req_id, and watch events arriving meanwhile are queued
//! for [`Xs::next_event`].

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use xenstore_proto::frame::{self, InBuf};
use xenstore_proto::ring::{RingError, FEATURE_RECONNECTION};
use xenstore_proto::sim::wait_readable;
use xenstore_proto::wire::{msg_name, Header, MsgType, XsError, PAYLOAD_MAX};

use crate::ring::Client;
use crate::sim::SimGuest;

/// A byte pipe to the daemon.
pub trait Link {
    /// Sends what fits now; Ok(0) when there is no room.
    fn send(&mut self, bytes: &[u8]) -> io::Result<usize>;
    /// Receives what is waiting; Ok(0) when nothing is.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// Sleeps until the daemon may have done something, or `timeout`.
    fn wait(&mut self, timeout: Duration) -> io::Result<()>;
}

/// A guest domain's link: the ring in its page and its event channel.
pub struct RingLink {
    guest: SimGuest,
    ring: Client,
}

impl RingLink {
    pub fn open(run_dir: &Path, domid: u16) -> io::Result<RingLink> {
        let mut guest = SimGuest::open(run_dir, domid)?;
        let page = guest.take_page().expect("a fresh guest has its page");
        Ok(RingLink {
            guest,
            ring: Client::new(Box::new(page)),
        })
    }

    pub fn ring(&self) -> &Client {
        &self.ring
    }

    pub fn notify(&self) -> io::Result<()> {
        self.guest.notify()
    }

    /// See [`SimGuest::unlock`].
    pub fn unlock(&mut self) {
        self.guest.unlock();
    }
}

impl Link for RingLink {
    fn send(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let n = self.ring.write(bytes)?;
        if n > 0 {
            self.guest.notify()?;
        }
        Ok(n)
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (n, was_full) = self.ring.read_responses(buf)?;
        if was_full {
            // Room freed in a full response queue: a blocked daemon may go on.
            self.guest.notify()?;
        }
        Ok(n)
    }

    fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        self.guest.wait(timeout).map(drop)
    }
}

/// A dom0 tool's link: the daemon's Unix socket.
pub struct SocketLink {
    stream: UnixStream,
}

impl SocketLink {
    pub fn connect(socket: &Path) -> io::Result<SocketLink> {
        let stream = UnixStream::connect(socket)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", socket.display())))?;
        stream.set_nonblocking(true)?;
        Ok(SocketLink { stream })
    }
}

impl Link for SocketLink {
    fn send(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self.stream.write(bytes) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            r => r,
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.stream.read(buf) {
            Ok(0) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the daemon closed the connection",
            )),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            r => r,
        }
    }

    fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        wait_readable(self.stream.as_raw_fd(), timeout).map(drop)
    }
}

#[derive(Debug)]
pub enum XsClientError {
    /// The daemon answered XS_ERROR.
    Xs {
        op: &'static str,
        arg: String,
        error: String,
    },
    Io(io::Error),
    Timeout {
        op: &'static str,
        arg: String,
    },
    /// The daemon sent something that is not a xenstore reply.
    Protocol(String),
}

impl XsClientError {
    /// The XS_ERROR name ("ENOENT"), if the daemon refused.
    pub fn xs_error(&self) -> Option<&str> {
        match self {
            XsClientError::Xs { error, .. } => Some(error),
            _ => None,
        }
    }

    /// The ring's error indicator, if the daemon stopped the ring.
    pub fn ring_error(&self) -> Option<u32> {
        match self {
            XsClientError::Io(e) => e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<RingError>())
                .map(|r| r.code()),
            _ => None,
        }
    }
}

impl std::fmt::Display for XsClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            XsClientError::Xs { op, arg, error } => write!(f, "{op} {arg}: {error}"),
            XsClientError::Io(e) => write!(f, "{e}"),
            XsClientError::Timeout { op, arg } => write!(f, "{op} {arg}: no reply"),
            XsClientError::Protocol(why) => write!(f, "bad reply: {why}"),
        }
    }
}

impl std::error::Error for XsClientError {}

impl From<io::Error> for XsClientError {
    fn from(e: io::Error) -> Self {
        XsClientError::Io(e)
    }
}

pub type Result<T> = std::result::Result<T, XsClientError>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchEvent {
    pub path: String,
    pub token: String,
}

impl WatchEvent {
    fn parse(payload: &[u8]) -> WatchEvent {
        let mut parts = payload.split(|&b| b == 0);
        let path = text(parts.next().unwrap_or_default());
        let token = text(parts.next().unwrap_or_default());
        WatchEvent { path, token }
    }
}

/// A xenstore client over any [`Link`].
pub struct Xs<L: Link> {
    link: L,
    next_req_id: u32,
    inbuf: InBuf,
    events: VecDeque<WatchEvent>,
    /// How long a request may wait for its reply.
    pub timeout: Duration,
    /// The longest payload taken from the daemon; more is a protocol
    /// error. PAYLOAD_MAX unless a caller knows its daemon breaks the
    /// limit (the bench's oxenstored runs), and never over
    /// frame::LARGEST_PAYLOAD.
    pub reply_max: usize,
}

/// A guest domain's client over its ring.
pub type Guest = Xs<RingLink>;

impl Guest {
    /// Becomes domain `domid`'s guest process (see [`SimGuest::open`]).
    ///
    /// Each guest process is a fresh connection, like a new socket client:
    /// if a daemon serves the ring already, the reconnect handshake drops
    /// whatever an earlier process left (a half-sent request, unread
    /// replies, its watches and transactions).
    pub fn open(run_dir: &Path, domid: u16) -> Result<Guest> {
        let mut guest = Xs::new(RingLink::open(run_dir, domid)?);
        if guest.link.ring().server_features() & FEATURE_RECONNECTION != 0 {
            guest.reconnect()?;
        }
        Ok(guest)
    }

    /// The ring's reconnect handshake: no packets, watches or transactions
    /// survive it.
    pub fn reconnect(&mut self) -> Result<()> {
        self.link
            .ring()
            .request_reconnect()
            .map_err(io::Error::from)?;
        self.link.notify()?;
        let deadline = Instant::now() + self.timeout;
        while !self.link.ring().connected() {
            if Instant::now() > deadline {
                return Err(XsClientError::Timeout {
                    op: "reconnect",
                    arg: String::new(),
                });
            }
            self.link.wait(Duration::from_millis(50))?;
        }
        self.inbuf = InBuf::default();
        self.events.clear();
        Ok(())
    }
}

impl Xs<SocketLink> {
    /// A dom0 client on the daemon's socket.
    pub fn connect(socket: &Path) -> io::Result<Xs<SocketLink>> {
        Ok(Xs::new(SocketLink::connect(socket)?))
    }
}

fn cstr(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

/// A reply's NUL-separated strings.
fn strings(body: &[u8]) -> Vec<String> {
    body.split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// The next whole message in `inbuf`, if its payload is at most `max`.
fn next_message(inbuf: &mut InBuf, max: usize) -> Result<Option<(Header, &[u8])>> {
    inbuf
        .next_message_up_to(max)
        .map_err(|big| XsClientError::Protocol(format!("reply length {} exceeds {max}", big.0)))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes.strip_suffix(&[0]).unwrap_or(bytes)).into_owned()
}

impl<L: Link> Xs<L> {
    pub fn new(link: L) -> Xs<L> {
        Xs {
            link,
            next_req_id: 1,
            inbuf: InBuf::default(),
            events: VecDeque::new(),
            timeout: Duration::from_secs(10),
            reply_max: PAYLOAD_MAX,
        }
    }

    pub fn link(&mut self) -> &mut L {
        &mut self.link
    }

    /// Sends raw bytes (tests: malformed messages).
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        let deadline = Instant::now() + self.timeout;
        let mut sent = 0;
        while sent < bytes.len() {
            let n = self.link.send(&bytes[sent..])?;
            sent += n;
            if n == 0 {
                if Instant::now() > deadline {
                    return Err(XsClientError::Timeout {
                        op: "send",
                        arg: format!("{} bytes", bytes.len()),
                    });
                }
                // Waiting for room; what the daemon sends meanwhile must not
                // wedge it: a full buffer of events moves to the queue.
                if self.pump()? {
                    self.queue_events()?;
                }
                self.link.wait(Duration::from_millis(50))?;
            }
        }
        Ok(())
    }

    /// Moves what the daemon sent into `inbuf`, as much as fits. True when
    /// it stopped on a full buffer: more may be waiting on the link.
    fn pump(&mut self) -> Result<bool> {
        let link = &mut self.link;
        loop {
            // An empty slice means a full buffer: stop until messages are
            // taken (a socket would read 0 and look closed).
            let mut full = false;
            let n = self.inbuf.fill(|buf| {
                full = buf.is_empty();
                if full {
                    Ok(0)
                } else {
                    link.recv(buf)
                }
            })?;
            if n == 0 {
                return Ok(full);
            }
        }
    }

    /// Queues the watch events waiting in `inbuf`; a reply there is one
    /// nobody asked for.
    fn queue_events(&mut self) -> Result<()> {
        while let Some((header, body)) = next_message(&mut self.inbuf, self.reply_max)? {
            if header.ty != MsgType::WatchEvent as u32 {
                return Err(XsClientError::Protocol(format!(
                    "unsolicited {} reply",
                    msg_name(header.ty).unwrap_or("unknown")
                )));
            }
            self.events.push_back(WatchEvent::parse(body));
        }
        Ok(())
    }

    /// One request, its reply's payload (XS_ERROR becomes Err).
    pub fn request(&mut self, ty: MsgType, tx: u32, payload: &[u8]) -> Result<Vec<u8>> {
        self.request_raw(ty as u32, tx, payload)
    }

    /// As `request`, with any type number (tests: unknown types).
    pub fn request_raw(&mut self, ty: u32, tx: u32, payload: &[u8]) -> Result<Vec<u8>> {
        let op = msg_name(ty).unwrap_or("unknown type");
        let arg = text(payload.split(|&b| b == 0).next().unwrap_or_default());
        let req_id = self.next_req_id;
        self.next_req_id = self.next_req_id.wrapping_add(1);
        let mut msg = Vec::new();
        frame::encode(&mut msg, ty, req_id, tx, &[payload]);
        self.send_raw(&msg)?;
        let deadline = Instant::now() + self.timeout;
        loop {
            let full = self.pump()?;
            while let Some((header, body)) = next_message(&mut self.inbuf, self.reply_max)? {
                if header.ty == MsgType::WatchEvent as u32 {
                    self.events.push_back(WatchEvent::parse(body));
                } else if header.req_id != req_id {
                    return Err(XsClientError::Protocol(format!(
                        "{} reply for req_id {} while waiting for {req_id}",
                        msg_name(header.ty).unwrap_or("unknown"),
                        header.req_id
                    )));
                } else if header.ty == MsgType::Error as u32 {
                    return Err(XsClientError::Xs {
                        op,
                        arg,
                        error: text(body),
                    });
                } else {
                    return Ok(body.to_vec());
                }
            }
            if Instant::now() > deadline {
                return Err(XsClientError::Timeout { op, arg });
            }
            if !full {
                self.link.wait(Duration::from_millis(100))?;
            }
        }
    }

    /// The next watch event, waiting up to `timeout` for one.
    pub fn next_event(&mut self, timeout: Duration) -> Result<Option<WatchEvent>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(ev) = self.events.pop_front() {
                return Ok(Some(ev));
            }
            let full = self.pump()?;
            self.queue_events()?;
            if full || !self.events.is_empty() {
                continue;
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            self.link
                .wait((deadline - now).min(Duration::from_millis(100)))?;
        }
    }

    pub fn read(&mut self, tx: u32, path: &str) -> Result<String> {
        self.request(MsgType::Read, tx, &cstr(path))
            .map(|v| text(&v))
    }

    pub fn write(&mut self, tx: u32, path: &str, value: &str) -> Result<()> {
        let mut payload = cstr(path);
        payload.extend_from_slice(value.as_bytes());
        self.request(MsgType::Write, tx, &payload).map(drop)
    }

    pub fn mkdir(&mut self, tx: u32, path: &str) -> Result<()> {
        self.request(MsgType::Mkdir, tx, &cstr(path)).map(drop)
    }

    pub fn rm(&mut self, tx: u32, path: &str) -> Result<()> {
        self.request(MsgType::Rm, tx, &cstr(path)).map(drop)
    }

    pub fn directory(&mut self, tx: u32, path: &str) -> Result<Vec<String>> {
        self.request(MsgType::Directory, tx, &cstr(path))
            .map(|v| strings(&v))
    }

    /// Permissions in xenstore's text form: "n0", "r6", ...
    pub fn get_perms(&mut self, tx: u32, path: &str) -> Result<Vec<String>> {
        self.request(MsgType::GetPerms, tx, &cstr(path))
            .map(|v| strings(&v))
    }

    pub fn set_perms(&mut self, tx: u32, path: &str, perms: &[&str]) -> Result<()> {
        let mut payload = cstr(path);
        for p in perms {
            payload.extend(cstr(p));
        }
        self.request(MsgType::SetPerms, tx, &payload).map(drop)
    }

    pub fn watch(&mut self, path: &str, token: &str) -> Result<()> {
        let mut payload = cstr(path);
        payload.extend(cstr(token));
        self.request(MsgType::Watch, 0, &payload).map(drop)
    }

    pub fn unwatch(&mut self, path: &str, token: &str) -> Result<()> {
        let mut payload = cstr(path);
        payload.extend(cstr(token));
        self.request(MsgType::Unwatch, 0, &payload).map(drop)
    }

    pub fn transaction_start(&mut self) -> Result<u32> {
        let body = self.request(MsgType::TransactionStart, 0, b"\0")?;
        text(&body)
            .parse()
            .map_err(|_| XsClientError::Protocol(format!("transaction id {:?}", text(&body))))
    }

    /// Commits (`commit`) or aborts; a conflict comes back as EAGAIN.
    pub fn transaction_end(&mut self, tx: u32, commit: bool) -> Result<()> {
        let payload: &[u8] = if commit { b"T\0" } else { b"F\0" };
        self.request(MsgType::TransactionEnd, tx, payload).map(drop)
    }

    pub fn get_domain_path(&mut self, domid: u16) -> Result<String> {
        self.request(MsgType::GetDomainPath, 0, &cstr(&domid.to_string()))
            .map(|v| text(&v))
    }

    /// XS_INTRODUCE: dom0 hands the daemon a domain's page and port.
    pub fn introduce(&mut self, domid: u16, gfn: u64, port: u32) -> Result<()> {
        let mut payload = Vec::new();
        for arg in [domid.to_string(), gfn.to_string(), port.to_string()] {
            payload.extend(cstr(&arg));
        }
        self.request(MsgType::Introduce, 0, &payload).map(drop)
    }

    pub fn release(&mut self, domid: u16) -> Result<()> {
        self.request(MsgType::Release, 0, &cstr(&domid.to_string()))
            .map(drop)
    }

    pub fn is_domain_introduced(&mut self, domid: u16) -> Result<bool> {
        self.request(MsgType::IsDomainIntroduced, 0, &cstr(&domid.to_string()))
            .map(|v| text(&v) == "T")
    }
}

/// The XS_ERROR names a daemon may answer with (for callers matching on them).
pub fn is_xs_error(err: &XsClientError, want: XsError) -> bool {
    err.xs_error() == Some(want.name())
}

#[cfg(test)]
mod tests {
    use super::*;
    use xenstored_probes::conn::ring::conn::{RingConn, Wake};
    use xenstored_probes::conn::ring::sim::SimBackend;

    /// A stand-in server thread: answers each request with its own payload
    /// reversed, after first firing a watch event; XS_RM gets ENOENT.
    fn serve(mut conn: RingConn, requests: usize) {
        let mut inbuf = InBuf::default();
        let mut served = 0;
        while served < requests {
            wait_readable(conn.fd(), Duration::from_millis(100)).unwrap();
            match conn.wake().unwrap() {
                Wake::Ready => {}
                // Guest::open starts a fresh session.
                Wake::Reconnect => conn.finish_reconnect().unwrap(),
                Wake::Gone => panic!("guest gone"),
            }
            loop {
                match inbuf.fill(|buf| conn.read(buf)) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("{e}"),
                }
            }
            while let Some((h, payload)) = inbuf.next_message().unwrap() {
                let body: Vec<u8> = payload.iter().rev().copied().filter(|&b| b != 0).collect();
                let mut out = Vec::new();
                let event = MsgType::WatchEvent as u32;
                frame::encode(&mut out, event, 0, h.tx_id, &[b"a/b\0tok\0"]);
                if h.ty == MsgType::Rm as u32 {
                    let error = MsgType::Error as u32;
                    frame::encode(&mut out, error, h.req_id, h.tx_id, &[b"ENOENT\0"]);
                } else {
                    frame::encode(&mut out, h.ty, h.req_id, h.tx_id, &[&body]);
                }
                let mut sent = 0;
                while sent < out.len() {
                    match conn.write(&out[sent..]) {
                        Ok(n) => sent += n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(1));
                            conn.wake().unwrap();
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                served += 1;
            }
        }
    }

    #[test]
    fn requests_replies_and_events_over_the_simulated_ring() {
        let run = std::env::temp_dir().join(format!("xs-guest-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&run);
        SimGuest::prepare(&run, 7, 1, 1).unwrap();
        let conn = RingConn::attach(&SimBackend::new(&run), 7, 1, 1).unwrap();
        let server = std::thread::spawn(move || serve(conn, 3));

        let mut guest = Guest::open(&run, 7).unwrap();
        assert_eq!(guest.read(0, "abc").unwrap(), "cba");
        // Bigger than the ring both ways: split across many wraps.
        let big = "x".repeat(3000) + "y";
        guest.write(0, "p", &big).unwrap();
        let err = guest.rm(0, "missing").unwrap_err();
        assert_eq!(err.xs_error(), Some("ENOENT"));
        assert!(is_xs_error(&err, XsError::Enoent));
        server.join().unwrap();
        for _ in 0..3 {
            let ev = guest.next_event(Duration::ZERO).unwrap().unwrap();
            assert_eq!(
                ev,
                WatchEvent {
                    path: "a/b".into(),
                    token: "tok".into()
                }
            );
        }
        assert_eq!(guest.next_event(Duration::ZERO).unwrap(), None);
        drop(guest);
        std::fs::remove_dir_all(&run).unwrap();
    }
}
