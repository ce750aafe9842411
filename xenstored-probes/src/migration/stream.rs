//! The xenstore migration stream, version 1 (Xen's
//! docs/designs/xenstore-migration.md; `xenstore_state.h`), as C xenstored
//! 4.17–4.20 writes it to `state_dump` for a live update: a preamble, then
//! 8-byte-aligned records (GLOBAL, one CONN per connection each followed by
//! its WATCHes, the special nodes, every NODE parents first, END).
//!
//! This file only turns bytes into [`State`] and back: what the records
//! mean to a daemon (fds to adopt, rings to map) is the restorer's. The
//! reader takes hostile bytes (the file is on disk, the fuzz target feeds
//! it anything): every length is checked against what is left, and a bad
//! stream is an [`Error`] naming the record and offset, never a panic.

use std::fmt;

/// The preamble's identifier (no NUL).
pub const IDENT: &[u8; 8] = b"xenstore";
/// The only version C xenstored 4.17–4.20 writes and reads.
pub const VERSION: u32 = 1;
/// The preamble's flags: 0 for a little-endian writer, the only kind here.
const FLAGS_LITTLE_ENDIAN: u32 = 0;
const PREAMBLE_LEN: usize = 16;
const RECORD_HEADER_LEN: usize = 8;
/// `tdomid` when a ring connection has no target (Xen's DOMID_INVALID).
pub const DOMID_INVALID: u16 = 0x7ff4;

const TYPE_END: u32 = 0;
const TYPE_GLOBAL: u32 = 1;
const TYPE_CONN: u32 = 2;
const TYPE_WATCH: u32 = 3;
const TYPE_TRANSACTION: u32 = 4;
const TYPE_NODE: u32 = 5;

const CONN_RING: u16 = 0;
const CONN_SOCKET: u16 = 1;

/// Everything a stream holds, in stream order within each kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    pub global: Option<Global>,
    pub connections: Vec<Connection>,
    pub watches: Vec<Watch>,
    pub transactions: Vec<Transaction>,
    pub nodes: Vec<Node>,
    /// Types of records this reader does not know, skipped as C does.
    pub skipped: Vec<u32>,
}

/// The daemon-wide descriptors that survive the exec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Global {
    /// The listening Unix socket, or -1.
    pub socket_fd: i32,
    /// /dev/xen/evtchn (its bound ports stay bound across the exec).
    pub evtchn_fd: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connection {
    /// Non-zero; watches and transactions name their connection by it.
    pub id: u32,
    pub kind: ConnKind,
    /// Read and not yet executed: whole requests, the last possibly cut.
    pub input: Vec<u8>,
    /// Not yet written: first the unsent rest of a partly written message
    /// (`partial` bytes, headerless), then whole messages.
    pub output: Vec<u8>,
    pub partial: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnKind {
    /// A domain's shared page (grant entry 1) and event channel.
    Ring {
        domid: u16,
        /// The domain it acts for (SET_TARGET), if any.
        target: Option<u16>,
        port: u32,
    },
    /// A dom0 client's accepted socket.
    Socket { fd: i32 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watch {
    pub conn_id: u32,
    /// As the client gave it (relative for a guest's relative watch).
    pub path: Vec<u8>,
    pub token: Vec<u8>,
}

/// A transaction open at the time of the dump (C 4.17 writes none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transaction {
    pub conn_id: u32,
    pub tx_id: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Non-zero: the node belongs to that connection's transaction `tx_id`.
    pub conn_id: u32,
    pub tx_id: u32,
    /// In a transaction: read (1) and/or written (2); 0 otherwise.
    pub access: u16,
    /// The owner first.
    pub perms: Vec<Perm>,
    pub path: Vec<u8>,
    pub value: Vec<u8>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Perm {
    /// b'n', b'r', b'w' or b'b', as in SET_PERMS.
    pub access: u8,
    /// The domain is gone: kept for the owner's sake, ignored in checks.
    pub ignore: bool,
    pub domid: u16,
}

const PERM_IGNORE: u8 = 1;

/// Why a stream was refused: what, and at which byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub offset: usize,
    pub what: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "migration stream, byte {}: {}", self.offset, self.what)
    }
}

