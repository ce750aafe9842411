//! `--summary`: counts, errors and latency percentiles per op and per
//! domain, the busiest paths, and watch fan-out, as comfy-table tables.

use crate::record::{Kind, Record};
use comfy_table::{
    presets::{ASCII_FULL_CONDENSED, UTF8_FULL_CONDENSED},
    Table,
};
use std::borrow::Cow;
use std::collections::HashMap;
use xenstore_proto::quantile::nearest_rank;

/// Memory stays bounded however long a summary runs: latencies beyond
/// this many per row are a uniform sample (reservoir), exact below it.
const LATENCY_SAMPLES: usize = 10_000;
/// Distinct paths counted one by one; requests on later new paths are
/// counted together.
const PATHS_MAX: usize = 10_000;
/// Firing requests kept for the fan-out table; past twice this, only the
/// ones that fired most are kept.
const FIRERS_MAX: usize = 10_000;

#[derive(Default)]
struct Stats {
    count: u64,
    /// `count` at the last interval's tables.
    count_before: u64,
    errors: u64,
    /// Latencies seen with one: every one up to LATENCY_SAMPLES, then a
    /// uniform sample of that size.
    timed: u64,
    latencies_ns: Vec<u64>,
}

impl Stats {
    fn add(&mut self, r: &Record) {
        self.count += 1;
        self.errors += r.error.is_some() as u64;
        if let Some(ns) = r.latency_ns {
            self.timed += 1;
            if self.latencies_ns.len() < LATENCY_SAMPLES {
                self.latencies_ns.push(ns);
            } else {
                // Algorithm R: the i-th value replaces a kept one with
                // probability LATENCY_SAMPLES / i.
                let j = (splitmix(self.timed ^ ns) % self.timed) as usize;
                if j < LATENCY_SAMPLES {
                    self.latencies_ns[j] = ns;
                }
            }
        }
    }

    /// Requests per second since the last interval's tables; starts the next.
    fn rate(&mut self, secs: f64) -> String {
        let n = self.count - std::mem::replace(&mut self.count_before, self.count);
        format!("{:.1}", n as f64 / secs)
    }

    fn percentile_us(&mut self, p: f64) -> String {
        nearest_rank(&mut self.latencies_ns, p)
            .map_or("-".into(), |ns| format!("{:.1}", ns as f64 / 1e3))
    }
}

/// A cheap, well-mixed hash (SplitMix64's finaliser) for the reservoir.
pub(crate) fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[derive(Default)]
pub struct Summary {
    /// By op name: borrowed from the wire table, no allocation per record.
    ops: HashMap<Cow<'static, str>, Stats>,
    domains: HashMap<u16, Stats>,
    paths: HashMap<String, u64>,
    /// Requests on new paths once PATHS_MAX were counted.
    other_paths: u64,
    /// Firing request serial -> watch events it fired.
    fanout: HashMap<u64, u64>,
    /// Firing request serial -> its op and path, once its record is seen.
    firers: HashMap<u64, String>,
    watch_events: u64,
    /// Box-drawing tables (see `box_drawing_for_stdout`); plain ASCII if not.
    box_drawing: bool,
}

/// Whether tables may use box-drawing characters: only on a terminal whose
/// locale (the first set of LC_ALL, LC_CTYPE, LANG) is UTF-8.
pub fn box_drawing(is_terminal: bool, env: impl Fn(&str) -> Option<String>) -> bool {
    if !is_terminal {
        return false;
    }
    let locale = ["LC_ALL", "LC_CTYPE", "LANG"]
        .into_iter()
        .filter_map(env)
        .find(|v| !v.is_empty())
        .unwrap_or_default();
    // language_TERRITORY.CODESET@modifier
    let codeset = locale
        .split_once('.')
        .map_or("", |(_, c)| c.split('@').next().unwrap_or(""));
    matches!(
        codeset.to_ascii_lowercase().replace('-', "").as_str(),
        "utf8"
    )
}

/// `box_drawing` for this process's standard output and environment.
pub fn box_drawing_for_stdout() -> bool {
    use std::io::IsTerminal;
    box_drawing(std::io::stdout().is_terminal(), |k| std::env::var(k).ok())
}

impl Summary {
    pub fn new(box_drawing: bool) -> Summary {
        Summary {
            box_drawing,
            ..Summary::default()
        }
    }

