//! The drop-in start contract of xenstored-shim, against the real binary:
//! `--pid-file` detaches and returns only once the socket accepts, the pid
//! file names the daemon, a live socket is never taken over, SIGTERM
//! cleans up, upstream's flags are honoured or refused with a reason,
//! XENSTORED_RUNDIR/ROOTDIR, syslog once detached, systemd's READY=1, the
//! classic trace file.
use crate::common::process::BoundedOutput;
use crate::common::shim::private_dir;
use crate::common::{bin, signal, wait_for};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

const XENSTORE_CONTROL: &str = "/usr/lib/xen-4.17/bin/xenstore-control";
const TIMEOUT: Duration = Duration::from_secs(20);
const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;

/// One private directory: socket, run dir, pid file, the caller's output.
struct Place {
    dir: PathBuf,
    socket: PathBuf,
    pid_file: PathBuf,
}

impl Place {
    fn new(tag: &str) -> Place {
        let dir = private_dir(tag);
        Place {
            socket: dir.join("socket"),
            pid_file: dir.join("xenstored.pid"),
            dir,
        }
    }

    /// The shim on this place's socket and run dir, output into files.
    fn shim(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin("xenstored-shim"));
        cmd.arg("--socket")
            .arg(&self.socket)
            .arg("--run-dir")
            .arg(self.dir.join("run"))
            .args(args)
            .env_remove("NOTIFY_SOCKET")
            .env_remove("XENSTORED_PATH")
            .env_remove("XENSTORED_RUNDIR");
        cmd
    }

    /// Runs `cmd` to its exit (the detached start's readiness signal).
    fn start(&self, cmd: &mut Command) -> Started {
        let out = self.dir.join(format!("out-{}", unique()));
        let err = self.dir.join(format!("err-{}", unique()));
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("start xenstored-shim");
        let status = wait_exit(&mut child, "the starting xenstored-shim");
        Started {
            status,
            stdout: std::fs::read_to_string(out).unwrap(),
            stderr: std::fs::read_to_string(err).unwrap(),
        }
    }

    fn daemon_pid(&self) -> u32 {
        let text = std::fs::read_to_string(&self.pid_file).expect("read the pid file");
        assert!(
            text.ends_with('\n'),
            "pid file {text:?} ends with a newline"
        );
        text.trim().parse().expect("a pid in the pid file")
    }

    /// A Debian client against this socket; its stdout.
    fn client(&self, program: &str, args: &[&str]) -> String {
        crate::common::daemon::run_client(&self.socket, program, args)
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Ok(text) = std::fs::read_to_string(&self.pid_file) {
            if let Ok(pid) = text.trim().parse::<u32>() {
                signal(pid, 9);
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

struct Started {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

fn unique() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn wait_exit(child: &mut Child, what: &str) -> ExitStatus {
    crate::common::process::wait_exit(child, what, TIMEOUT)
}

fn alive(pid: u32) -> bool {
    // A zombie has exited: only a live process has a non-Z state.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

#[test]
fn pid_file_start_returns_once_serving_and_sigterm_cleans_up() {
    let place = Place::new("dropin-start");
    let started = place.start(place.shim(&["--pid-file"]).arg(&place.pid_file).arg("-P"));
    assert!(started.status.success(), "start failed: {}", started.stderr);
    // The caller's exit is the readiness signal: no retry, no wait.
    UnixStream::connect(&place.socket).expect("the socket accepts as soon as the start returns");
    let pid = place.daemon_pid();
    assert_eq!(
        started.stdout.trim(),
        pid.to_string(),
        "-P prints the daemon's pid"
    );
    assert!(alive(pid), "the pid file names a live process");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("xenstored-shim"),
        "pid {pid} is the shim"
    );
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let (sid, pgrp) = (fields[3], fields[2]);
    assert_ne!(sid, pid.to_string(), "detached twice: not a session leader");
    assert_eq!(sid, pgrp, "in its own session (setsid)");
    for fd in 0..=2 {
        let target = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).unwrap();
        assert_eq!(target, Path::new("/dev/null"), "the daemon's fd {fd}");
    }
    place.client("xenstore-write", &["/dropin/key", "value"]);
    assert_eq!(place.client("xenstore-read", &["/dropin/key"]), "value\n");

    signal(pid, SIGTERM);
    wait_for("the daemon to exit on SIGTERM", TIMEOUT, || !alive(pid));
    assert!(!place.socket.exists(), "SIGTERM removed the socket");
    assert!(!place.pid_file.exists(), "SIGTERM removed the pid file");
}

#[test]
fn foreground_sigterm_and_sigint_exit_zero_after_cleanup() {
    for sig in [SIGTERM, SIGINT] {
        let place = Place::new("dropin-fg");
        let mut child = place
            .shim(&["-N", "-F"])
            .arg(&place.pid_file)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        wait_for("the pid file", TIMEOUT, || place.pid_file.exists());
        assert_eq!(
            place.daemon_pid(),
            child.id(),
            "-N: the pid file names the process started"
        );
        UnixStream::connect(&place.socket).expect("serving once the pid file exists");
        signal(child.id(), sig);
        let status = wait_exit(&mut child, "the shim after a stop signal");
        assert_eq!(status.code(), Some(0), "signal {sig}: exit 0");
        assert!(!place.socket.exists(), "signal {sig}: socket removed");
        assert!(!place.pid_file.exists(), "signal {sig}: pid file removed");
    }
}

#[test]
fn second_start_on_a_live_socket_is_refused_and_the_first_keeps_serving() {
    let place = Place::new("dropin-twice");
    let first = place.start(place.shim(&["--pid-file"]).arg(&place.pid_file));
    assert!(first.status.success(), "{}", first.stderr);
    let pid = place.daemon_pid();
    let inode = std::fs::metadata(&place.socket).unwrap().ino();

    let other_pid_file = place.dir.join("second.pid");
    for args in [
        vec!["--pid-file", other_pid_file.to_str().unwrap()],
        vec!["-N"],
    ] {
        let second = place.start(&mut place.shim(&args));
        assert_eq!(
            second.status.code(),
            Some(1),
            "second start {args:?} must fail"
        );
        assert!(
            second
                .stderr
                .contains("a running xenstored serves this socket"),
            "clear error: {}",
            second.stderr
        );
        assert!(
            !other_pid_file.exists(),
            "the refused start wrote no pid file"
        );
    }
    assert_eq!(
        std::fs::metadata(&place.socket).unwrap().ino(),
        inode,
        "the socket was left alone"
    );
    assert!(alive(pid));
    place.client("xenstore-write", &["/still", "here"]);
    assert_eq!(place.client("xenstore-read", &["/still"]), "here\n");
    assert_eq!(
        place.daemon_pid(),
        pid,
        "the pid file still names the first"
    );
}

#[test]
fn stale_socket_file_is_replaced() {
    let place = Place::new("dropin-stale");
    // A socket file nobody listens on any more (a crashed daemon's). Another
    // test thread's fork can hold the listener's fd until its exec closes it,
    // so wait for the last copy to go rather than expect it gone at once.
    drop(UnixListener::bind(&place.socket).unwrap());
    wait_for("the dropped listener to refuse", TIMEOUT, || {
        UnixStream::connect(&place.socket).is_err()
    });
    let started = place.start(place.shim(&["-F"]).arg(&place.pid_file));
    assert!(started.status.success(), "{}", started.stderr);
    place.client("xenstore-write", &["/fresh", "1"]);
    assert_eq!(place.client("xenstore-read", &["/fresh"]), "1\n");
}

#[test]
fn unsupported_upstream_flags_are_refused_with_the_reason() {
    let place = Place::new("dropin-refused");
    let cases: [(&[&str], &str); 5] = [
        (&["-Ioff"], "-I/--internal-db"),
        (&["--internal-db", "off"], "-I/--internal-db"),
        (&["-w", "watch-event=20"], "-w/--timeout"),
        (&["--keep-orphans"], "-K/--keep-orphans"),
        (&["--master-domid", "7"], "stub domain"),
    ];
    for (args, named) in cases {
        let out = place.start(&mut place.shim(args));
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            out.stderr.starts_with("xenstored-shim: unsupported option")
                && out.stderr.contains(named),
            "{args:?}: {}",
            out.stderr
        );
        assert!(!place.socket.exists(), "{args:?}: nothing was started");
    }
    // -U with no state left by a daemon to take over from: nothing starts.
    let out = place.start(&mut place.shim(&["-U"]));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stderr.contains("live update:") && out.stderr.contains("state_dump"),
        "{}",
        out.stderr
    );
    assert!(!place.socket.exists());
    let out = place.start(&mut place.shim(&["--no-such-flag"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stderr.contains("'--no-such-flag'"), "{}", out.stderr);
    let out = place.start(&mut place.shim(&["-E", "many"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stderr.contains("'many'"), "{}", out.stderr);
}

#[test]
fn version_and_help_name_the_shim_and_upstream_flags() {
    let place = Place::new("dropin-version");
    let out = place.start(&mut place.shim(&["--version"]));
    assert!(out.status.success());
    assert!(out.stdout.starts_with("xenstored-shim "), "{}", out.stdout);
    for help in ["-H", "-h", "--help"] {
        let out = place.start(&mut place.shim(&[help]));
        assert!(out.status.success(), "{help}");
        for flag in [
            "--no-fork",
            "--pid-file",
            "--trace-file",
            "--no-domain-init",
            "--entry-nb",
        ] {
            assert!(out.stdout.contains(flag), "{help} lists {flag}");
        }
    }
}

#[test]
fn legacy_quota_flags_set_upstreams_quotas() {
    let place = Place::new("dropin-quota");
    let started = place.start(
        place
            .shim(&["-E", "7", "-S", "1000", "-W", "9", "-t", "3", "-A", "4"])
            .args(["-M", "5000", "--no-recovery", "--internal-db", "-F"])
            .arg(&place.pid_file),
    );
    assert!(started.status.success(), "{}", started.stderr);
    let table = place.client(XENSTORE_CONTROL, &["quota"]);
    for (what, nb) in [
        ("nodes", 7),
        ("node-size", 1000),
        ("watches", 9),
        ("transactions", 3),
        ("permissions", 4),
        ("path-max", 2048),
    ] {
        let line = table
            .lines()
            .find(|l| l.split(':').next().unwrap().trim() == what)
            .unwrap_or_else(|| panic!("{what} in {table}"));
        assert_eq!(
            line.split(':').nth(1).unwrap().split_whitespace().next(),
            Some(nb.to_string().as_str()),
            "{line}"
        );
    }
}

#[test]
fn xenstored_rundir_holds_the_socket_and_rootdir_is_unused() {
    let place = Place::new("dropin-env");
    let run_dir = place.dir.join("not-yet/xenstored");
    let root_dir = place.dir.join("rootdir");
    let mut cmd = Command::new(bin("xenstored-shim"));
    cmd.args(["-V", "--pid-file"])
        .arg(&place.pid_file)
        .env_remove("XENSTORED_PATH")
        .env_remove("NOTIFY_SOCKET")
        .env("XENSTORED_RUNDIR", &run_dir)
        .env("XENSTORED_ROOTDIR", &root_dir);
    let started = place.start(&mut cmd);
    assert!(started.status.success(), "{}", started.stderr);
    let version = format!("xenstored-shim {}:", env!("CARGO_PKG_VERSION"));
    assert!(
        started.stderr.contains(&version),
        "-V names the daemon and its version: {}",
        started.stderr
    );
    let socket = run_dir.join("socket");
    UnixStream::connect(&socket).expect("$XENSTORED_RUNDIR/socket serves");
    assert!(!root_dir.exists(), "XENSTORED_ROOTDIR is not created");
    assert!(
        started
            .stderr
            .contains(&format!("XENSTORED_ROOTDIR={} unused", root_dir.display())),
        "-V says so: {}",
        started.stderr
    );
    let pid = place.daemon_pid();
    signal(pid, SIGTERM);
    wait_for("the daemon to exit", TIMEOUT, || !alive(pid));
    assert!(!socket.exists());
}

#[test]
fn foreground_startup_error_goes_to_stderr() {
    let place = Place::new("dropin-fg-error");
    std::fs::write(place.dir.join("file"), "").unwrap();
    let blocked = place.dir.join("file/socket");
    let out = place.start(
        Command::new(bin("xenstored-shim"))
            .arg("--socket")
            .arg(&blocked)
            .args(["--run-dir", place.dir.join("run").to_str().unwrap(), "-N"]),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stderr.starts_with("xenstored-shim: listening: ")
            && out.stderr.contains(blocked.to_str().unwrap()),
        "{}",
        out.stderr
    );
}

#[test]
fn sd_notify_ready_reaches_notify_socket() {
    let place = Place::new("dropin-notify");
    let notify_path = place.dir.join("notify");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify.set_read_timeout(Some(TIMEOUT)).unwrap();
    let started = place.start(
        place
            .shim(&["--pid-file"])
            .arg(&place.pid_file)
            .env("NOTIFY_SOCKET", &notify_path),
    );
    assert!(started.status.success(), "{}", started.stderr);
    let mut buf = [0u8; 256];
    let n = notify
        .recv(&mut buf)
        .expect("READY=1 before the start returned");
    assert_eq!(&buf[..n], b"READY=1");
}

/// Once detached, messages go to syslog: the daemon runs in a private
/// mount namespace whose /dev/log is this test's datagram socket.
#[test]
fn detached_daemon_logs_to_syslog_and_its_startup_error_reaches_the_caller() {
    if !crate::common::need_root("detached_daemon_logs_to_syslog") {
        return;
    }
    let place = Place::new("dropin-syslog");
    let dev = place.dir.join("dev");
    std::fs::create_dir(&dev).unwrap();
    std::fs::write(dev.join("null"), "").unwrap();
    let log = UnixDatagram::bind(dev.join("log")).unwrap();
    log.set_read_timeout(Some(TIMEOUT)).unwrap();
    let in_private_dev = |pid_file: &Path| {
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private", "sh", "-ec"])
            .arg(r#"mount --bind /dev/null "$1/null"; mount --rbind "$1" /dev; shift; exec "$@""#)
            .arg("sh")
            .arg(&dev)
            .arg(bin("xenstored-shim"))
            .arg("--socket")
            .arg(&place.socket)
            .arg("--run-dir")
            .arg(place.dir.join("run"))
            .arg("--pid-file")
            .arg(pid_file)
            .env_remove("NOTIFY_SOCKET");
        cmd
    };
    let next_line = || {
        let mut buf = [0u8; 2048];
        let n = log.recv(&mut buf).expect("a syslog message");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };

    // The pid file's directory is missing: the daemon fails after detaching.
    let bad = place.dir.join("missing/xenstored.pid");
    let out = place.start(&mut in_private_dev(&bad));
    assert_eq!(out.status.code(), Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("pid file {}", bad.display())),
        "the caller reports the daemon's error: {}",
        out.stderr
    );
    let line = next_line();
    assert!(
        line.starts_with("<27>") && line.contains("xenstored-shim[") && line.contains("pid file"),
        "LOG_DAEMON|LOG_ERR with the error: {line}"
    );
    assert!(
        !place.socket.exists(),
        "the failed daemon removed its socket"
    );

    let out = place.start(&mut in_private_dev(&place.pid_file));
    assert!(out.status.success(), "{}", out.stderr);
    let pid = place.daemon_pid();
    let line = next_line();
    assert!(
        line.starts_with("<30>")
            && line.contains(&format!("xenstored-shim[{pid}]: ready: serving")),
        "LOG_DAEMON|LOG_INFO start-up line: {line}"
    );
    // A run-time error (a client's oversized message) reaches syslog too.
    let mut client = UnixStream::connect(&place.socket).unwrap();
    let header: Vec<u8> = [2u32, 1, 0, 5000]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    std::io::Write::write_all(&mut client, &header).unwrap();
    let line = next_line();
    assert!(
        line.starts_with("<27>") && line.contains("message length 5000 > 4096"),
        "{line}"
    );
    signal(pid, SIGTERM);
    let line = next_line();
    assert!(line.contains("SIGTERM: stopping"), "{line}");
    wait_for("the daemon to exit", TIMEOUT, || !alive(pid));
}

/// Xen's own start path, unmodified: /etc/xen/scripts/launch-xenstore (what
/// xenstored.service runs) with XENSTORED pointing at the shim in
/// /etc/default/xencommons. It runs in a private mount namespace whose
/// /etc/default and /run are fresh, so the host's are untouched.
#[test]
fn launch_xenstore_starts_the_shim_as_xenstored_service_does() {
    if !crate::common::need_root("launch_xenstore_starts_the_shim") {
        return;
    }
    let place = Place::new("dropin-launch");
    let notify_path = place.dir.join("notify");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify.set_read_timeout(Some(TIMEOUT)).unwrap();
    let xencommons = format!(
        "XENSTORED={}\nXENSTORED_ARGS=\"--socket {} --run-dir {}\"\n",
        bin("xenstored-shim").display(),
        place.socket.display(),
        place.dir.join("run").display()
    );
    let out = place.start(
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-ec"])
            .arg(
                r#"mount -t tmpfs none /etc/default; mount -t tmpfs none /run
                printf %s "$1" > /etc/default/xencommons
                # prlimit may not raise the fd limit past the hard one
                # without CAP_SYS_RESOURCE.
                echo "XENSTORED_MAX_OPEN_FDS=$(ulimit -Hn)" >> /etc/default/xencommons
                /etc/xen/scripts/launch-xenstore
                echo "pid file: $(cat /var/run/xen/xenstored.pid)""#,
            )
            .arg("sh")
            .arg(&xencommons)
            .env("NOTIFY_SOCKET", &notify_path),
    );
    assert!(
        out.status.success(),
        "launch-xenstore: {}{}",
        out.stdout,
        out.stderr
    );
    UnixStream::connect(&place.socket).expect("serving once launch-xenstore returned");
    let pid: u32 = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("pid file: "))
        .unwrap_or_else(|| panic!("{}", out.stdout))
        .parse()
        .unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(String::from_utf8_lossy(&cmdline).contains("--pid-file\0/var/run/xen/xenstored.pid"));
    let mut buf = [0u8; 64];
    let n = notify
        .recv(&mut buf)
        .expect("READY=1 for xenstored.service");
    assert_eq!(&buf[..n], b"READY=1");
    place.client("xenstore-write", &["/launched", "yes"]);
    assert_eq!(place.client("xenstore-read", &["/launched"]), "yes\n");
    signal(pid, SIGTERM);
    wait_for("the daemon to exit", TIMEOUT, || !alive(pid));
    assert!(!place.socket.exists());
}

/// Debian's /etc/init.d/xen start line, as it runs it: start-stop-daemon,
/// choom, `-- $XENSTORED_ARGS --pid-file /run/xenstore.pid`; the script
/// then polls `xenstore-read -s /`, which must answer at once.
#[test]
fn debian_init_start_line_starts_the_shim_once() {
    let place = Place::new("dropin-debian");
    let start_line = |place: &Place| {
        let mut cmd = Command::new("start-stop-daemon");
        cmd.args(["--start", "--quiet", "--pidfile"])
            .arg(&place.pid_file)
            .args(["--exec", "/usr/bin/choom", "--", "-n", "100"])
            .arg(bin("xenstored-shim"))
            .arg("--")
            .arg("--socket")
            .arg(&place.socket)
            .arg("--run-dir")
            .arg(place.dir.join("run"))
            .arg("--pid-file")
            .arg(&place.pid_file)
            .env_remove("NOTIFY_SOCKET")
            .env("XENSTORED_ROOTDIR", "/run/xenstored");
        cmd
    };
    let out = place.start(&mut start_line(&place));
    assert!(out.status.success(), "{}", out.stderr);
    place.client("xenstore-read", &["-s", "/"]);
    let pid = place.daemon_pid();
    let again = place.start(&mut start_line(&place));
    assert_eq!(again.status.code(), Some(1), "a second start is refused");
    assert_eq!(place.daemon_pid(), pid);
    assert!(alive(pid));
}

/// xenstored-probes/systemd/xenstored-shim.service's ExecStart, as systemd
/// would run it (Type=notify, NotifyAccess=main): READY=1 comes from the
/// main process once the socket serves, and the pid file names it.
#[test]
fn systemd_unit_exec_start_notifies_from_the_main_process() {
    let unit = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("xenstored-probes/systemd/xenstored-shim.service"),
    )
    .unwrap();
    assert!(unit.lines().any(|l| l == "Type=notify"));
    assert!(unit.lines().any(|l| l == "Alias=xenstored.service"));
    let exec_start = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart");
    let place = Place::new("dropin-unit");
    let notify_path = place.dir.join("notify");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify.set_read_timeout(Some(TIMEOUT)).unwrap();
    let xenstored_args = format!(
        "--socket {} --run-dir {}",
        place.socket.display(),
        place.dir.join("run").display()
    );
    let mut words = exec_start.split_whitespace().flat_map(|w| match w {
        "/usr/sbin/xenstored-shim" => vec![bin("xenstored-shim").display().to_string()],
        "/run/xen/xenstored.pid" => vec![place.pid_file.display().to_string()],
        "$XENSTORED_ARGS" => xenstored_args.split(' ').map(String::from).collect(),
        w => vec![w.to_string()],
    });
    let mut child = Command::new(words.next().unwrap())
        .args(words)
        .env("NOTIFY_SOCKET", &notify_path)
        .env_remove("XENSTORED_PATH")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 64];
    let n = notify.recv(&mut buf).expect("READY=1");
    assert_eq!(&buf[..n], b"READY=1");
    UnixStream::connect(&place.socket).expect("serving once READY=1 is sent");
    assert_eq!(
        place.daemon_pid(),
        child.id(),
        "the main process, not a fork"
    );
    assert_eq!(child.try_wait().unwrap(), None, "still running");
    signal(child.id(), SIGTERM);
    assert_eq!(wait_exit(&mut child, "the unit's shim").code(), Some(0));
    assert!(!place.socket.exists() && !place.pid_file.exists());
}

/// The same client session against C xenstored and the shim, both with
/// `-T`: the IN/OUT/CREATE/DESTROY connection lines agree once connection
/// pointers and clock are normalised (C also traces watches, rate limits
/// and store checks, which the shim does not).
#[test]
fn trace_file_matches_c_xenstoreds_lines() {
    use crate::common::upstream::{available, Flavor, Upstream};
    if !available(Flavor::C, "trace_file_matches_c_xenstoreds_lines") {
        return;
    }
    let session = |socket: &Path| {
        let run = |program: &str, args: &[&str]| {
            let out = Command::new(program)
                .env("XENSTORED_PATH", socket)
                .args(args)
                .bounded_output();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        run("xenstore-write", &["/trace/a", "one", "/trace/b", "two"]);
        run("xenstore-read", &["/trace/a"]);
        run("xenstore-read", &["/trace/missing"]);
        run("xenstore-list", &["/trace"]);
        run("xenstore-watch", &["-n", "1", "/trace/a"]);
        run("xenstore-rm", &["/trace"]);
    };
    let c_dir = private_dir("dropin-trace-c");
    let c_trace = c_dir.join("trace");
    let c = Upstream::start_with(Flavor::C, &["-T", c_trace.to_str().unwrap()]);
    session(&c.socket);
    fn ended(trace: &Path) -> impl FnMut() -> bool + '_ {
        move || classic_lines(&std::fs::read_to_string(trace).unwrap_or_default()).1
    }
    wait_for("C's last DESTROY", TIMEOUT, ended(&c_trace));
    drop(c);

    let place = Place::new("dropin-trace");
    let trace = place.dir.join("trace");
    let started = place.start(
        place
            .shim(&["-T"])
            .arg(&trace)
            .arg("--pid-file")
            .arg(&place.pid_file),
    );
    assert!(started.status.success(), "{}", started.stderr);
    session(&place.socket);
    wait_for("the shim's last DESTROY", TIMEOUT, ended(&trace));

    let (c_lines, _) = classic_lines(&std::fs::read_to_string(&c_trace).unwrap());
    let (shim_lines, _) = classic_lines(&std::fs::read_to_string(&trace).unwrap());
    assert_eq!(c_lines.len(), 6, "one per client: {c_lines:#?}");
    assert_eq!(shim_lines, c_lines);
    let _ = std::fs::remove_dir_all(c_dir);

    // SIGHUP reopens the file by name (log rotation).
    let rotated = place.dir.join("trace.1");
    std::fs::rename(&trace, &rotated).unwrap();
    signal(place.daemon_pid(), 1);
    wait_for("the trace file to be reopened", TIMEOUT, || trace.exists());
    place.client("xenstore-read", &["-s", "/"]);
    let fresh = std::fs::read_to_string(&trace).unwrap();
    assert!(
        fresh.starts_with("\n***\n") && fresh.contains(" READ (/ )"),
        "{fresh}"
    );
    assert!(!std::fs::read_to_string(&rotated)
        .unwrap()
        .contains(" READ (/ )"));
}

/// Each connection's lines (those that sent something), in the order
/// the connections were created, times blanked: connections overlap (the
/// next client may connect before the last one's end is seen) and C
/// reuses addresses, so lines are grouped per CREATE. Also whether every
/// such connection's DESTROY is there yet.
fn classic_lines(trace: &str) -> (Vec<Vec<String>>, bool) {
    let mut current = std::collections::HashMap::new();
    let mut conns: Vec<Vec<String>> = Vec::new();
    let mut talked = Vec::new();
    let mut ended = Vec::new();
    for line in trace.lines() {
        let w: Vec<&str> = line.splitn(5, ' ').collect();
        let (conn, text) = match w.as_slice() {
            ["CREATE", "connection", ptr] => {
                current.insert(ptr.to_string(), conns.len());
                conns.push(Vec::new());
                talked.push(false);
                ended.push(false);
                (conns.len() - 1, "CREATE connection".to_string())
            }
            ["DESTROY", "connection", ptr] => {
                let n = current[*ptr];
                ended[n] = true;
                (n, "DESTROY connection".to_string())
            }
            [dir @ ("IN" | "OUT"), ptr, _date, _time, rest] => {
                let n = current[*ptr];
                talked[n] |= *dir == "IN";
                (n, format!("{dir} {rest}"))
            }
            _ => continue,
        };
        conns[conn].push(text);
    }
    let complete = (0..conns.len()).all(|n| !talked[n] || ended[n]);
    let talkers = conns
        .into_iter()
        .enumerate()
        .filter(|(n, _)| talked[*n])
        .map(|(_, lines)| lines)
        .collect();
    (talkers, complete)
}
