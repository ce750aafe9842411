//! A raw-socket xenstore client: one outstanding request at a time, as
//! libxenstore does (`call`), or several (`send`, then `reply`), as a
//! pipelining client does; with as few syscalls as possible (one write per
//! request, usually one read per reply).

use anyhow::{bail, Context, Result};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use xenstore_proto::frame::{self, InBuf, Oversized};
use xenstore_proto::wire::{Header, MsgType, HEADER_LEN, PAYLOAD_MAX};

/// How long a reply may take before the run fails: a daemon that leaves a
/// request unanswered (the pipelined row found one) fails its case instead
/// of hanging the bench. Generous: on a loaded CI machine oxenstored took
/// over 10 s to answer S1's unrelated reader in the middle of a storm.
const REPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

pub struct Conn {
    stream: UnixStream,
    req_id: u32,
    out: Vec<u8>,
    /// What the daemon sent, framed by the shim's own framer.
    inbuf: InBuf,
}

/// A reply: its type (XS_ERROR included) and payload.
pub struct Reply<'a> {
    pub ty: u32,
    pub payload: &'a [u8],
}

impl Reply<'_> {
    /// The payload, or the error name as an error.
    pub fn ok(&self) -> Result<&[u8]> {
        if self.ty == MsgType::Error as u32 {
            let name = self.payload.strip_suffix(&[0]).unwrap_or(self.payload);
            bail!("daemon replied {}", String::from_utf8_lossy(name));
        }
        Ok(self.payload)
    }
}

impl Conn {
    pub fn connect(socket: &Path) -> Result<Conn> {
        let stream = UnixStream::connect(socket)
            .with_context(|| format!("connect to {}", socket.display()))?;
        stream.set_read_timeout(Some(REPLY_TIMEOUT))?;
        Ok(Conn {
            stream,
            req_id: 0,
            out: Vec::with_capacity(HEADER_LEN + PAYLOAD_MAX),
            inbuf: InBuf::default(),
        })
    }

