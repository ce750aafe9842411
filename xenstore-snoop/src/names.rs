//! Who is behind each connection, by name: the COMM column and `-n`.
//!
//! A dom0 client is named by the `comm` the daemon puts in `conn_open`'s
//! peer description when the connection opens (so a client living for
//! milliseconds is still named); a connection opened before the snooper
//! started is named from /proc/PID/comm at first sight, once. A guest's
//! connection is named after its domain when the store's
//! /local/domain/<id>/name was seen read or written in the trace, or else
//! by reading it (a `Lookup` through the daemon's socket) at the domain's
//! first record, once.
//! Fed by [`Event`]s and [`Record`]s, whatever back end produced them.

use crate::event::{Event, Probe};
use crate::paths;
use crate::record::{Kind, Record};
use std::collections::HashMap;
use std::rc::Rc;
use xenstore_proto::wire::MsgType;

/// Connections (and domains) remembered at most; past it the table starts
/// over, and live connections are named again from /proc.
const MAX_ENTRIES: usize = 1 << 16;

/// The kernel's TASK_COMM_LEN less its NUL: comm is cut to this.
pub const COMM_MAX: usize = 15;

/// Looks a domain's name up (in the store) when the trace has not shown it.
pub type Lookup = Box<dyn FnMut(u16) -> Option<String>>;

#[derive(Default)]
pub struct Names {
    /// dom0 connections: their client's name (None: it could not be had).
    by_conn: HashMap<u32, Option<Rc<str>>>,
    /// Domain names learned from the store's /local/domain/<id>/name.
    domains: HashMap<u16, Rc<str>>,
    /// Domains whose name was looked up, found or not: once each.
    looked_up: std::collections::HashSet<u16>,
    lookup: Option<Lookup>,
}

impl Names {
    pub fn new() -> Names {
        Names::default()
    }

    /// Names that look a guest's domain name up once, at its first record,
    /// when the trace has not shown it yet.
    pub fn with_lookup(lookup: Lookup) -> Names {
        Names {
            lookup: Some(lookup),
            ..Names::default()
        }
    }

    /// Notes a connection opening or closing.
    pub fn observe(&mut self, ev: &Event) {
        match ev.probe {
            Probe::ConnOpen if ev.dom == 0 => {
                let comm = xenstore_proto::peer::peer_comm(&ev.s2).map(Rc::from);
                bounded_insert(&mut self.by_conn, ev.conn, comm);
            }
            Probe::ConnClose => {
                self.by_conn.remove(&ev.conn);
            }
            _ => {}
        }
    }

    /// Learns a domain's name from a successful read or write of
    /// /local/domain/<id>/name.
    pub fn learn(&mut self, r: &Record) {
        // Cheap tests first: this sees every record.
        let names_a_name = r.path == "name" || r.path.ends_with("/name");
        if r.kind != Kind::Op || r.error.is_some() || !names_a_name {
            return;
        }
        let name = match r.op {
            Some(op) if op == MsgType::Write as u16 => &r.value,
            Some(op) if op == MsgType::Read as u16 => match &r.result {
                Some(result) => result,
                None => return,
            },
            _ => return,
        };
        let path = paths::record_path(r);
        let Some(domid) = path
            .strip_prefix("/local/domain/")
            .and_then(|rest| rest.strip_suffix("/name"))
            .and_then(|id| id.parse::<u16>().ok())
        else {
            return;
        };
        if name.is_empty() || r.truncated {
            return;
        }
        if self.domains.get(&domid).is_none_or(|n| **n != **name) {
            bounded_insert(&mut self.domains, domid, Rc::from(name.as_str()));
        }
    }

    /// The name of the client behind `r`, None when unknown (a guest whose
    /// domain name was not seen, a client gone before it was seen).
    pub fn name(&mut self, r: &Record) -> Option<Rc<str>> {
        if r.dom != 0 {
            if let Some(name) = self.domains.get(&r.dom) {
                return Some(name.clone());
            }
            let lookup = self.lookup.as_mut()?;
            if self.looked_up.len() >= MAX_ENTRIES {
                self.looked_up.clear();
            }
            if !self.looked_up.insert(r.dom) {
                return None;
            }
            let name: Rc<str> = Rc::from(lookup(r.dom)?);
            bounded_insert(&mut self.domains, r.dom, name.clone());
            return Some(name);
        }
        if let Some(known) = self.by_conn.get(&r.conn) {
            return known.clone();
        }
        if r.pid == 0 {
            return None;
        }
        let comm = proc_comm(r.pid).map(Rc::from);
        bounded_insert(&mut self.by_conn, r.conn, comm.clone());
        comm
    }
}

