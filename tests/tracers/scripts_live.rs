//! The bpftrace scripts against a real shim, real clients and real uprobes,
//! next to the real snooper: scripts/xenstore-snoop.bt prints the snooper's
//! lines, and scripts/xs-stacks.bt + scripts/xs-stack-correlate attribute
//! every request of a libxenstore client and a pyxs client to its stack.
//!
//! Each test runs a private copy of the shim binary: bpftrace attaches USDT
//! probes by path (inode), so a private copy keeps other tests' tracers and
//! semaphore counts away from ours.

use crate::common::process::{output_within, Watched, CLIENT_TIMEOUT};
use crate::common::shim::Shim;
use crate::common::TIMEOUT;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(name)
}

/// A running tracer (snooper or bpftrace) whose output is collected.
struct Tracer(Watched);

/// Detaching bpftrace's uprobes takes seconds on a loaded machine, and
/// more since the sites are 5-byte nops the kernel optimises (each
/// detach waits for the trampoline to be unused): one fresh-clone CI run
/// saw a tracer take over a minute to end after SIGTERM.
const EXIT_TIMEOUT: Duration = Duration::from_secs(180);
/// bpftrace compiles its script with LLVM before it attaches: with this
/// file's three tests starting theirs at once on a loaded machine, that
/// took longer than TIMEOUT.
const START_TIMEOUT: Duration = Duration::from_secs(90);

impl Tracer {
    /// Starts `cmd` and waits until `ready` holds for its stdout + stderr.
    fn start(what: &'static str, cmd: Command, ready: impl Fn(&[String]) -> bool) -> Tracer {
        Tracer::start_to(what, cmd, Stdio::piped(), true, ready)
    }

    /// As `start`, with stdout going to `stdout`, and read by the test only
    /// if `collect_stdout` (else `take_stdout` hands the pipe on).
    fn start_to(
        what: &'static str,
        mut cmd: Command,
        stdout: Stdio,
        collect_stdout: bool,
        ready: impl Fn(&[String]) -> bool,
    ) -> Tracer {
        cmd.stdout(stdout).stderr(Stdio::piped());
        let mut t = Watched::spawn(what, &mut cmd, !collect_stdout);
        t.wait_ready(what, START_TIMEOUT, |out, err| ready(&[out, err].concat()));
        Tracer(t)
    }

    fn wait_line(&self, pred: impl Fn(&str) -> bool) {
        self.0.wait_line(&self.0.what, TIMEOUT, pred);
    }

    fn take_stdout(&mut self) -> std::process::ChildStdout {
        self.0.child.stdout.take().expect("stdout not collected")
    }

    /// SIGTERM (both bpftrace and the snooper end cleanly on it; SIGINT
    /// may be ignored when the tests run as a background job).
    fn stop(self) -> Vec<String> {
        self.stop_with_stderr().0
    }

    fn stop_with_stderr(self) -> (Vec<String>, Vec<String>) {
        crate::common::signal(self.0.child.id(), 15);
        self.end()
    }

    /// The whole stdout once the process has ended by itself.
    fn wait(self) -> Vec<String> {
        self.end().0
    }

    fn end(self) -> (Vec<String>, Vec<String>) {
        let what = self.0.what.clone();
        let ended = self.0.end(EXIT_TIMEOUT);
        assert!(
            ended.status.success(),
            "{what}: {} {:?}",
            ended.status,
            ended.stderr
        );
        (ended.stdout, ended.stderr)
    }
}

/// The snooper attached to `shim`; its stdout is collected, or left for
/// `take_stdout` when `collect_stdout` is false.
fn snooper(shim: &Shim, args: &[&str], collect_stdout: bool) -> Tracer {
    let mut cmd = crate::common::snoop_command();
    cmd.arg("--daemon-pid")
        .arg(shim.pid().to_string())
        .args(args)
        .stdin(Stdio::null());
    let ready = |lines: &[String]| lines.iter().any(|l| l.contains("Ctrl-C to end."));
    Tracer::start_to("xenstore-snoop", cmd, Stdio::piped(), collect_stdout, ready)
}