impl std::error::Error for Error {}

fn err<T>(offset: usize, what: impl Into<String>) -> Result<T, Error> {
    Err(Error {
        offset,
        what: what.into(),
    })
}

/// Reads a whole stream. It must end with an END record; records after it
/// are ignored, as C does.
pub fn read(bytes: &[u8]) -> Result<State, Error> {
    if bytes.len() < PREAMBLE_LEN {
        return err(
            0,
            format!("{} bytes: shorter than the preamble", bytes.len()),
        );
    }
    if &bytes[..8] != IDENT {
        return err(0, "not a xenstore stream (no \"xenstore\" identifier)");
    }
    let version = u32::from_be_bytes(bytes[8..12].try_into().unwrap());
    if version != VERSION {
        return err(
            8,
            format!("version {version}; only version {VERSION} is known"),
        );
    }
    let flags = u32::from_ne_bytes(bytes[12..16].try_into().unwrap());
    if flags != FLAGS_LITTLE_ENDIAN {
        return err(
            12,
            format!("flags {flags:#x}: only a little-endian stream is read"),
        );
    }
    let mut state = State::default();
    let mut at = PREAMBLE_LEN;
    loop {
        let Some(head) = bytes.get(at..at + RECORD_HEADER_LEN) else {
            return err(at, "no END record");
        };
        let kind = u32::from_ne_bytes(head[..4].try_into().unwrap());
        let len = u32::from_ne_bytes(head[4..].try_into().unwrap()) as usize;
        let body_at = at + RECORD_HEADER_LEN;
        let Some(body) = bytes.get(body_at..body_at.saturating_add(len)) else {
            return err(
                at,
                format!("record type {kind} of {len} bytes runs past the end"),
            );
        };
        let mut body = Body {
            bytes: body,
            at: 0,
            base: body_at,
        };
        match kind {
            TYPE_END => return Ok(state),
            TYPE_GLOBAL => {
                if state.global.is_some() {
                    return err(at, "a second GLOBAL record");
                }
                state.global = Some(Global {
                    socket_fd: body.i32()?,
                    evtchn_fd: body.i32()?,
                });
            }
            TYPE_CONN => {
                let c = read_connection(&mut body)?;
                if c.id == 0 || state.connections.iter().any(|o| o.id == c.id) {
                    return err(
                        at,
                        format!("connection id {} is zero or listed twice", c.id),
                    );
                }
                state.connections.push(c);
            }
            TYPE_WATCH => {
                let conn_id = body.u32()?;
                let path_len = body.u16()? as usize;
                let token_len = body.u16()? as usize;
                state.watches.push(Watch {
                    conn_id,
                    path: body.string(path_len, "watch path")?,
                    token: body.string(token_len, "watch token")?,
                });
            }
            TYPE_TRANSACTION => state.transactions.push(Transaction {
                conn_id: body.u32()?,
                tx_id: body.u32()?,
            }),
            TYPE_NODE => state.nodes.push(read_node(&mut body)?),
            other => state.skipped.push(other),
        }
        at = body_at + len;
    }
}

fn read_connection(body: &mut Body) -> Result<Connection, Error> {
    let id = body.u32()?;
    let conn_type = body.u16()?;
    body.u16()?; // pad
    let kind = match conn_type {
        CONN_RING => {
            let domid = body.u16()?;
            let target = body.u16()?;
            ConnKind::Ring {
                domid,
                target: (target != DOMID_INVALID).then_some(target),
                port: body.u32()?,
            }
        }
        CONN_SOCKET => {
            let fd = body.i32()?;
            body.u32()?; // the union's other half
            ConnKind::Socket { fd }
        }
        other => return body.fail(format!("connection type {other}")),
    };
    let in_len = body.u16()? as usize;
    let partial = body.u16()?;
    let out_len = body.u32()? as usize;
    if partial as usize > out_len {
        return body.fail(format!(
            "a partial response of {partial} bytes in {out_len} bytes of output"
        ));
    }
    Ok(Connection {
        id,
        kind,
        input: body.take(in_len, "buffered input")?.to_vec(),
        output: body.take(out_len, "buffered output")?.to_vec(),
        partial,
    })
}

