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

use super::stream::{ConnKind, Connection, Global, Node, Perm, State, Watch};

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

    fn hex(s: &[u8]) -> String {
        s.iter().map(|b| format!("{b:02x}")).collect()
    }

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
