//! `-r FILE`: a recorded trace through the same filters and output as a
//! live session. Times come from the trace: -T and --relative show what
//! the live snooper would have shown, and --duration and --interval count
//! trace time.

use crate::cli::Args;
use crate::output::{JsonRecord, TextStyle};
use crate::record::Record;
use crate::summary::{box_drawing_for_stdout, Summary};
use crate::trace_file::{End, Item, Reader};
use anyhow::{Context, Result};
use std::io::{BufRead, ErrorKind, Write};
use std::path::Path;

/// Replays `path` (`-` for standard input) to standard output; returns
/// the exit code.
pub fn run(args: &Args, path: &Path) -> Result<i32> {
    let (input, name): (Box<dyn BufRead>, String) = if path == Path::new("-") {
        (Box::new(std::io::stdin().lock()), "standard input".into())
    } else {
        let file =
            std::fs::File::open(path).with_context(|| format!("-r: opening {}", path.display()))?;
        let input = std::io::BufReader::with_capacity(1 << 16, file);
        (Box::new(input), path.display().to_string())
    };
    let out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let done = match replay(args, input, &name, out, box_drawing_for_stdout()) {
        Ok(done) => done,
        // `| head`: as live, a closed pipe ends quietly.
        Err(e) if is_broken_pipe(&e) => return Ok(0),
        Err(e) => return Err(e),
    };
    if let Some(cut) = &done.cut {
        eprintln!("xenstore-snoop: {cut}: replayed what is there");
    }
    if let Some(kernel) = &done.kernel_filter {
        eprintln!("xenstore-snoop: {name} was recorded with the kernel filter `{kernel}`");
    }
    let lost = done.end.as_ref().map_or(done.lost, |e| e.lost);
    eprintln!(
        "xenstore-snoop: {} records read from {name}, {} shown; \
         the recording lost {lost} events{}",
        done.records,
        done.shown,
        done.end.map_or(String::new(), |e| {
            match (e.undecodable, e.unmatched_dropped) {
                (0, 0) => String::new(),
                (u, d) => format!(", {u} undecodable, {d} unmatched requests/replies dropped"),
            }
        })
    );
    Ok(0)
}

/// What a replay read.
#[derive(Debug, Default)]
pub struct Replayed {
    pub records: u64,
    pub shown: u64,
    /// The last lost-event total seen (the end line's is in `end`).
    pub lost: u64,
    pub end: Option<End>,
    /// Why the trace stopped short, when it has no end line.
    pub cut: Option<String>,
    pub kernel_filter: Option<String>,
}

