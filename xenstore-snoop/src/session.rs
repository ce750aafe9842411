//! One tracing session: attach to the daemon, read, pair, filter, print,
//! detach. Everything it sets up is torn down on every way out.

use crate::cli::Args;
use crate::cuts::Cuts;
use crate::event::{Decoder, Event, Probe};
use crate::filter::Filter;
use crate::format::Format;
use crate::names::Names;
use crate::output::{Clock, JsonRecord, TextStyle, TimeColumn};
use crate::pairing::{Pairing, Record};
use crate::perf::Rings;
use crate::summary::Summary;
use crate::uprobe::{remove_stale_groups, tracefs, Group};
use crate::{attach, sdt, target};
use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xenstore_proto::wire;

/// Builds the record filter from the flags.
pub fn filter_from(args: &Args) -> Result<Filter> {
    let ops = args
        .ops
        .iter()
        .map(|name| {
            wire::msg_type_by_name(name.trim())
                .map(|t| t as u16)
                .with_context(|| format!("--op: unknown operation {name:?}"))
        })
        .collect::<Result<_>>()?;
    let path = args
        .path
        .as_deref()
        .map(regex::Regex::new)
        .transpose()
        .context("--path: bad regular expression")?;
    Ok(Filter {
        domains: args.domains.clone(),
        pids: args.pids.clone(),
        names: args.names.clone(),
        failed_only: args.failed,
        ops,
        path,
        no_watch_events: args.no_watch_events,
        lifecycle: args.verbose,
    })
}

/// Why the trace stopped.
#[derive(Debug, PartialEq, Eq)]
enum Stop {
    Signal,
    Duration,
    Count,
    TargetExited,
    PipeClosed,
}

/// Traces until a stop condition; returns the process exit code.
pub fn run(args: &Args) -> Result<i32> {
    let filter = filter_from(args)?;
    let tracefs = tracefs(args.tracefs.as_deref())?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("xenstore-snoop needs root (uprobes and perf_event_open)");
    }
    let target = target::find(args.daemon_pid, args.binary.as_deref())?;
    let sites = sdt::read_probes(&target.binary)?;
    let probes = attach::choose(&target.binary, sites, &filter, args.paired)?;

    let stop_flag = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&stop_flag))
            .context("installing signal handlers")?;
    }

    for stale in remove_stale_groups(&tracefs)? {
        eprintln!("xenstore-snoop: removed stale uprobes of {stale}");
    }
    let kernel_filter = filter.kernel_filter();
    let mut group = Group::new(tracefs, kernel_filter.is_some());
    let mut decoders: Vec<Decoder> = Vec::new();
    let mut seen_names: HashMap<String, u32> = HashMap::new();
    for p in &probes {
        // A probe inlined at several sites has several notes: one event each.
        let n = seen_names.entry(p.name.clone()).or_default();
        let mut site = p.clone();
        if *n > 0 {
            site.name = format!("{}_{n}", p.name);
        }
        *n += 1;
        group.add(&target.binary, &site)?;
        let path = group.event_dir(&site.name).join("format");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let format = Format::parse(&text).with_context(|| format!("parsing {}", path.display()))?;
        let probe = Probe::from_name(&p.name).expect("filtered above");
        decoders.push(Decoder::new(probe, &format)?);
    }
    let ids: Vec<u16> = decoders.iter().map(|d| d.id).collect();
    let mut rings = Rings::open(
        &ids,
        (args.ring_mb as usize) << 20,
        kernel_filter.as_deref(),
    )?;
    rings.enable()?;
    let clock = Clock::now();
    eprintln!(
        "Tracing {} pid {} ({} probe sites, group {}){}... Ctrl-C to end.",
        target::DAEMON_NAME,
        target.pid,
        ids.len(),
        group.name,
        kernel_filter.map_or(String::new(), |f| format!(", kernel filter `{f}`"))
    );

    let mut loop_ = Loop {
        args,
        filter,
        style: TextStyle {
            time: if args.timestamp {
                TimeColumn::Wall
            } else if args.relative {
                TimeColumn::Relative
            } else {
                TimeColumn::None
            },
            latency: args.latency,
            verbose: args.verbose,
        },
        clock,
        out: std::io::BufWriter::with_capacity(1 << 18, std::io::stdout().lock()),
        line: String::with_capacity(256),
        pairing: Pairing::new(),
        names: Names::new(),
        cuts: Cuts::new(),
        summary: Summary::default(),
        shown: 0,
        seen: 0,
        undecodable: 0,
    };
    let stop = loop_.trace(&mut rings, &decoders, target.pid, &stop_flag);
    let lost = rings.lost();
    let corrupt = rings.corrupt_bytes;
    // Close the perf events before deleting the uprobes they use.
    drop(rings);
    group.remove()?;
    let stop = stop?;

    if stop == Stop::TargetExited {
        eprintln!(
            "xenstore-snoop: {} pid {} exited",
            target::DAEMON_NAME,
            target.pid
        );
    }
    eprintln!(
        "xenstore-snoop: {} events seen, {} lost{}{}",
        loop_.seen,
        lost,
        match (loop_.undecodable, loop_.pairing.dropped) {
            (0, 0) => String::new(),
            (u, d) => format!(", {u} undecodable, {d} unmatched requests/replies dropped"),
        },
        match corrupt {
            0 => String::new(),
            n => format!(", {n} bytes of corrupt ring data skipped"),
        }
    );
    Ok(0)
}

