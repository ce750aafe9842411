//! `--timeline` and `--timeline-json`: the capture as swimlanes. A track
//! per guest and per dom0 process (lanes: requests, watch events,
//! transactions), a track of devices (each frontend's and backend's
//! XenbusState as spans), and flows from a write to the watch events it
//! fired and on to each watcher's next request. Built once as Chrome
//! trace events (what Perfetto and chrome://tracing open); the HTML page
//! (html.rs) draws the same events.

pub mod html;

use crate::output::{Clock, TextStyle};
use crate::record::{Kind, Record};
use regex::Regex;
use serde_json::{json, Value};
use std::collections::HashMap;

/// Records kept: a guest's boot is a few hundred; a capture running for
/// hours stops growing here (and says so in the file).
pub const RECORDS_MAX: usize = 200_000;

/// XenbusState names, by value (xen/include/public/io/xenbus.h).
pub const XENBUS_STATES: [&str; 9] = [
    "Unknown",
    "Initialising",
    "InitWait",
    "Initialised",
    "Connected",
    "Closing",
    "Closed",
    "Reconfiguring",
    "Reconfigured",
];

/// The records of a capture, kept for drawing at the end.
pub struct Timeline {
    records: Vec<Record>,
    /// Records past RECORDS_MAX, not drawn.
    pub dropped: u64,
}

/// Lanes of a client's track, one set per connection (a process may hold
/// several, whose requests overlap in time): Chrome thread ids are
/// `conn * 4 + lane`.
const REQUESTS: u64 = 1;
const WATCH_EVENTS: u64 = 2;
const TRANSACTIONS: u64 = 3;
const LANE_NAMES: [&str; 4] = ["", "requests", "watch events", "transactions"];
/// The devices' track (a Chrome process id no client track takes).
const DEVICES: u32 = 1;

impl Default for Timeline {
    fn default() -> Self {
        Timeline::new()
    }
}

impl Timeline {
    pub fn new() -> Timeline {
        Timeline {
            records: Vec::new(),
            dropped: 0,
        }
    }

    /// Keeps a record (already through the filters).
    pub fn add(&mut self, r: &Record) {
        if self.records.len() < RECORDS_MAX {
            self.records.push(r.clone());
        } else {
            self.dropped += 1;
        }
    }

