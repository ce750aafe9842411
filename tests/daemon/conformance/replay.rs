//! Replays one case against a daemon's socket and renders what came back,
//! step by step, in the case format's expectation syntax.

use super::case::{quote, Action, Case, Step, Tx};
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;
use xenstore_proto::wire::{Header, MsgType, HEADER_LEN};

/// How long to wait for each message a step expects. The daemons answer in
/// microseconds, but a loaded machine can hold a process off the CPU (or on
/// a page fault) for seconds; waiting costs nothing unless a daemon never
/// answers, and conformance.rs stops a suite after a few such cases.
pub const PATIENT: Duration = Duration::from_secs(30);
/// For a daemon allowed to answer a case its own way, where silence may be
/// its answer (oxenstored waits for more bytes where C answers): as long
/// as it was always given.
pub const BRIEF: Duration = Duration::from_secs(3);
/// How long `quiet` waits, after the messages it expects, for one that
/// should not come.
const QUIET: Duration = Duration::from_millis(100);

enum Conn {
    Open(UnixStream),
    Closed,
}

/// One rendered message list per step. `expect` is what the daemon should
/// answer a step: `quiet` waits up to `patience` for each of its messages
/// before the short silence (they may be written a moment after the reply
/// the previous step read), and a step times out after `patience`.
pub fn replay<'a>(
    case: &'a Case,
    socket: &Path,
    patience: Duration,
    expect: impl Fn(&'a Step) -> &'a [String],
) -> Vec<Vec<String>> {
    let mut conns: HashMap<String, Conn> = HashMap::new();
    // Transaction ids the daemon chose, by variable: (connection, id).
    let mut vars: HashMap<String, (String, u32)> = HashMap::new();
    let mut next_req = 1u32;
    let mut out = Vec::new();
    for step in &case.steps {
        let conn = conns.entry(step.conn.clone()).or_insert_with(|| {
            let s = UnixStream::connect(socket)
                .unwrap_or_else(|e| panic!("{}: connect {}: {e}", case.name, socket.display()));
            Conn::Open(s)
        });
        let render = |msgs: Vec<Msg>, vars: &HashMap<String, (String, u32)>| -> Vec<String> {
            msgs.iter().map(|m| m.render(&step.conn, vars)).collect()
        };
        let lines = match (&step.action, &mut *conn) {
            (Action::Close, c) => {
                *c = Conn::Closed;
                vec![]
            }
            (_, Conn::Closed) => vec!["closed".to_string()],
            (Action::Wait, Conn::Open(s)) => render(vec![read_one(s, patience)], &vars),
            (Action::Quiet, Conn::Open(s)) => {
                let expected = messages_in(expect(step));
                render(read_until_quiet(s, expected, patience), &vars)
            }
            (Action::Raw { bytes, wait }, Conn::Open(s)) => {
                if s.write_all(bytes).is_err() {
                    vec!["closed".to_string()]
                } else if *wait {
                    render(read_reply(s, patience), &vars)
                } else {
                    vec![]
                }
            }
            (
                Action::Send {
                    ty,
                    req,
                    tx,
                    len,
                    payload,
                    wait,
                    capture,
                },
                Conn::Open(s),
            ) => {
                let req_id = req.unwrap_or_else(|| {
                    next_req += 1;
                    next_req - 1
                });
                let tx_id = match tx {
                    Tx::Num(n) => *n,
                    Tx::Var(v) => {
                        vars.get(v)
                            .unwrap_or_else(|| panic!("{}: ${v} never captured", case.name))
                            .1
                    }
                };
                let header = Header {
                    ty: *ty,
                    req_id,
                    tx_id,
                    len: len.unwrap_or(payload.len() as u32),
                };
                let bytes = [&header.encode()[..], payload].concat();
                if s.write_all(&bytes).is_err() {
                    vec!["closed".to_string()]
                } else if !*wait {
                    vec![]
                } else {
                    let msgs = read_reply(s, patience);
                    if let (Some(var), Some(reply)) = (capture, msgs.last()) {
                        if let Some(id) = reply.tx_id_payload() {
                            vars.insert(var.clone(), (step.conn.clone(), id));
                        }
                    }
                    render(msgs, &vars)
                }
            }
        };
        if lines.iter().any(|l| l == "closed") {
            if let Some(c) = conns.get_mut(&step.conn) {
                *c = Conn::Closed;
            }
        }
        // A daemon that stops answering would cost a timeout a step: give
        // up on the case at the first timeout the recording does not have.
        let stalled =
            lines.iter().any(|l| l == "timeout") && !expect(step).contains(&"timeout".to_string());
        out.push(lines);
        if stalled {
            break;
        }
    }
    out
}

