//! What a simulated run must show, besides each reply answering its
//! request in order (client.rs checks that as replies arrive):
//! - liveness: the loop never sleeps while a request whose bytes reached it
//!   is unanswered and its reply is not on its way (`sleeping_on`);
//! - order across connections: a write's watch events are queued on every
//!   watcher before its writer has the reply (`events_before_replies`);
//! - exactly once: each watcher heard each fan-out write once (`fan_out`);
//! - agreement: each dom0 worker's replies and own watch events equal what
//!   a daemon gives the same requests one at a time, with no event loop
//!   (`agreement`).

use super::client::{Client, Role, Sent, FAN};
use super::net::Net;
use crate::conn::ring::Field;
use crate::conn::SpareOutput;
use crate::daemon::direct::{Idle, NoBackend};
use crate::daemon::quota::Quotas;
use crate::daemon::Daemon;
use xenstore_proto::wire::{Header, MsgType, HEADER_LEN};

/// The request the daemon owes `c` a reply to now, if any: its bytes all
/// reached the daemon, it has no reply, and its client is not itself the
/// holdup (not reading, or with replies it has not read yet).
pub fn owes_reply<'c>(c: &'c Client, net: &Net) -> Option<&'c Sent> {
    let ep = c.endpoint?;
    if c.closed || !c.reading {
        return None;
    }
    let e = &net.endpoints[ep];
    let replies_wait = !e.to_client.is_empty()
        || e.to_guest_signals > 0
        || c.ring
            .as_ref()
            .is_some_and(|r| r.load(Field::RspProd) != r.load(Field::RspCons));
    if replies_wait {
        return None;
    }
    c.waiting().next()
}

/// The requests left waiting while the loop sleeps.
pub fn sleeping_on(clients: &[Client], net: &Net) -> Vec<String> {
    clients
        .iter()
        .filter_map(|c| {
            let s = owes_reply(c, net)?;
            Some(format!(
                "{}: request {} (type {}) delivered at pass {}, unanswered while the loop sleeps",
                c.name,
                s.req_id,
                s.ty,
                s.delivered.unwrap_or(0)
            ))
        })
        .collect()
}

/// Counts, for each client, the passes in a row the daemon has owed it a
/// reply; the requests owed longer than `bound`.
pub fn overdue(clients: &mut [Client], net: &Net, bound: u64) -> Vec<String> {
    let mut late = Vec::new();
    for c in clients.iter_mut() {
        if owes_reply(c, net).is_some() {
            c.owed += 1;
            c.slowest = c.slowest.max(c.owed);
        } else {
            c.owed = 0;
        }
        if c.owed > bound {
            late.push(format!(
                "{}: owed a reply for {} passes (bound {bound})",
                c.name, c.owed
            ));
        }
    }
    late
}

/// For each fan-out write whose writer has its reply: the event is queued
/// on every watcher (received, in its socket, or in its output queue).
/// Checked after the pass, so an event queued after the reply but in the
/// same pass goes unnoticed; one never queued does not.
pub fn events_before_replies(clients: &mut [Client], net: &Net, daemon: &Daemon) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut answered = Vec::new();
    for c in clients.iter_mut() {
        for i in std::mem::take(&mut c.fan_answered) {
            if let Some(path) = &c.sent[i].fan_path {
                answered.push((c.name.clone(), path.clone()));
            }
        }
    }
    for (writer, path) in answered {
        for w in clients.iter().filter(|c| c.role == Role::Watcher) {
            let Some(ep) = w.endpoint else { continue };
            if w.fan_events.contains(&path) {
                continue;
            }
            // The stream not yet parsed, in order: what the watcher holds
            // of a message, its socket, the daemon's output queue.
            let e = &net.endpoints[ep];
            let mut stream = w.inbox.clone();
            stream.extend(&e.to_client);
            if let Some((token, _)) = e.registered {
                if let Some(conn) = daemon.conn(token.0 as u32) {
                    stream.extend_from_slice(conn.pending());
                }
            }
            if !contains(&stream, &path) {
                wrong.push(format!(
                    "{writer} has its reply to the write of {}, but {} has no event for it",
                    String::from_utf8_lossy(&path),
                    w.name
                ));
            }
        }
    }
    wrong
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