/// Whether `name` (from `-n`) names `comm`: equal, or equal to comm's
/// COMM_MAX bytes, as the kernel cuts a long program name.
pub fn matches(name: &str, comm: &str) -> bool {
    if name == comm {
        return true;
    }
    let mut end = COMM_MAX.min(name.len());
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name.len() > COMM_MAX && &name[..end] == comm
}

fn bounded_insert<K: std::hash::Hash + Eq, V>(map: &mut HashMap<K, V>, k: K, v: V) {
    if map.len() >= MAX_ENTRIES {
        map.clear();
    }
    map.insert(k, v);
}

fn proc_comm(pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim_end_matches('\n').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairing::tests::ev;
    use crate::pairing::Pairing;

    fn op(
        p: &mut Pairing,
        serial: u64,
        op: MsgType,
        dom: u16,
        path: &str,
        value: &str,
        result: &str,
    ) -> Record {
        let mut req = ev(Probe::Request, serial, op as u16, path, value);
        req.dom = dom;
        p.push(req);
        p.push(ev(Probe::Response, serial, op as u16, result, ""))
            .unwrap()
    }

    #[test]
    fn dom0_clients_are_named_at_conn_open_and_forgotten_at_close() {
        let mut names = Names::new();
        let mut open = ev(Probe::ConnOpen, 0, 0, "socket", "pid 100 uid 0 comm xl");
        open.conn = 3;
        names.observe(&open);
        let mut p = Pairing::new();
        let r = op(&mut p, 1, MsgType::Read, 0, "/a", "", "x");
        assert_eq!(names.name(&r).as_deref(), Some("xl"));
        let mut close = ev(Probe::ConnClose, 0, 0, "eof", "");
        close.conn = 3;
        names.observe(&close);
        assert!(names.by_conn.is_empty());
    }

    #[test]
    fn a_connection_opened_earlier_is_named_from_proc() {
        let mut names = Names::new();
        let mut p = Pairing::new();
        let mut r = op(&mut p, 1, MsgType::Read, 0, "/a", "", "x");
        r.pid = std::process::id();
        let me = std::fs::read_to_string("/proc/self/comm").unwrap();
        assert_eq!(names.name(&r).as_deref(), Some(me.trim_end()));
        // read once: the answer stays with the connection
        r.pid = u32::MAX - 1;
        assert_eq!(names.name(&r).as_deref(), Some(me.trim_end()));
        r.conn = 99;
        assert_eq!(names.name(&r), None, "no such process");
    }

    #[test]
    fn guests_are_named_after_their_domain_once_seen() {
        let mut names = Names::new();
        let mut p = Pairing::new();
        let guest = op(&mut p, 1, MsgType::Read, 6, "device", "", "");
        assert_eq!(names.name(&guest), None);
        names.learn(&op(
            &mut p,
            2,
            MsgType::Write,
            0,
            "/local/domain/6/name",
            "web01",
            "OK",
        ));
        assert_eq!(names.name(&guest).as_deref(), Some("web01"));
        // the guest reading its own name, relative
        names.learn(&op(&mut p, 3, MsgType::Read, 6, "name", "", "web02"));
        assert_eq!(names.name(&guest).as_deref(), Some("web02"));
        names.learn(&op(
            &mut p,
            4,
            MsgType::Read,
            0,
            "/local/domain/6/namex",
            "",
            "no",
        ));
        assert_eq!(names.name(&guest).as_deref(), Some("web02"));
    }

    #[test]
    fn an_unseen_domain_name_is_looked_up_once() {
        let asked = Rc::new(std::cell::Cell::new(0));
        let counter = asked.clone();
        let mut names = Names::with_lookup(Box::new(move |dom| {
            counter.set(counter.get() + 1);
            (dom == 6).then(|| "web01".to_string())
        }));
        let mut p = Pairing::new();
        let six = op(&mut p, 1, MsgType::Read, 6, "device", "", "");
        let seven = op(&mut p, 2, MsgType::Read, 7, "device", "", "");
        assert_eq!(names.name(&six).as_deref(), Some("web01"));
        assert_eq!(names.name(&six).as_deref(), Some("web01"));
        assert_eq!(names.name(&seven), None);
        assert_eq!(names.name(&seven), None);
        assert_eq!(asked.get(), 2, "once per domain");
    }

    #[test]
    fn long_names_match_their_cut_comm() {
        assert!(matches("xenstore-write", "xenstore-write"));
        assert!(matches("a-very-long-program", "a-very-long-pro"));
        assert!(!matches("xenstore", "xenstore-write"));
        assert!(!matches("a-very-long-pro", "a-very-long-program"));
    }
}
