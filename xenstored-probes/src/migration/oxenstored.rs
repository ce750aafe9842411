//! oxenstored's live-update dump (tools/ocaml/xenstored/xenstored.ml, `DB`),
//! read into the same [`State`] as C xenstored's stream, so one restorer
//! takes over from either. A text file, one record a line:
//!
//! ```text
//! $xenstored-dump-format
//! global,<listening socket fd>
//! evtchn-dev,<fd>,<VIRQ_DOM_EXC port>
//! dom,<domid>,<mfn>,<remote port>,<local port>     (dom0 included)
//! socket,<fd>                                      (a dom0 client)
//! watch,<domid | -fd>,<hex path>,<hex token>       (after its connection)
//! store,<hex path>,<hex perms "n0\0r5">,<hex value> (parents first)
//! ```
//!
//! oxenstored updates only when no connection has a transaction or partial
//! I/O, so there is no buffered data. Unlike oxenstored, which skips a line
//! it cannot read, a bad line is refused here: a half-restored store is
//! worse than the error that keeps the dump for inspection.
//!
//! [`write`] is the inverse, for a live update into oxenstored: it takes
//! every channel bound on the one evtchn fd (VIRQ_DOM_EXC too, which it
//! never binds again), each ring's page mapped again by its frame.

use super::stream::{ConnKind, Connection, Global, Node, Perm, State, Watch};
use std::collections::HashMap;
use std::fmt::Write as _;

/// The dump's first line.
pub const HEADER: &str = "$xenstored-dump-format";

/// Where oxenstored 4.17–4.20 writes its dump (compiled in).
pub const DUMP_FILE: &str = "/var/run/xenstored/db";

/// Reads a whole dump; the error names the line.
pub fn read(text: &str) -> Result<State, String> {
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, HEADER)) => {}
        _ => return Err(format!("not an oxenstored dump (no {HEADER:?} line)")),
    }
    let mut state = State::default();
    let mut global = Global {
        socket_fd: -1,
        evtchn_fd: -1,
    };
    // oxenstored names a watch's connection by domid, or by -fd.
    let mut by_domid = Vec::new();
    let mut by_fd = Vec::new();
    for (i, line) in lines {
        let fail = |why: &str| format!("line {}: {why}: {line:?}", i + 1);
        let fields: Vec<&str> = line.split(',').collect();
        let int = |s: &str| s.parse::<i64>().map_err(|_| fail("not a number"));
        let id = state.connections.len() as u32 + 1;
        match fields.as_slice() {
            // Later versions may add fields (a read-only socket): ignored.
            ["global", fd, ..] => global.socket_fd = int(fd)? as i32,
            ["evtchn-dev", fd, _virq_port] => global.evtchn_fd = int(fd)? as i32,
            ["dom", domid, _mfn, port, ..] => {
                let domid = u16::try_from(int(domid)?).map_err(|_| fail("domid"))?;
                state.connections.push(Connection {
                    id,
                    kind: ConnKind::Ring {
                        domid,
                        target: None,
                        port: int(port)? as u32,
                    },
                    input: Vec::new(),
                    output: Vec::new(),
                    partial: 0,
                });
                by_domid.push((domid as i64, id));
            }
            ["socket", fd] => {
                let fd = int(fd)? as i32;
                state.connections.push(Connection {
                    id,
                    kind: ConnKind::Socket { fd },
                    input: Vec::new(),
                    output: Vec::new(),
                    partial: 0,
                });
                by_fd.push((-(fd as i64), id));
            }
            ["watch", who, path, token] => {
                let who = int(who)?;
                let table = if who < 0 { &by_fd } else { &by_domid };
                let conn_id = table
                    .iter()
                    .rev()
                    .find(|(k, _)| *k == who)
                    .map(|(_, id)| *id)
                    .ok_or_else(|| fail("a watch of no connection listed before it"))?;
                state.watches.push(Watch {
                    conn_id,
                    path: unhex_string(path).ok_or_else(|| fail("path is not hex of a string"))?,
                    token: unhex_string(token)
                        .ok_or_else(|| fail("token is not hex of a string"))?,
                });
            }
            ["store", path, perms, value] => {
                let path = unhex_string(path).ok_or_else(|| fail("path is not hex of a string"))?;
                let perms = unhex(perms).ok_or_else(|| fail("perms are not hex"))?;
                state.nodes.push(Node {
                    conn_id: 0,
                    tx_id: 0,
                    access: 0,
                    perms: parse_perms(&perms).ok_or_else(|| fail("bad permissions"))?,
                    path: special_name(path),
                    value: unhex(value).ok_or_else(|| fail("value is not hex"))?,
                });
            }
            _ => return Err(fail("unknown record")),
        }
    }
    state.global = Some(global);
    Ok(state)
}