/// Replays the trace `input` (called `name` in messages) to `out` through
/// the filters and output the flags ask for.
pub fn replay(
    args: &Args,
    input: impl BufRead,
    name: &str,
    out: impl Write,
    box_drawing: bool,
) -> Result<Replayed> {
    let filter = crate::session::filter_from(args)?;
    let mut reader = Reader::open(input, name)?;
    let clock = reader.header.clock();
    let mut replay = Replay {
        args,
        style: args.text_style(),
        out,
        line: String::new(),
        summary: Summary::new(box_drawing),
        shown: 0,
        top: args
            .top
            .then(|| crate::top::Driver::new(args, clock, None))
            .transpose()?,
        timeline: (args.timeline.is_some() || args.timeline_json.is_some())
            .then(crate::timeline::Timeline::new),
    };
    // Trace time, in ns; the interval at least 1 ns.
    let ns = |secs: f64| ((secs * 1e9) as u64).max(1);
    let deadline = args
        .duration
        .map(|s| clock.start_mono_ns.saturating_add(ns(s)));
    let interval = args.interval.map(ns);
    let mut next_report = interval.map(|i| clock.start_mono_ns.saturating_add(i));
    let mut done = Replayed {
        kernel_filter: reader.header.kernel_filter.clone(),
        ..Replayed::default()
    };

    if !args.json && !args.summary && !args.top {
        writeln!(replay.out, "{}", replay.style.header())?;
    }
    let mut last_ns = clock.start_mono_ns;
    let mut quit = false;
    while let Some(item) = reader.next_item()? {
        let r = match item {
            Item::Record(r) => r,
            Item::Lost { total, .. } => {
                done.lost = total;
                continue;
            }
            Item::End(e) => {
                last_ns = last_ns.max(e.mono_ns);
                done.end = Some(e);
                continue;
            }
        };
        done.records += 1;
        if deadline.is_some_and(|d| r.mono_ns > d) {
            break;
        }
        last_ns = last_ns.max(r.mono_ns);
        if let Some(top) = &mut replay.top {
            let pace = top.screen.interactive();
            if top.advance(r.mono_ns, pace)? != crate::top::Go::On {
                quit = true;
                break;
            }
        }
        // The tables of the interval that ended before this record; quiet
        // intervals print nothing.
        if let (Some(at), Some(every)) = (next_report, interval) {
            if r.mono_ns >= at {
                if replay.summary.requests_in_interval() > 0 {
                    replay.interval_tables(at, every, &clock)?;
                }
                let behind = (r.mono_ns - at) / every;
                next_report =
                    Some(at.saturating_add(behind.saturating_add(1).saturating_mul(every)));
            }
        }
        if filter.wants(&r) {
            replay.show(&r, &clock)?;
            if replay.top.is_none() && args.count.is_some_and(|n| replay.shown >= n) {
                break;
            }
        }
    }
    if let Some(mut top) = replay.top.take() {
        if !quit {
            top.finish(last_ns)?;
        }
    }
    if let Some(timeline) = &replay.timeline {
        crate::timeline::write_files(args, timeline, &clock)?;
    }
    if args.summary {
        let tables = replay.summary.render(10);
        writeln!(replay.out, "{tables}")?;
    }
    replay.out.flush()?;
    done.shown = replay.shown;
    done.cut = reader.cut.take();
    Ok(done)
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == ErrorKind::BrokenPipe)
    })
}

struct Replay<'a, W: Write> {
    args: &'a Args,
    style: TextStyle,
    out: W,
    line: String,
    summary: Summary,
    shown: u64,
    top: Option<crate::top::Driver>,
    timeline: Option<crate::timeline::Timeline>,
}

