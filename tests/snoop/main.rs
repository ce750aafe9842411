mod attach;
#[path = "../common/mod.rs"]
mod common;
mod filters;
mod lifecycle;
mod loss;
mod output;
mod summary;
mod timeline;
mod top;
mod trace_file;

use common::process::{output_within, wait_exit, BoundedOutput, Ended, Watched, CLIENT_TIMEOUT};
use common::shim::{private_dir, Shim};
use common::TIMEOUT;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A running xenstore-snoop whose output is collected line by line.
struct Snooper(Watched);

impl Snooper {
    /// Starts the snooper on `shim` and waits until its events are enabled.
    fn attach(shim: &Shim, args: &[&str]) -> Snooper {
        let pid = shim.pid().to_string();
        Snooper::start(&[&["--daemon-pid", &pid], args].concat())
    }

    /// Starts the snooper with exactly `args` and waits until it is attached.
    fn start(args: &[&str]) -> Snooper {
        let mut snoop = Watched::spawn(
            "xenstore-snoop",
            common::snoop_command()
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
            false,
        );
        snoop.wait_ready("the snooper to attach", TIMEOUT, |_, err| {
            err.iter().any(|l| l.contains("Ctrl-C to end."))
        });
        Snooper(snoop)
    }

    fn pid(&self) -> u32 {
        self.0.child.id()
    }

    /// Its "Tracing ..." line: what it attached and how.
    fn tracing_line(&self) -> String {
        let said = self.stderr();
        said.iter()
            .find(|l| l.starts_with("Tracing "))
            .unwrap_or_else(|| panic!("no Tracing line: {said:?}"))
            .clone()
    }

    /// Whether it captures through tracefs uprobes (else BPF), as it said.
    fn on_tracefs(&self) -> bool {
        let tracing = self.tracing_line();
        assert!(
            tracing.contains("(tracefs, ") || tracing.contains("(BPF, "),
            "{tracing}"
        );
        tracing.contains("(tracefs, ")
    }

    fn stdout(&self) -> Vec<String> {
        self.0.stdout()
    }

    fn stderr(&self) -> Vec<String> {
        self.0.stderr()
    }

    /// Waits until some output line satisfies `pred`.
    fn wait_line(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        self.0.wait_line(what, TIMEOUT, pred)
    }

    /// SIGINT, then the whole output and the exit status.
    fn stop(self) -> (Vec<String>, Vec<String>, std::process::ExitStatus) {
        self.stop_with(2)
    }

    fn stop_with(self, signal: i32) -> (Vec<String>, Vec<String>, std::process::ExitStatus) {
        let Ended {
            stdout,
            stderr,
            status,
        } = self.0.stop(signal, TIMEOUT);
        (stdout, stderr, status)
    }
}

/// A Debian client connected as a guest domain.
fn guest(socket: &Path, program: &str, args: &[&str]) -> std::process::Output {
    output_within(
        Command::new(program)
            .env("XENSTORED_PATH", socket)
            .args(args),
        CLIENT_TIMEOUT,
    )
}

fn columns(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// The snooper's closing line on standard error: "S events seen, L lost".
fn stats_line(stderr: &[String]) -> &str {
    stderr
        .iter()
        .find(|l| l.contains("events seen"))
        .unwrap_or_else(|| panic!("no events seen line: {stderr:?}"))
}

/// Each line parsed as JSON.
fn json_lines<S: AsRef<str>>(lines: impl IntoIterator<Item = S>) -> Vec<serde_json::Value> {
    lines
        .into_iter()
        .map(|l| {
            let l = l.as_ref();
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))
        })
        .collect()
}

/// The daemon's semaphores for every probe note, read from its memory,
/// with the probe's name.
fn semaphores(shim: &Shim) -> Vec<(String, u16)> {
    let pid = shim.pid();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    let probes = xenstore_snoop::sdt::read_probes(&exe).unwrap();
    // The first mapping of the binary is file offset 0.
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let base = maps
        .lines()
        .find(|l| l.ends_with(exe.to_str().unwrap()))
        .map(|l| u64::from_str_radix(l.split('-').next().unwrap(), 16).unwrap())
        .unwrap();
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    probes
        .iter()
        .map(|p| {
            let mut b = [0u8; 2];
            std::os::unix::fs::FileExt::read_exact_at(&mem, &mut b, base + sema_vaddr(&exe, p))
                .unwrap();
            (p.name.clone(), u16::from_ne_bytes(b))
        })
        .collect()
}

/// Whether every semaphore is down (nothing attached).
fn all_down(semaphores: &[(String, u16)]) -> bool {
    semaphores.iter().all(|s| s.1 == 0)
}

/// The probes a snooper without -v attaches to: their semaphores are up,
/// every other one down, so the daemon builds no arguments nobody reads.
const SNOOPED: [&str; 4] = ["reply", "watch_event", "conn_open", "truncated"];

/// The semaphore's offset from the load base, from the ELF itself.
fn sema_vaddr(exe: &Path, probe: &xenstore_snoop::sdt::SdtProbe) -> u64 {
    let out = Command::new("readelf").arg("-n").arg(exe).bounded_output();
    let notes = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = notes.lines();
    while let Some(l) = lines.next() {
        if l.trim() == format!("Name: {}", probe.name) {
            let loc = lines.next().unwrap();
            let sema = loc.rsplit("Semaphore: ").next().unwrap().trim();
            return u64::from_str_radix(sema.trim_start_matches("0x"), 16).unwrap();
        }
    }
    panic!("probe {} not in readelf -n", probe.name);
}

fn our_uprobes(group_pid: u32) -> Vec<String> {
    std::fs::read_to_string("/sys/kernel/tracing/uprobe_events")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&format!("xssnoop_{group_pid}/")))
        .map(str::to_string)
        .collect()
}

/// Runs xenstore-snoop with `args` to the end (replays need no daemon).
fn snoop_run(args: &[&str]) -> std::process::Output {
    Command::new(common::bin("xenstore-snoop"))
        .args(args)
        .stdin(Stdio::null())
        .bounded_output()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Seconds of the day of `HH:MM:SS.ffffff`.
fn chrono_like(t: &str) -> f64 {
    let parts: Vec<f64> = t.split(':').map(|p| p.parse().unwrap()).collect();
    parts[0] * 3600.0 + parts[1] * 60.0 + parts[2]
}

/// Moves every thread of `pid` to the first CPU this test may use.
fn pin_to_one_cpu(pid: u32) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list in /proc/self/status");
    let cpu = allowed.trim().split([',', '-']).next().unwrap();
    let out = Command::new("taskset")
        .args(["-a", "-p", "-c", cpu, &pid.to_string()])
        .bounded_output();
    assert!(out.status.success(), "taskset: {out:?}");
}
