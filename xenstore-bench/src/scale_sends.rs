//! The kernel's part of S2 spread's growth, measured in the run: the
//! daemon's send calls timed with bpftrace (entry to exit of each
//! sendto, by socket) during one more S2 spread run at the smallest and
//! the largest N. The socket with the most sends is the writer's, which
//! gets every reply; the others are the watchers', one event each.
//!
//! With ring domains, the run's writes all go to domains, and the
//! doorbells are timed too: a doorbell is a write(2) on the socket
//! connected to the domain's guest (std's `UnixDatagram::send`), a reply
//! a sendto on the writer's socket.

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use xenstore_testkit::scratch_dir;

/// How long bpftrace may take to attach, or to report.
const BPFTRACE_BOUND: Duration = Duration::from_secs(30);

/// Sends on some sockets: how many, and their mean time in the kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sends {
    pub count: u64,
    pub mean_ns: f64,
}

/// One traced run's sends, split by whose socket.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SendTimes {
    /// On the writer's socket: the replies (hot: every write's).
    pub replies: Sends,
    /// On the watchers' sockets: the events (each for a different one).
    pub events: Sends,
    /// How many watcher sockets were sent to.
    pub watchers: usize,
}

/// One traced run of domain events: the replies (sendto on the writer's
/// socket) and the doorbells (write on each domain's doorbell socket).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DoorbellTimes {
    pub replies: Sends,
    pub doorbells: Sends,
    /// How many doorbell sockets were written to.
    pub domains: usize,
}

/// bpftrace timing process `pid`'s sendto and write calls until `finish`.
pub struct SendTracer {
    pid: u32,
    child: Child,
    output: PathBuf,
    stderr: PathBuf,
}