    /// Sends one request (payload = the concatenated parts) and waits for
    /// its reply, skipping any watch events.
    pub fn call(&mut self, ty: MsgType, tx_id: u32, parts: &[&[u8]]) -> Result<Reply<'_>> {
        self.send(ty, tx_id, parts)?;
        self.reply()
    }

    /// How many watch events the daemon had queued for this connection
    /// before now: it answers a connection in order, so every event queued
    /// before a request arrives ahead of that request's reply.
    pub fn events_queued(&mut self) -> Result<usize> {
        self.send(MsgType::GetDomainPath, 0, &[b"0\0"])?;
        let events = self.skip_events()?;
        self.reply()?.ok()?;
        Ok(events)
    }

    /// Sends one request without waiting for its reply (`reply` reads it):
    /// a pipelining client.
    pub fn send(&mut self, ty: MsgType, tx_id: u32, parts: &[&[u8]]) -> Result<()> {
        self.req_id = self.req_id.wrapping_add(1);
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > PAYLOAD_MAX {
            bail!("payload of {len} bytes is over {PAYLOAD_MAX}");
        }
        self.out.clear();
        frame::encode(&mut self.out, ty as u32, self.req_id, tx_id, parts);
        self.stream.write_all(&self.out).context("send request")
    }

    /// The next reply, watch events skipped.
    pub fn reply(&mut self) -> Result<Reply<'_>> {
        self.skip_events()?;
        let (header, payload) = self.take()?;
        Ok(Reply {
            ty: header.ty,
            payload,
        })
    }

    /// Takes the watch events at the front of what the daemon sent, waiting
    /// for the first other message; how many.
    fn skip_events(&mut self) -> Result<usize> {
        let mut events = 0;
        while self.next_type()? == MsgType::WatchEvent as u32 {
            self.take()?;
            events += 1;
        }
        Ok(events)
    }

    /// The type of the next whole message, read until one has arrived.
    fn next_type(&mut self) -> Result<u32> {
        while !self.inbuf.has_message() {
            let stream = &mut self.stream;
            let n = self
                .inbuf
                .fill(|b| stream.read(b))
                .map_err(|e| match e.kind() {
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                        anyhow::anyhow!(
                            "no reply within {REPLY_TIMEOUT:?}: a request left unanswered"
                        )
                    }
                    _ => anyhow::Error::new(e).context("read reply"),
                })?;
            if n == 0 {
                bail!("daemon closed the connection");
            }
        }
        let header = &self.inbuf.unconsumed()[..HEADER_LEN];
        Ok(Header::decode(header.try_into().unwrap()).ty)
    }

    /// The whole message `next_type` waited for.
    fn take(&mut self) -> Result<(Header, &[u8])> {
        self.next_type()?;
        match self.inbuf.next_message() {
            Ok(Some(message)) => Ok(message),
            Ok(None) => unreachable!("next_type waited for a whole message"),
            Err(Oversized(len)) => bail!("daemon sent a {len}-byte payload"),
        }
    }

    pub fn read(&mut self, path: &[u8]) -> Result<Reply<'_>> {
        self.call(MsgType::Read, 0, &[path, b"\0"])
    }

    pub fn write(&mut self, tx_id: u32, path: &[u8], value: &[u8]) -> Result<Reply<'_>> {
        self.call(MsgType::Write, tx_id, &[path, b"\0", value])
    }

    pub fn directory(&mut self, path: &[u8]) -> Result<Reply<'_>> {
        self.call(MsgType::Directory, 0, &[path, b"\0"])
    }

    /// Starts a transaction; its id.
    pub fn tx_start(&mut self) -> Result<u32> {
        let reply = self.call(MsgType::TransactionStart, 0, &[b"\0"])?;
        let id = reply.ok()?;
        let id = id.strip_suffix(&[0]).unwrap_or(id);
        std::str::from_utf8(id)
            .ok()
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("bad transaction id {:?}", String::from_utf8_lossy(id)))
    }

    pub fn watch(&mut self, path: &[u8], token: &[u8]) -> Result<()> {
        self.call(MsgType::Watch, 0, &[path, b"\0", token, b"\0"])?
            .ok()?;
        Ok(())
    }

    /// Waits up to `timeout` for the next watch event (no request may be
    /// outstanding); its path.
    pub fn event(&mut self, timeout: std::time::Duration) -> Result<&[u8]> {
        self.stream.set_read_timeout(Some(timeout))?;
        let ty = self.next_type();
        self.stream.set_read_timeout(Some(REPLY_TIMEOUT))?;
        let ty = ty.context("wait for a watch event")?;
        if ty != MsgType::WatchEvent as u32 {
            bail!("expected a watch event, got message type {ty}");
        }
        let (_, payload) = self.take()?;
        Ok(payload.split(|&b| b == 0).next().unwrap_or_default())
    }

    /// Whether the daemon sent anything not yet read (without waiting).
    pub fn has_unread(&mut self) -> Result<bool> {
        if self.inbuf.pending() > 0 {
            return Ok(true);
        }
        self.stream.set_nonblocking(true)?;
        let stream = &mut self.stream;
        let read = self.inbuf.fill(|b| stream.read(b));
        self.stream.set_nonblocking(false)?;
        match read {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(false),
            read => Ok(read.context("read")? > 0),
        }
    }

    /// Ends a transaction; false when the commit conflicted (EAGAIN).
    pub fn tx_commit(&mut self, tx_id: u32) -> Result<bool> {
        let reply = self.call(MsgType::TransactionEnd, tx_id, &[b"T\0"])?;
        if reply.ty == MsgType::Error as u32 && reply.payload.starts_with(b"EAGAIN") {
            return Ok(false);
        }
        reply.ok()?;
        Ok(true)
    }
}
