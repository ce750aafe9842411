//! `--top`: who is busy right now. Records are counted per client (a
//! guest domain, or a dom0 process) over one refresh window; each refresh
//! turns the window into a [`Frame`] of rates, which a terminal screen
//! (tui.rs) or plain text (for pipes and scripts) shows.

pub mod tui;

use crate::record::{Kind, Record};
use std::collections::HashMap;
use std::fmt::Write as _;
use xenstore_proto::quantile::nearest_rank;

/// Latencies kept per client and window for the p99: enough for a
/// percentile, bounded however busy a window is.
const LATENCY_SAMPLES: usize = 4096;
/// Distinct paths counted per window; later new paths are not ranked.
const PATHS_MAX: usize = 4096;
/// Clients remembered (their totals); a host has far fewer.
const CLIENTS_MAX: usize = 4096;
/// Refreshes a client stays listed after its last request or event
/// (dom0's short-lived clients, one process per xenstore-read, come and go).
const IDLE_REFRESHES_KEPT: u32 = 10;
/// Hottest paths shown.
pub const PATHS_SHOWN: usize = 10;

/// A row: a guest by domain, a dom0 client by process.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Client {
    Guest(u16),
    Dom0 { pid: u32 },
}

#[derive(Default)]
struct Counts {
    requests: u64,
    errors: u64,
    watch_events: u64,
    transactions: u64,
    eagains: u64,
    /// Requests with a latency, and a sample of those latencies.
    timed: u64,
    latencies_ns: Vec<u64>,
}

#[derive(Default)]
struct ClientState {
    name: Option<std::rc::Rc<str>>,
    window: Counts,
    /// Refreshes in a row without a request or event.
    idle: u32,
    total_requests: u64,
    total_eagains: u64,
}

/// The running counts.
#[derive(Default)]
pub struct Top {
    clients: HashMap<Client, ClientState>,
    paths: HashMap<String, u64>,
}

/// One client's line of a frame.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub client: Client,
    pub name: String,
    pub requests_per_s: f64,
    pub errors_per_s: f64,
    pub watch_events_per_s: f64,
    pub transactions_per_s: f64,
    /// EAGAINs since the start (a conflict is rare and worth keeping in view).
    pub eagains: u64,
    pub requests: u64,
    pub p99_us: Option<f64>,
    /// The most used of the domain's quotas, "name N%", when the daemon said.
    pub quota: Option<String>,
}

impl Row {
    pub fn dom(&self) -> u16 {
        match self.client {
            Client::Guest(d) => d,
            Client::Dom0 { .. } => 0,
        }
    }

    pub fn pid(&self) -> u32 {
        match self.client {
            Client::Guest(_) => 0,
            Client::Dom0 { pid } => pid,
        }
    }
}

/// One refresh: the window's rates.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Frame {
    /// The window's length, s.
    pub secs: f64,
    pub rows: Vec<Row>,
    /// The window's busiest paths, requests per second.
    pub paths: Vec<(String, f64)>,
}

/// What a frame is sorted by (a key each on the screen).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortBy {
    #[default]
    Requests,
    Errors,
    WatchEvents,
    Latency,
    Name,
}

impl SortBy {
    pub const KEYS: [(char, SortBy, &'static str); 5] = [
        ('r', SortBy::Requests, "REQ/s"),
        ('e', SortBy::Errors, "ERR/s"),
        ('w', SortBy::WatchEvents, "WATCH/s"),
        ('l', SortBy::Latency, "P99(us)"),
        ('n', SortBy::Name, "NAME"),
    ];

    pub fn column(self) -> &'static str {
        Self::KEYS.iter().find(|k| k.1 == self).map_or("", |k| k.2)
    }
}

/// How the rows are shown: the screen's keys change it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ViewState {
    pub sort: SortBy,
    /// Only this domain's rows.
    pub domain: Option<u16>,
}

impl Top {
    pub fn new() -> Top {
        Top::default()
    }

