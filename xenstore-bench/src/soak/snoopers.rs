//! xenstore-snoop instances started, killed and stopped under load, driven
//! only through the snooper's command line (so any back end will do): each
//! prints JSON lines, and one stopped by SIGINT must account for every
//! request it saw go by: each serial between its first and last line was
//! printed, or its final report counts at least that many events lost.

use anyhow::{bail, Context, Result};
use fastrand::Rng;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use xenstore_testkit::lines::Lines;
use xenstore_testkit::wait_until;

const SIGKILL: i32 = 9;
const SIGINT: i32 = 2;
/// Attaching and detaching under load, on a loaded machine, may be slow.
const TIMEOUT: Duration = Duration::from_secs(60);

/// What the snooper wrote to stdout, reduced as it arrives: a minutes-long
/// stretch prints millions of lines.
#[derive(Default)]
struct Tally {
    /// Serials of request lines.
    serials: Vec<u64>,
    /// Every line (requests, watch events, anything else).
    lines: u64,
    /// Lines that are not JSON objects with a kind.
    garbled: u64,
}

pub struct Snooper {
    child: Child,
    stdout: Option<JoinHandle<Tally>>,
    stderr: Lines,
}

/// What one snooper stopped by SIGINT accounted for.
#[derive(Debug, Default, Clone, Copy)]
pub struct Accounting {
    pub lines: u64,
    /// Distinct requests printed.
    pub requests: u64,
    /// Serials from its first request line to its last.
    pub span: u64,
    pub lost: u64,
    /// The snooper's own requests, which it does not show (its report says
    /// how many).
    pub own: u64,
}