/// What a `dom` line says of a ring beyond the stream's connection: the
/// page's frame (INTRODUCE's) and the channel's local port on the evtchn
/// fd (the stream's connection names the domain's own port).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DomChannel {
    pub mfn: u64,
    pub local_port: u32,
}

/// `state` as oxenstored 4.17–4.20 reads it with `--live --restart`: the
/// GLOBAL record's evtchn fd with VIRQ_DOM_EXC bound there as
/// `virq_port`, each ring connection's [`DomChannel`] by connection id.
/// Refuses what the dump cannot say (oxenstored refuses its own update
/// then): buffered bytes, transactions, a domain acting for another.
pub fn write(
    state: &State,
    virq_port: u32,
    channels: &HashMap<u32, DomChannel>,
) -> Result<String, String> {
    let global = state.global.ok_or("no listening socket and evtchn fd")?;
    if global.evtchn_fd < 0 {
        return Err("no evtchn fd".to_string());
    }
    if let Some(t) = state.transactions.first() {
        return Err(format!("connection {} has a transaction open", t.conn_id));
    }
    let mut out = format!(
        "{HEADER}\nglobal,{}\nevtchn-dev,{},{virq_port}\n",
        global.socket_fd, global.evtchn_fd
    );
    for c in &state.connections {
        if !c.input.is_empty() || !c.output.is_empty() {
            return Err(format!("connection {} has bytes in flight", c.id));
        }
        let who = match c.kind {
            ConnKind::Ring {
                target: Some(t),
                domid,
                ..
            } => return Err(format!("domain {domid} acts for domain {t} (SET_TARGET)")),
            ConnKind::Ring { domid, port, .. } => {
                let ch = channels
                    .get(&c.id)
                    .ok_or_else(|| format!("domain {domid}'s ring has no channel"))?;
                let _ = writeln!(out, "dom,{domid},{},{port},{}", ch.mfn, ch.local_port);
                i64::from(domid)
            }
            ConnKind::Socket { fd } => {
                let _ = writeln!(out, "socket,{fd}");
                -i64::from(fd)
            }
        };
        for w in state.watches.iter().filter(|w| w.conn_id == c.id) {
            let _ = writeln!(out, "watch,{who},{},{}", hex(&w.path), hex(&w.token));
        }
    }
    for n in &state.nodes {
        if n.conn_id != 0 {
            return Err("a node of a transaction".to_string());
        }
        let mut path = n.path.clone();
        if path.first() == Some(&b'@') {
            path.insert(0, b'/');
        }
        let _ = writeln!(
            out,
            "store,{},{},{}",
            hex(&path),
            hex(&perms_text(&n.perms)),
            hex(&n.value)
        );
    }
    Ok(out)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// "n0\0r5": oxenstored has no "ignore" mark (C's for a gone domain).
fn perms_text(perms: &[Perm]) -> Vec<u8> {
    let entries: Vec<Vec<u8>> = perms
        .iter()
        .map(|p| format!("{}{}", p.access as char, p.domid).into_bytes())
        .collect();
    entries.join(&0u8)
}

/// oxenstored keeps @introduceDomain and @releaseDomain in its tree, under
/// the root: the dump says "/@releaseDomain".
fn special_name(path: Vec<u8>) -> Vec<u8> {
    match path.strip_prefix(b"/") {
        Some(name) if name.first() == Some(&b'@') => name.to_vec(),
        _ => path,
    }
}

/// A path or token: hex of a string without NUL (it ends C strings).
fn unhex_string(s: &str) -> Option<Vec<u8>> {
    unhex(s).filter(|b| !b.contains(&0))
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// "n0\0r5" (owner first): each entry a letter and a domid.
fn parse_perms(text: &[u8]) -> Option<Vec<Perm>> {
    text.split(|&b| b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (&access, id) = e.split_first()?;
            if !b"nrwb".contains(&access) {
                return None;
            }
            let domid = std::str::from_utf8(id).ok()?.parse().ok()?;
            Some(Perm {
                access,
                ignore: false,
                domid,
            })
        })
        .collect::<Option<Vec<_>>>()
        .filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dump_reads_into_the_stream_state() {
        let text = format!(
            "{HEADER}\nglobal,5\nevtchn-dev,7,3\ndom,0,1234,2,4\nsocket,9\nwatch,-9,{},{}\n\
             dom,3,777,1,8\nwatch,3,{},{}\nstore,{},{},\nstore,{},{},{}\nstore,{},{},\n",
            hex(b"@releaseDomain"),
            hex(b"tok"),
            hex(b"device"),
            hex(b""),
            hex(b"/"),
            hex(b"n0"),
            hex(b"/local/domain/3/x"),
            hex(b"n3\0r0"),
            hex(b"v\0al"),
            hex(b"/@releaseDomain"),
            hex(b"n0"),
        );
        let s = read(&text).unwrap();
        assert_eq!(
            s.global,
            Some(Global {
                socket_fd: 5,
                evtchn_fd: 7
            })
        );
        assert_eq!(s.connections.len(), 3);
        assert_eq!(s.connections[1].kind, ConnKind::Socket { fd: 9 });
        assert_eq!(s.watches[0].conn_id, s.connections[1].id);
        assert_eq!(s.watches[0].path, b"@releaseDomain");
        assert_eq!(s.watches[1].conn_id, s.connections[2].id);
        assert_eq!(s.nodes[1].value, b"v\0al");
        assert_eq!(s.nodes[1].perms.len(), 2);
        assert_eq!(s.nodes[1].perms[1].access, b'r');
        assert_eq!(s.nodes[2].path, b"@releaseDomain");
    }

    /// What a shim hands oxenstored: read back, it is the same state.
    #[test]
    fn a_written_dump_reads_back_as_the_state_it_was_written_from() {
        let conn = |id, kind| Connection {
            id,
            kind,
            input: Vec::new(),
            output: Vec::new(),
            partial: 0,
        };
        let ring = |domid, port| ConnKind::Ring {
            domid,
            target: None,
            port,
        };
        let perm = |access, domid| Perm {
            access,
            ignore: false,
            domid,
        };
        let node = |path: &[u8], perms: Vec<Perm>, value: &[u8]| Node {
            conn_id: 0,
            tx_id: 0,
            access: 0,
            perms,
            path: path.to_vec(),
            value: value.to_vec(),
        };
        let watch = |conn_id, path: &[u8], token: &[u8]| Watch {
            conn_id,
            path: path.to_vec(),
            token: token.to_vec(),
        };
        let state = State {
            global: Some(Global {
                socket_fd: 5,
                evtchn_fd: 7,
            }),
            connections: vec![
                conn(1, ring(0, 2)),
                conn(2, ConnKind::Socket { fd: 9 }),
                conn(3, ring(5, 1)),
            ],
            watches: vec![
                watch(2, b"@releaseDomain", b"xenconsoled"),
                watch(2, b"/local/domain/5", b"t,with,commas"),
                watch(3, b"data", b"mine"),
            ],
            nodes: vec![
                node(b"@releaseDomain", vec![perm(b'n', 0)], b""),
                node(b"/", vec![perm(b'n', 0)], b""),
                node(b"/local/domain/5", vec![perm(b'n', 5), perm(b'r', 0)], b""),
                node(b"/local/domain/5/data", vec![perm(b'b', 5)], b"v\0al,ue"),
            ],
            ..State::default()
        };
        let channels = HashMap::from([
            (
                1,
                DomChannel {
                    mfn: 0,
                    local_port: 3,
                },
            ),
            (
                3,
                DomChannel {
                    mfn: 0xfeffc,
                    local_port: 4,
                },
            ),
        ]);
        let text = write(&state, 6, &channels).unwrap();
        assert!(text.starts_with(&format!(
            "{HEADER}\nglobal,5\nevtchn-dev,7,6\ndom,0,0,2,3\nsocket,9\n"
        )));
        assert!(text.contains("\ndom,5,1044476,1,4\nwatch,5,"), "{text}");
        assert_eq!(read(&text).unwrap(), state);
    }

    #[test]
    fn what_oxenstored_cannot_take_is_refused() {
        let mut state = State {
            global: Some(Global {
                socket_fd: 5,
                evtchn_fd: 7,
            }),
            ..State::default()
        };
        state.connections.push(Connection {
            id: 1,
            kind: ConnKind::Ring {
                domid: 3,
                target: Some(2),
                port: 1,
            },
            input: Vec::new(),
            output: Vec::new(),
            partial: 0,
        });
        let said = write(&state, 6, &HashMap::new()).unwrap_err();
        assert!(said.contains("domain 3 acts for domain 2"), "{said}");
        state.connections[0].kind = ConnKind::Socket { fd: 9 };
        state.connections[0].output = b"x".to_vec();
        let said = write(&state, 6, &HashMap::new()).unwrap_err();
        assert!(said.contains("bytes in flight"), "{said}");
        state.connections[0].output.clear();
        state.global = Some(Global {
            socket_fd: 5,
            evtchn_fd: -1,
        });
        assert!(write(&state, 6, &HashMap::new()).is_err());
    }

    #[test]
    fn bad_lines_are_refused_with_their_number() {
        for (bad, why) in [
            ("dom,x,1,2,3", "not a number"),
            ("watch,4,00,00", "no connection"),
            ("store,zz,00,00", "path is not hex"),
            ("store,2f00,6e30,", "path is not hex of a string"),
            ("store,2f,00,", "bad permissions"),
            ("frobnicate", "unknown record"),
        ] {
            let e = read(&format!("{HEADER}\n{bad}\n")).unwrap_err();
            assert!(e.starts_with("line 2: ") && e.contains(why), "{bad}: {e}");
        }
        assert!(read("xenstore")
            .unwrap_err()
            .contains("not an oxenstored dump"));
    }
}
