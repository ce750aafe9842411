//! Child processes waited on with a deadline: a client run to completion, or
//! a long-running one (a tracer, a watch) whose output is collected.

use crate::lines::Lines;
use crate::wait::{wait_for, wait_until};
use std::io::{self, Read};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// How long a client may take to finish: generous, for a loaded machine.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);

/// Waits up to `timeout` for `child` to exit; on timeout kills it and panics.
pub fn wait_exit(child: &mut Child, what: &str, timeout: Duration) -> ExitStatus {
    let mut status = None;
    let waited = wait_until(&format!("{what} to exit"), timeout, || {
        status = child.try_wait().expect("wait for a child");
        status.is_some()
    });
    if let Err(e) = waited {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{e} (killed it)");
    }
    status.unwrap()
}

/// A child sent `signal` when dropped, even when the test fails, and killed
/// if it has not exited within 5 s: a leftover tracer keeps its uprobes, a
/// leftover daemon its socket.
pub struct StopOnDrop {
    pub child: Child,
    pub signal: i32,
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        crate::signal(self.child.id(), self.signal);
        let child = &mut self.child;
        let exited = wait_until("a stopped child to exit", Duration::from_secs(5), || {
            matches!(child.try_wait(), Ok(Some(_)))
        });
        if exited.is_err() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// As `Command::output`, but bounded: panics (killing the child) after
/// `timeout`.
pub fn output_within(cmd: &mut Command, timeout: Duration) -> Output {
    bounded_output(cmd, None, timeout)
}

/// `Command::output` with a deadline (`CLIENT_TIMEOUT`), for commands built
/// in a chain.
pub trait BoundedOutput {
    fn bounded_output(&mut self) -> Output;
}

impl BoundedOutput for Command {
    fn bounded_output(&mut self) -> Output {
        output_within(self, CLIENT_TIMEOUT)
    }
}

/// As `output_within`, with `input` on the child's stdin.
pub fn output_fed(cmd: &mut Command, input: &[u8], timeout: Duration) -> Output {
    bounded_output(cmd, Some(input.to_vec()), timeout)
}

fn bounded_output(cmd: &mut Command, input: Option<Vec<u8>>, timeout: Duration) -> Output {
    let stdin = match input {
        Some(_) => Stdio::piped(),
        None => Stdio::null(),
    };
    let mut child = cmd
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
    // Each pipe on its own thread, so a child that fills one never blocks.
    if let (Some(mut pipe), Some(input)) = (child.stdin.take(), input) {
        std::thread::spawn(move || std::io::Write::write_all(&mut pipe, &input));
    }
    let read_all = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = read_all(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = read_all(child.stderr.take().map(|p| Box::new(p) as _));
    let status = wait_exit(&mut child, &format!("{cmd:?}"), timeout);
    // A grandchild holding the pipes open would block the readers.
    wait_for(&format!("the output of {cmd:?}"), timeout, || {
        stdout.is_finished() && stderr.is_finished()
    });
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// A running child whose piped stdout and stderr are collected line by line.
/// Killed when dropped.
pub struct Watched {
    /// Names the process in failure messages.
    pub what: String,
    pub child: Child,
    stdout: Option<Lines>,
    stderr: Option<Lines>,
}

/// What a watched process left when it ended.
pub struct Ended {
    pub stdout: Vec<String>,
    pub stderr: Vec<String>,
    pub status: ExitStatus,
}

impl Watched {
    /// Spawns `cmd` and collects whichever of its stdout and stderr are
    /// piped; with `keep_stdout` the stdout pipe stays in `child.stdout`.
    pub fn spawn(what: &str, cmd: &mut Command, keep_stdout: bool) -> Watched {
        let mut child = spawn_retrying_etxtbsy(cmd).unwrap_or_else(|e| panic!("start {what}: {e}"));
        let stdout = match keep_stdout {
            true => None,
            false => child
                .stdout
                .take()
                .map(|p| Lines::collect(&format!("{what}'s stdout"), p)),
        };
        let stderr = child
            .stderr
            .take()
            .map(|p| Lines::collect(&format!("{what}'s stderr"), p));
        Watched {
            what: what.to_string(),
            child,
            stdout,
            stderr,
        }
    }

    /// Stdout lines so far (none when not collected).
    pub fn stdout(&self) -> Vec<String> {
        self.stdout
            .as_ref()
            .map(Lines::snapshot)
            .unwrap_or_default()
    }

    /// Stderr lines so far (none when not collected).
    pub fn stderr(&self) -> Vec<String> {
        self.stderr
            .as_ref()
            .map(Lines::snapshot)
            .unwrap_or_default()
    }

    /// Stdout line `i`, waiting up to `timeout` for it.
    pub fn line(&self, i: usize, timeout: Duration) -> String {
        self.stdout
            .as_ref()
            .expect("stdout not collected")
            .line(i, timeout)
    }

    /// Waits up to `timeout` until `ready(stdout, stderr)` holds; panics if
    /// the process exits first.
    pub fn wait_ready(
        &mut self,
        what: &str,
        timeout: Duration,
        ready: impl Fn(&[String], &[String]) -> bool,
    ) {
        wait_for(what, timeout, || {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("{} exited ({status}): {:?}", self.what, self.stderr());
            }
            ready(&self.stdout(), &self.stderr())
        });
    }

    /// The first stdout line satisfying `pred`, waiting up to `timeout`.
    pub fn wait_line(&self, what: &str, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
        self.stdout
            .as_ref()
            .expect("stdout not collected")
            .find(what, timeout, pred)
    }

    /// Waits up to `timeout` for the process to end by itself, then for
    /// all its output.
    pub fn end(mut self, timeout: Duration) -> Ended {
        let status = wait_exit(&mut self.child, &self.what, timeout);
        let stream =
            |lines: Option<Lines>| lines.map(|mut l| l.finish(timeout)).unwrap_or_default();
        Ended {
            stdout: stream(self.stdout.take()),
            stderr: stream(self.stderr.take()),
            status,
        }
    }

    /// Sends `signal`, then as `end`.
    pub fn stop(self, signal: i32, timeout: Duration) -> Ended {
        crate::signal(self.child.id(), signal);
        self.end(timeout)
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Spawns `cmd`, retrying briefly on ETXTBSY: a freshly copied binary stays
/// busy while a child that a parallel thread forked still holds the copy's
/// write descriptor (until that child execs).
pub fn spawn_retrying_etxtbsy(cmd: &mut Command) -> io::Result<Child> {
    const ETXTBSY: i32 = 26;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(ETXTBSY) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            result => return result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_that_hangs_is_killed_at_the_deadline() {
        let hung = std::panic::catch_unwind(|| {
            output_within(Command::new("sleep").arg("30"), Duration::from_millis(200))
        });
        assert!(hung.is_err());
    }

    #[test]
    fn every_line_is_in_once_the_child_has_ended() {
        let seq = Watched::spawn(
            "seq",
            Command::new("seq")
                .args(["1", "20000"])
                .stdout(Stdio::piped()),
            false,
        );
        let ended = seq.end(Duration::from_secs(30));
        assert!(ended.status.success());
        assert_eq!(ended.stdout.len(), 20000);
        assert_eq!(ended.stdout[19999], "20000");
    }

    #[test]
    fn a_line_that_never_comes_is_a_clear_failure() {
        let quiet = Watched::spawn("true", Command::new("true").stdout(Stdio::piped()), false);
        let missing = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            quiet.line(0, Duration::from_secs(10))
        }));
        let message = *missing.unwrap_err().downcast::<String>().unwrap();
        assert!(message.contains("ended before line 1"), "{message}");
    }
}