    /// Counts one record (already through the filters).
    pub fn add(&mut self, r: &Record) {
        let client = if r.dom == 0 {
            Client::Dom0 { pid: r.pid }
        } else {
            Client::Guest(r.dom)
        };
        if !self.clients.contains_key(&client) && self.clients.len() >= CLIENTS_MAX {
            self.forget_idle();
        }
        let state = self.clients.entry(client).or_default();
        if r.comm.is_some() {
            state.name.clone_from(&r.comm);
        }
        let w = &mut state.window;
        match r.kind {
            Kind::Op => {
                w.requests += 1;
                state.total_requests += 1;
                w.errors += r.error.is_some() as u64;
                if r.op == Some(xenstore_proto::wire::MsgType::TransactionStart as u16) {
                    w.transactions += 1;
                }
                if r.error.as_deref() == Some("EAGAIN") {
                    w.eagains += 1;
                    state.total_eagains += 1;
                }
                if let Some(ns) = r.latency_ns {
                    w.timed += 1;
                    if w.latencies_ns.len() < LATENCY_SAMPLES {
                        w.latencies_ns.push(ns);
                    } else {
                        // A uniform sample past the cap (reservoir, as summary.rs).
                        let j = crate::summary::splitmix(w.timed ^ ns) % w.timed;
                        if let Some(kept) = w.latencies_ns.get_mut(j as usize) {
                            *kept = ns;
                        }
                    }
                }
                if let Some(path) = crate::paths::node_path(r) {
                    if let Some(n) = self.paths.get_mut(path.as_ref()) {
                        *n += 1;
                    } else if self.paths.len() < PATHS_MAX {
                        self.paths.insert(path.into_owned(), 1);
                    }
                }
            }
            Kind::WatchEvent => w.watch_events += 1,
            _ => {}
        }
    }

    /// Drops clients quiet in this window, to stay within CLIENTS_MAX.
    fn forget_idle(&mut self) {
        self.clients
            .retain(|_, s| s.window.requests + s.window.watch_events > 0);
    }

    /// Ends a window of `secs` seconds: its frame; the next one starts empty.
    pub fn roll(&mut self, secs: f64) -> Frame {
        let secs = secs.max(1e-3);
        let rows = self
            .clients
            .iter_mut()
            .map(|(client, s)| {
                let mut w = std::mem::take(&mut s.window);
                s.idle = match w.requests + w.watch_events {
                    0 => s.idle + 1,
                    _ => 0,
                };
                Row {
                    client: client.clone(),
                    name: s.name.as_deref().unwrap_or("-").to_string(),
                    requests_per_s: w.requests as f64 / secs,
                    errors_per_s: w.errors as f64 / secs,
                    watch_events_per_s: w.watch_events as f64 / secs,
                    transactions_per_s: w.transactions as f64 / secs,
                    eagains: s.total_eagains,
                    requests: s.total_requests,
                    p99_us: nearest_rank(&mut w.latencies_ns, 0.99).map(|ns| ns as f64 / 1e3),
                    quota: None,
                }
            })
            .collect();
        self.clients.retain(|_, s| s.idle < IDLE_REFRESHES_KEPT);
        let mut paths: Vec<(String, f64)> = self
            .paths
            .drain()
            .map(|(p, n)| (p, n as f64 / secs))
            .collect();
        paths.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        paths.truncate(PATHS_SHOWN);
        Frame { secs, rows, paths }
    }
}

