//! One tracing session: attach to the daemon, read, pair, filter, print,
//! detach. Everything it sets up is torn down on every way out.

use crate::cli::Args;
use crate::event::Event;
use crate::filter::Filter;
use crate::output::{Clock, JsonRecord, TextStyle, TimeColumn};
use crate::pairing::Pairing;
use crate::source::Source;
use crate::summary::Summary;
use crate::{attach, sdt, source, target};
use anyhow::{bail, Context, Result};
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
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("xenstore-snoop needs root (BPF, or uprobes and perf_event_open)");
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

    let mut source = source::open(args, &target, &probes, &filter)?;
    let clock = Clock::now();
    eprintln!(
        "Tracing {} pid {} ({})... Ctrl-C to end.",
        target::DAEMON_NAME,
        target.pid,
        source.describe()
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
        summary: Summary::default(),
        shown: 0,
        seen: 0,
    };
    let stop = loop_.trace(source.as_mut(), target.pid, &stop_flag);
    let lost = source.lost();
    let undecodable = source.undecodable();
    let trouble = source.trouble();
    source.close()?;
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
        match (undecodable, loop_.pairing.dropped) {
            (0, 0) => String::new(),
            (u, d) => format!(", {u} undecodable, {d} unmatched requests/replies dropped"),
        },
        trouble.map_or(String::new(), |t| format!(", {t}"))
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
    summary: Summary,
    shown: u64,
    seen: u64,
}

impl<W: Write> Loop<'_, W> {
    fn trace(
        &mut self,
        source: &mut dyn Source,
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
            source.wait(100)?;
            let lost = source.lost();
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
            if let Some(stop) = self.drain(source, &mut batch)? {
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
        let stop = match self.drain(source, &mut batch)? {
            Some(Stop::PipeClosed) => return Ok(Stop::PipeClosed),
            _ => stop,
        };
        if stop != Stop::Count {
            for r in self.pairing.unanswered() {
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

    /// One pass over the source, in time order across CPUs.
    fn drain(&mut self, source: &mut dyn Source, batch: &mut Vec<Event>) -> Result<Option<Stop>> {
        batch.clear();
        source.drain(&mut |ev| batch.push(ev));
        self.seen += batch.len() as u64;
        // One CPU's events come sorted; a stable sort would still allocate
        // its scratch (megabytes a drain at high rates).
        if !batch.is_sorted_by_key(|e| e.mono_ns) {
            batch.sort_by_key(|e| e.mono_ns);
        }
        for ev in batch.drain(..) {
            let Some(r) = self.pairing.push(ev) else {
                continue;
            };
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

    fn show(&mut self, r: &crate::pairing::Record) -> std::io::Result<()> {
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
