//! One tracing session: attach to the daemon, read, pair, filter, print,
//! detach. Everything it sets up is torn down on every way out.

use crate::capture::Source;
use crate::cli::Args;
use crate::cuts::Cuts;
use crate::event::Event;
use crate::filter::Filter;
use crate::names::Names;
use crate::output::{Clock, JsonRecord, TextStyle};
use crate::pairing::Pairing;
use crate::record::{Kind, Record};
use crate::semaphores::Semaphores;
use crate::summary::Summary;
use crate::trace_file;
use crate::{attach, capture, sdt, target};
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xenstore_proto::wire;

/// How often the semaphores of the probes in use are checked while tracing.
const SEMAPHORE_CHECK: Duration = Duration::from_secs(1);

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

/// Traces live until a stop condition; returns the process exit code.
pub fn run(args: &Args) -> Result<i32> {
    let filter = filter_from(args)?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("xenstore-snoop needs root (BPF, or uprobes and perf_event_open)");
    }
    let target = target::find(args.daemon_pid, args.binary.as_deref())?;
    // Where the daemon's binary is, for --follow once /proc/PID is gone.
    let exe = std::fs::read_link(format!("/proc/{}/exe", target.pid)).ok();

    let stop_flag = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&stop_flag))
            .context("installing signal handlers")?;
    }

    crate::domains::warn_unknown(target.pid, &args.domains);
    let kernel_filter = filter.kernel_filter();
    let mut loop_ = Loop {
        args,
        filter,
        style: args.text_style(),
        clock: Clock::now(),
        start: Instant::now(),
        next_report: None,
        header_shown: false,
        out: std::io::BufWriter::with_capacity(1 << 18, std::io::stdout().lock()),
        line: String::with_capacity(256),
        pairing: Pairing::new(),
        names: names_for(target.pid),
        cuts: Cuts::new(),
        summary: Summary::new(crate::summary::box_drawing_for_stdout()),
        trace: None,
        top: None,
        timeline: (args.timeline.is_some() || args.timeline_json.is_some())
            .then(crate::timeline::Timeline::new),
        socket: crate::domains::daemon_socket(target.pid),
        shown: 0,
        seen: 0,
        undecodable: 0,
        own_pid: std::process::id(),
        own_hidden: 0,
        lost_before: 0,
    };
    loop_.trace = args
        .write
        .as_deref()
        .map(|path| {
            let header = trace_file::Header::new(
                &loop_.clock,
                target.pid,
                &target.binary,
                kernel_filter.clone(),
            );
            trace_file::Writer::create(path, &header)
        })
        .transpose()?;
    loop_.next_report = args
        .interval
        .map(|i| loop_.start + Duration::from_secs_f64(i));
    let mut totals = Totals::default();
    let traced = follow(&mut loop_, target, exe, &stop_flag, &mut totals);
    // Whatever ended the tracing, the trace file gets its end record and
    // the user the closing counts; a failure is reported after them.
    let stopped = match &traced {
        Ok(stop) => format!("{stop:?}"),
        Err(_) => "Failed".to_string(),
    };
    // The terminal back before anything more is said.
    loop_.top = None;
    let closed = close(&mut loop_, &totals, stopped);
    if matches!(&traced, Ok(stop) if *stop != Stop::PipeClosed) && loop_.args.summary {
        let tables = loop_.summary.render(10);
        // A closed pipe at the very end changes nothing.
        let _ = loop_.emit(&tables);
    }
    eprintln!("{}", closing_line(&loop_, &totals));
    traced?;
    closed?;
    if let Some(timeline) = &loop_.timeline {
        crate::timeline::write_files(args, timeline, &loop_.clock)?;
    }
    Ok(0)
}

/// What the back ends counted over every daemon traced.
#[derive(Default)]
struct Totals {
    lost: u64,
    corrupt_bytes: u64,
    trouble: Vec<String>,
}