impl<W: Write> Replay<'_, W> {
    fn show(&mut self, r: &Record, clock: &crate::output::Clock) -> Result<()> {
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
            serde_json::to_writer(&mut self.out, &JsonRecord::new(r, clock))?;
        } else {
            self.line.clear();
            self.style.write_line(r, clock, &mut self.line);
            self.out.write_all(self.line.as_bytes())?;
        }
        self.out.write_all(b"\n")?;
        Ok(())
    }

    /// The tables of the interval ending at trace time `at`.
    fn interval_tables(&mut self, at: u64, every: u64, clock: &crate::output::Clock) -> Result<()> {
        let stamp = clock.wall(at).with_timezone(&chrono::Local);
        let tables = self.summary.render_interval(10, every as f64 / 1e9);
        writeln!(self.out, "{}\n{tables}", stamp.format("%H:%M:%S"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Probe;
    use crate::output::Clock;
    use crate::pairing::tests::ev;
    use crate::pairing::Pairing;
    use crate::trace_file::{Header, Writer};
    use clap::Parser;

    const SEC: u64 = 1_000_000_000;

    /// A trace of reads (`/r/<i>`) at these times after the start (s), by domain 6 on odd i.
    fn trace(at_secs: &[f64], end: bool) -> Vec<u8> {
        let clock = Clock {
            offset_ns: 1_700_000_000 * SEC as i128,
            start_mono_ns: 1000 * SEC,
        };
        let path = std::env::temp_dir().join(format!(
            "xs-replay-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let header = Header::new(&clock, 1, Path::new("/x"), None);
        let mut w = Writer::create(&path, &header).unwrap();
        let mut p = Pairing::new();
        for (i, secs) in at_secs.iter().enumerate() {
            let serial = i as u64 + 1;
            let mut req = ev(Probe::Request, serial, 2, &format!("/r/{i}"), "");
            req.mono_ns = clock.start_mono_ns + (secs * 1e9) as u64;
            req.dom = (i % 2 * 6) as u16;
            p.push(req);
            let mut resp = ev(Probe::Response, serial, 2, "v", "");
            resp.mono_ns = clock.start_mono_ns + (secs * 1e9) as u64 + 5000;
            w.record(&p.push(resp).unwrap()).unwrap();
        }
        if end {
            w.finish(End::default()).unwrap();
        } else {
            w.flush().unwrap();
        }
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        bytes
    }

    fn run(flags: &[&str], trace: &[u8]) -> (String, Replayed) {
        let args =
            Args::try_parse_from([&["xenstore-snoop", "-r", "t"][..], flags].concat()).unwrap();
        let mut out = Vec::new();
        let done = replay(&args, trace, "t", &mut out, false).unwrap();
        (String::from_utf8(out).unwrap(), done)
    }

    #[test]
    fn filters_count_and_relative_times() {
        let t = trace(&[0.5, 1.25, 2.0], true);
        let (out, done) = run(&["--relative"], &t);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "TIME(s)      DOM PID    COMM            TX  OP");
        assert_eq!(
            lines[2],
            "1.250000     6   100    -               0   XS_READ: /r/1 -> v"
        );
        assert_eq!((done.records, done.shown, done.cut), (3, 3, None));
        let (out, done) = run(&["-d", "6"], &t);
        assert_eq!(out.lines().count(), 2, "{out}");
        assert_eq!((done.records, done.shown), (3, 1));
        let (out, _) = run(&["-c", "2", "--json"], &t);
        assert_eq!(out.lines().count(), 2, "{out}");
        // --duration counts trace time.
        let (out, _) = run(&["--duration", "1.3"], &t);
        assert_eq!(out.lines().count(), 3, "{out}");
        // -T: the recorded wall clock.
        let (out, _) = run(&["-T"], &t);
        assert!(
            out.lines().nth(1).unwrap().starts_with("22:30:00.500000 "),
            "{out}"
        );
    }

    #[test]
    fn intervals_in_trace_time_skip_quiet_ones() {
        // Requests in the 1st, 2nd and 4th second; the 3rd is quiet.
        let t = trace(&[0.1, 0.2, 0.9, 1.5, 3.2, 3.3], true);
        let (out, _) = run(&["--summary", "--interval", "1"], &t);
        let heads: Vec<&str> = out.lines().filter(|l| l.starts_with("last ")).collect();
        assert_eq!(
            heads,
            [
                "last 1 s: 3 requests, 3.0/s; 3 in all",
                "last 1 s: 1 requests, 1.0/s; 4 in all"
            ],
            "{out}"
        );
        // Then the final totals: all six.
        let last = out.rsplit("| OP ").next().unwrap();
        assert!(last.contains("| XS_READ | 6 "), "{out}");
        // The stamps are the intervals' ends in trace time (local time).
        let stamp = |s: u64| {
            Clock {
                offset_ns: 1_700_000_000 * SEC as i128,
                start_mono_ns: 0,
            }
            .wall((1000 + s) * SEC)
            .with_timezone(&chrono::Local)
            .format("%H:%M:%S")
            .to_string()
        };
        assert!(
            out.starts_with(&format!("{}\nlast 1 s: 3", stamp(1))),
            "{out}"
        );
        assert!(out.contains(&format!("{}\nlast 1 s: 1", stamp(2))), "{out}");
        // A tiny interval on a long trace: no overflow, no endless loop.
        let (out, _) = run(&["--summary", "--interval", "0.000000000001"], &t);
        assert_eq!(out.lines().filter(|l| l.starts_with("last ")).count(), 5);
    }

    #[test]
    fn a_cut_trace_says_so() {
        let t = trace(&[0.1, 0.2], false);
        let (out, done) = run(&[], &t);
        assert_eq!(out.lines().count(), 3);
        assert!(done.cut.unwrap().contains("without its end line"));
        let err = replay(
            &Args::try_parse_from(["xenstore-snoop", "-r", "t"]).unwrap(),
            &b"DOM PID\n"[..],
            "t",
            Vec::new(),
            false,
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("not a xenstore-snoop-trace file"));
    }
}
