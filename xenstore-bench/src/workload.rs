//! The client workloads: what one connection asks, over and over. Each
//! connection works on its own keys so the store stays the same size and
//! transactions never conflict (we measure the daemon, not retries).

use crate::client::Conn;
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::time::Instant;
use xenstore_proto::wire::MsgType;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// XS_READ of a 64-byte value.
    Read,
    /// XS_WRITE of a 64-byte value over an existing node.
    Write,
    /// XS_DIRECTORY of a node with 16 children.
    Directory,
    /// Read-modify-write in a transaction: START, READ, WRITE, END (one op).
    Txn,
    /// XS_READ with `IN_FLIGHT` requests in flight, each its own write, as
    /// a multi-threaded client or OCaml's xenstore client pipelines: each
    /// reply is one op, timed from its request's send.
    Pipelined,
}

/// Requests a `Pipelined` connection keeps in flight.
pub const IN_FLIGHT: usize = 8;

impl Workload {
    pub const ALL: [Workload; 5] = [
        Workload::Read,
        Workload::Write,
        Workload::Directory,
        Workload::Txn,
        Workload::Pipelined,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Read => "read",
            Workload::Write => "write",
            Workload::Directory => "directory",
            Workload::Txn => "txn (r-m-w)",
            Workload::Pipelined => "read, 8 in flight",
        }
    }
}

pub const KEYS: usize = 64;
const DIR_CHILDREN: usize = 16;
pub const VALUE: &[u8; 64] = b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// The keys of connection `conn`.
fn key(conn: usize, k: usize) -> Vec<u8> {
    format!("/bench/c{conn}/k{k}").into_bytes()
}

fn counter(conn: usize) -> Vec<u8> {
    format!("/bench/c{conn}/counter").into_bytes()
}

const DIR: &[u8] = b"/bench/dir";

/// Creates the nodes every workload of `conns` connections touches.
pub fn seed(socket: &Path, conns: usize) -> Result<()> {
    let mut c = Conn::connect(socket)?;
    for conn in 0..conns {
        for k in 0..KEYS {
            c.write(0, &key(conn, k), VALUE)?
                .ok()
                .context("seed keys")?;
        }
        c.write(0, &counter(conn), b"0")?
            .ok()
            .context("seed counter")?;
    }
    for d in 0..DIR_CHILDREN {
        let child = format!("/bench/dir/child{d}");
        c.write(0, child.as_bytes(), b"x")?
            .ok()
            .context("seed dir")?;
    }
    Ok(())
}

/// One connection's loop state.
pub struct Worker {
    workload: Workload,
    keys: Vec<Vec<u8>>,
    counter: Vec<u8>,
    next: usize,
}

impl Worker {
    pub fn new(workload: Workload, conn: usize) -> Worker {
        Worker {
            workload,
            keys: (0..KEYS).map(|k| key(conn, k)).collect(),
            counter: counter(conn),
            next: 0,
        }
    }

    /// Performs one operation (a `Pipelined` worker: a window of requests),
    /// pushing each op's latency in ns; errors if the daemon refused one.
    pub fn op(&mut self, c: &mut Conn, latencies: &mut Vec<u32>) -> Result<()> {
        if self.workload == Workload::Pipelined {
            return self.window(c, latencies);
        }
        let start = Instant::now();
        self.one(c)?;
        latencies.push(nanos(start));
        Ok(())
    }

    /// IN_FLIGHT reads sent one write each, then their replies.
    fn window(&mut self, c: &mut Conn, latencies: &mut Vec<u32>) -> Result<()> {
        let mut sent = [Instant::now(); IN_FLIGHT];
        for at in &mut sent {
            self.next = (self.next + 1) % KEYS;
            *at = Instant::now();
            c.send(MsgType::Read, 0, &[&self.keys[self.next], b"\0"])?;
        }
        for at in sent {
            let r = c.reply()?;
            if r.ok()?.len() != VALUE.len() {
                bail!("read returned {} bytes", r.payload.len());
            }
            latencies.push(nanos(at));
        }
        Ok(())
    }

    fn one(&mut self, c: &mut Conn) -> Result<()> {
        self.next = (self.next + 1) % KEYS;
        let key = &self.keys[self.next];
        match self.workload {
            Workload::Read => {
                let r = c.read(key)?;
                if r.ok()?.len() != VALUE.len() {
                    bail!("read returned {} bytes", r.payload.len());
                }
            }
            Workload::Write => {
                c.write(0, key, VALUE)?.ok()?;
            }
            Workload::Directory => {
                c.directory(DIR)?.ok()?;
            }
            Workload::Pipelined => unreachable!("op() runs it as windows"),
            Workload::Txn => loop {
                let tx = c.tx_start()?;
                let reply = c.call(MsgType::Read, tx, &[&self.counter, b"\0"])?;
                let value: u64 = std::str::from_utf8(reply.ok()?)
                    .ok()
                    .and_then(|s| s.trim_end_matches('\0').parse().ok())
                    .context("counter is not a number")?;
                let next = (value + 1).to_string();
                c.write(tx, &self.counter, next.as_bytes())?.ok()?;
                if c.tx_commit(tx)? {
                    break;
                }
            },
        }
        Ok(())
    }
}

fn nanos(since: Instant) -> u32 {
    since.elapsed().as_nanos().min(u32::MAX as u128) as u32
}