/// Traces `target`, and under --follow each daemon that runs the same
/// binary after it, until a stop condition or a failure.
fn follow<W: Write>(
    loop_: &mut Loop<'_, W>,
    mut target: target::Target,
    mut exe: Option<std::path::PathBuf>,
    stop_flag: &AtomicBool,
    totals: &mut Totals,
) -> Result<Stop> {
    loop {
        let (stop, done) = trace_daemon(loop_, &target, stop_flag)?;
        totals.lost += done.lost;
        loop_.lost_before += done.lost;
        loop_.undecodable += done.undecodable;
        totals.corrupt_bytes += done.corrupt_bytes;
        totals.trouble.extend(done.trouble);
        if stop != Stop::TargetExited {
            return Ok(stop);
        }
        // Still there: it exec'd a new image (a live update).
        let execd = target::alive(target.pid);
        eprintln!(
            "xenstore-snoop: {} pid {} {}",
            target::DAEMON_NAME,
            target.pid,
            if execd {
                "exec'd a new image"
            } else {
                "exited"
            }
        );
        if execd && !loop_.args.follow {
            // Its new image fires nothing we attached: never trace on blind.
            bail!(
                "not tracing the new image of pid {} (the old one's probes no longer fire): \
                 start the snooper again, or use --follow",
                target.pid
            );
        }
        let Some(old_exe) = exe.as_deref().filter(|_| loop_.args.follow) else {
            return Ok(stop);
        };
        let gone = chrono::Local::now();
        let gap = Instant::now();
        let next = if execd {
            target::find(Some(target.pid), None).ok()
        } else {
            crate::follow::next_daemon(old_exe, target.pid, stop_flag)
        };
        let Some(next) = next else {
            return Ok(Stop::Signal);
        };
        eprintln!(
            "xenstore-snoop: --follow: gap of {:.3} s from {} (requests in it were not seen); following pid {}",
            gap.elapsed().as_secs_f64(),
            gone.format("%H:%M:%S%.3f"),
            next.pid
        );
        // The new daemon numbers connections and serials afresh.
        loop_.names = names_for(next.pid);
        loop_.cuts = Cuts::new();
        exe = std::fs::read_link(format!("/proc/{}/exe", next.pid)).ok();
        target = next;
    }
}

/// Ends the trace file (-w) with the session's final counts.
fn close<W: Write>(loop_: &mut Loop<'_, W>, totals: &Totals, stopped: String) -> Result<()> {
    let Some(trace) = loop_.trace.take() else {
        return Ok(());
    };
    trace.finish(trace_file::End {
        mono_ns: crate::output::clock_ns(libc::CLOCK_MONOTONIC),
        seen: loop_.seen,
        lost: totals.lost,
        undecodable: loop_.undecodable,
        unmatched_dropped: loop_.pairing.dropped,
        corrupt_bytes: totals.corrupt_bytes,
        stopped,
    })
}

/// "xenstore-snoop: N events seen, M lost", and what else went wrong.
fn closing_line<W: Write>(loop_: &Loop<'_, W>, totals: &Totals) -> String {
    format!(
        "xenstore-snoop: {} events seen, {} lost{}{}{}",
        loop_.seen,
        totals.lost,
        match (loop_.undecodable, loop_.pairing.dropped) {
            (0, 0) => String::new(),
            (u, d) => format!(", {u} undecodable, {d} unmatched requests/replies dropped"),
        },
        match loop_.own_hidden {
            0 => String::new(),
            n => format!(
                ", {n} of its own requests ({}) not shown",
                match loop_.args.top {
                    true => "domain names, quotas",
                    false => "domain names",
                }
            ),
        },
        totals
            .trouble
            .iter()
            .map(|t| format!(", {t}"))
            .collect::<String>()
    )
}

/// Names that look an unseen guest's domain name up through `daemon`'s socket.
fn names_for(daemon: u32) -> Names {
    match crate::domains::daemon_socket(daemon) {
        Some(socket) => Names::with_lookup(Box::new(move |domid| {
            crate::domains::domain_name(&socket, domid)
        })),
        None => Names::new(),
    }
}

/// What one daemon's tracing left to report.
struct Detached {
    lost: u64,
    undecodable: u64,
    corrupt_bytes: u64,
    /// Anything else wrong with the capture (the back end says what).
    trouble: Option<String>,
}

