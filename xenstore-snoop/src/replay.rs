//! `-r FILE`: a recorded trace through the same filters and output as a
//! live session. Times come from the trace: -T and --relative show what
//! the live snooper would have shown, and --duration and --interval count
//! trace time.

use crate::cli::Args;
use crate::output::{JsonRecord, TextStyle, TimeColumn};
use crate::pairing::Record;
use crate::summary::{box_drawing_for_stdout, Summary};
use crate::trace_file::{Item, Reader};
use anyhow::{Context, Result};
use std::io::{ErrorKind, Write};
use std::path::Path;

/// How text lines look, from the flags.
pub fn text_style(args: &Args) -> TextStyle {
    TextStyle {
        time: if args.timestamp {
            TimeColumn::Wall
        } else if args.relative {
            TimeColumn::Relative
        } else {
            TimeColumn::None
        },
        latency: args.latency,
        verbose: args.verbose,
    }
}

/// Replays `path` to standard output; returns the exit code.
pub fn run(args: &Args, path: &Path) -> Result<i32> {
    let filter = crate::session::filter_from(args)?;
    // `-r -`: standard input, e.g. from zcat.
    let (input, name): (Box<dyn std::io::BufRead>, String) = if path == Path::new("-") {
        (Box::new(std::io::stdin().lock()), "standard input".into())
    } else {
        let file =
            std::fs::File::open(path).with_context(|| format!("-r: opening {}", path.display()))?;
        let input = std::io::BufReader::with_capacity(1 << 16, file);
        (Box::new(input), path.display().to_string())
    };
    let mut reader = Reader::open(input, &name)?;
    let clock = reader.header.clock();
    if let Some(kernel) = &reader.header.kernel_filter {
        eprintln!("xenstore-snoop: {name} was recorded with the kernel filter `{kernel}`");
    }
    let mut replay = Replay {
        args,
        style: text_style(args),
        out: std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock()),
        line: String::new(),
        summary: Summary::new(box_drawing_for_stdout()),
        shown: 0,
    };
    let ns = |secs: f64| (secs * 1e9) as u64;
    let deadline = args.duration.map(|s| clock.start_mono_ns + ns(s));
    let interval = args.interval.map(ns);
    let mut next_report = interval.map(|i| clock.start_mono_ns + i);
    let (mut records, mut lost, mut end) = (0u64, 0u64, None);

    let result = (|| -> Result<()> {
        if !args.json && !args.summary {
            writeln!(replay.out, "{}", replay.style.header())?;
        }
        while let Some(item) = reader.next_item()? {
            let r = match item {
                Item::Record(r) => r,
                Item::Lost { total, .. } => {
                    lost = total;
                    continue;
                }
                Item::End(e) => {
                    end = Some(e);
                    continue;
                }
            };
            records += 1;
            if deadline.is_some_and(|d| r.mono_ns > d) {
                break;
            }
            // Tables of each interval that ended before this record; quiet
            // intervals print nothing.
            if let (Some(at), Some(every)) = (next_report, interval) {
                if r.mono_ns >= at {
                    if replay.summary.requests_in_interval() > 0 {
                        replay.interval_tables(at, every, &clock)?;
                    }
                    let behind = (r.mono_ns - at) / every;
                    next_report = Some(at + (behind + 1) * every);
                }
            }
            if filter.wants(&r) {
                replay.show(&r, &clock)?;
                if args.count.is_some_and(|n| replay.shown >= n) {
                    break;
                }
            }
        }
        if args.summary {
            let tables = replay.summary.render(10);
            writeln!(replay.out, "{tables}")?;
        }
        replay.out.flush()?;
        Ok(())
    })();
    match result {
        Ok(()) => {}
        // `| head`: as live, a closed pipe ends quietly.
        Err(e) if is_broken_pipe(&e) => return Ok(0),
        Err(e) => return Err(e),
    }

    if let Some(cut) = &reader.cut {
        eprintln!("xenstore-snoop: {cut}: replayed what is there");
    }
    let lost = end.as_ref().map_or(lost, |e| e.lost);
    eprintln!(
        "xenstore-snoop: {records} records read from {name}, {} shown; \
         the recording lost {lost} events{}",
        replay.shown,
        end.map_or(String::new(), |e| {
            match (e.undecodable, e.unmatched_dropped) {
                (0, 0) => String::new(),
                (u, d) => format!(", {u} undecodable, {d} unmatched requests/replies dropped"),
            }
        })
    );
    Ok(0)
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
}

impl<W: Write> Replay<'_, W> {
    fn show(&mut self, r: &Record, clock: &crate::output::Clock) -> Result<()> {
        self.shown += 1;
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
