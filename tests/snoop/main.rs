//! xenstore-snoop against a real shim, real clients and real uprobes.
//!
//! Every test runs its own copy of the shim binary: uprobes attach to an
//! inode, so a private copy keeps other tests' snoopers (and their
//! semaphore counts) away from ours.

#[path = "../common/mod.rs"]
mod common;

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

#[test]
fn classic_lines_for_real_clients() {
    if !common::need_root("classic_lines_for_real_clients") {
        return;
    }
    let shim = Shim::private_copy();
    let dom6 = common::introduce(&shim, 6);
    let snoop = Snooper::attach(&shim, &[]);

    // dom0 via pyxs: the domain path, a transaction with one write.
    common::pyxs(
        &shim.socket,
        "c.get_domain_path(6)\n\
         c.transaction()\n\
         c.write(b'/local/domain/6/data/tx-written', b'yes')\n\
         assert c.commit()\n\
         c.close()\n",
    );
    // dom0 watches, then a guest read, a missing node and a write firing it.
    let watch = shim.watch(&["-n", "2", "/local/domain/6/device"]);
    snoop.wait_line("for the WATCH", |l| {
        l.contains("XS_WATCH: /local/domain/6/device")
    });
    let read = guest(&dom6, "xenstore-read", &["device/vbd/0/state"]);
    assert_eq!(String::from_utf8_lossy(&read.stdout).trim(), "3");
    let missing = guest(&dom6, "xenstore-read", &["device/vif/0/type"]);
    assert!(!missing.status.success());
    let write = guest(&dom6, "xenstore-write", &["device/vbd/0/state", "4"]);
    assert!(write.status.success(), "{write:?}");
    assert!(watch.end(TIMEOUT).status.success());

    let header = snoop.stdout()[0].clone();
    assert_eq!(columns(&header), ["DOM", "PID", "COMM", "TX", "OP"]);
    let gdp = snoop.wait_line("XS_GET_DOMAIN_PATH", |l| l.contains("XS_GET_DOMAIN_PATH:"));
    let c = columns(&gdp);
    assert_eq!(c[0], "0", "{gdp}");
    assert_ne!(c[1], "0", "a dom0 client has a pid: {gdp}");
    assert_eq!(c[2], "python3", "the client's comm: {gdp}");
    assert_eq!(c[3], "0", "{gdp}");
    assert!(
        gdp.ends_with("XS_GET_DOMAIN_PATH: 6 -> /local/domain/6"),
        "{gdp}"
    );

    let start = snoop.wait_line("XS_TRANSACTION_START", |l| {
        l.contains("XS_TRANSACTION_START")
    });
    let tx_id = start.rsplit("-> ").next().unwrap().trim().to_string();
    assert!(tx_id.parse::<u32>().unwrap() > 0, "{start}");
    let tx_write = snoop.wait_line("the write in the transaction", |l| {
        l.contains("XS_WRITE: /local/domain/6/data/tx-written yes -> OK")
    });
    assert_eq!(columns(&tx_write)[3], tx_id, "{tx_write}");
    let tx_end = snoop.wait_line("XS_TRANSACTION_END", |l| l.contains("XS_TRANSACTION_END"));
    assert_eq!(columns(&tx_end)[3], tx_id, "{tx_end}");

    let guest_read = snoop.wait_line("the guest read", |l| {
        l.contains("XS_READ: device/vbd/0/state -> 3")
    });
    // no /local/domain/6/name in this store: the guest is `-`
    assert_eq!(
        columns(&guest_read)[..4],
        ["6", "0", "-", "0"],
        "{guest_read}"
    );
    let enoent = snoop.wait_line("the ENOENT", |l| l.contains("device/vif/0/type"));
    assert!(
        enoent.ends_with("[ERROR] XS_READ: device/vif/0/type -> ENOENT"),
        "{enoent}"
    );
    assert_eq!(columns(&enoent)[0], "6");
    let event = snoop.wait_line("the watch event", |l| {
        l.contains("XS_WATCH_EVENT: /local/domain/6/device/vbd/0/state")
    });
    let c = columns(&event);
    assert_eq!((c[0], c[2], c[3]), ("0", "xenstore-watch", "-"), "{event}");
    assert_eq!(c.len(), 7, "path and token: {event}");

    let me = snoop.pid();
    let (_, stderr, status) = snoop.stop();
    assert!(status.success(), "{status} {stderr:?}");
    assert!(our_uprobes(me).is_empty(), "SIGINT leaves no group");
    let stats = stats_line(&stderr);
    // Domain 6's name, looked up once through the daemon, is not shown.
    assert!(
        stats.ends_with(", 0 lost, 1 of its own requests (domain names) not shown"),
        "{stats}"
    );
}

#[test]
fn domain_filter_shows_only_that_domain() {
    if !common::need_root("domain_filter_shows_only_that_domain") {
        return;
    }
    let shim = Shim::private_copy();
    let dom6 = common::introduce(&shim, 6);
    let dom7 = common::introduce(&shim, 7);
    let snoop = Snooper::attach(&shim, &["-d", "6"]);
    shim.run("xenstore-write", &["/local/domain/6/from-dom0", "x"]);
    assert!(guest(&dom7, "xenstore-read", &["device/vbd/0/state"])
        .status
        .success());
    assert!(guest(&dom6, "xenstore-read", &["device/vbd/0/state"])
        .status
        .success());
    assert!(guest(&dom6, "xenstore-write", &["done", "1"])
        .status
        .success());
    snoop.wait_line("dom 6's last write", |l| {
        l.contains("XS_WRITE: done 1 -> OK")
    });
    let (out, _, status) = snoop.stop();
    assert!(status.success());
    let lines = &out[1..];
    assert!(lines.len() >= 2, "{out:?}");
    for l in lines {
        assert_eq!(columns(l)[0], "6", "a line of another domain: {l}");
    }
}