impl Snooper {
    /// Starts `binary --daemon-pid PID --json --ring-mb MIB`.
    pub fn start(binary: &Path, daemon_pid: u32, ring_mb: u32) -> Result<Snooper> {
        let mut child = Command::new(binary)
            .args(["--daemon-pid", &daemon_pid.to_string(), "--json"])
            .args(["--ring-mb", &ring_mb.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("start {}", binary.display()))?;
        let out = BufReader::new(child.stdout.take().unwrap());
        let stdout = std::thread::spawn(move || {
            let mut t = Tally::default();
            for line in out.lines().map_while(Result::ok) {
                t.lines += 1;
                match serde_json::from_str::<serde_json::Value>(&line) {
                    Ok(v) if v["kind"] == "op" => match v["serial"].as_u64() {
                        Some(s) => t.serials.push(s),
                        None => t.garbled += 1,
                    },
                    Ok(v) if v["kind"].is_string() => {}
                    _ => t.garbled += 1,
                }
            }
            t
        });
        let stderr = Lines::collect("xenstore-snoop's stderr", child.stderr.take().unwrap());
        Ok(Snooper {
            child,
            stdout: Some(stdout),
            stderr,
        })
    }

    fn stderr(&self) -> Vec<String> {
        self.stderr.snapshot()
    }

    /// Waits until it says it is tracing ("... Ctrl-C to end.").
    pub fn wait_attached(&mut self) -> Result<()> {
        let mut exited = None;
        let waited = wait_until("xenstore-snoop to attach", TIMEOUT, || {
            exited = self.child.try_wait().ok().flatten();
            exited.is_some() || self.stderr().iter().any(|l| l.contains("Ctrl-C to end"))
        });
        if let Some(status) = exited {
            bail!(
                "xenstore-snoop exited ({status}) before attaching: {:?}",
                self.stderr()
            );
        }
        waited.with_context(|| format!("{:?}", self.stderr()))
    }

    /// SIGKILL: nothing of it may be left once a later snooper has started.
    pub fn kill(mut self) -> Result<()> {
        xenstore_testkit::signal(self.child.id(), SIGKILL);
        self.child.wait()?;
        Ok(())
    }

    /// SIGINT: it must exit 0 and account for every request it saw.
    pub fn interrupt(mut self) -> Result<Accounting> {
        xenstore_testkit::signal(self.child.id(), SIGINT);
        let mut status = None;
        wait_until("xenstore-snoop to exit on SIGINT", TIMEOUT, || {
            status = self.child.try_wait().ok().flatten();
            status.is_some()
        })?;
        let stdout = self.stdout.take().unwrap().join();
        let mut t = stdout.map_err(|_| anyhow::anyhow!("the stdout reader panicked"))?;
        let stderr = self.stderr.finish(TIMEOUT);
        let status = status.unwrap();
        if !status.success() {
            bail!("xenstore-snoop exited {status} on SIGINT: {stderr:?}");
        }
        let lost = lost_count(&stderr)
            .with_context(|| format!("no \"N lost\" in the snooper's report: {stderr:?}"))?;
        if t.garbled > 0 {
            bail!(
                "{} of {} output lines are not JSON records",
                t.garbled,
                t.lines
            );
        }
        t.serials.sort_unstable();
        let printed = t.serials.len() as u64;
        t.serials.dedup();
        let requests = t.serials.len() as u64;
        if requests != printed {
            bail!("{} requests printed twice", printed - requests);
        }
        let (first, last) = (t.serials.first(), t.serials.last());
        let span = first.zip(last).map_or(0, |(lo, hi)| hi - lo + 1);
        let a = Accounting {
            lines: t.lines,
            requests,
            span,
            lost,
            own: own_count(&stderr),
        };
        if span - requests > lost + a.own {
            bail!(
                "{} requests between serials {first:?} and {last:?} neither printed nor \
                 counted lost: {a:?}, {stderr:?}",
                span - requests - lost - a.own,
            );
        }
        Ok(a)
    }
}

impl Drop for Snooper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// L of the final report "xenstore-snoop: S events seen, L lost...".
fn lost_count(stderr: &[String]) -> Option<u64> {
    count_before(stderr, " lost")
}

/// N of the final report's ", N of its own requests (domain names) not
/// shown" (the snooper's look-ups through the daemon), 0 without it.
fn own_count(stderr: &[String]) -> u64 {
    count_before(stderr, " of its own requests").unwrap_or(0)
}

/// The number just before `what` in the final report.
fn count_before(stderr: &[String], what: &str) -> Option<u64> {
    let report = stderr.iter().rev().find(|l| l.contains(" events seen"))?;
    let before = &report[..report.find(what)?];
    before.rsplit([' ', ',']).next()?.parse().ok()
}

/// The churn: one snooper after another until `stop`, each killed (SIGKILL
/// during or after attaching) or stopped (SIGINT) at a random moment. The
/// last is always stopped by SIGINT, after every kill.
#[derive(Default)]
pub struct Churn {
    pub started: u64,
    pub killed: u64,
    pub interrupted: Vec<Accounting>,
}

pub fn churn(
    binary: &Path,
    daemon_pid: u32,
    ring_mb: u32,
    mut rng: Rng,
    stop: &AtomicBool,
) -> Result<Churn> {
    let mut c = Churn::default();
    loop {
        let last = stop.load(Ordering::Relaxed);
        let mut s = Snooper::start(binary, daemon_pid, ring_mb)?;
        c.started += 1;
        let roll = rng.u8(..10);
        if roll == 0 && !last {
            // Killed at any point of its start, attached or not.
            std::thread::sleep(Duration::from_millis(rng.u64(..300)));
            s.kill()?;
            c.killed += 1;
            continue;
        }
        s.wait_attached()?;
        std::thread::sleep(Duration::from_millis(rng.u64(200..2000)));
        if roll < 4 && !last {
            s.kill()?;
            c.killed += 1;
        } else {
            let a = s.interrupt().context("a snooper stopped by SIGINT")?;
            c.interrupted.push(a);
        }
        if last {
            return Ok(c);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_lost_count_is_read_from_the_final_report() {
        let err = |l: &str| vec!["Tracing ... Ctrl-C to end.".to_string(), l.to_string()];
        assert_eq!(
            super::lost_count(&err("xenstore-snoop: 10 events seen, 0 lost")),
            Some(0)
        );
        assert_eq!(
            super::lost_count(&err(
                "xenstore-snoop: 10 events seen, 37 lost, 2 undecodable"
            )),
            Some(37)
        );
        assert_eq!(super::lost_count(&err("nothing")), None);
        let own = err("xenstore-snoop: 10 events seen, 3 lost, 8 of its own requests (domain names) not shown");
        assert_eq!(
            (super::lost_count(&own), super::own_count(&own)),
            (Some(3), 8)
        );
        assert_eq!(
            super::own_count(&err("xenstore-snoop: 10 events seen, 3 lost")),
            0
        );
    }
}