    pub fn add(&mut self, r: &Record) {
        match r.kind {
            Kind::Op => {
                self.ops.entry(r.op_name()).or_default().add(r);
                self.domains.entry(r.dom).or_default().add(r);
                // Busy paths repeat: copy a path only the first time.
                let full = self.paths.len() >= PATHS_MAX;
                match self.paths.get_mut(&r.path) {
                    Some(n) => *n += 1,
                    None if full => self.other_paths += 1,
                    None => {
                        self.paths.insert(r.path.clone(), 1);
                    }
                }
                if self.fanout.contains_key(&r.serial) {
                    self.firers
                        .insert(r.serial, format!("{} {}", r.op_name(), r.path));
                }
            }
            Kind::WatchEvent => {
                self.watch_events += 1;
                *self.fanout.entry(r.serial).or_default() += 1;
                if self.fanout.len() > 2 * FIRERS_MAX {
                    self.keep_top_firers();
                }
            }
            _ => {}
        }
    }

    /// Keeps the FIRERS_MAX requests that fired most (amortised: runs once
    /// per FIRERS_MAX new firing requests).
    fn keep_top_firers(&mut self) {
        let mut firing: Vec<(u64, u64)> = self.fanout.drain().collect();
        firing.select_nth_unstable_by(FIRERS_MAX, |a, b| b.1.cmp(&a.1));
        firing.truncate(FIRERS_MAX);
        self.fanout.extend(firing);
        let fanout = &self.fanout;
        self.firers.retain(|serial, _| fanout.contains_key(serial));
    }

    /// The tables, as text: running totals.
    pub fn render(&mut self, top: usize) -> String {
        self.render_tables(top, None)
    }

    /// The tables of one `--interval`: a line with the interval's request
    /// count and rate, and a RATE(/s) column (requests per second over the
    /// last `secs`) beside the running totals of each op and domain.
    pub fn render_interval(&mut self, top: usize, secs: f64) -> String {
        let total: u64 = self.ops.values().map(|s| s.count).sum();
        let n = self.requests_in_interval();
        let head = format!(
            "last {} s: {n} requests, {:.1}/s; {total} in all\n",
            (secs * 1e3).round() / 1e3,
            n as f64 / secs
        );
        head + &self.render_tables(top, Some(secs))
    }

    /// Requests added since the last interval's tables.
    pub fn requests_in_interval(&self) -> u64 {
        self.ops.values().map(|s| s.count - s.count_before).sum()
    }

    fn render_tables(&mut self, top: usize, rate_secs: Option<f64>) -> String {
        let mut out = String::new();
        let stats_header = |first: &'static str| {
            let mut h = vec![first, "COUNT"];
            if rate_secs.is_some() {
                h.push("RATE(/s)");
            }
            h.extend(["ERRORS", "P50(us)", "P99(us)"]);
            h
        };
        let stats_row = |first: String, s: &mut Stats| {
            let mut row = vec![first, s.count.to_string()];
            if let Some(secs) = rate_secs {
                row.push(s.rate(secs));
            }
            let (p50, p99) = (s.percentile_us(0.5), s.percentile_us(0.99));
            row.extend([s.errors.to_string(), p50, p99]);
            row
        };
        let mut ops = self.table(&stats_header("OP"));
        let mut names: Vec<_> = self.ops.keys().cloned().collect();
        names.sort_by_key(|n| std::cmp::Reverse(self.ops[n].count));
        for n in names {
            let s = self.ops.get_mut(&n).unwrap();
            ops.add_row(stats_row(n.into_owned(), s));
        }
        out += &format!("{ops}\n");

        let mut doms = self.table(&stats_header("DOM"));
        let mut ids: Vec<_> = self.domains.keys().copied().collect();
        ids.sort_unstable();
        for d in ids {
            let s = self.domains.get_mut(&d).unwrap();
            doms.add_row(stats_row(d.to_string(), s));
        }
        out += &format!("{doms}\n");

        let mut paths = self.table(&["PATH", "COUNT"]);
        let mut busiest: Vec<_> = self.paths.iter().collect();
        busiest.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (p, n) in busiest.into_iter().take(top) {
            paths.add_row(vec![crate::output::escape(p).into_owned(), n.to_string()]);
        }
        out += &format!("{paths}\n");
        if self.other_paths > 0 {
            out += &format!(
                "{} requests on paths past the first {PATHS_MAX} distinct ones, not listed\n",
                self.other_paths
            );
        }