    /// Chrome's trace event format (JSON object form): metadata naming
    /// the tracks and lanes, complete ("X") events, flow ("s"/"f") pairs.
    pub fn trace_events(&self, clock: &Clock) -> Value {
        let mut records: Vec<&Record> = self.records.iter().collect();
        records.sort_by_key(|r| r.mono_ns);
        let t0 = records.first().map_or(clock.start_mono_ns, |r| r.mono_ns);
        let us = |ns: u64| ns.saturating_sub(t0) as f64 / 1e3;
        let style = TextStyle::default();
        let mut line = String::new();
        let mut events = Vec::new();
        let mut tracks: HashMap<(u16, u32), u32> = HashMap::new();
        let mut track_of = |r: &Record, events: &mut Vec<Value>| -> u32 {
            let key = if r.dom == 0 { (0, r.pid) } else { (r.dom, 0) };
            let next = tracks.len() as u32 + 2;
            *tracks.entry(key).or_insert_with(|| {
                let name = match (r.dom, r.comm.as_deref()) {
                    (0, comm) => format!("dom0 {} [{}]", comm.unwrap_or("-"), r.pid),
                    (d, Some(name)) => format!("dom{d} {name}"),
                    (d, None) => format!("dom{d}"),
                };
                events.push(meta("process_name", next, 0, &name));
                events.push(json!({"ph": "M", "name": "process_sort_index", "pid": next,
                                   "args": {"sort_index": next}}));
                next
            })
        };
        let mut named = std::collections::HashSet::new();
        let mut lane = |events: &mut Vec<Value>, track: u32, conn: u32, kind: u64| -> u64 {
            let tid = u64::from(conn) * 4 + kind;
            if named.insert((track, tid)) {
                let name = format!("{} (conn {conn})", LANE_NAMES[kind as usize]);
                events.push(meta("thread_name", track, tid, &name));
            }
            tid
        };
        let mut devices = Devices::new();
        // Firing request serial -> where its mark is.
        let mut marks: HashMap<u64, Spot> = HashMap::new();
        // Connection -> watch events not yet followed by a request.
        let mut woken: HashMap<u32, Vec<Spot>> = HashMap::new();
        // Open transactions: (conn, id) -> start.
        let mut open_tx: HashMap<(u32, u32), Spot> = HashMap::new();
        let mut flow_id = 0u64;
        let mut flow = |events: &mut Vec<Value>, from: Spot, to: Spot| {
            flow_id += 1;
            events.push(
                json!({"ph": "s", "id": flow_id, "name": "watch", "cat": "watch",
                               "pid": from.0, "tid": from.1, "ts": from.2}),
            );
            events.push(json!({"ph": "f", "bp": "e", "id": flow_id, "name": "watch",
                               "cat": "watch", "pid": to.0, "tid": to.1, "ts": to.2}));
        };
        let last_us = records.last().map_or(0.0, |r| us(r.mono_ns));
        for r in &records {
            let track = track_of(r, &mut events);
            let ts = us(r.mono_ns);
            line.clear();
            style.write_line(r, clock, &mut line);
            match r.kind {
                Kind::Op => {
                    let dur = r.latency_ns.map_or(1.0, |ns| (ns as f64 / 1e3).max(1.0));
                    let tid = lane(&mut events, track, r.conn, REQUESTS);
                    events.push(json!({"ph": "X", "name": r.op_name(), "cat":
                        if r.error.is_some() { "error" } else { "request" },
                        "pid": track, "tid": tid, "ts": ts, "dur": dur,
                        "args": {"line": line, "path": r.path}}));
                    marks.insert(r.serial, (track, tid, ts));
                    for event in woken.remove(&r.conn).unwrap_or_default() {
                        flow(&mut events, event, (track, tid, ts));
                    }
                    use xenstore_proto::wire::MsgType::{TransactionEnd, TransactionStart};
                    if [TransactionStart as u16, TransactionEnd as u16].contains(&r.op.unwrap_or(0))
                    {
                        let tx_lane = lane(&mut events, track, r.conn, TRANSACTIONS);
                        transaction(r, (track, tx_lane, ts), &mut open_tx, &mut events);
                    }
                    devices.write(r, ts, &mut events);
                }
                Kind::WatchEvent => {
                    let tid = lane(&mut events, track, r.conn, WATCH_EVENTS);
                    events.push(json!({"ph": "X", "name": "XS_WATCH_EVENT", "cat": "watch",
                        "pid": track, "tid": tid, "ts": ts, "dur": 1.0,
                        "args": {"line": line, "path": r.path}}));
                    if let Some(&from) = r.fired_by.and_then(|s| marks.get(&s)) {
                        flow(&mut events, from, (track, tid, ts));
                    }
                    woken.entry(r.conn).or_default().push((track, tid, ts));
                }
                _ => {}
            }
        }
        // Still open at the end: drawn to the end.
        let mut open_tx: Vec<_> = open_tx.into_iter().collect();
        open_tx.sort_by(|a, b| a.1 .2.total_cmp(&b.1 .2));
        for ((_, id), (track, tid, start)) in open_tx {
            events.push(
                json!({"ph": "X", "name": format!("transaction {id}"), "cat": "open",
                "pid": track, "tid": tid, "ts": start,
                "dur": (last_us - start).max(1.0), "args": {"line": "still open at the end"}}),
            );
        }
        devices.finish(last_us, &mut events);
        json!({
            "traceEvents": events,
            "displayTimeUnit": "ms",
            "otherData": {
                "generator": concat!("xenstore-snoop ", env!("CARGO_PKG_VERSION")),
                "start": clock.wall(t0).to_rfc3339(),
                "records": self.records.len(),
                "records_not_drawn": self.dropped,
            },
        })
    }
}

/// Where a mark is: track (Chrome pid), lane (tid), time (µs).
type Spot = (u32, u64, f64);

