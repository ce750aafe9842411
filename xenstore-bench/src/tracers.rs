//! Tracers attached around a measured run: xenstore-snoop (full capture to
//! a file) and bpftrace running the snoop script, both started before the
//! run and stopped after it, outside the measured window.

use crate::daemons::scratch_dir;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use xenstore_testkit::wait::wait_until;

/// The path every attach check asks for: it shows up in the tracer's output
/// once the tracer sees events.
pub const MARKER: &str = "/bench/attach-marker";

#[derive(Clone, Debug)]
pub enum TracerKind {
    /// `xenstore-snoop --daemon-pid PID ARGS` writing to a file.
    Snoop { binary: PathBuf, args: Vec<String> },
    /// `bpftrace -B BUFFERING SCRIPT TARGET_BINARY` writing to a file.
    Bpftrace {
        script: PathBuf,
        buffering: &'static str,
    },
    /// `xenstore-snoop --daemon-pid PID --metrics` writing a textfile
    /// every second (seen attached once the file counts the marker's reads).
    Metrics { binary: PathBuf },
}

pub struct Tracer {
    child: Option<Child>,
    stderr: PathBuf,
    dir: PathBuf,
}

/// What a tracer said about itself when it stopped.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub seen: Option<u64>,
    pub lost: Option<u64>,
    /// CPU time the tracer process used while attached, ns.
    pub cpu_ns: Option<u64>,
    /// It did not stop within [`STOP_BOUND`] of SIGINT and was killed (its
    /// own report then never came; the run it traced still counts).
    pub killed: bool,
}

/// How long a tracer may take to stop after SIGINT. bpftrace (0.17) has
/// taken 20 s and more now and then under load; the measured window closed
/// before the signal, so the run is kept and the tracer killed.
pub const STOP_BOUND: Duration = Duration::from_secs(10);

impl Tracer {
    /// Starts tracing `pid` (running `binary`) and returns once the tracer's
    /// output shows the marker that `mark` makes the target fire.
    pub fn attach(
        kind: &TracerKind,
        pid: u32,
        binary: &Path,
        mut mark: impl FnMut() -> Result<()>,
    ) -> Result<Tracer> {
        let dir = scratch_dir("tracer")?;
        let output = dir.join("trace.out");
        let stderr = dir.join("trace.err");
        let mut cmd = match kind {
            TracerKind::Snoop {
                binary: snoop,
                args,
            } => {
                let mut c = Command::new(snoop);
                c.arg("--daemon-pid").arg(pid.to_string()).args(args);
                c
            }
            TracerKind::Bpftrace { script, buffering } => {
                let mut c = Command::new("bpftrace");
                c.args(["-B", buffering]).arg(script).arg(binary);
                c
            }
            TracerKind::Metrics { binary: snoop } => {
                let mut c = Command::new(snoop);
                c.arg("--daemon-pid").arg(pid.to_string());
                c.args(["--metrics", "--interval", "1", "--metrics-textfile"])
                    .arg(&dir);
                c
            }
        };
        // Where attachment shows: the marker's path in a trace, the
        // marker's reads counted in the metrics.
        let (shows, needle) = match kind {
            TracerKind::Metrics { .. } => (dir.join("xenstore.prom"), "op=\"XS_READ\""),
            _ => (output.clone(), MARKER),
        };
        let child = cmd
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&output)?)
            .stderr(std::fs::File::create(&stderr)?)
            .spawn()
            .with_context(|| format!("start {cmd:?}"))?;
        let mut tracer = Tracer {
            child: Some(child),
            stderr,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            mark()?;
            if std::fs::read_to_string(&shows).is_ok_and(|t| t.contains(needle)) {
                return Ok(tracer);
            }
            if let Some(status) = tracer.child.as_mut().unwrap().try_wait()? {
                bail!("{cmd:?} exited ({status}): {}", tracer.stderr_text());
            }
            if Instant::now() > deadline {
                bail!("{cmd:?} never showed an event: {}", tracer.stderr_text());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("attached").id()
    }

    /// Where it writes (a metrics exporter's textfile directory).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Stops the tracer (SIGINT, as Ctrl-C) and reads its seen/lost report;
    /// one still running [`STOP_BOUND`] later is killed (said on stderr and
    /// in [`Counts::killed`]).
    pub fn detach(mut self) -> Result<Counts> {
        let mut child = self.child.take().unwrap();
        let cpu_ns = crate::daemons::cpu_ns(child.id()).ok();
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let stopped = || !matches!(child.try_wait(), Ok(None));
        if wait_until("the tracer to stop", STOP_BOUND, stopped).is_err() {
            let _ = child.kill();
            let _ = child.wait();
            eprintln!(
                "bench: a tracer ignored SIGINT for {} s, killed (its run is kept): {}",
                STOP_BOUND.as_secs(),
                self.stderr_text().trim()
            );
            return Ok(Counts {
                cpu_ns,
                killed: true,
                ..Counts::default()
            });
        }
        Ok(Counts {
            cpu_ns,
            ..parse_counts(&self.stderr_text())
        })
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The counts in xenstore-snoop's exit line
/// "xenstore-snoop: N events seen, M lost".
pub fn parse_counts(text: &str) -> Counts {
    let line = text.lines().rev().find(|l| l.contains("events seen"));
    let number_before = |key: &str| -> Option<u64> {
        let line = line?;
        let head = &line[..line.find(key)?];
        head.split(|c: char| !c.is_ascii_digit())
            .rfind(|w| !w.is_empty())?
            .parse()
            .ok()
    };
    Counts {
        seen: number_before("events seen"),
        lost: number_before(" lost"),
        cpu_ns: None,
        killed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_exit_line() {
        let c = parse_counts("xenstore-snoop: 1234 events seen, 7 lost\n");
        assert_eq!((c.seen, c.lost), (Some(1234), Some(7)));
        let c = parse_counts("nothing here");
        assert_eq!((c.seen, c.lost), (None, None));
    }
}