pub struct Msg {
    pub ty: u32,
    pub req_id: u32,
    pub tx_id: u32,
    pub payload: Vec<u8>,
    /// Set instead of a message: "closed" or "timeout".
    pub end: Option<&'static str>,
}

impl Msg {
    fn end(what: &'static str) -> Msg {
        Msg {
            ty: 0,
            req_id: 0,
            tx_id: 0,
            payload: vec![],
            end: Some(what),
        }
    }

    /// The id in a TRANSACTION_START reply ("12\0").
    fn tx_id_payload(&self) -> Option<u32> {
        if self.ty != MsgType::TransactionStart as u32 || self.end.is_some() {
            return None;
        }
        let text = std::str::from_utf8(&self.payload).ok()?;
        text.trim_end_matches('\0').parse().ok()
    }

    /// `TYPE req=N tx=N "payload"`; transaction ids this connection captured
    /// are shown as their variable, since daemons may number them differently.
    fn render(&self, conn: &str, vars: &HashMap<String, (String, u32)>) -> String {
        if let Some(end) = self.end {
            return end.to_string();
        }
        let var_of = |id: u32| {
            let mut names: Vec<&String> = vars
                .iter()
                .filter(|(_, (c, v))| c == conn && *v == id)
                .map(|(n, _)| n)
                .collect();
            names.sort();
            names.first().map(|n| format!("${n}"))
        };
        let ty = xenstore_proto::wire::msg_name(self.ty)
            .map(|n| n.trim_start_matches("XS_").to_string())
            .unwrap_or_else(|| self.ty.to_string());
        let tx = match self.tx_id {
            0 => "0".to_string(),
            id => var_of(id).unwrap_or(id.to_string()),
        };
        let payload = match self.tx_id_payload().and_then(var_of) {
            Some(var) => format!("\"{var}\\0\""),
            None => quote(&self.payload),
        };
        format!("{ty} req={} tx={tx} {payload}", self.req_id)
    }
}

/// How many of an expectation's entries are messages (not the connection's
/// or the daemon's end).
fn messages_in(expect: &[String]) -> usize {
    let end = |e: &String| e == "closed" || e == "timeout" || e.ends_with(" died");
    expect.iter().filter(|e| !end(e)).count()
}

/// Messages up to and including the first that is not a watch event.
fn read_reply(s: &mut UnixStream, patience: Duration) -> Vec<Msg> {
    let mut msgs = Vec::new();
    loop {
        let m = read_one(s, patience);
        let done = m.end.is_some() || m.ty != MsgType::WatchEvent as u32;
        msgs.push(m);
        if done {
            return msgs;
        }
    }
}

/// The `expected` messages (each waited for up to `patience`), then
/// whatever arrives before a short silence (nothing, usually).
fn read_until_quiet(s: &mut UnixStream, expected: usize, patience: Duration) -> Vec<Msg> {
    let mut msgs = Vec::new();
    loop {
        let wait = if msgs.len() < expected {
            patience
        } else {
            QUIET
        };
        let m = read_one(s, wait);
        match m.end {
            Some("timeout") => return msgs,
            Some(_) => {
                msgs.push(m);
                return msgs;
            }
            None => msgs.push(m),
        }
    }
}

fn read_one(s: &mut UnixStream, timeout: Duration) -> Msg {
    s.set_read_timeout(Some(timeout)).unwrap();
    let mut header = [0u8; HEADER_LEN];
    if let Err(e) = read_exact(s, &mut header) {
        return Msg::end(e);
    }
    let header = Header::decode(&header);
    let len = header.len as usize;
    if len > 1 << 20 {
        return Msg::end("closed");
    }
    let mut payload = vec![0u8; len];
    if let Err(e) = read_exact(s, &mut payload) {
        return Msg::end(e);
    }
    Msg {
        ty: header.ty,
        req_id: header.req_id,
        tx_id: header.tx_id,
        payload,
        end: None,
    }
}

fn read_exact(s: &mut UnixStream, buf: &mut [u8]) -> Result<(), &'static str> {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => return Err("closed"),
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(if got == 0 { "timeout" } else { "closed" });
            }
            Err(_) => return Err("closed"),
        }
    }
    Ok(())
}

/// Whether the daemon on `socket` answers a request on a fresh connection
/// within `patience`: a live daemon does, a dying one cannot (its listening
/// socket refuses, or drops what it had queued).
pub fn answers(socket: &Path, patience: Duration) -> bool {
    let Ok(mut s) = UnixStream::connect(socket) else {
        return false;
    };
    let request = xenstore_proto::frame::message(MsgType::GetDomainPath as u32, 0, 0, b"0\0");
    s.write_all(&request).is_ok() && read_one(&mut s, patience).end.is_none()
}