/// A transaction's span, on the lane of `at`: from its start's reply to
/// its end.
fn transaction(
    r: &Record,
    at: Spot,
    open: &mut HashMap<(u32, u32), Spot>,
    events: &mut Vec<Value>,
) {
    use xenstore_proto::wire::MsgType;
    let op = r.op.map(u32::from);
    if op == Some(MsgType::TransactionStart as u32) && r.error.is_none() {
        if let Some(id) = r.result.as_deref().and_then(|v| v.parse().ok()) {
            open.insert((r.conn, id), at);
        }
    } else if op == Some(MsgType::TransactionEnd as u32) {
        let Some((track, tid, start)) = r.tx.and_then(|id| open.remove(&(r.conn, id))) else {
            return;
        };
        let outcome = match (&r.error, r.value.as_str()) {
            (Some(e), _) => e.clone(),
            (None, "F") => "aborted".into(),
            (None, _) => "committed".into(),
        };
        events.push(
            json!({"ph": "X", "name": format!("transaction {}", r.tx.unwrap_or(0)),
            "cat": if r.error.is_some() { "error" } else { "transaction" },
            "pid": track, "tid": tid, "ts": start,
            "dur": (at.2 - start).max(1.0), "args": {"line": outcome}}),
        );
    }
}

/// Writes `--timeline` and `--timeline-json`, as asked.
pub fn write_files(
    args: &crate::cli::Args,
    timeline: &Timeline,
    clock: &Clock,
) -> anyhow::Result<()> {
    use anyhow::Context;
    let trace = timeline.trace_events(clock);
    let files = [
        (&args.timeline, "--timeline", html::page(&trace)),
        (&args.timeline_json, "--timeline-json", trace.to_string()),
    ];
    for (path, flag, text) in files {
        let Some(path) = path else { continue };
        std::fs::write(path, text)
            .with_context(|| format!("{flag}: writing {}", path.display()))?;
        eprintln!(
            "xenstore-snoop: {flag}: {} records drawn in {}{}",
            timeline.records.len(),
            path.display(),
            match timeline.dropped {
                0 => String::new(),
                n => format!(" ({n} more past {RECORDS_MAX} not drawn)"),
            }
        );
    }
    Ok(())
}

fn meta(what: &str, pid: u32, tid: u64, name: &str) -> Value {
    json!({"ph": "M", "name": what, "pid": pid, "tid": tid, "args": {"name": name}})
}

/// Each device half's XenbusState over time: a span from each write of
/// its `state` node to the next.
struct Devices {
    frontend: Regex,
    backend: Regex,
    /// Lane name -> (lane id, current state and since when).
    lanes: HashMap<String, (u32, Option<(u8, f64)>)>,
}

impl Devices {
    fn new() -> Devices {
        Devices {
            frontend: Regex::new(r"^/local/domain/(\d+)/device/([^/]+)/([^/]+)/state$")
                .expect("a valid regex"),
            backend: Regex::new(r"^/local/domain/(\d+)/backend/([^/]+)/(\d+)/([^/]+)/state$")
                .expect("a valid regex"),
            lanes: HashMap::new(),
        }
    }

    /// Which device half `path` (absolute) is the state of, if any.
    fn lane(&self, path: &str) -> Option<String> {
        if let Some(c) = self.frontend.captures(path) {
            return Some(format!("dom{} {} {} frontend", &c[1], &c[2], &c[3]));
        }
        let c = self.backend.captures(path)?;
        Some(format!(
            "dom{} {} {} backend (dom{})",
            &c[3], &c[2], &c[4], &c[1]
        ))
    }

    fn write(&mut self, r: &Record, ts: f64, events: &mut Vec<Value>) {
        if r.op != Some(xenstore_proto::wire::MsgType::Write as u16) || r.error.is_some() {
            return;
        }
        let absolute = crate::paths::absolute(r.dom, &r.path);
        let Some(name) = self.lane(&absolute) else {
            return;
        };
        let Some(state) = r.value.trim().parse::<u8>().ok().filter(|&s| s <= 8) else {
            return;
        };
        let next = self.lanes.len() as u32 + 1;
        let (lane, current) = self.lanes.entry(name.clone()).or_insert_with(|| {
            events.push(meta("thread_name", DEVICES, next.into(), &name));
            (next, None)
        });
        if let Some((was, since)) = current.replace((state, ts)) {
            events.push(state_span(*lane, was, since, ts));
        }
    }

    /// Every device's last state, drawn to the end.
    fn finish(self, last_us: f64, events: &mut Vec<Value>) {
        if self.lanes.is_empty() {
            return;
        }
        events.push(meta("process_name", DEVICES, 0, "devices (XenbusState)"));
        events.push(
            json!({"ph": "M", "name": "process_sort_index", "pid": DEVICES,
                           "args": {"sort_index": 0}}),
        );
        let mut lanes: Vec<_> = self.lanes.into_values().collect();
        lanes.sort_by_key(|l| l.0);
        for (lane, current) in lanes {
            if let Some((state, since)) = current {
                events.push(state_span(lane, state, since, last_us.max(since + 1.0)));
            }
        }
    }
}