impl Frame {
    /// The rows the view shows, in its order.
    pub fn rows(&self, view: &ViewState) -> Vec<&Row> {
        let mut rows: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| view.domain.is_none_or(|d| r.dom() == d))
            .collect();
        let key = |r: &Row| match view.sort {
            SortBy::Requests => r.requests_per_s,
            SortBy::Errors => r.errors_per_s,
            SortBy::WatchEvents => r.watch_events_per_s,
            SortBy::Latency => r.p99_us.unwrap_or(-1.0),
            SortBy::Name => 0.0,
        };
        rows.sort_by(|a, b| {
            let by_name = a.name.cmp(&b.name).then_with(|| a.client.cmp(&b.client));
            match view.sort {
                SortBy::Name => by_name,
                _ => key(b).total_cmp(&key(a)).then(by_name),
            }
        });
        rows
    }

    /// The column heads, in the order `cells` gives them.
    pub const HEADS: [&'static str; 11] = [
        "DOM", "PID", "NAME", "REQ/s", "ERR/s", "WATCH/s", "TX/s", "EAGAIN", "P99(us)", "REQS",
        "QUOTA",
    ];

    /// A row's cells, as text.
    pub fn cells(r: &Row) -> [String; 11] {
        [
            r.dom().to_string(),
            r.pid().to_string(),
            crate::output::escape(&r.name).into_owned(),
            format!("{:.1}", r.requests_per_s),
            format!("{:.1}", r.errors_per_s),
            format!("{:.1}", r.watch_events_per_s),
            format!("{:.1}", r.transactions_per_s),
            r.eagains.to_string(),
            r.p99_us.map_or("-".into(), |us| format!("{us:.1}")),
            r.requests.to_string(),
            r.quota.clone().unwrap_or_else(|| "-".into()),
        ]
    }

    /// The frame as plain text: a heading, the client table, the paths.
    pub fn text(&self, view: &ViewState, heading: &str) -> String {
        let rows = self.rows(view);
        let total = rows.iter().fold(0.0, |sum, r| sum + r.requests_per_s);
        let mut out = format!(
            "{heading}: {total:.1} requests/s over {:.1} s, {} clients, sorted by {}{}\n",
            self.secs,
            rows.len(),
            view.sort.column(),
            view.domain
                .map_or(String::new(), |d| format!(", domain {d} only"))
        );
        let cells: Vec<[String; 11]> = rows.iter().map(|r| Frame::cells(r)).collect();
        let widths: Vec<usize> = (0..11)
            .map(|i| {
                cells
                    .iter()
                    .map(|c| c[i].chars().count())
                    .chain([Frame::HEADS[i].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |out: &mut String, cols: &[&str]| {
            let mut l = String::new();
            for (i, c) in cols.iter().enumerate() {
                let _ = write!(l, "{c:<w$} ", w = widths[i]);
            }
            out.push_str(l.trim_end());
            out.push('\n');
        };
        line(&mut out, &Frame::HEADS);
        for c in &cells {
            line(&mut out, &c.each_ref().map(String::as_str));
        }
        out.push_str("HOT PATHS (requests/s)\n");
        for (path, rate) in &self.paths {
            let _ = writeln!(out, "{rate:>8.1} {}", crate::output::escape(path));
        }
        out
    }
}

/// `--top` over a capture, live or replayed: counts records, ends a
/// window every refresh (`--interval`, default 1 s) of monotonic time (the
/// live clock, or the trace's), shows it, and handles keys.
pub struct Driver {
    top: Top,
    pub screen: tui::Screen,
    clock: crate::output::Clock,
    every_ns: u64,
    window_start_ns: u64,
    /// Frames to show before stopping (`--count`).
    count: Option<u64>,
    /// The daemon's dom0 socket, for quotas (live only).
    socket: Option<std::path::PathBuf>,
    /// Events the capture lost so far, said in the heading.
    pub lost: u64,
}

/// Whether `--top` goes on.
#[derive(Debug, PartialEq, Eq)]
pub enum Go {
    On,
    /// q, Ctrl-C or a signal.
    Quit,
    /// `--count` frames shown.
    Counted,
}

impl Driver {
    pub fn new(
        args: &crate::cli::Args,
        clock: crate::output::Clock,
        socket: Option<std::path::PathBuf>,
    ) -> anyhow::Result<Driver> {
        Ok(Driver {
            top: Top::new(),
            screen: tui::Screen::open()?,
            clock,
            every_ns: (args.interval.unwrap_or(1.0) * 1e9).max(1e6) as u64,
            window_start_ns: clock.start_mono_ns,
            count: args.count,
            socket,
            lost: 0,
        })
    }

    pub fn add(&mut self, r: &Record) {
        self.top.add(r);
    }

    /// Monotonic time is `now_ns`: shows every window that ended by then.
    /// `pace` (a replay on a terminal) holds each frame a refresh of real
    /// time, so the trace plays at the speed it was recorded.
    pub fn advance(&mut self, now_ns: u64, pace: bool) -> std::io::Result<Go> {
        while now_ns >= self.window_start_ns.saturating_add(self.every_ns) {
            let end = self.window_start_ns + self.every_ns;
            let go = self.refresh(end, pace)?;
            if go != Go::On {
                return Ok(go);
            }
        }
        self.keys(std::time::Duration::ZERO)
    }

    /// Ends the window at `end_ns` and shows it.
    fn refresh(&mut self, end_ns: u64, pace: bool) -> std::io::Result<Go> {
        let secs = end_ns.saturating_sub(self.window_start_ns) as f64 / 1e9;
        self.window_start_ns = end_ns;
        let mut frame = self.top.roll(secs);
        if let Some(socket) = &self.socket {
            fill_quotas(&mut frame.rows, socket);
        }
        let stamp = self.clock.wall(end_ns).with_timezone(&chrono::Local);
        let mut heading = format!("xenstore-snoop --top {}", stamp.format("%H:%M:%S"));
        if self.lost > 0 {
            heading.push_str(&format!(
                " ({} events lost: try a larger --ring-mb)",
                self.lost
            ));
        }
        self.screen.show(frame, heading)?;
        if self.count.is_some_and(|n| self.screen.frames() >= n) {
            return Ok(Go::Counted);
        }
        if pace {
            let go = self.keys(std::time::Duration::from_nanos(self.every_ns))?;
            if go != Go::On {
                return Ok(go);
            }
        }
        // Paused: a replay waits; live, the capture goes on underneath.
        while pace && self.screen.paused() {
            let go = self.keys(std::time::Duration::from_millis(100))?;
            if go != Go::On {
                return Ok(go);
            }
        }
        Ok(Go::On)
    }

    fn keys(&mut self, wait: std::time::Duration) -> std::io::Result<Go> {
        Ok(if self.screen.keys(wait)? {
            Go::Quit
        } else {
            Go::On
        })
    }

    /// A replay ended at `end_ns`: its last, partial window; on a
    /// terminal the view stays until quit.
    pub fn finish(&mut self, end_ns: u64) -> std::io::Result<()> {
        if end_ns > self.window_start_ns && self.refresh(end_ns, false)? != Go::On {
            return Ok(());
        }
        while self.screen.interactive() && !self.screen.keys(std::time::Duration::from_secs(1))? {}
        Ok(())
    }
}

/// The most used quota of each guest in `rows`, asked of the daemon at
/// `socket` ("nodes 12%"); rows it does not answer for keep "-".
pub fn fill_quotas(rows: &mut [Row], socket: &std::path::Path) {
    use crate::metrics::daemon::DaemonSocket;
    let Ok(mut daemon) = DaemonSocket::connect(socket) else {
        return;
    };
    let Ok(limits) = daemon.quota_limits() else {
        return;
    };
    for row in rows.iter_mut() {
        let Client::Guest(dom) = row.client else {
            continue;
        };
        let Ok(Some(used)) = daemon.quota_used(dom.into()) else {
            continue;
        };
        row.quota = used
            .iter()
            .filter_map(|(name, &n)| {
                let limit = *limits.get(name).filter(|&&l| l > 0)?;
                Some((name, n as f64 * 100.0 / limit as f64))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(name, pct)| format!("{name} {pct:.0}%"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Probe;
    use crate::pairing::tests::ev;
    use crate::pairing::Pairing;

    fn record(p: &mut Pairing, serial: u64, dom: u16, pid: u32, op: u16, error: bool) -> Record {
        let mut req = ev(Probe::Request, serial, op, "/a", "");
        req.dom = dom;
        req.pid = pid;
        p.push(req);
        let mut resp = ev(
            Probe::Response,
            serial,
            op,
            if error { "EAGAIN" } else { "OK" },
            "",
        );
        resp.dom = dom;
        resp.pid = pid;
        if error {
            resp.extra = crate::pairing::tests::response_extra(11, 0);
        }
        resp.mono_ns += serial * 1000;
        p.push(resp).unwrap()
    }

    #[test]
    fn rates_per_client_over_the_window() {
        let mut top = Top::new();
        let mut p = Pairing::new();
        for i in 0..20 {
            top.add(&record(&mut p, i + 1, 6, 0, 2, false));
        }
        for i in 0..5 {
            top.add(&record(&mut p, 100 + i, 0, 42, 6, i == 0));
        }
        let frame = top.roll(2.0);
        let view = ViewState::default();
        let rows = frame.rows(&view);
        assert_eq!(rows[0].client, Client::Guest(6));
        assert_eq!(rows[0].requests_per_s, 10.0);
        assert_eq!(rows[1].client, Client::Dom0 { pid: 42 });
        assert_eq!(
            (
                rows[1].requests_per_s,
                rows[1].errors_per_s,
                rows[1].eagains
            ),
            (2.5, 0.5, 1)
        );
        assert_eq!(rows[1].transactions_per_s, 2.5);
        assert!(rows[0].p99_us.is_some());
        // Errors first, then one domain only.
        let by_errors = ViewState {
            sort: SortBy::Errors,
            domain: None,
        };
        assert_eq!(frame.rows(&by_errors)[0].client, Client::Dom0 { pid: 42 });
        let only6 = ViewState {
            domain: Some(6),
            ..view.clone()
        };
        assert_eq!(frame.rows(&only6).len(), 1);
        let text = frame.text(&view, "t");
        assert!(text.contains("DOM PID"), "{text}");
        assert!(text.contains("/a"), "{text}");
        // The next window starts empty; totals carry on.
        let next = top.roll(1.0);
        assert!(next.rows.iter().all(|r| r.requests_per_s == 0.0));
        assert_eq!(next.rows(&view).iter().map(|r| r.requests).sum::<u64>(), 25);
        assert!(next.paths.is_empty());
        // Gone quiet for long enough: no longer listed.
        for _ in 0..IDLE_REFRESHES_KEPT {
            top.roll(1.0);
        }
        assert!(top.roll(1.0).rows.is_empty());
    }
}