struct Loop<'a, W: Write> {
    args: &'a Args,
    filter: Filter,
    style: TextStyle,
    clock: Clock,
    out: W,
    /// The text line being built, reused.
    line: String,
    pairing: Pairing,
    names: Names,
    cuts: Cuts,
    summary: Summary,
    shown: u64,
    seen: u64,
    undecodable: u64,
}

impl<W: Write> Loop<'_, W> {
    fn trace(
        &mut self,
        rings: &mut Rings,
        decoders: &[Decoder],
        daemon: u32,
        stop_flag: &AtomicBool,
    ) -> Result<Stop> {
        let start = Instant::now();
        let deadline = self
            .args
            .duration
            .map(|s| start + Duration::from_secs_f64(s));
        let interval = self.args.interval.map(Duration::from_secs_f64);
        let mut next_report = interval.map(|i| start + i);
        let mut batch: Vec<Event> = Vec::new();
        if !self.args.json && !self.args.summary && self.emit(&self.style.header()).is_err() {
            return Ok(Stop::PipeClosed);
        }
        let mut lost_reported = 0;
        let stop = loop {
            rings.wait(100)?;
            let lost = rings.lost();
            if lost > lost_reported {
                // Said at once, not only in the final count.
                eprintln!(
                    "xenstore-snoop: {} events lost so far (ring buffer full; try a larger --ring-mb)",
                    lost
                );
                lost_reported = lost;
            }
            let alive = target::alive(daemon);
            // Drain after checking liveness so nothing the daemon fired is missed.
            if let Some(stop) = self.drain(rings, decoders, daemon, &mut batch)? {
                break stop;
            }
            if stop_flag.load(Ordering::Relaxed) {
                break Stop::Signal;
            }
            if !alive {
                break Stop::TargetExited;
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                break Stop::Duration;
            }
            if let (Some(at), Some(every)) = (next_report, interval) {
                if now >= at {
                    let stamp = chrono::Local::now().format("%H:%M:%S");
                    let tables = format!("{stamp}\n{}", self.summary.render(10));
                    if self.emit(&tables).is_err() {
                        break Stop::PipeClosed;
                    }
                    next_report = Some(at + every);
                }
            }
        };
        if stop == Stop::PipeClosed {
            return Ok(stop);
        }
        // Replies already in the rings, then what never got one.
        let stop = match self.drain(rings, decoders, daemon, &mut batch)? {
            Some(Stop::PipeClosed) => return Ok(Stop::PipeClosed),
            _ => stop,
        };
        if stop != Stop::Count {
            for mut r in self.pairing.unanswered() {
                r.comm = self.names.name(&r);
                self.cuts.measure(&mut r);
                if self.filter.wants(&r) && self.show(&r).is_err() {
                    return Ok(Stop::PipeClosed);
                }
            }
        }
        if self.args.summary {
            let tables = self.summary.render(10);
            if self.emit(&tables).is_err() {
                return Ok(Stop::PipeClosed);
            }
        }
        Ok(stop)
    }

    /// One pass over the rings, in time order across CPUs.
    fn drain(
        &mut self,
        rings: &mut Rings,
        decoders: &[Decoder],
        daemon: u32,
        batch: &mut Vec<Event>,
    ) -> Result<Option<Stop>> {
        batch.clear();
        let mut undecodable = 0;
        rings.drain(|s| {
            // uprobes fire in every process running the binary: keep ours.
            if s.pid != daemon || s.raw.len() < 2 {
                return;
            }
            let id = u16::from_ne_bytes([s.raw[0], s.raw[1]]);
            // A handful of decoders: a scan beats hashing the id.
            match decoders
                .iter()
                .find(|d| d.id == id)
                .map(|d| d.decode(s.raw, s.time_ns))
            {
                Some(Ok(ev)) => batch.push(ev),
                _ => undecodable += 1,
            }
        });
        self.undecodable += undecodable;
        self.seen += batch.len() as u64;
        // One CPU's events come sorted; a stable sort would still allocate
        // its scratch (megabytes a drain at high rates).
        if !batch.is_sorted_by_key(|e| e.mono_ns) {
            batch.sort_by_key(|e| e.mono_ns);
        }
        for ev in batch.drain(..) {
            self.names.observe(&ev);
            self.cuts.observe(&ev);
            let Some(mut r) = self.pairing.push(ev) else {
                continue;
            };
            self.names.learn(&r);
            r.comm = self.names.name(&r);
            self.cuts.measure(&mut r);
            if !self.filter.wants(&r) {
                continue;
            }
            if self.show(&r).is_err() {
                return Ok(Some(Stop::PipeClosed));
            }
            if self.args.count.is_some_and(|n| self.shown >= n) {
                return Ok(Some(Stop::Count));
            }
        }
        if self.out.flush().is_err() {
            return Ok(Some(Stop::PipeClosed));
        }
        Ok(None)
    }

    fn show(&mut self, r: &Record) -> std::io::Result<()> {
        self.shown += 1;
        if self.args.summary {
            self.summary.add(r);
            return Ok(());
        }
        if self.args.json {
            serde_json::to_writer(&mut self.out, &JsonRecord::new(r, &self.clock))?;
        } else {
            self.line.clear();
            self.style.write_line(r, &self.clock, &mut self.line);
            self.out.write_all(self.line.as_bytes())?;
        }
        self.out.write_all(b"\n")
    }

    fn emit(&mut self, text: &str) -> std::io::Result<()> {
        writeln!(self.out, "{text}")?;
        self.out.flush()
    }
}