#[test]
fn json_lines_parse_with_the_schema() {
    if !common::need_root("json_lines_parse_with_the_schema") {
        return;
    }
    let shim = Shim::private_copy();
    let snoop = Snooper::attach(&shim, &["--json", "-v"]);
    shim.run("xenstore-write", &["/json/a", "line1\nline2"]);
    let missing = shim
        .client("xenstore-read")
        .arg("/json/missing")
        .bounded_output();
    assert!(!missing.status.success());
    let watch = shim.watch(&["-n", "2", "/json"]);
    snoop.wait_line("the WATCH", |l| l.contains("\"XS_WATCH\""));
    shim.run("xenstore-write", &["/json/b", "2"]);
    assert!(watch.end(TIMEOUT).status.success());
    snoop.wait_line("the watch event", |l| {
        l.contains("\"watch_event\"") && l.contains("/json/b")
    });
    let (out, _, status) = snoop.stop();
    assert!(status.success());

    let records = json_lines(&out);
    for r in &records {
        for key in xenstore_snoop::output::JSON_KEYS {
            assert!(r.get(key).is_some(), "{key} missing: {r}");
        }
    }
    let write = records
        .iter()
        .find(|r| r["op"] == "XS_WRITE" && r["path"] == "/json/a")
        .expect("the write");
    assert_eq!(write["value"], "line1\nline2");
    assert_eq!(write["result"], "OK");
    assert!(write["latency_us"].as_f64().unwrap() > 0.0);
    assert!(write["ts"].as_str().unwrap().ends_with('Z'));
    // JSON shows when each request came (the BPF program reads the clock
    // only when the output shows times).
    let later = records
        .iter()
        .find(|r| r["op"] == "XS_WRITE" && r["path"] == "/json/b")
        .expect("the second write");
    let (a, b) = (write["mono_ns"].as_u64(), later["mono_ns"].as_u64());
    assert!(a.unwrap() > 0 && a < b, "{write} then {later}");
    let read = records
        .iter()
        .find(|r| r["op"] == "XS_READ" && r["path"] == "/json/missing")
        .expect("the failed read");
    assert_eq!(read["error"], "ENOENT");
    let fired = records
        .iter()
        .find(|r| r["kind"] == "watch_event" && r["path"] == "/json/b")
        .expect("the watch event");
    let firer = records
        .iter()
        .find(|r| r["op"] == "XS_WRITE" && r["path"] == "/json/b")
        .expect("the firing write");
    assert_eq!(fired["fired_by"], firer["serial"]);
    assert_eq!(fired["tx"], serde_json::Value::Null);
    assert!(
        records.iter().any(|r| r["kind"] == "conn_open"),
        "-v shows connections"
    );
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

#[test]
fn sigkilled_snooper_leaves_nothing_behind() {
    if !common::need_root("sigkilled_snooper_leaves_nothing_behind") {
        return;
    }
    let shim = Shim::private_copy();
    assert!(all_down(&semaphores(&shim)));
    let first = Snooper::attach(&shim, &[]);
    let victim = first.pid();
    // BPF attaches without tracefs events: only the semaphores show it.
    assert_eq!(!our_uprobes(victim).is_empty(), first.on_tracefs());
    let raised = semaphores(&shim);
    for (probe, count) in &raised {
        let attached = SNOOPED.contains(&probe.as_str());
        assert_eq!(*count > 0, attached, "{probe}: {raised:?}");
    }
    shim.run("xenstore-write", &["/killed/a", "1"]);
    first.wait_line("the write", |l| l.contains("XS_WRITE: /killed/a 1"));
    first.stop_with(9); // SIGKILL
                        // Its perf events closed with it: the probes are off already.
    assert!(all_down(&semaphores(&shim)), "{:?}", semaphores(&shim));

    let second = Snooper::attach(&shim, &[]);
    assert!(
        our_uprobes(victim).is_empty(),
        "stale group left: {:?}\nthe second snooper said: {:?}",
        our_uprobes(victim),
        second.stderr()
    );
    // (A snooper of a parallel test may have been the one to remove it.)
    shim.run("xenstore-write", &["/killed/b", "2"]);
    second.wait_line("the write", |l| l.contains("XS_WRITE: /killed/b 2"));
    let me = second.pid();
    let (_, _, status) = second.stop_with(15);
    assert!(status.success());
    assert!(our_uprobes(me).is_empty(), "SIGTERM leaves no group");
    assert!(all_down(&semaphores(&shim)));
}

/// Another daemon run from the same binary is left alone: nothing of it
/// is shown, and with the BPF back end's uprobe-multi link its probes stay
/// off (it neither traps nor builds probe strings). tracefs uprobe events
/// and BPF's per-site links (for kernels without uprobe-multi) reach it,
/// and its firings are dropped.
#[test]
fn a_second_daemon_of_the_same_binary_is_left_alone() {
    if !common::need_root("a_second_daemon_of_the_same_binary_is_left_alone") {
        return;
    }
    let traced = Shim::private_copy();
    let dir = common::daemon::scratch_dir("twin").unwrap();
    let twin = Shim::launch("xenstored-shim twin", &traced.binary, dir, &[]).unwrap();
    let snoop = Snooper::attach(&traced, &[]);
    for (probe, count) in semaphores(&traced) {
        assert_eq!(count > 0, SNOOPED.contains(&probe.as_str()), "{probe}");
    }
    if !snoop.on_tracefs() {
        assert!(all_down(&semaphores(&twin)), "{:?}", semaphores(&twin));
        let tracing = snoop.tracing_line();
        assert!(
            !tracing.contains("uprobe link each"),
            "this kernel (6.6 or later) has uprobe-multi links: {tracing:?}"
        );
    }
    twin.run("xenstore-write", &["/twin/a", "1"]);
    traced.run("xenstore-write", &["/twin/b", "2"]);
    snoop.wait_line("the traced write", |l| l.contains("XS_WRITE: /twin/b 2"));
    let (out, _, status) = snoop.stop();
    assert!(status.success());
    assert!(!out.iter().any(|l| l.contains("/twin/a")), "{out:?}");

    let per_site = Snooper::attach(&traced, &["--backend", "bpf", "--bpf-links", "per-site"]);
    let tracing = per_site.tracing_line();
    assert!(tracing.contains("a uprobe link each"), "{tracing:?}");
    assert!(
        !all_down(&semaphores(&twin)),
        "per-site links reach the twin"
    );
    twin.run("xenstore-write", &["/twin/c", "3"]);
    traced.run("xenstore-write", &["/twin/d", "4"]);
    per_site.wait_line("the traced write", |l| {
        l.contains("XS_WRITE: /twin/d 4 -> OK")
    });
    let (out, _, status) = per_site.stop();
    assert!(status.success());
    assert!(!out.iter().any(|l| l.contains("/twin/c")), "{out:?}");
    assert!(all_down(&semaphores(&twin)) && all_down(&semaphores(&traced)));
}

/// --paired attaches request and response instead of reply, and makes
/// the same lines from them.
#[test]
fn paired_mode_makes_the_same_lines_from_request_and_response() {
    if !common::need_root("paired_mode_makes_the_same_lines_from_request_and_response") {
        return;
    }
    let shim = Shim::private_copy();
    let snoop = Snooper::attach(&shim, &["--paired", "-L"]);
    for (probe, count) in semaphores(&shim) {
        let attached = [
            "request",
            "response",
            "watch_event",
            "conn_open",
            "truncated",
        ]
        .contains(&probe.as_str());
        assert_eq!(count > 0, attached, "{probe}");
    }
    shim.run("xenstore-write", &["/paired/a", "1"]);
    let line = snoop.wait_line("the write", |l| l.contains("XS_WRITE: /paired/a 1 -> OK"));
    // DOM PID COMM TX LAT(us) OP
    let latency: f64 = columns(&line)[4].parse().unwrap();
    assert!(latency > 0.0, "{line}");
    let (_, _, status) = snoop.stop();
    assert!(status.success());
}

/// A daemon binary from before `reply` (its note renamed in a private
/// copy, so the SDT notes no longer offer it) is snooped through request
/// and response, with the same lines.
#[test]
fn a_daemon_without_the_reply_probe_gets_request_and_response() {
    if !common::need_root("a_daemon_without_the_reply_probe_gets_request_and_response") {
        return;
    }
    let dir = common::daemon::scratch_dir("no-reply").unwrap();
    let binary = dir.join("xenstored-shim");
    let mut bytes = std::fs::read(common::bin("xenstored-shim")).unwrap();
    // A note's strings are "provider\0name\0args\0".
    let note = b"xenstore\0reply\0";
    let at: Vec<usize> = bytes
        .windows(note.len())
        .enumerate()
        .filter(|(_, w)| w == note)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(at.len(), 1, "one reply note in the shim");
    bytes[at[0] + b"xenstore\0".len()..][..5].copy_from_slice(b"older");
    std::fs::write(&binary, bytes).unwrap();
    std::fs::set_permissions(&binary, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let shim = Shim::launch("xenstored-shim without reply", &binary, dir, &[]).unwrap();
    assert!(!semaphores(&shim).iter().any(|(probe, _)| probe == "reply"));

    let snoop = Snooper::attach(&shim, &["-L"]);
    let up: Vec<String> = semaphores(&shim)
        .into_iter()
        .filter(|(_, count)| *count > 0)
        .map(|(probe, _)| probe)
        .collect();
    assert!(
        up.contains(&"request".into()) && up.contains(&"response".into()),
        "{up:?}"
    );
    shim.run("xenstore-write", &["/older/a", "1"]);
    let missing = output_within(
        Command::new("xenstore-read")
            .env("XENSTORED_PATH", &shim.socket)
            .arg("/older/missing"),
        CLIENT_TIMEOUT,
    );
    assert!(!missing.status.success());
    snoop.wait_line("the write", |l| l.contains("XS_WRITE: /older/a 1 -> OK"));
    snoop.wait_line("the failed read", |l| {
        l.contains("[ERROR] XS_READ: /older/missing -> ENOENT")
    });
    let (_, _, status) = snoop.stop();
    assert!(status.success());
}

#[test]
fn target_exit_ends_the_trace_cleanly() {
    if !common::need_root("target_exit_ends_the_trace_cleanly") {
        return;
    }
    let mut shim = Shim::private_copy();
    let snoop = Snooper::attach(&shim, &[]);
    shim.run("xenstore-write", &["/bye", "1"]);
    snoop.wait_line("the write", |l| l.contains("XS_WRITE: /bye 1"));
    shim.child.kill().unwrap();
    shim.child.wait().unwrap();
    let me = snoop.pid();
    let ended = snoop.0.end(TIMEOUT);
    assert!(ended.status.success(), "{}", ended.status);
    let err = ended.stderr.join("\n");
    assert!(err.contains("exited"), "{err}");
    assert!(err.contains("events seen"), "{err}");
    assert!(our_uprobes(me).is_empty());
}

#[test]
fn closed_pipe_exits_quietly() {
    if !common::need_root("closed_pipe_exits_quietly") {
        return;
    }
    let shim = Shim::private_copy();
    let mut snoop = Watched::spawn(
        "xenstore-snoop",
        common::snoop_command()
            .args(["--daemon-pid", &shim.pid().to_string(), "-c", "1000"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
        true,
    );
    let mut out = BufReader::new(snoop.child.stdout.take().unwrap());
    let mut header = String::new();
    out.read_line(&mut header).unwrap();
    assert!(header.starts_with("DOM"));
    drop(out); // like `| head -1`
    for i in 0..20 {
        shim.run("xenstore-write", &["/pipe", &i.to_string()]);
    }
    let ended = snoop.end(TIMEOUT);
    let err = ended.stderr.join("\n");
    assert!(ended.status.success(), "{} {err}", ended.status);
    assert!(
        !err.contains("Broken pipe") && !err.contains("panicked"),
        "{err}"
    );
    assert!(err.contains("events seen"), "{err}");
}

#[test]
fn errors_are_clear() {
    let out = Command::new(common::bin("xenstore-snoop"))
        .args(["--daemon-pid", "4000000000"])
        .bounded_output();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("xenstore-snoop: "), "{err}");
    let out = Command::new(common::bin("xenstore-snoop"))
        .args(["--op", "NOT_AN_OP"])
        .bounded_output();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown operation"));
    let help = Command::new(common::bin("xenstore-snoop"))
        .arg("--help")
        .bounded_output();
    assert!(String::from_utf8_lossy(&help.stdout).contains("Examples:"));
}

#[test]
fn a_burst_is_seen_whole() {
    if !common::need_root("a_burst_is_seen_whole") {
        return;
    }
    const N: usize = 3000;
    let shim = Shim::private_copy();
    let snoop = Snooper::attach(&shim, &["--op", "WRITE,READ", "--path", "^/burst/"]);
    common::pyxs(
        &shim.socket,
        &format!(
            "for i in range({N}):\n    c.write(b'/burst/%d' % (i % 50), b'v%d' % i)\n    c.read(b'/burst/%d' % (i % 50))\nc.close()\n"
        ),
    );
    snoop.wait_line("the last read", |l| {
        l.contains(&format!("XS_READ: /burst/{} -> v{}", (N - 1) % 50, N - 1))
    });
    let (out, err, status) = snoop.stop();
    assert!(status.success());
    let writes = out
        .iter()
        .filter(|l| l.contains("XS_WRITE: /burst/"))
        .count();
    let reads = out
        .iter()
        .filter(|l| l.contains("XS_READ: /burst/"))
        .count();
    assert_eq!((writes, reads), (N, N));
    assert!(
        out.iter().all(|l| !l.ends_with("-> ?")),
        "every request paired"
    );
    let stats = stats_line(&err);
    assert!(stats.ends_with(", 0 lost"), "{stats}");
}

#[test]
fn summary_tables_count_ops_and_domains() {
    if !common::need_root("summary_tables_count_ops_and_domains") {
        return;
    }
    let shim = Shim::private_copy();
    let dom6 = common::introduce(&shim, 6);
    let snoop = Snooper::attach(&shim, &["--summary"]);
    for i in 0..5 {
        shim.run("xenstore-write", &["/summary/a", &i.to_string()]);
    }
    assert!(!guest(&dom6, "xenstore-read", &["missing"]).status.success());
    let (out, _, status) = snoop.stop();
    assert!(status.success());
    let text = out.join("\n");
    let row = |first: &str| -> Vec<String> {
        out.iter()
            .map(|l| {
                l.split(['|', '│', '┆'])
                    .map(|c| c.trim().to_string())
                    .filter(|c| !c.is_empty())
                    .collect::<Vec<_>>()
            })
            .find(|cells| cells.first().map(String::as_str) == Some(first))
            .unwrap_or_else(|| panic!("no row {first}:\n{text}"))
    };
    assert_eq!(row("XS_WRITE")[1..3], ["5", "0"]);
    assert_eq!(row("6")[1..3], ["1", "1"], "dom 6: one read, one error");
    assert_eq!(row("/summary/a")[1], "5");
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

#[test]
fn record_then_replay_with_other_filters_and_summary() {
    if !common::need_root("record_then_replay_with_other_filters_and_summary") {
        return;
    }
    let shim = Shim::private_copy();
    let dom6 = common::introduce(&shim, 6);
    let trace = shim.dir.join("trace.jsonl");
    let trace_arg = trace.to_str().unwrap();
    // Tee-like: -x shows only failures, the trace gets everything.
    let snoop = Snooper::attach(&shim, &["-w", trace_arg, "-x", "-T", "-L"]);
    let watch = shim.watch(&["-n", "2", "/rec"]);
    assert_eq!(watch.line(0, TIMEOUT), "/rec");
    shim.run("xenstore-write", &["/rec/a", "1"]);
    assert!(watch.end(TIMEOUT).status.success());
    assert!(!guest(&dom6, "xenstore-read", &["rec/missing"])
        .status
        .success());
    assert!(guest(&dom6, "xenstore-read", &["device/vbd/0/state"])
        .status
        .success());
    snoop.wait_line("the guest's failed read", |l| l.contains("rec/missing"));
    let (live, err, status) = snoop.stop();
    assert!(status.success(), "{err:?}");
    assert!(live[1..].iter().all(|l| l.contains("[ERROR]")), "{live:?}");

    // The file: its owner's only, a header, every record before the
    // filters, the end line.
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&trace).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    let file = std::fs::read_to_string(&trace).unwrap();
    let lines = json_lines(file.lines());
    let header = &lines[0];
    assert_eq!(header["trace"], "header");
    assert_eq!(header["format"], "xenstore-snoop-trace");
    assert_eq!(header["version"], 1);
    assert_eq!(header["daemon_pid"], shim.pid());
    let end = lines.last().unwrap();
    assert_eq!(end["trace"], "end");
    assert_eq!(end["lost"], 0);
    let stats = stats_line(&err);
    assert!(
        stats.contains(&format!("{} events seen", end["seen"])),
        "{stats}"
    );
    let recorded = |op: &str, path: &str| {
        lines
            .iter()
            .any(|r| r["op"] == op && r["path"] == path && r.get("trace").is_none())
    };
    assert!(recorded("XS_WRITE", "/rec/a"), "{file}");
    assert!(recorded("XS_WATCH_EVENT", "/rec/a"), "{file}");
    assert!(recorded("XS_READ", "device/vbd/0/state"), "{file}");
    // -x attaches neither watch_event nor the lifecycle probes; -w attaches
    // all, so -v on the replay shows connections.
    assert!(lines.iter().any(|r| r["kind"] == "conn_open"), "{file}");

    // The same flags on the replay give exactly the live output.
    let replay = snoop_run(&["-r", trace_arg, "-x", "-T", "-L"]);
    assert!(replay.status.success(), "{replay:?}");
    assert_eq!(text(&replay.stdout).lines().collect::<Vec<_>>(), live);
    assert!(text(&replay.stderr).contains("the recording lost 0 events"));
    // -r - reads standard input (zcat trace.gz | xenstore-snoop -r -).
    let piped = common::process::output_fed(
        Command::new(common::bin("xenstore-snoop")).args(["-r", "-", "-x", "-T", "-L"]),
        file.as_bytes(),
        CLIENT_TIMEOUT,
    );
    assert!(piped.status.success(), "{piped:?}");
    assert_eq!(piped.stdout, replay.stdout);

    // Other filters on the same file.
    let dom6_only = snoop_run(&["-r", trace_arg, "-d", "6"]);
    let out = text(&dom6_only.stdout);
    let body: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(body.len(), 2, "{out}");
    assert!(body.iter().all(|l| columns(l)[0] == "6"), "{out}");
    let writes = snoop_run(&["-r", trace_arg, "--op", "WRITE", "--json"]);
    let json = json_lines(text(&writes.stdout).lines());
    assert!(json.iter().all(|r| r["op"] == "XS_WRITE"), "{json:?}");
    assert!(json.iter().any(|r| r["path"] == "/rec/a"), "{json:?}");
    let verbose = snoop_run(&["-r", trace_arg, "-v"]);
    assert!(text(&verbose.stdout).contains("[CONN_OPEN]"), "{verbose:?}");
    let two = snoop_run(&["-r", trace_arg, "-c", "2"]);
    assert_eq!(text(&two.stdout).lines().count(), 3, "header and 2 lines");

    // --summary over the trace; piped, so plain ASCII tables.
    let summary = snoop_run(&["-r", trace_arg, "--summary"]);
    let tables = text(&summary.stdout);
    assert!(tables.is_ascii(), "{tables}");
    let row = |tables: &str, first: &str| -> Vec<String> {
        tables
            .lines()
            .map(|l| {
                l.split(['|', '│', '┆'])
                    .map(|c| c.trim().to_string())
                    .filter(|c| !c.is_empty())
                    .collect::<Vec<_>>()
            })
            .find(|c| c.first().map(String::as_str) == Some(first))
            .unwrap_or_else(|| panic!("no row {first}:\n{tables}"))
    };
    assert_eq!(
        row(&tables, "6")[1..3],
        ["2", "1"],
        "dom 6: two reads, one failed"
    );
    assert_eq!(row(&tables, "/rec/a")[1], "1");

    // On a terminal: box drawing with a UTF-8 locale, ASCII with LANG=C.
    let on_a_pty = |lang: &str| {
        let cmd = format!(
            "{} -r {trace_arg} --summary",
            common::bin("xenstore-snoop").display()
        );
        let out = Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .env_remove("LC_ALL")
            .env_remove("LC_CTYPE")
            .env("LANG", lang)
            .stdin(Stdio::null())
            .bounded_output();
        assert!(out.status.success(), "{out:?}");
        text(&out.stdout)
    };
    let boxes = on_a_pty("C.UTF-8");
    assert!(boxes.contains('│') && !boxes.contains('|'), "{boxes}");
    assert_eq!(row(&boxes, "6")[1..3], ["2", "1"]);
    let ascii = on_a_pty("C");
    assert!(ascii.is_ascii() && ascii.contains('|'), "{ascii}");
}

#[test]
fn a_killed_recorder_leaves_a_trace_that_replays_to_the_cut() {
    if !common::need_root("a_killed_recorder_leaves_a_trace_that_replays_to_the_cut") {
        return;
    }
    let shim = Shim::private_copy();
    let trace = shim.dir.join("cut.jsonl");
    let trace_arg = trace.to_str().unwrap();
    let snoop = Snooper::attach(&shim, &["-w", trace_arg]);
    shim.run("xenstore-write", &["/cut/a", "1"]);
    // Shown means recorded: the trace is flushed before the output.
    snoop.wait_line("the write", |l| l.contains("XS_WRITE: /cut/a 1 -> OK"));
    snoop.stop_with(9);
    let replay = snoop_run(&["-r", trace_arg]);
    assert!(replay.status.success(), "{replay:?}");
    assert!(text(&replay.stdout).contains("XS_WRITE: /cut/a 1 -> OK"));
    let err = text(&replay.stderr);
    assert!(
        err.contains("without its end line") && err.contains("replayed what is there"),
        "{err}"
    );

    // Not a trace, or a newer format, or a broken line: clear errors.
    let header = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    let bad = |name: &str, content: &str, want: &str| {
        let path = shim.dir.join(name);
        std::fs::write(&path, content).unwrap();
        let out = snoop_run(&["-r", path.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(
            err.starts_with("xenstore-snoop: ") && err.contains(want),
            "{name}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    };
    bad(
        "text.out",
        "DOM PID    TX  OP\n",
        "is not a xenstore-snoop-trace file",
    );
    bad(
        "v2.jsonl",
        &header.replace("\"version\":1", "\"version\":2"),
        "version 2; this xenstore-snoop reads version 1",
    );
    bad(
        "broken.jsonl",
        &format!("{header}\n{{\"kind\":\"op\"}}\n{{}}\n"),
        "broken.jsonl:2: missing field",
    );
    let missing = shim.dir.join("missing.jsonl");
    let out = snoop_run(&["-r", missing.to_str().unwrap()]);
    assert!(text(&out.stderr).contains("-r: opening"), "{out:?}");
    // -r reads a file, it does not trace a daemon.
    let out = snoop_run(&["-r", trace_arg, "--daemon-pid", "1"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn summary_intervals_show_rates_in_ascii_when_piped() {
    if !common::need_root("summary_intervals_show_rates_in_ascii_when_piped") {
        return;
    }
    let shim = Shim::private_copy();
    let snoop = Snooper::attach(&shim, &["--summary", "--interval", "0.5"]);
    common::pyxs(
        &shim.socket,
        "for i in range(50):\n    c.write(b'/rate/a', b'%d' % i)\nc.close()\n",
    );
    let head = snoop.wait_line("an interval with the writes", |l| {
        l.starts_with("last ") && !l.contains(": 0 requests")
    });
    // "last 0.5 s: 50 requests, 100.0/s; 50 in all" (or split over two)
    assert!(
        head.contains(" requests, ") && head.ends_with(" in all"),
        "{head}"
    );
    let header = snoop.wait_line("the op table's header", |l| l.contains("RATE(/s)"));
    assert!(
        header.starts_with("| OP ") || header.starts_with("| DOM "),
        "{header}"
    );
    let write = snoop.wait_line("the XS_WRITE row", |l| l.starts_with("| XS_WRITE "));
    let cells: Vec<&str> = write
        .split('|')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let rate: f64 = cells[2].parse().unwrap();
    assert!(rate > 0.0, "{write}");
    // A later quiet interval: the total stays, the rate drops to 0.
    let quiet = snoop.wait_line("a quiet interval", |l| {
        l.starts_with("last ") && l.contains(": 0 requests, 0.0/s;")
    });
    assert!(quiet.ends_with("; 50 in all"), "{quiet}");
    let (out, _, status) = snoop.stop();
    assert!(status.success());
    let all = out.join("\n");
    assert!(all.is_ascii(), "a pipe gets ASCII tables:\n{all}");
}

#[test]
fn timestamp_and_latency_columns() {
    if !common::need_root("timestamp_and_latency_columns") {
        return;
    }
    let shim = Shim::private_copy();
    let snoop = Snooper::attach(&shim, &["-T", "-L"]);
    shim.run("xenstore-write", &["/cols", "1"]);
    let line = snoop.wait_line("the write", |l| l.contains("XS_WRITE: /cols 1 -> OK"));
    let (out, _, _) = snoop.stop();
    assert_eq!(
        columns(&out[0]),
        ["TIME", "DOM", "PID", "COMM", "TX", "LAT(us)", "OP"]
    );
    let c = columns(&line);
    // HH:MM:SS.µµµµµµ of now (UTC), then dom, pid, comm, tx, latency
    let time = chrono_like(c[0]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        % 86400.0;
    assert!((now - time).abs() < 60.0, "{line}");
    assert_eq!(c[0].len(), 15, "{line}");
    assert_eq!(c[3], "xenstore-write", "{line}");
    let lat: f64 = c[5].parse().unwrap();
    assert!(lat > 0.0 && lat < 1e6, "{line}");
}

/// Seconds of the day of `HH:MM:SS.ffffff`.
fn chrono_like(t: &str) -> f64 {
    let parts: Vec<f64> = t.split(':').map(|p| p.parse().unwrap()).collect();
    parts[0] * 3600.0 + parts[1] * 60.0 + parts[2]
}

#[test]
fn not_root_is_a_clear_error() {
    if !common::need_root("not_root_is_a_clear_error") {
        return;
    }
    // A copy under /tmp, so the build tree's permissions don't matter.
    let dir = private_dir("snoop-nobody");
    let binary = dir.join("xenstore-snoop");
    std::fs::copy(common::bin("xenstore-snoop"), &binary).unwrap();
    let run = || {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&binary)
            .bounded_output()
    };
    let mut out = run();
    // ETXTBSY while a sibling test's fork still holds the copy's write fd.
    for _ in 0..100 {
        if !String::from_utf8_lossy(&out.stderr).contains("Text file busy") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        out = run();
    }
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("xenstore-snoop: ") && err.contains("root"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn finds_the_daemon_by_its_binary() {
    if !common::need_root("finds_the_daemon_by_its_binary") {
        return;
    }
    let shim = Shim::private_copy();
    let binary = shim.dir.join("xenstored-shim");
    let snoop = Snooper::start(&["--binary", binary.to_str().unwrap()]);
    let attached = format!("Tracing xenstored-shim pid {} ", shim.pid());
    assert!(
        snoop.stderr().iter().any(|l| l.starts_with(&attached)),
        "{:?}",
        snoop.stderr()
    );
    shim.run("xenstore-write", &["/by-binary", "1"]);
    snoop.wait_line("the write", |l| l.contains("XS_WRITE: /by-binary 1 -> OK"));
    let (_, _, status) = snoop.stop();
    assert!(status.success());
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

#[test]
fn lost_events_are_counted_exactly() {
    if !common::need_root("lost_events_are_counted_exactly") {
        return;
    }
    // N reply samples of ~110 B: more than one 1 MiB ring holds. The shim
    // runs on one CPU, so they all go to that CPU's ring however many CPUs
    // the machine has.
    const N: u64 = 20_000;
    let shim = Shim::private_copy();
    pin_to_one_cpu(shim.pid());
    let snoop = Snooper::attach(&shim, &["--ring-mb", "1"]);
    // A snooper that does not read: the 1 MiB rings overflow.
    common::signal(snoop.pid(), 19); // SIGSTOP
    common::pyxs(
        &shim.socket,
        &format!("for i in range({N}):\n    c.write(b'/lost', b'%d' % i)\nc.close()\n"),
    );
    common::signal(snoop.pid(), 18); // SIGCONT
    let (_, err, status) = snoop.stop();
    assert!(status.success());
    let stats = stats_line(&err);
    // "xenstore-snoop: S events seen, L lost"
    let nums: Vec<u64> = stats
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    let (seen, lost) = (nums[0], nums[1]);
    assert!(lost > 0, "{stats}");
    // one reply a request, and pyxs's connection opening (its close is
    // attached only with -v)
    assert_eq!(seen + lost, N + 1, "{stats}");
    assert!(
        err.iter().any(|l| l.contains("events lost so far")),
        "{err:?}"
    );
}

#[test]
fn a_small_ring_wraps_losing_and_reordering_nothing() {
    if !common::need_root("a_small_ring_wraps_losing_and_reordering_nothing") {
        return;
    }
    // N reply records of ~90 B go round a 1 MiB ring (each CPU's ring,
    // tracefs) nearly twice, the reader draining as they come.
    const N: usize = 20_000;
    let shim = Shim::private_copy();
    let snoop = Snooper::attach(&shim, &["--ring-mb", "1", "--json", "--op", "WRITE"]);
    common::pyxs(
        &shim.socket,
        &format!("for i in range({N}):\n    c.write(b'/round', b'%d' % i)\nc.close()\n"),
    );
    snoop.wait_line("the last write", |l| l.contains(&format!("\"{}\"", N - 1)));
    let (out, err, status) = snoop.stop();
    assert!(status.success(), "{err:?}");
    let values: Vec<String> = json_lines(&out)
        .iter()
        .filter(|j| j["path"] == "/round")
        .map(|j| j["value"].as_str().unwrap().to_string())
        .collect();
    let expected: Vec<String> = (0..N).map(|i| i.to_string()).collect();
    assert!(
        values == expected,
        "{} values, first wrong at {:?}",
        values.len(),
        values.iter().zip(&expected).position(|(a, b)| a != b)
    );
    let stats = stats_line(&err);
    assert!(stats.ends_with(" 0 lost"), "{stats}");
}

#[test]
fn user_space_filters_on_concurrent_snoopers() {
    if !common::need_root("user_space_filters_on_concurrent_snoopers") {
        return;
    }
    let shim = Shim::private_copy();
    // Three snoopers on one daemon at once, each with its own uprobe group.
    let failed = Snooper::attach(&shim, &["-x"]);
    let writes = Snooper::attach(&shim, &["--op", "WRITE", "--path", "^/keep/"]);
    let quiet = Snooper::attach(&shim, &["--no-watch-events", "--op", "WATCH_EVENT,RM"]);
    let watch = shim.watch(&["-n", "2", "/keep"]);
    writes.wait_line("nothing but a header yet", |l| l.starts_with("DOM"));
    // The watch's initial event says it is registered.
    assert_eq!(watch.line(0, TIMEOUT), "/keep");
    shim.run("xenstore-write", &["/keep/a", "1", "/drop/b", "2"]);
    assert!(watch.end(TIMEOUT).status.success());
    let _ = shim
        .client("xenstore-read")
        .arg("/keep/missing")
        .bounded_output();
    shim.run("xenstore-rm", &["/drop"]);
    writes.wait_line("the /keep write", |l| l.contains("XS_WRITE: /keep/a 1"));
    failed.wait_line("the failed read", |l| l.contains("/keep/missing"));
    quiet.wait_line("the rm", |l| l.contains("XS_RM: /drop -> OK"));

    let body = |s: Snooper| -> Vec<String> {
        let (out, _, status) = s.stop();
        assert!(status.success());
        out[1..].to_vec()
    };
    let failed = body(failed);
    assert!(!failed.is_empty());
    assert!(failed.iter().all(|l| l.contains("[ERROR] ")), "{failed:?}");
    assert_eq!(body(writes).len(), 1);
    let quiet = body(quiet);
    assert!(quiet.iter().all(|l| l.contains("XS_RM:")), "{quiet:?}");
}

#[test]
fn pid_filter_shows_one_dom0_client() {
    if !common::need_root("pid_filter_shows_one_dom0_client") {
        return;
    }
    let shim = Shim::private_copy();
    // A pyxs client that waits for a go, so its pid is known beforehand.
    let mut client = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(format!(
            "import sys\nfrom pyxs import Client\nsys.stdin.readline()\n\
             c = Client(unix_socket_path={:?})\nc.connect()\n\
             c.write(b'/mine', b'1')\nc.read(b'/mine')\nc.close()\n",
            shim.socket.display().to_string()
        ))
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = client.id().to_string();
    let snoop = Snooper::attach(&shim, &["-p", &pid, "--duration", "60"]);
    shim.run("xenstore-write", &["/theirs", "1"]);
    std::io::Write::write_all(client.stdin.as_mut().unwrap(), b"go\n").unwrap();
    assert!(wait_exit(&mut client, "the pyxs client", TIMEOUT).success());
    snoop.wait_line("the client's read", |l| l.contains("XS_READ: /mine -> 1"));
    let (out, _, _) = snoop.stop();
    let body = &out[1..];
    assert_eq!(body.len(), 2, "{body:?}");
    assert!(body.iter().all(|l| columns(l)[1] == pid), "{body:?}");
}

#[test]
fn a_type_beyond_16_bits_is_not_shown_as_a_real_one() {
    if !common::need_root("a_type_beyond_16_bits_is_not_shown_as_a_real_one") {
        return;
    }
    use std::io::Write;
    let shim = Shim::private_copy();
    let snoop = Snooper::attach(&shim, &[]);
    let mut s = std::os::unix::net::UnixStream::connect(&shim.socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // 0x10002 would be XS_READ in 16 bits.
    s.write_all(&common::wire::message(0x10002, 1, 0, b"/forged\0"))
        .unwrap();
    let (h, body) = common::wire::reply(&mut s);
    assert_eq!((h.ty, body.as_slice()), (16, &b"ENOSYS\0"[..]));
    let line = snoop.wait_line("the forged request", |l| l.contains("/forged"));
    assert!(
        line.contains("[ERROR] XS_UNKNOWN(>65534): /forged -> ENOSYS"),
        "{line}"
    );
}

#[test]
fn short_lived_clients_are_named_and_selected_by_name() {
    if !common::need_root("short_lived_clients_are_named_and_selected_by_name") {
        return;
    }
    let shim = Shim::private_copy();
    // Connected before the snooper: named from /proc at first sight (so
    // it must still run then: it waits for a third event).
    let watch = shim.watch(&["-n", "3", "/named"]);
    assert_eq!(watch.line(0, TIMEOUT), "/named");
    let named = Snooper::attach(&shim, &["-n", "xenstore-write", "-n", "xenstore-watch"]);
    let json = Snooper::attach(&shim, &["--json"]);
    // xenstore-write lives milliseconds: gone long before anyone looks.
    shim.run("xenstore-write", &["/named/a", "1"]);
    shim.run("xenstore-read", &["/named/a"]);
    let write = named.wait_line("the write", |l| l.contains("XS_WRITE: /named/a 1 -> OK"));
    assert_eq!(columns(&write)[2], "xenstore-write", "{write}");
    let event = named.wait_line("the watch event", |l| {
        l.contains("XS_WATCH_EVENT: /named/a")
    });
    assert_eq!(columns(&event)[2], "xenstore-watch", "{event}");
    shim.run("xenstore-write", &["/named/done", "1"]);
    assert!(watch.end(TIMEOUT).status.success());
    named.wait_line("the last write", |l| l.contains("/named/done"));
    let (out, _, status) = named.stop();
    assert!(status.success());
    let body = &out[1..];
    assert!(
        body.iter()
            .all(|l| ["xenstore-write", "xenstore-watch"].contains(&columns(l)[2])),
        "-n shows only those names: {body:?}"
    );
    assert!(!body.iter().any(|l| l.contains("XS_READ:")), "{body:?}");

    json.wait_line("the last write", |l| l.contains("/named/done"));
    let (out, _, _) = json.stop();
    let read = json_lines(&out)
        .into_iter()
        .find(|r| r["op"] == "XS_READ" && r["path"] == "/named/a")
        .expect("the read");
    assert_eq!(read["comm"], "xenstore-read", "{read}");
}

#[test]
fn path_filter_matches_guest_relative_paths_as_resolved() {
    if !common::need_root("path_filter_matches_guest_relative_paths_as_resolved") {
        return;
    }
    let shim = Shim::private_copy();
    let dom6 = common::introduce(&shim, 6);
    let dom7 = common::introduce(&shim, 7);
    // Named before the snooper starts: looked up in the store at first sight.
    shim.run("xenstore-write", &["/local/domain/7/name", "db02"]);
    let snoop = Snooper::attach(&shim, &["--path", "^/local/domain/6/device/"]);
    let by_name = Snooper::attach(&shim, &["-n", "db02"]);
    // The toolstack names domain 6: its lines show the name from then on.
    shim.run("xenstore-write", &["/local/domain/6/name", "web01"]);
    for (socket, path) in [
        (&dom6, "device/vbd/0/state"),
        (&dom6, "/local/domain/6/device/vbd/0/state"),
        (&dom7, "device/vbd/0/state"),
        (&dom6, "name"),
    ] {
        let out = guest(socket, "xenstore-read", &[path]);
        assert!(out.status.success(), "{path}: {out:?}");
    }
    shim.run("xenstore-read", &["/local/domain/6/device/vbd/0/state"]);
    let line = snoop.wait_line("dom0's read", |l| l.starts_with("0 "));
    let (out, _, status) = snoop.stop();
    assert!(status.success());
    let body: Vec<&str> = out[1..].iter().map(String::as_str).collect();
    assert_eq!(body.len(), 3, "{body:?}");
    // Shown as sent: the relative path stays relative.
    assert_eq!(
        columns(body[0]),
        [
            "6",
            "0",
            "web01",
            "0",
            "XS_READ:",
            "device/vbd/0/state",
            "->",
            "3"
        ],
        "{body:?}"
    );
    assert!(
        body[1].ends_with("XS_READ: /local/domain/6/device/vbd/0/state -> 3"),
        "{body:?}"
    );
    assert!(line.contains("xenstore-read"), "{line}");
    let (out, _, _) = by_name.stop();
    assert_eq!(
        columns(&out[1]),
        [
            "7",
            "0",
            "db02",
            "0",
            "XS_READ:",
            "device/vbd/0/state",
            "->",
            "3"
        ],
        "{out:?}"
    );
    assert_eq!(
        out.len(),
        2,
        "only domain 7's request, not the snooper's lookup: {out:?}"
    );
}

#[test]
fn cut_values_are_marked_with_the_bytes_cut() {
    if !common::need_root("cut_values_are_marked_with_the_bytes_cut") {
        return;
    }
    let shim = Shim::private_copy();
    let text = Snooper::attach(&shim, &["--path", "^/cut$"]);
    let json = Snooper::attach(&shim, &["--json", "--path", "^/cut$"]);
    let value = "X".repeat(4000);
    shim.run("xenstore-write", &["/cut", &value]);
    assert_eq!(shim.run("xenstore-read", &["/cut"]).trim_end(), value);

    let write = text.wait_line("the write", |l| l.contains("XS_WRITE: /cut "));
    let shown = write.split("XS_WRITE: /cut ").nth(1).unwrap();
    let (kept, mark) = shown.split_once('…').expect("a cut mark");
    assert!(
        kept.len() < 4000 && kept.bytes().all(|b| b == b'X'),
        "{write}"
    );
    let cut = 4000 - kept.len();
    assert_eq!(mark, format!("[+{cut} bytes] -> OK"), "{write}");
    let read = text.wait_line("the read", |l| l.contains("XS_READ: /cut "));
    let result = read.split(" -> ").nth(1).unwrap();
    let (kept, mark) = result.split_once('…').expect("a cut mark");
    assert_eq!(mark, format!("[+{} bytes]", 4000 - kept.len()), "{read}");

    json.wait_line("the read", |l| l.contains("\"XS_READ\""));
    let (out, _, _) = json.stop();
    let records = json_lines(&out);
    let write = records.iter().find(|r| r["op"] == "XS_WRITE").unwrap();
    assert_eq!(write["truncated"], true);
    assert_eq!(write["truncated_bytes"], cut as u64, "{write}");
    assert_eq!(
        write["value"].as_str().unwrap().len() + cut,
        4000,
        "the count is what the value lacks"
    );
}

/// The BPF program copies a firing's strings in one 256-byte window when
/// they fit in it, else one by one: values on both sides of that edge, and
/// far from it, are shown whole, by the reply probe and by the paired ones.
#[test]
fn values_on_both_sides_of_the_copy_window_are_shown_whole() {
    if !common::need_root("values_on_both_sides_of_the_copy_window_are_shown_whole") {
        return;
    }
    let shim = Shim::private_copy();
    let reply = Snooper::attach(&shim, &["--json", "--path", "^/win/"]);
    let paired = Snooper::attach(&shim, &["--json", "--paired", "--path", "^/win/"]);
    let lengths: Vec<usize> = [0, 1, 100, 1000].into_iter().chain(230..=262).collect();
    let value = |len: usize| -> String {
        (0..len)
            .map(|i| char::from(b'a' + ((i + len) % 26) as u8))
            .collect()
    };
    let path = |len: usize| format!("/win/{len}");
    let mut write_args = Vec::new();
    for &len in &lengths {
        write_args.push(path(len));
        write_args.push(value(len));
    }
    let write_args: Vec<&str> = write_args.iter().map(String::as_str).collect();
    shim.run("xenstore-write", &write_args);
    let paths: Vec<String> = lengths.iter().map(|&l| path(l)).collect();
    let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
    shim.run("xenstore-read", &paths);

    let last = format!("\"{}\"", path(*lengths.last().unwrap()));
    for snoop in [reply, paired] {
        snoop.wait_line("the last read", |l| {
            l.contains("\"XS_READ\"") && l.contains(&last)
        });
        let (out, _, _) = snoop.stop();
        let records = json_lines(&out);
        for &len in &lengths {
            let find = |op: &str| {
                records
                    .iter()
                    .find(|r| r["op"] == op && r["path"] == path(len).as_str())
                    .unwrap_or_else(|| panic!("no {op} of {}: {out:?}", path(len)))
            };
            let write = find("XS_WRITE");
            assert_eq!(write["value"], value(len).as_str(), "{write}");
            assert_eq!(write["result"], "OK", "{write}");
            let read = find("XS_READ");
            assert_eq!(read["result"], value(len).as_str(), "{read}");
        }
    }
}

#[test]
fn follow_traces_across_a_daemon_restart() {
    if !common::need_root("follow_traces_across_a_daemon_restart") {
        return;
    }
    let first = Shim::private_copy();
    let mut snoop = Snooper::attach(&first, &["--follow", "--path", "^/life/"]);
    first.run("xenstore-write", &["/life/first", "1"]);
    snoop.wait_line("the first daemon's write", |l| l.contains("/life/first"));

    // A restart: the old process goes, a new one runs the same binary.
    let old = first.pid();
    common::signal(old, 15); // SIGTERM
    snoop
        .0
        .wait_ready("the exit to be noticed", TIMEOUT, |_, err| {
            err.iter().any(|l| l.contains(&format!("pid {old} exited")))
        });
    let second = Shim::launch(
        "second xenstored-shim",
        &first.binary,
        private_dir("shim-follow"),
        &[],
    )
    .unwrap();
    let new = second.pid();
    snoop
        .0
        .wait_ready("the snooper to re-attach", TIMEOUT, |_, err| {
            err.iter()
                .any(|l| l.starts_with(&format!("Tracing xenstored-shim pid {new} ")))
        });
    second.run("xenstore-write", &["/life/second", "2"]);
    snoop.wait_line("the second daemon's write", |l| l.contains("/life/second"));
    let (out, err, status) = snoop.stop();
    assert!(status.success(), "{err:?}");
    assert_eq!(
        out.iter().filter(|l| l.starts_with("DOM ")).count(),
        1,
        "one header: {out:?}"
    );
    let gap = err
        .iter()
        .find(|l| l.contains("--follow: gap of "))
        .unwrap_or_else(|| panic!("the gap is reported: {err:?}"));
    assert!(gap.ends_with(&format!("following pid {new}")), "{gap}");
}

#[test]
fn a_failed_reattach_still_ends_the_trace_and_says_the_counts() {
    if !common::need_root("a_failed_reattach_still_ends_the_trace_and_says_the_counts") {
        return;
    }
    let first = Shim::private_copy();
    let trace = first.dir.join("failed.jsonl");
    let mut snoop = Snooper::attach(&first, &["--follow", "-w", trace.to_str().unwrap()]);
    first.run("xenstore-write", &["/life/first", "1"]);
    snoop.wait_line("the first daemon's write", |l| l.contains("/life/first"));

    // The daemon's binary is replaced by one without the probes, which
    // then runs: --follow finds it, and attaching to it fails.
    let old = first.pid();
    common::signal(old, 15); // SIGTERM
    snoop
        .0
        .wait_ready("the exit to be noticed", TIMEOUT, |_, err| {
            err.iter().any(|l| l.contains(&format!("pid {old} exited")))
        });
    std::fs::remove_file(&first.binary).unwrap();
    std::fs::copy("/bin/sleep", &first.binary).unwrap();
    let mut probeless = Command::new(&first.binary).arg("600").spawn().unwrap();
    let Ended { stderr, status, .. } = snoop.0.end(TIMEOUT);
    probeless.kill().unwrap();
    probeless.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{stderr:?}");
    let counts = stats_line(&stderr);
    assert!(counts.contains(" events seen, 0 lost"), "{counts}");
    let failure = stderr.last().unwrap();
    assert!(
        failure.contains("no .note.stapsdt section"),
        "the failure is said after the counts: {stderr:?}"
    );
    let end = json_lines(std::fs::read_to_string(&trace).unwrap().lines())
        .pop()
        .unwrap();
    assert_eq!(end["trace"], "end", "{end}");
    assert_eq!(end["stopped"], "Failed", "{end}");
    assert!(end["seen"].as_u64().unwrap() > 0, "{end}");
}

#[test]
fn an_unknown_domain_is_warned_about() {
    if !common::need_root("an_unknown_domain_is_warned_about") {
        return;
    }
    let shim = Shim::private_copy();
    common::introduce(&shim, 6);
    let known = Snooper::attach(&shim, &["-d", "6"]);
    let unknown = Snooper::attach(&shim, &["-d", "6", "-d", "7"]);
    let (_, err, _) = known.stop();
    assert!(!err.iter().any(|l| l.contains("warning")), "{err:?}");
    let (_, err, _) = unknown.stop();
    let warnings: Vec<&String> = err.iter().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{err:?}");
    assert!(
        warnings[0].contains("does not know domain 7 (not introduced, no /local/domain/7)"),
        "{err:?}"
    );
}

#[test]
fn another_tracefs_mount_is_used_when_named() {
    if !common::need_root("another_tracefs_mount_is_used_when_named") {
        return;
    }
    let shim = Shim::private_copy();
    let mount = shim.dir.join("tracefs");
    std::fs::create_dir_all(&mount).unwrap();
    let mounted = output_within(
        Command::new("mount")
            .args(["-t", "tracefs", "nodev"])
            .arg(&mount),
        CLIENT_TIMEOUT,
    );
    assert!(mounted.status.success(), "{mounted:?}");
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mount.clone());
    // The mount matters to the tracefs back end only, whichever the suite runs.
    let tracefs = ["--backend", "tracefs", "--tracefs", mount.to_str().unwrap()];
    let snoop = Snooper::attach(&shim, &tracefs);
    shim.run("xenstore-write", &["/via/other/mount", "1"]);
    snoop.wait_line("the write", |l| l.contains("/via/other/mount"));
    let (_, err, status) = snoop.stop();
    assert!(status.success(), "{err:?}");

    // $TRACEFS is the same option; a directory that is no tracefs is an error.
    let out = Command::new(common::bin("xenstore-snoop"))
        .args([
            "--backend",
            "tracefs",
            "--daemon-pid",
            &shim.pid().to_string(),
        ])
        .env("TRACEFS", &shim.dir)
        .bounded_output();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "--tracefs {}: no uprobe_events there",
            shim.dir.display()
        )),
        "{err}"
    );
}

/// Every `xenstore-snoop ...` command README.md shows parses with today's
/// flags (what each does is run by the tests above and by `make demo`).
#[test]
fn readme_snooper_commands_parse() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let mut checked = 0;
    for line in readme.lines().map(str::trim_start) {
        let Some(rest) = line.strip_prefix("xenstore-snoop ") else {
            continue;
        };
        let command = rest.split(['#', '|']).next().unwrap();
        // Words, with '...' quoting as the shell does.
        let mut words = vec!["xenstore-snoop".to_string()];
        for (i, part) in command.split('\'').enumerate() {
            if i % 2 == 1 {
                words.push(part.to_string());
            } else {
                words.extend(part.split_whitespace().map(String::from));
            }
        }
        if let Err(e) = xenstore_snoop::cli::command().try_get_matches_from(&words) {
            panic!("README's `{line}`: {e}");
        }
        checked += 1;
    }
    assert!(checked >= 8, "{checked} commands found");
}

#[test]
fn another_daemon_of_the_same_binary_is_not_shown() {
    if !common::need_root("another_daemon_of_the_same_binary_is_not_shown") {
        return;
    }
    // Uprobes fire in every process running the file: the snooper keeps
    // only its daemon's firings (in the kernel on bpf, in user space on tracefs).
    let shim = Shim::private_copy();
    let twin = Shim::launch(
        "xenstored-shim twin",
        &shim.binary,
        private_dir("snoop-twin"),
        &[],
    )
    .unwrap();
    let snoop = Snooper::attach(&shim, &[]);
    twin.run("xenstore-write", &["/twin", "1"]);
    shim.run("xenstore-write", &["/ours", "1"]);
    snoop.wait_line("our write", |l| l.contains("XS_WRITE: /ours 1 -> OK"));
    let (out, _, status) = snoop.stop();
    assert!(status.success());
    assert!(!out.iter().any(|l| l.contains("/twin")), "{out:?}");
}