/// Runs a Python file with Debian's python3 (the only one with pyxs).
fn python(file: &Path, socket: &Path) {
    let out = output_within(
        Command::new("/usr/bin/python3").arg(file).arg(socket),
        CLIENT_TIMEOUT,
    );
    assert!(
        out.status.success(),
        "{}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Lines that the snooper and the bpftrace script print for requests.
fn op_lines(lines: &[String]) -> Vec<String> {
    let mut v: Vec<String> = lines
        .iter()
        .filter(|l| l.contains(": ") && l.starts_with(|c: char| c.is_ascii_digit()))
        .cloned()
        .collect();
    v.sort();
    v
}

/// The line without the snooper's COMM column (the scripts have none):
/// it starts after DOM and PID (3 + 1 and 6 + 1 columns) and takes 15 + 1.
fn without_comm(line: &str) -> String {
    const AT: usize = 11;
    if !line[..AT.min(line.len())].ends_with(' ') || line.len() < AT + 16 {
        return line.to_string();
    }
    let rest = &line[AT..];
    let name_end = rest.find(' ').unwrap_or(rest.len());
    format!("{}{}", &line[..AT], &rest[name_end.max(15) + 1..])
}

#[test]
fn bpftrace_snoop_prints_the_snooper_lines() {
    if !crate::common::need_root("bpftrace_snoop_prints_the_snooper_lines") {
        return;
    }
    let shim = Shim::private_copy();
    let binary = shim.binary.clone();
    let snoop = snooper(&shim, &[], true);
    let mut cmd = Command::new("bpftrace");
    cmd.args(["-B", "none"])
        .stdin(Stdio::null())
        .arg(script("xenstore-snoop.bt"))
        .arg(&binary);
    // BEGIN prints the header once every probe is attached
    let bt = Tracer::start("bpftrace xenstore-snoop.bt", cmd, |lines| {
        lines.iter().any(|l| l.starts_with("DOM PID"))
    });

    // A fixed workload: Debian clients and pyxs, an error, a watch, a
    // transaction, and a value past bpftrace's 64-byte strings.
    let long = "v".repeat(100);
    shim.run("xenstore-write", &["/bt/a", "hello world"]);
    assert!(!output_within(
        shim.client("xenstore-read").arg("/bt/missing"),
        CLIENT_TIMEOUT
    )
    .status
    .success());
    shim.run("xenstore-read", &["/bt/a"]);
    shim.run("xenstore-write", &["/bt/long", &long]);
    let watch = shim.watch(&["-n", "2", "/bt/w"]);
    // The initial event says the watch is registered.
    assert_eq!(watch.line(0, TIMEOUT), "/bt/w");
    shim.run("xenstore-write", &["/bt/w/x", "1"]);
    assert!(watch.end(TIMEOUT).status.success());
    let py = shim.dir.join("workload.py");
    std::fs::write(
        &py,
        "import sys\nfrom pyxs import Client\n\
         c = Client(unix_socket_path=sys.argv[1])\nc.connect()\n\
         c.get_domain_path(6)\n\
         c.transaction()\nc.write(b'/bt/t', b'in tx')\nc.commit()\n\
         c.delete(b'/bt/a')\nc.write(b'/bt/done', b'1')\nc.close()\n",
    )
    .unwrap();
    python(&py, &shim.socket);

    let done = |l: &str| l.contains("XS_WRITE: /bt/done 1 -> OK");
    snoop.wait_line(done);
    bt.wait_line(done);
    let snooped: Vec<String> = op_lines(&snoop.stop())
        .iter()
        .map(|l| without_comm(l))
        .collect();
    let traced = op_lines(&bt.stop());

    // The snooper's lines, with the one documented difference: bpftrace
    // strings hold 63 bytes.
    let mut expected: Vec<String> = snooped
        .iter()
        .map(|l| l.replace(&long, &long[..63]))
        .collect();
    expected.sort();
    assert!(snooped.len() >= 12, "{snooped:#?}");
    for want in [
        "[ERROR] XS_READ: /bt/missing -> ENOENT",
        "XS_WATCH_EVENT: /bt/w/x ",
        "XS_TRANSACTION_END: T -> OK",
        "XS_GET_DOMAIN_PATH: 6 -> /local/domain/6",
    ] {
        assert!(
            snooped.iter().any(|l| l.contains(want)),
            "{want}: {snooped:#?}"
        );
    }
    assert!(
        snooped
            .iter()
            .any(|l| l.contains(" 1   XS_WRITE: /bt/t in tx -> OK")),
        "the transaction's TX column: {snooped:#?}"
    );
    assert_eq!(traced, expected, "bpftrace lines != snooper lines");
    drop(shim);
}

#[test]
fn stacks_attribute_every_client_request() {
    if !crate::common::need_root("stacks_attribute_every_client_request") {
        return;
    }
    let shim = Shim::private_copy();
    let dir = shim.dir.clone();
    let stacks_path = dir.join("stacks.txt");
    // stdout straight to the file, unbuffered (-B none): bpftrace's -o
    // buffers its file fully, which would hide records from a live reader.
    let mut cmd = Command::new("bpftrace");
    cmd.args(["-q", "--no-warnings", "-B", "none"])
        .arg(script("xs-stacks.bt"))
        .arg(&shim.socket)
        .stdin(Stdio::null());
    let file = std::fs::File::create(&stacks_path).unwrap();
    let stacks = Tracer::start_to("bpftrace xs-stacks.bt", cmd, file.into(), true, |_| {
        std::fs::read_to_string(&stacks_path).is_ok_and(|s| s.contains("# xs-stacks.bt: tracing"))
    });
    // Live, as documented: xenstore-snoop --json | xs-stack-correlate,
    // following the stacks file as bpftrace appends to it.
    let mut snoop = snooper(&shim, &["--json"], false);
    let mut cmd = Command::new(script("xs-stack-correlate"));
    cmd.arg("--stacks")
        .arg(&stacks_path)
        .stdin(Stdio::from(snoop.take_stdout()));
    let correlate = Tracer::start("xs-stack-correlate", cmd, |_| true);

    // A libxenstore client from a shell loop, and a pyxs client.
    let out = output_within(
        shim.client("sh")
            .arg("-c")
            .arg("for i in 1 2 3; do xenstore-write /st/loop/$i v$i || exit 1; done; xenstore-read /st/loop/2"),
        CLIENT_TIMEOUT,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let py = dir.join("pyclient.py");
    std::fs::write(
        &py,
        "import sys\nfrom pyxs import Client\n\n\
         def store_config(c):\n    c.write(b'/st/py/a', b'1')\n    c.write(b'/st/py/b', b'2')\n\n\
         def main():\n    c = Client(unix_socket_path=sys.argv[1])\n    c.connect()\n    \
         store_config(c)\n    c.read(b'/st/py/a')\n    c.close()\n\nmain()\n",
    )
    .unwrap();
    python(&py, &shim.socket);

    // The last request is attributed live, before anything stops.
    correlate.wait_line(|l| l.contains("XS_READ: /st/py/a -> 1"));
    let _ = snoop.stop(); // EOF for the correlator: it prints the ranking
    let report = correlate.wait().join("\n") + "\n";
    let (_, bpftrace_stderr) = stacks.stop_with_stderr();

    let stacks_text = std::fs::read_to_string(&stacks_path).unwrap();
    let context = format!(
        "{report}\n--- stacks:\n{stacks_text}\n--- bpftrace stderr:\n{}",
        bpftrace_stderr.join("\n")
    );

    assert!(
        report.contains("unattributed dom0 requests: 0\n"),
        "{context}"
    );
    assert!(!report.contains("(unattributed"), "{context}");
    // (a) each request followed by its stack; check both clients' requests.
    let lines: Vec<&str> = report.lines().collect();
    let attributed = |request: &str| -> Vec<&str> {
        let i = lines
            .iter()
            .position(|l| l.contains(request))
            .unwrap_or_else(|| panic!("no request {request}:\n{context}"));
        lines[i + 1..]
            .iter()
            .take_while(|l| l.starts_with("    "))
            .copied()
            .collect()
    };
    for i in 1..=3 {
        let stack = attributed(&format!("XS_WRITE: /st/loop/{i} v{i} -> OK"));
        assert!(
            stack[0]
                .trim_start()
                .starts_with("xs_write [xenstore-write"),
            "{context}"
        );
        assert!(stack[1].contains("(xenstore-write text+0x"), "{context}");
    }
    let stack = attributed("XS_READ: /st/loop/2 -> v2");
    assert!(
        stack[0].trim_start().starts_with("xs_read [xenstore-read"),
        "{context}"
    );
    for request in ["XS_WRITE: /st/py/a 1 -> OK", "XS_WRITE: /st/py/b 2 -> OK"] {
        let stack = attributed(request).join("\n");
        assert!(stack.contains("[python3 tid"), "{context}");
        assert!(stack.contains("py write ("), "{context}");
        assert!(
            stack.contains("py store_config (") && stack.contains("py main ("),
            "{context}"
        );
    }
    let stack = attributed("XS_READ: /st/py/a -> 1").join("\n");
    assert!(
        stack.contains("py read (") && !stack.contains("store_config"),
        "{context}"
    );

    // (b) the ranking: the pyxs write call site issued 2 requests
    let summary = report.split("STACKS BY REQUESTS").nth(1).unwrap();
    assert!(
        summary.lines().any(|l| l
            .split_whitespace()
            .eq(["2", "0", "0", "0", "python3", "sendto"])),
        "{context}"
    );
    drop(shim);
}

/// The sum of the counts of bpftrace histogram `name` in `lines`.
fn histogram_count(lines: &[String], name: &str) -> u64 {
    lines
        .iter()
        .skip_while(|l| l.trim() != format!("{name}:"))
        .skip(1)
        .take_while(|l| l.starts_with('['))
        .map(|l| {
            let count = l.split(')').nth(1).unwrap().split('|').next().unwrap();
            count.trim().parse::<u64>().unwrap()
        })
        .sum()
}

#[test]
fn xs_latency_counts_every_request_by_type_from_reply() {
    if !crate::common::need_root("xs_latency_counts_every_request_by_type_from_reply") {
        return;
    }
    let shim = Shim::private_copy();
    let mut cmd = Command::new("bpftrace");
    cmd.args(["-B", "none"])
        .stdin(Stdio::null())
        .arg(script("xs-latency.bt"))
        .arg(&shim.binary);
    let bt = Tracer::start("bpftrace xs-latency.bt", cmd, |lines| {
        lines.iter().any(|l| l.ends_with("Ctrl-C to end."))
    });
    for i in 0..3 {
        shim.run("xenstore-write", &[&format!("/lat/{i}"), "v"]);
    }
    for i in 0..2 {
        let read = output_within(
            shim.client("xenstore-read").arg(format!("/lat/none{i}")),
            CLIENT_TIMEOUT,
        );
        assert!(!read.status.success());
    }
    // The maps are filled as the probe fires: all there once the clients end.
    let out = bt.stop();
    assert_eq!(histogram_count(&out, "@us[XS_WRITE]"), 3, "{out:#?}");
    assert_eq!(histogram_count(&out, "@us[XS_READ]"), 2, "{out:#?}");
    assert!(
        out.iter().any(|l| l == "@errors[XS_READ, 2]: 2"),
        "{out:#?}"
    );
}

/// A bpftrace script across a live update in place (man/xenstore-scripts.7,
/// AFTER A LIVE UPDATE): stopped before `xenstore-control live-update -f`
/// into the daemon's own file and started again after, it sees the new
/// image's requests. (Kept attached across the update it would not: the
/// kernel leaves the new image's semaphores at 0.)
#[test]
fn a_bpftrace_script_restarted_after_an_update_sees_the_new_image() {
    let test = "a_bpftrace_script_restarted_after_an_update_sees_the_new_image";
    if !crate::common::need_root(test)
        || !crate::common::upstream::available(crate::common::upstream::Flavor::C, test)
    {
        return;
    }
    let shim = Shim::private_copy();
    let pid = shim.pid();
    let binary = shim.binary.clone();
    let bpftrace = || {
        let mut cmd = Command::new("bpftrace");
        cmd.args(["-B", "none"])
            .stdin(Stdio::null())
            .arg(script("xenstore-snoop.bt"))
            .arg(&binary);
        Tracer::start("bpftrace xenstore-snoop.bt", cmd, |lines| {
            lines.iter().any(|l| l.starts_with("DOM PID"))
        })
    };
    let before = bpftrace();
    shim.run("xenstore-write", &["/lu/before", "1"]);
    before.wait_line(|l| l.contains("XS_WRITE: /lu/before 1 -> OK"));
    before.stop();

    let update = output_within(
        shim.client("/usr/lib/xen-4.17/bin/xenstore-control")
            .args(["live-update", "-t", "10", "-f"])
            .arg(&binary),
        Duration::from_secs(60),
    );
    assert!(update.status.success(), "{update:?}\n{}", shim.log());
    assert!(
        shim.log().contains("live update: took over"),
        "{}",
        shim.log()
    );
    assert_eq!(shim.pid(), pid);

    let after = bpftrace();
    shim.run("xenstore-write", &["/lu/after", "2"]);
    after.wait_line(|l| l.contains("XS_WRITE: /lu/after 2 -> OK"));
    after.stop();
}