/// Every watcher heard every answered fan-out write, and each only once.
pub fn fan_out(clients: &[Client]) -> Vec<String> {
    let mut wrong = Vec::new();
    let writes: Vec<&Vec<u8>> = clients
        .iter()
        .flat_map(|c| c.sent[..c.answered].iter())
        .filter_map(|s| s.fan_path.as_ref())
        .collect();
    for w in clients.iter().filter(|c| c.role == Role::Watcher) {
        let mut heard = w.fan_events.clone();
        heard.sort();
        if let Some(twice) = heard.windows(2).find(|p| p[0] == p[1]) {
            wrong.push(format!(
                "{} heard {} twice",
                w.name,
                String::from_utf8_lossy(&twice[0])
            ));
        }
        for path in &writes {
            if heard.binary_search(path).is_err() {
                wrong.push(format!(
                    "{} never heard {}",
                    w.name,
                    String::from_utf8_lossy(path)
                ));
            }
        }
    }
    wrong
}

/// A dom0 worker's answered requests, executed one at a time on a daemon
/// of their own: its replies and own watch events must be the same (a
/// `loose` request's reply only in kind: it depends on other clients).
pub fn agreement(c: &Client) -> Option<String> {
    if c.role != Role::Worker {
        return None;
    }
    let mut d = Daemon::new(Quotas::default(), Box::new(NoBackend));
    let id = d.open(
        0,
        Box::new(Idle {
            pid: 1,
            peer: "reference",
        }),
    );
    let mut spare = SpareOutput::default();
    let mut expected = Vec::new();
    let mut start = 0;
    for s in &c.sent[..c.answered] {
        let bytes = &c.outbox[start..s.end];
        start = s.end;
        let header = Header::decode(bytes[..HEADER_LEN].try_into().unwrap());
        d.handle(id, header, &bytes[HEADER_LEN..]);
        let conn = d.conn_mut(id)?;
        let mut out = conn.pending();
        while out.len() >= HEADER_LEN {
            let h = Header::decode(out[..HEADER_LEN].try_into().unwrap());
            let end = HEADER_LEN + h.len as usize;
            let payload = out[HEADER_LEN..end].to_vec();
            out = &out[end..];
            let fan = h.ty == MsgType::WatchEvent as u32 && payload.starts_with(FAN.as_bytes());
            if !fan {
                expected.push((h, payload));
            }
        }
        let n = conn.pending().len();
        conn.consumed(n, &mut spare);
    }
    // The real run's messages up to its last answered reply.
    let replies_seen = |msgs: &[(Header, Vec<u8>)]| {
        let mut n = 0;
        let mut upto = 0;
        for (i, (h, _)) in msgs.iter().enumerate() {
            if h.ty != MsgType::WatchEvent as u32 {
                n += 1;
                if n == c.answered {
                    upto = i + 1;
                    break;
                }
            }
        }
        upto
    };
    let real = &c.received[..replies_seen(&c.received)];
    let expected = &expected[..replies_seen(&expected)];
    let loose = |req_id: u32| c.sent.iter().any(|s| s.req_id == req_id && s.loose);
    for (i, pair) in real.iter().zip(expected).enumerate() {
        let ((rh, rp), (eh, ep)) = pair;
        let same = if rh.ty != MsgType::WatchEvent as u32 && loose(rh.req_id) {
            rh.req_id == eh.req_id && eh.ty != MsgType::WatchEvent as u32
        } else {
            rh == eh && rp == ep
        };
        if !same {
            return Some(format!(
                "{}: message {i} differs from one request at a time: {:?} {:?} vs {:?} {:?}",
                c.name,
                rh,
                String::from_utf8_lossy(rp),
                eh,
                String::from_utf8_lossy(ep)
            ));
        }
    }
    (real.len() != expected.len()).then(|| {
        format!(
            "{}: {} messages, one request at a time gives {}",
            c.name,
            real.len(),
            expected.len()
        )
    })
}