fn state_span(lane: u32, state: u8, from: f64, to: f64) -> Value {
    let name = XENBUS_STATES[state as usize];
    json!({"ph": "X", "name": format!("{state} {name}"), "cat": "xenbus",
           "pid": DEVICES, "tid": lane, "ts": from, "dur": (to - from).max(1.0),
           "args": {"state": state, "line": format!("XenbusState {state} ({name})")}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Probe;
    use crate::pairing::tests::ev;
    use crate::pairing::Pairing;
    use xenstore_proto::wire::MsgType;

    /// A toolstack (dom0 pid 100) writing the backend's state, a guest
    /// (dom 6) its frontend's, a watch event firing from one to the other.
    fn boot() -> Timeline {
        let mut p = Pairing::new();
        let mut t = Timeline::new();
        let mut op = |serial: u64, dom: u16, conn: u32, op: MsgType, path: &str, value: &str| {
            let mut req = ev(Probe::Request, serial, op as u16, path, value);
            (req.dom, req.conn, req.mono_ns) = (dom, conn, serial * 1_000_000);
            p.push(req);
            let mut resp = ev(Probe::Response, serial, op as u16, "OK", "");
            (resp.dom, resp.conn, resp.mono_ns) = (dom, conn, serial * 1_000_000 + 5000);
            if dom != 0 {
                resp.pid = 0;
            }
            p.push(resp).unwrap()
        };
        t.add(&op(
            1,
            0,
            3,
            MsgType::Write,
            "/local/domain/0/backend/vbd/6/51712/state",
            "2",
        ));
        t.add(&op(2, 6, 9, MsgType::Write, "device/vbd/51712/state", "3"));
        let mut w = ev(
            Probe::WatchEvent,
            2,
            15,
            "/local/domain/6/device/vbd/51712/state",
            "tok",
        );
        (w.conn, w.mono_ns) = (3, 2_000_010);
        let w = Pairing::new().push(w).unwrap();
        t.add(&w);
        t.add(&op(
            3,
            0,
            3,
            MsgType::Write,
            "/local/domain/0/backend/vbd/6/51712/state",
            "4",
        ));
        t.add(&op(4, 6, 9, MsgType::Write, "device/vbd/51712/state", "4"));
        t
    }

    #[test]
    fn tracks_device_states_and_paired_flows() {
        let clock = Clock {
            offset_ns: 0,
            start_mono_ns: 0,
        };
        let v = boot().trace_events(&clock);
        let events = v["traceEvents"].as_array().unwrap();
        let named = |what: &str| -> Vec<String> {
            events
                .iter()
                .filter(|e| e["ph"] == "M" && e["name"] == what)
                .map(|e| e["args"]["name"].as_str().unwrap().to_string())
                .collect()
        };
        let mut tracks = named("process_name");
        tracks.sort();
        assert_eq!(tracks, ["devices (XenbusState)", "dom0 - [100]", "dom6"]);
        let lanes = named("thread_name");
        assert!(
            lanes.contains(&"dom6 vbd 51712 frontend".to_string()),
            "{lanes:?}"
        );
        assert!(lanes.contains(&"dom6 vbd 51712 backend (dom0)".to_string()));
        let mut states: Vec<&str> = events
            .iter()
            .filter(|e| e["cat"] == "xenbus")
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        states.sort();
        assert_eq!(
            states,
            ["2 InitWait", "3 Initialised", "4 Connected", "4 Connected"]
        );
        // The guest's write fired the toolstack's watch, which woke its next write.
        let flows: Vec<&Value> = events
            .iter()
            .filter(|e| e["cat"] == "watch" && e["ph"] != "X")
            .collect();
        assert_eq!(flows.len(), 4, "{flows:?}");
        for id in [1, 2] {
            let ends: Vec<&str> = flows
                .iter()
                .filter(|e| e["id"] == id)
                .map(|e| e["ph"].as_str().unwrap())
                .collect();
            assert_eq!(ends, ["s", "f"]);
        }
        assert_eq!(flows[0]["ts"], 1000.0);
        assert_eq!(flows[3]["ts"], 2000.0);
    }
}