fn read_node(body: &mut Body) -> Result<Node, Error> {
    let conn_id = body.u32()?;
    let tx_id = body.u32()?;
    let path_len = body.u16()? as usize;
    let value_len = body.u16()? as usize;
    let access = body.u16()?;
    let n_perms = body.u16()? as usize;
    let mut perms = Vec::with_capacity(n_perms.min(body.left() / 4));
    for _ in 0..n_perms {
        let access = body.u8()?;
        let flags = body.u8()?;
        perms.push(Perm {
            access,
            ignore: flags & PERM_IGNORE != 0,
            domid: body.u16()?,
        });
    }
    Ok(Node {
        conn_id,
        tx_id,
        access,
        perms,
        path: body.string(path_len, "node path")?,
        value: body.take(value_len, "node value")?.to_vec(),
    })
}

/// One record's body, read front to back.
struct Body<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Where the body starts in the stream, for errors.
    base: usize,
}

impl<'a> Body<'a> {
    fn fail<T>(&self, what: String) -> Result<T, Error> {
        err(self.base + self.at, what)
    }

    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Error> {
        if n > self.left() {
            return self.fail(format!(
                "{what}: {n} bytes, {} left in the record",
                self.left()
            ));
        }
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    /// A NUL-terminated string of `len` bytes with the NUL, returned
    /// without it; a NUL inside is refused (it would cut the path).
    fn string(&mut self, len: usize, what: &str) -> Result<Vec<u8>, Error> {
        let start = self.base + self.at;
        let bytes = self.take(len, what)?;
        match bytes.split_last() {
            Some((0, text)) if !text.contains(&0) => Ok(text.to_vec()),
            _ => err(start, format!("{what} is not one NUL-terminated string")),
        }
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        Ok(self.take(N, "record")?.try_into().unwrap())
    }

    fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, Error> {
        Ok(u16::from_ne_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_ne_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, Error> {
        Ok(i32::from_ne_bytes(self.array()?))
    }
}

/// Writes `state` as C xenstored does: GLOBAL, each connection followed by
/// its watches, transactions, nodes in the order given, END. Strings longer
/// than a u16 length can say are the caller's bug (paths and tokens are
/// bounded far below by the wire's payload limit).
pub fn write(state: &State) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(IDENT);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&FLAGS_LITTLE_ENDIAN.to_ne_bytes());
    if let Some(g) = state.global {
        record(&mut out, TYPE_GLOBAL, |b| {
            b.extend_from_slice(&g.socket_fd.to_ne_bytes());
            b.extend_from_slice(&g.evtchn_fd.to_ne_bytes());
        });
    }
    for c in &state.connections {
        record(&mut out, TYPE_CONN, |b| write_connection(b, c));
        for w in state.watches.iter().filter(|w| w.conn_id == c.id) {
            write_watch(&mut out, w);
        }
    }
    // Watches of no listed connection still go out (the reader refuses
    // them only when it restores, not when it parses).
    let listed = |id| state.connections.iter().any(|c| c.id == id);
    for w in state.watches.iter().filter(|w| !listed(w.conn_id)) {
        write_watch(&mut out, w);
    }
    for t in &state.transactions {
        record(&mut out, TYPE_TRANSACTION, |b| {
            b.extend_from_slice(&t.conn_id.to_ne_bytes());
            b.extend_from_slice(&t.tx_id.to_ne_bytes());
        });
    }
    for n in &state.nodes {
        record(&mut out, TYPE_NODE, |b| write_node(b, n));
    }
    record(&mut out, TYPE_END, |_| {});
    out
}

fn write_connection(b: &mut Vec<u8>, c: &Connection) {
    b.extend_from_slice(&c.id.to_ne_bytes());
    match c.kind {
        ConnKind::Ring {
            domid,
            target,
            port,
        } => {
            b.extend_from_slice(&CONN_RING.to_ne_bytes());
            b.extend_from_slice(&0u16.to_ne_bytes());
            b.extend_from_slice(&domid.to_ne_bytes());
            b.extend_from_slice(&target.unwrap_or(DOMID_INVALID).to_ne_bytes());
            b.extend_from_slice(&port.to_ne_bytes());
        }
        ConnKind::Socket { fd } => {
            b.extend_from_slice(&CONN_SOCKET.to_ne_bytes());
            b.extend_from_slice(&0u16.to_ne_bytes());
            b.extend_from_slice(&fd.to_ne_bytes());
            b.extend_from_slice(&0u32.to_ne_bytes());
        }
    }
    b.extend_from_slice(&len16(c.input.len()).to_ne_bytes());
    b.extend_from_slice(&c.partial.to_ne_bytes());
    b.extend_from_slice(&(c.output.len() as u32).to_ne_bytes());
    b.extend_from_slice(&c.input);
    b.extend_from_slice(&c.output);
}

fn write_watch(out: &mut Vec<u8>, w: &Watch) {
    record(out, TYPE_WATCH, |b| {
        b.extend_from_slice(&w.conn_id.to_ne_bytes());
        b.extend_from_slice(&len16(w.path.len() + 1).to_ne_bytes());
        b.extend_from_slice(&len16(w.token.len() + 1).to_ne_bytes());
        b.extend_from_slice(&w.path);
        b.push(0);
        b.extend_from_slice(&w.token);
        b.push(0);
    });
}

fn write_node(b: &mut Vec<u8>, n: &Node) {
    b.extend_from_slice(&n.conn_id.to_ne_bytes());
    b.extend_from_slice(&n.tx_id.to_ne_bytes());
    b.extend_from_slice(&len16(n.path.len() + 1).to_ne_bytes());
    b.extend_from_slice(&len16(n.value.len()).to_ne_bytes());
    b.extend_from_slice(&n.access.to_ne_bytes());
    b.extend_from_slice(&len16(n.perms.len()).to_ne_bytes());
    for p in &n.perms {
        b.push(p.access);
        b.push(if p.ignore { PERM_IGNORE } else { 0 });
        b.extend_from_slice(&p.domid.to_ne_bytes());
    }
    b.extend_from_slice(&n.path);
    b.push(0);
    b.extend_from_slice(&n.value);
}

fn len16(n: usize) -> u16 {
    u16::try_from(n).expect("a migration stream field longer than 65535 bytes")
}

/// A record: header, the body `fill` writes, zero padding to 8 bytes (the
/// length counts the padding, as C writes it).
fn record(out: &mut Vec<u8>, kind: u32, fill: impl FnOnce(&mut Vec<u8>)) {
    let head = out.len();
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    let body = out.len();
    fill(out);
    out.resize(body + (out.len() - body).next_multiple_of(8), 0);
    let len = (out.len() - body) as u32;
    out[head + 4..head + 8].copy_from_slice(&len.to_ne_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> State {
        State {
            global: Some(Global {
                socket_fd: 3,
                evtchn_fd: 4,
            }),
            connections: vec![
                Connection {
                    id: 1,
                    kind: ConnKind::Ring {
                        domid: 0,
                        target: None,
                        port: 5,
                    },
                    input: vec![],
                    output: vec![],
                    partial: 0,
                },
                Connection {
                    id: 2,
                    kind: ConnKind::Socket { fd: 9 },
                    // a READ cut after its header
                    input: vec![2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, b'/'],
                    // the last 3 bytes of a reply, then a whole one
                    output: b"OK\0\x0f\0\0\0\0\0\0\0\0\0\0\0\x03\0\0\0OK\0".to_vec(),
                    partial: 3,
                },
                Connection {
                    id: 3,
                    kind: ConnKind::Ring {
                        domid: 7,
                        target: Some(2),
                        port: 12,
                    },
                    input: vec![],
                    output: vec![],
                    partial: 0,
                },
            ],
            watches: vec![
                Watch {
                    conn_id: 2,
                    path: b"@releaseDomain".to_vec(),
                    token: b"tok".to_vec(),
                },
                Watch {
                    conn_id: 3,
                    path: b"device".to_vec(),
                    token: b"".to_vec(),
                },
            ],
            transactions: vec![],
            nodes: vec![
                Node {
                    conn_id: 0,
                    tx_id: 0,
                    access: 0,
                    perms: vec![Perm {
                        access: b'n',
                        ignore: false,
                        domid: 0,
                    }],
                    path: b"/".to_vec(),
                    value: vec![],
                },
                Node {
                    conn_id: 0,
                    tx_id: 0,
                    access: 0,
                    perms: vec![
                        Perm {
                            access: b'n',
                            ignore: false,
                            domid: 7,
                        },
                        Perm {
                            access: b'r',
                            ignore: true,
                            domid: 9,
                        },
                    ],
                    path: b"/local/domain/7/data".to_vec(),
                    value: b"with\0nul".to_vec(),
                },
            ],
            skipped: vec![],
        }
    }

    #[test]
    fn a_stream_reads_back_as_written() {
        let state = sample();
        let bytes = write(&state);
        assert_eq!(read(&bytes), Ok(state));
        assert_eq!(bytes.len() % 8, 0, "every record is 8-byte aligned");
    }

    #[test]
    fn records_are_laid_out_as_xenstore_state_h_says() {
        let bytes = write(&State {
            global: Some(Global {
                socket_fd: -1,
                evtchn_fd: 7,
            }),
            ..State::default()
        });
        let mut expected = b"xenstore\0\0\0\x01\0\0\0\0".to_vec();
        expected.extend_from_slice(&[1, 0, 0, 0, 8, 0, 0, 0]);
        expected.extend_from_slice(&(-1i32).to_le_bytes());
        expected.extend_from_slice(&7i32.to_le_bytes());
        expected.extend_from_slice(&[0; 8]); // END
        assert_eq!(bytes, expected);
    }

    #[test]
    fn every_truncation_is_refused_with_an_offset() {
        let bytes = write(&sample());
        for cut in 0..bytes.len() - 8 {
            let e = read(&bytes[..cut]).expect_err("a cut stream");
            assert!(e.offset <= cut, "{cut}: {e}");
        }
    }

    #[test]
    fn bad_preambles_say_what_is_wrong() {
        let mut bytes = write(&State::default());
        bytes[11] = 2;
        assert!(read(&bytes).unwrap_err().what.contains("version 2"));
        bytes[11] = 1;
        bytes[12] = 1;
        assert!(read(&bytes).unwrap_err().what.contains("little-endian"));
        assert!(read(b"oxenstored dump.")
            .unwrap_err()
            .what
            .contains("identifier"));
    }

    #[test]
    fn strings_must_be_one_nul_terminated_string() {
        let mut state = State::default();
        state.watches.push(Watch {
            conn_id: 1,
            path: b"a".to_vec(),
            token: b"t".to_vec(),
        });
        let mut bytes = write(&state);
        // The watch path "a\0" becomes "aa": no terminator.
        let at = bytes.windows(2).position(|w| w == b"a\0").unwrap();
        bytes[at + 1] = b'a';
        assert!(read(&bytes).unwrap_err().what.contains("watch path"));
    }

    #[test]
    fn a_connection_id_is_not_zero_and_not_listed_twice() {
        let mut state = sample();
        state.connections[1].id = 1;
        let e = read(&write(&state)).unwrap_err();
        assert!(e.what.contains("listed twice"), "{e}");
        state.connections[1].id = 0;
        assert!(read(&write(&state)).is_err());
    }

    #[test]
    fn unknown_records_are_skipped_and_listed() {
        let mut bytes = write(&State::default());
        let end = bytes.split_off(PREAMBLE_LEN);
        bytes.extend_from_slice(&[9, 0, 0, 0, 8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        bytes.extend_from_slice(&end);
        assert_eq!(read(&bytes).unwrap().skipped, [9]);
    }
}