/// Attaches to one daemon process, traces it until a stop condition, and
/// detaches; returns why it stopped and what the back end counted.
fn trace_daemon<W: Write>(
    loop_: &mut Loop<'_, W>,
    target: &target::Target,
    stop_flag: &AtomicBool,
) -> Result<(Stop, Detached)> {
    let sites = sdt::read_probes(&target.binary)?;
    // -w records what any filter could want on replay: every probe, every
    // request; only -d (which the trace header names) still filters.
    let record_all = Filter {
        domains: loop_.filter.domains.clone(),
        lifecycle: true,
        ..Filter::default()
    };
    let capture = if loop_.trace.is_some() {
        &record_all
    } else {
        &loop_.filter
    };
    let probes = attach::choose(&target.binary, sites, capture, loop_.args.paired)?;
    let mut source = capture::open(loop_.args, target, &probes, capture)?;
    let mut semaphores = Semaphores::open(target, &probes)?;
    semaphores.ensure_raised()?;
    eprintln!(
        "Tracing {} pid {} ({})... Ctrl-C to end.",
        target::DAEMON_NAME,
        target.pid,
        source.describe()
    );
    let stop = loop_.trace(source.as_mut(), target, &mut semaphores, stop_flag);
    let done = Detached {
        lost: source.lost(),
        undecodable: source.undecodable(),
        corrupt_bytes: source.corrupt_bytes(),
        trouble: source.trouble(),
    };
    let closed = source.close();
    // After the kernel's own decrements, which may take ours.
    semaphores.release();
    closed?;
    Ok((stop?, done))
}

struct Loop<'a, W: Write> {
    args: &'a Args,
    filter: Filter,
    style: TextStyle,
    clock: Clock,
    /// When tracing began (for --duration and --interval, across --follow).
    start: Instant,
    next_report: Option<Instant>,
    header_shown: bool,
    out: W,
    /// The text line being built, reused.
    line: String,
    pairing: Pairing,
    names: Names,
    cuts: Cuts,
    summary: Summary,
    /// `-w`: every record, before the filters.
    trace: Option<trace_file::Writer>,
    /// `--top`, once attached.
    top: Option<crate::top::Driver>,
    /// `--timeline`, `--timeline-json`: what is shown, kept for drawing.
    timeline: Option<crate::timeline::Timeline>,
    /// The daemon's dom0 socket (for --top's quotas).
    socket: Option<std::path::PathBuf>,
    /// Events lost while tracing earlier daemon processes (--follow).
    lost_before: u64,
    shown: u64,
    seen: u64,
    undecodable: u64,
    own_pid: u32,
    /// The snooper's own requests (names.rs's look-ups), not shown: said on
    /// exit, so that every request is shown, counted lost or counted here.
    own_hidden: u64,
}