        let mut fan = self.table(&["FIRED BY", "WATCH EVENTS"]);
        let mut firing: Vec<_> = self.fanout.iter().collect();
        firing.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (serial, n) in firing.into_iter().take(top) {
            let who = self
                .firers
                .get(serial)
                .map_or(format!("serial {serial}"), |s| {
                    crate::output::escape(s).into_owned()
                });
            fan.add_row(vec![who, n.to_string()]);
        }
        out += &format!("watch events: {}\n", self.watch_events);
        if !self.fanout.is_empty() {
            out += &format!("{fan}\n");
        }
        out
    }

    fn table(&self, header: &[&str]) -> Table {
        let mut t = Table::new();
        t.load_preset(if self.box_drawing {
            UTF8_FULL_CONDENSED
        } else {
            ASCII_FULL_CONDENSED
        })
        .set_header(header.to_vec());
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Probe;
    use crate::pairing::tests::{ev, response_extra};
    use crate::pairing::Pairing;

    #[test]
    fn counts_errors_percentiles_and_fanout() {
        let mut p = Pairing::new();
        let mut s = Summary::default();
        for serial in 1..=100u64 {
            p.push(ev(Probe::Request, serial, 2, "/a", ""));
            let mut resp = ev(Probe::Response, serial, 2, "x", "");
            resp.mono_ns = serial * 1000 + serial * 1000; // latency = serial µs
            if serial % 10 == 0 {
                resp.extra = response_extra(2, 0);
            }
            s.add(&p.push(resp).unwrap());
        }
        for _ in 0..3 {
            s.add(&p.push(ev(Probe::WatchEvent, 200, 15, "/w", "t")).unwrap());
        }
        p.push(ev(Probe::Request, 200, 11, "/w", "v"));
        s.add(&p.push(ev(Probe::Response, 200, 11, "OK", "")).unwrap());
        let text = s.render(5);
        let row = text.lines().find(|l| l.contains("XS_READ")).unwrap();
        let cells: Vec<&str> = row
            .split('|')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(cells, ["XS_READ", "100", "10", "50.0", "99.0"]);
        assert!(text.contains("watch events: 3"), "{text}");
        let fan = text.lines().find(|l| l.contains("XS_WRITE /w")).unwrap();
        assert!(fan.contains(" 3 "), "{fan}");
    }

    /// However many requests, paths and firing requests: bounded tables,
    /// and percentiles still near the truth.
    #[test]
    fn memory_stays_bounded() {
        let mut p = Pairing::new();
        let mut s = Summary::default();
        let n = 3 * LATENCY_SAMPLES.max(PATHS_MAX).max(FIRERS_MAX) as u64;
        for serial in 1..=n {
            p.push(ev(Probe::Request, serial, 2, &format!("/p/{serial}"), ""));
            let mut resp = ev(Probe::Response, serial, 2, "x", "");
            // latency = (serial mod 1000) µs: p50 about 500, p99 about 990
            resp.mono_ns = serial * 1000 + (serial % 1000) * 1000;
            s.add(&p.push(resp).unwrap());
            s.add(
                &p.push(ev(Probe::WatchEvent, serial, 15, "/w", "t"))
                    .unwrap(),
            );
        }
        let read = &s.ops[&Cow::Borrowed("XS_READ")];
        assert_eq!(read.count, n);
        assert_eq!(read.latencies_ns.len(), LATENCY_SAMPLES);
        assert_eq!(s.paths.len(), PATHS_MAX);
        assert_eq!(s.other_paths, n - PATHS_MAX as u64);
        assert!((FIRERS_MAX..=2 * FIRERS_MAX).contains(&s.fanout.len()));
        assert!(s.firers.len() <= s.fanout.len());
        let stats = s.ops.get_mut(&Cow::Borrowed("XS_READ")).unwrap();
        let p50: f64 = stats.percentile_us(0.5).parse().unwrap();
        let p99: f64 = stats.percentile_us(0.99).parse().unwrap();
        assert!((480.0..520.0).contains(&p50), "p50 {p50}");
        assert!((980.0..=999.0).contains(&p99), "p99 {p99}");
        assert!(s.render(5).contains("not listed"));
    }

    fn cells(line: &str) -> Vec<String> {
        line.split(['|', '│', '┆'])
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect()
    }

    fn row(text: &str, first: &str) -> Vec<String> {
        text.lines()
            .map(cells)
            .find(|c| c.first().map(String::as_str) == Some(first))
            .unwrap_or_else(|| panic!("no row {first}:\n{text}"))
    }

    #[test]
    fn box_drawing_only_on_a_utf8_terminal() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(name, _)| *name == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert!(box_drawing(true, env(&[("LANG", "C.UTF-8")])));
        assert!(box_drawing(true, env(&[("LANG", "en_GB.utf8")])));
        assert!(box_drawing(true, env(&[("LC_CTYPE", "de_DE.UTF-8@euro")])));
        // a pipe or a file: never
        assert!(!box_drawing(false, env(&[("LANG", "C.UTF-8")])));
        // no locale, C, POSIX, Latin-1
        assert!(!box_drawing(true, env(&[])));
        assert!(!box_drawing(true, env(&[("LANG", "C")])));
        assert!(!box_drawing(true, env(&[("LANG", "POSIX")])));
        assert!(!box_drawing(true, env(&[("LANG", "de_DE.ISO-8859-1")])));
        // LC_ALL over LC_CTYPE over LANG; empty ones do not count
        assert!(!box_drawing(
            true,
            env(&[
                ("LC_ALL", "C"),
                ("LC_CTYPE", "C.UTF-8"),
                ("LANG", "C.UTF-8")
            ])
        ));
        assert!(box_drawing(
            true,
            env(&[("LC_ALL", ""), ("LC_CTYPE", "C.UTF-8"), ("LANG", "C")])
        ));
        assert!(!box_drawing(
            true,
            env(&[("LC_CTYPE", "C"), ("LANG", "C.UTF-8")])
        ));
    }

    #[test]
    fn ascii_or_box_drawing_tables() {
        let mut p = Pairing::new();
        p.push(ev(Probe::Request, 1, 2, "/a", ""));
        let r = p.push(ev(Probe::Response, 1, 2, "x", "")).unwrap();
        for boxes in [false, true] {
            let mut s = Summary::new(boxes);
            s.add(&r);
            let text = s.render(5);
            assert_eq!(text.is_ascii(), !boxes, "{text}");
            assert!(text.contains('│') == boxes, "{text}");
            assert_eq!(row(&text, "XS_READ")[1], "1");
        }
    }

    #[test]
    fn intervals_show_rates_beside_totals() {
        let mut p = Pairing::new();
        let mut s = Summary::default();
        let mut serial = 0;
        let mut add = |s: &mut Summary, op: u16, dom: u16, n: usize| {
            for _ in 0..n {
                serial += 1;
                let mut req = ev(Probe::Request, serial, op, "/a", "");
                req.dom = dom;
                p.push(req);
                s.add(&p.push(ev(Probe::Response, serial, op, "x", "")).unwrap());
            }
        };
        add(&mut s, 2, 0, 10);
        add(&mut s, 11, 6, 4);
        let first = s.render_interval(5, 2.0);
        assert!(
            first.starts_with("last 2 s: 14 requests, 7.0/s; 14 in all\n"),
            "{first}"
        );
        assert_eq!(
            row(&first, "OP"),
            ["OP", "COUNT", "RATE(/s)", "ERRORS", "P50(us)", "P99(us)"]
        );
        assert_eq!(row(&first, "XS_READ")[1..3], ["10", "5.0"]);
        assert_eq!(row(&first, "XS_WRITE")[1..3], ["4", "2.0"]);
        assert_eq!(row(&first, "6")[1..3], ["4", "2.0"]);
        // The next interval's rates count only its own requests.
        add(&mut s, 2, 0, 3);
        let second = s.render_interval(5, 0.5);
        assert!(
            second.starts_with("last 0.5 s: 3 requests, 6.0/s; 17 in all\n"),
            "{second}"
        );
        assert_eq!(row(&second, "XS_READ")[1..3], ["13", "6.0"]);
        assert_eq!(row(&second, "XS_WRITE")[1..3], ["4", "0.0"]);
        assert_eq!(row(&second, "0")[1..3], ["13", "6.0"]);
        // The final tables: totals, no rate column.
        let last = s.render(5);
        assert_eq!(
            row(&last, "OP"),
            ["OP", "COUNT", "ERRORS", "P50(us)", "P99(us)"]
        );
        assert_eq!(row(&last, "XS_READ")[1], "13");
    }
}
