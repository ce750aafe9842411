//! `--summary`: counts, errors and latency percentiles per op and per
//! domain, the busiest paths, and watch fan-out, as comfy-table tables.

use crate::pairing::{Kind, Record};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use std::borrow::Cow;
use std::collections::HashMap;

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
    errors: u64,
    /// Latencies seen with one: every one up to LATENCY_SAMPLES, then a
    /// uniform sample of that size.
    timed: u64,
    latencies_ns: Vec<u64>,
    sorted: bool,
}

impl Stats {
    fn add(&mut self, r: &Record) {
        self.count += 1;
        self.errors += r.error.is_some() as u64;
        if let Some(ns) = r.latency_ns {
            self.timed += 1;
            self.sorted = false;
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

    fn percentile_us(&mut self, p: f64) -> String {
        if self.latencies_ns.is_empty() {
            return "-".into();
        }
        if !self.sorted {
            self.latencies_ns.sort_unstable();
            self.sorted = true;
        }
        let v = &self.latencies_ns;
        let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
        format!("{:.1}", v[i] as f64 / 1e3)
    }
}

/// A cheap, well-mixed hash (SplitMix64's finaliser) for the reservoir.
fn splitmix(x: u64) -> u64 {
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
}

impl Summary {
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

    /// The tables, as text.
    pub fn render(&mut self, top: usize) -> String {
        let mut out = String::new();
        let mut ops = table(&["OP", "COUNT", "ERRORS", "P50(us)", "P99(us)"]);
        let mut names: Vec<_> = self.ops.keys().cloned().collect();
        names.sort_by_key(|n| std::cmp::Reverse(self.ops[n].count));
        for n in names {
            let s = self.ops.get_mut(&n).unwrap();
            let (p50, p99) = (s.percentile_us(0.5), s.percentile_us(0.99));
            ops.add_row(vec![
                n.into_owned(),
                s.count.to_string(),
                s.errors.to_string(),
                p50,
                p99,
            ]);
        }
        out += &format!("{ops}\n");

        let mut doms = table(&["DOM", "COUNT", "ERRORS", "P50(us)", "P99(us)"]);
        let mut ids: Vec<_> = self.domains.keys().copied().collect();
        ids.sort_unstable();
        for d in ids {
            let s = self.domains.get_mut(&d).unwrap();
            let (p50, p99) = (s.percentile_us(0.5), s.percentile_us(0.99));
            doms.add_row(vec![
                d.to_string(),
                s.count.to_string(),
                s.errors.to_string(),
                p50,
                p99,
            ]);
        }
        out += &format!("{doms}\n");

        let mut paths = table(&["PATH", "COUNT"]);
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

        let mut fan = table(&["FIRED BY", "WATCH EVENTS"]);
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
}

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_header(header.to_vec());
    t
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
            .split(['│', '\u{2506}'])
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
}