impl<W: Write> Loop<'_, W> {
    fn trace(
        &mut self,
        source: &mut dyn Source,
        daemon: &target::Target,
        semaphores: &mut Semaphores,
        stop_flag: &AtomicBool,
    ) -> Result<Stop> {
        let deadline = self
            .args
            .duration
            .map(|s| self.start + Duration::from_secs_f64(s));
        let interval = self.args.interval.map(Duration::from_secs_f64);
        let mut last_report = self
            .next_report
            .zip(interval)
            .map_or(self.start, |(at, i)| at - i);
        let mut batch: Vec<Event> = Vec::new();
        if self.args.top && self.top.is_none() {
            self.top = Some(crate::top::Driver::new(
                self.args,
                self.clock,
                self.socket.clone(),
            )?);
        }
        if !self.args.json && !self.args.summary && !self.args.top && !self.header_shown {
            self.header_shown = true;
            if self.emit(&self.style.header()).is_err() {
                return Ok(Stop::PipeClosed);
            }
        }
        let mut lost_reported = 0;
        let mut next_check = Instant::now() + SEMAPHORE_CHECK;
        let stop = loop {
            source.wait(100)?;
            let lost = source.lost();
            if lost > lost_reported {
                // Said at once, not only in the final count (a full-screen
                // view says it in its heading: a line would tear it).
                match self.top.as_mut().filter(|t| t.screen.interactive()) {
                    Some(top) => top.lost = self.lost_before + lost,
                    None => eprintln!(
                        "xenstore-snoop: {} events lost so far (ring buffer full; try a larger --ring-mb)",
                        lost
                    ),
                }
                lost_reported = lost;
                if let Some(trace) = &mut self.trace {
                    let total = self.lost_before + lost;
                    trace.lost(crate::output::clock_ns(libc::CLOCK_MONOTONIC), total)?;
                }
            }
            // Same file or not, an exec leaves the memory we opened.
            let alive = daemon.runs() && !semaphores.execd();
            if alive && Instant::now() >= next_check {
                // Another tracer may have lowered what it raised for both.
                semaphores.ensure_raised()?;
                next_check = Instant::now() + SEMAPHORE_CHECK;
            }
            // Drain after checking liveness so nothing the daemon fired is missed.
            if let Some(stop) = self.drain(source, &mut batch, false)? {
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
            if let Some(top) = &mut self.top {
                use crate::top::Go;
                match top.advance(crate::output::clock_ns(libc::CLOCK_MONOTONIC), false) {
                    Ok(Go::On) => {}
                    Ok(Go::Quit) => break Stop::Signal,
                    Ok(Go::Counted) => break Stop::Count,
                    // `--top | head`: as with lines, a closed pipe ends quietly.
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => break Stop::PipeClosed,
                    Err(e) => return Err(e.into()),
                }
                continue;
            }
            if let (Some(at), Some(every)) = (self.next_report, interval) {
                if now >= at {
                    let stamp = chrono::Local::now().format("%H:%M:%S");
                    // Rates over the time that really passed (the loop wakes every 100 ms).
                    let secs = now.duration_since(last_report).as_secs_f64();
                    last_report = now;
                    let tables = format!("{stamp}\n{}", self.summary.render_interval(10, secs));
                    if self.emit(&tables).is_err() {
                        break Stop::PipeClosed;
                    }
                    self.next_report = Some(at + every);
                }
            }
        };
        if stop == Stop::PipeClosed {
            return Ok(stop);
        }
        // Replies already captured, then what never got one.
        let stop = match self.drain(source, &mut batch, true)? {
            Some(Stop::PipeClosed) => return Ok(Stop::PipeClosed),
            _ => stop,
        };
        let mut unanswered = self.pairing.unanswered();
        for r in &mut unanswered {
            r.comm = self.names.name(r);
            self.cuts.measure(r);
            if let Some(trace) = &mut self.trace {
                trace.record(r)?;
            }
        }
        if stop != Stop::Count {
            for r in unanswered {
                if self.filter.wants(&r) && self.show(&r).is_err() {
                    return Ok(Stop::PipeClosed);
                }
            }
        }
        Ok(stop)
    }

    /// One pass over the source, in time order across CPUs; `last` takes
    /// all it holds.
    fn drain(
        &mut self,
        source: &mut dyn Source,
        batch: &mut Vec<Event>,
        last: bool,
    ) -> Result<Option<Stop>> {
        batch.clear();
        source.drain(&mut |ev| batch.push(ev), last);
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
            // The snooper's own lookups (names.rs) are not the traffic traced.
            if r.pid == self.own_pid {
                self.own_hidden += u64::from(r.kind == Kind::Op);
                continue;
            }
            self.names.learn(&r);
            r.comm = self.names.name(&r);
            self.cuts.measure(&mut r);
            if let Some(trace) = &mut self.trace {
                trace.record(&r)?;
            }
            if !self.filter.wants(&r) {
                continue;
            }
            if self.show(&r).is_err() {
                return Ok(Some(Stop::PipeClosed));
            }
            if self.top.is_none() && self.args.count.is_some_and(|n| self.shown >= n) {
                return Ok(Some(Stop::Count));
            }
        }
        if let Some(trace) = &mut self.trace {
            trace.flush()?;
        }
        if self.out.flush().is_err() {
            return Ok(Some(Stop::PipeClosed));
        }
        Ok(None)
    }

    fn show(&mut self, r: &Record) -> std::io::Result<()> {
        self.shown += 1;
        if let Some(timeline) = &mut self.timeline {
            timeline.add(r);
        }
        if let Some(top) = &mut self.top {
            top.add(r);
            return Ok(());
        }
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