impl SendTracer {
    /// Returns once every probe is attached (bpftrace runs BEGIN after
    /// attaching, and it prints the marker). The report comes when this
    /// process calls getppid (`finish`), not at bpftrace's exit: under
    /// load bpftrace has taken 20 s and more to stop (tracers.rs).
    pub fn start(pid: u32) -> Result<SendTracer> {
        let me = std::process::id();
        let dir = scratch_dir("send-tracer")?;
        let (output, stderr) = (dir.join("sends.out"), dir.join("sends.err"));
        let script = format!(
            "BEGIN {{ printf(\"attached\\n\"); }}\n\
             tracepoint:syscalls:sys_enter_sendto /pid == {pid}/ \
             {{ @start[tid] = nsecs; @fd[tid] = args->fd; }}\n\
             tracepoint:syscalls:sys_exit_sendto /pid == {pid} && @start[tid]/ \
             {{ @ns[@fd[tid]] = stats(nsecs - @start[tid]); delete(@start[tid]); \
             delete(@fd[tid]); }}\n\
             tracepoint:syscalls:sys_enter_write /pid == {pid}/ \
             {{ @wstart[tid] = nsecs; @wfd[tid] = args->fd; }}\n\
             tracepoint:syscalls:sys_exit_write /pid == {pid} && @wstart[tid]/ \
             {{ @bell[@wfd[tid]] = stats(nsecs - @wstart[tid]); delete(@wstart[tid]); \
             delete(@wfd[tid]); }}\n\
             tracepoint:syscalls:sys_enter_getppid /pid == {me}/ \
             {{ print(@ns); print(@bell); printf(\"reported\\n\"); exit(); }}\n\
             END {{ clear(@start); clear(@fd); clear(@ns); clear(@wstart); clear(@wfd); \
             clear(@bell); }}\n"
        );
        let child = Command::new("bpftrace")
            .args(["-B", "line", "-e", &script])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&output)?)
            .stderr(std::fs::File::create(&stderr)?)
            .spawn()
            .context("start bpftrace")?;
        let mut t = SendTracer {
            pid,
            child,
            output,
            stderr,
        };
        let deadline = Instant::now() + BPFTRACE_BOUND;
        while !std::fs::read_to_string(&t.output)?.contains("attached") {
            if let Some(status) = t.child.try_wait()? {
                bail!("bpftrace exited ({status}): {}", t.stderr_text());
            }
            if Instant::now() > deadline {
                bail!("bpftrace did not attach within 30 s: {}", t.stderr_text());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(t)
    }

    fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Has bpftrace report its sends (see `start`), and splits them.
    pub fn finish(mut self) -> Result<SendTimes> {
        let text = self.report()?;
        parse(&text).with_context(|| format!("bpftrace's stderr: {}", self.stderr_text().trim()))
    }

    /// The same for a run of domain events: replies and doorbells.
    pub fn finish_doorbells(mut self) -> Result<DoorbellTimes> {
        let text = self.report()?;
        parse_doorbells(&text)
            .with_context(|| format!("bpftrace's stderr: {}", self.stderr_text().trim()))
    }

    /// bpftrace's report, once it has printed it.
    fn report(&mut self) -> Result<String> {
        wait_for_epoll(self.pid)?;
        // SAFETY: getppid has no preconditions; the call is the signal.
        unsafe { libc::getppid() };
        let deadline = Instant::now() + BPFTRACE_BOUND;
        loop {
            let text = std::fs::read_to_string(&self.output)?;
            if text.contains("reported") {
                return Ok(text);
            }
            if let Some(status) = self.child.try_wait()? {
                bail!("bpftrace exited ({status}): {}", self.stderr_text());
            }
            if Instant::now() > deadline {
                bail!("bpftrace did not report within 30 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The syscall mio's poll waits in (aarch64 has only epoll_pwait).
#[cfg(target_arch = "x86_64")]
const EPOLL_WAIT: libc::c_long = libc::SYS_epoll_wait;
#[cfg(not(target_arch = "x86_64"))]
const EPOLL_WAIT: libc::c_long = libc::SYS_epoll_pwait;

/// Returns once daemon `pid` waits in epoll_wait: every send it began
/// has returned. A client has its event once the daemon's send has copied
/// it, and on the daemon's CPU the woken client can run before that send
/// returns: a report taken then would miss the last send's exit.
fn wait_for_epoll(pid: u32) -> Result<()> {
    let file = format!("/proc/{pid}/syscall");
    let deadline = Instant::now() + BPFTRACE_BOUND;
    loop {
        let now = std::fs::read_to_string(&file).with_context(|| format!("read {file}"))?;
        let syscall = now.split(' ').next().and_then(|n| n.parse().ok());
        if syscall == Some(EPOLL_WAIT) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("daemon {pid} not back in epoll_wait within 30 s ({file}: {now:?})");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

impl Drop for SendTracer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// bpftrace's `@ns[FD]: count C, average A, total T` lines, split into
/// the busiest socket (the writer's) and the rest (the watchers').
pub fn parse(text: &str) -> Result<SendTimes> {
    let mut per_fd = per_fd(text, "@ns[")?;
    per_fd.sort_unstable_by_key(|&(count, _)| std::cmp::Reverse(count));
    let Some((&writer, watchers)) = per_fd.split_first() else {
        bail!("bpftrace saw no send");
    };
    Ok(SendTimes {
        replies: sends(&[writer]),
        events: sends(watchers),
        watchers: watchers.len(),
    })
}

/// The busiest sendto socket (the writer's) and every written one (the
/// doorbells).
pub fn parse_doorbells(text: &str) -> Result<DoorbellTimes> {
    let replies = per_fd(text, "@ns[")?;
    let Some(&writer) = replies.iter().max_by_key(|f| f.0) else {
        bail!("bpftrace saw no reply");
    };
    let bells = per_fd(text, "@bell[")?;
    if bells.is_empty() {
        bail!("bpftrace saw no doorbell");
    }
    Ok(DoorbellTimes {
        replies: sends(&[writer]),
        doorbells: sends(&bells),
        domains: bells.len(),
    })
}

fn sends(fds: &[(u64, u64)]) -> Sends {
    let count: u64 = fds.iter().map(|f| f.0).sum();
    let total: u64 = fds.iter().map(|f| f.1).sum();
    Sends {
        count,
        mean_ns: total as f64 / count.max(1) as f64,
    }
}

/// (count, total ns) of each of the map's `MAP[FD]: count C, …, total T` lines.
fn per_fd(text: &str, map: &str) -> Result<Vec<(u64, u64)>> {
    let mut per_fd = Vec::new();
    for line in text.lines().filter(|l| l.starts_with(map)) {
        let field = |name: &str| -> Result<u64> {
            let at = line
                .find(name)
                .with_context(|| format!("no {name} in {line:?}"))?;
            let digits: String = line[at + name.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits
                .parse()
                .with_context(|| format!("bad {name} in {line:?}"))
        };
        per_fd.push((field("count ")?, field("total ")?));
    }
    Ok(per_fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busiest_socket_is_the_writers() {
        let text = "attached\n\n\
                    @ns[7]: count 10, average 1500, total 15000\n\
                    @ns[5]: count 30, average 900, total 27000\n\
                    @ns[9]: count 10, average 2500, total 25000\n";
        let t = parse(text).unwrap();
        assert_eq!(
            t.replies,
            Sends {
                count: 30,
                mean_ns: 900.0
            }
        );
        assert_eq!(
            t.events,
            Sends {
                count: 20,
                mean_ns: 2000.0
            }
        );
        assert_eq!(t.watchers, 2);
    }

    #[test]
    fn doorbells_are_the_writes_and_the_reply_the_busiest_sendto() {
        let text = "attached\n\n\
                    @ns[5]: count 30, average 900, total 27000\n\
                    @ns[9]: count 1, average 2000, total 2000\n\n\
                    @bell[12]: count 10, average 1000, total 10000\n\
                    @bell[14]: count 20, average 2500, total 50000\n";
        let t = parse_doorbells(text).unwrap();
        assert_eq!(
            t.replies,
            Sends {
                count: 30,
                mean_ns: 900.0
            }
        );
        assert_eq!(
            t.doorbells,
            Sends {
                count: 30,
                mean_ns: 2000.0
            }
        );
        assert_eq!(t.domains, 2);
        let e = parse_doorbells("attached\n@ns[5]: count 3, average 9, total 27\n").unwrap_err();
        assert!(format!("{e}").contains("no doorbell"), "{e}");
    }

    #[test]
    fn no_send_is_an_error() {
        let e = parse("attached\n").unwrap_err();
        assert!(format!("{e}").contains("no send"), "{e}");
    }
}
