//! The Debian package `make deb` builds: lintian-clean, installed with dpkg
//! on this machine, its installed binaries and scripts used for real (the
//! daemon started as its unit starts it, the snooper, man, the systemtap
//! tapset found by name, the bpftrace script), then removed leaving only its
//! conffile, then purged.
use crate::common::process::{output_within, BoundedOutput, StopOnDrop, Watched};
use crate::common::TIMEOUT;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const PACKAGE: &str = "xenstore-snoop";
const CONFFILE: &str = "/etc/default/xenstored-shim";
const UNIT: &str = "/lib/systemd/system/xenstored-shim.service";
const SHIM: &str = "/usr/sbin/xenstored-shim";

/// Every file the package must ship (issue: binaries, man pages, completions,
/// unit, defaults, tapset, scripts).
const FILES: &[&str] = &[
    SHIM,
    "/usr/bin/xenstore-snoop",
    "/usr/share/man/man1/xenstore-snoop.1.gz",
    "/usr/share/man/man7/xenstored-probes.7.gz",
    "/usr/share/man/man7/xenstore-scripts.7.gz",
    "/usr/share/man/man8/xenstored-shim.8.gz",
    "/usr/share/bash-completion/completions/xenstore-snoop",
    "/usr/share/zsh/vendor-completions/_xenstore-snoop",
    "/usr/share/fish/vendor_completions.d/xenstore-snoop.fish",
    UNIT,
    CONFFILE,
    "/usr/share/systemtap/tapset/xenstore.stp",
    "/usr/share/xenstore-snoop/xenstore-snoop.bt",
    "/usr/share/xenstore-snoop/xs-stacks.bt",
    "/usr/share/xenstore-snoop/xs-latency.bt",
    "/usr/share/xenstore-snoop/xenstore-snoop.d",
    "/usr/share/xenstore-snoop/xs-stack-correlate",
    "/usr/share/doc/xenstore-snoop/copyright",
    "/usr/share/doc/xenstore-snoop/README.systemd",
    "/lib/systemd/system/xenstore-snoop-metrics.service",
    "/usr/share/xenstore-snoop/xenstore-alerts.yml",
    "/usr/share/xenstore-snoop/xenstore-alerts.test.yml",
];

/// dpkg and lintian on a loaded machine: minutes, not hours.
const PACKAGE_TOOL_TIMEOUT: Duration = Duration::from_secs(600);

fn run(program: &str, args: &[&str]) -> Output {
    output_within(Command::new(program).args(args), PACKAGE_TOOL_TIMEOUT)
}

fn ok(program: &str, args: &[&str]) -> String {
    let out = run(program, args);
    assert!(
        out.status.success(),
        "{program} {args:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The package `make deb` left in target/deb, if any.
fn built_deb() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/deb");
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
}

/// Purges the package however the test ends, so a failure leaves the
/// machine as it was.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = run("dpkg", &["--purge", PACKAGE]);
    }
}

/// Waits for a line of `tracer` matching `want`, writing `/pkg/key` until
/// one comes (a tracer attaches asynchronously: the first writes may
/// precede it). Returns its lines so far.
fn wait_traced(tracer: &Watched, socket: &Path, want: &str) -> Vec<String> {
    let mut n = 0;
    crate::common::wait_for(
        &format!("{} to show {want:?}", tracer.what),
        TIMEOUT,
        || {
            n += 1;
            let out = Command::new("xenstore-write")
                .env("XENSTORED_PATH", socket)
                .args(["/pkg/key", &n.to_string()])
                .bounded_output();
            assert!(out.status.success(), "xenstore-write: {out:?}");
            tracer.stdout().iter().any(|l| l.contains(want))
        },
    );
    tracer.stdout()
}

#[test]
fn package_is_lintian_clean_installs_runs_and_removes_cleanly() {
    if !crate::common::need_root("package_is_lintian_clean_installs_runs_and_removes_cleanly") {
        return;
    }
    let Some(deb) = built_deb() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no package in target/deb: `make test` builds it with `make deb` first"
        );
        eprintln!("\n*** SKIPPING package test: no target/deb/*.deb (run `make deb`) ***\n");
        return;
    };
    let deb = deb.to_str().unwrap();

    // What it ships.
    let listing = ok("dpkg-deb", &["-c", deb]);
    for file in FILES {
        assert!(
            listing.contains(&format!(".{file}\n")),
            "{file} not in\n{listing}"
        );
    }
    // xs-guest speaks only the simulated ring: it does nothing on a real host.
    assert!(
        !listing.contains("xs-guest"),
        "xs-guest shipped:\n{listing}"
    );
    assert_eq!(ok("dpkg-deb", &["-f", deb, "Package"]).trim(), PACKAGE);

    // lintian: no errors, no warnings (the overrides say why for each).
    let lint = run("lintian", &["--fail-on", "error,warning", deb]);
    assert!(
        lint.status.success(),
        "lintian: {}{}",
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );

    let _installed = Installed;
    ok("dpkg", &["--install", deb]);
    for file in FILES {
        assert!(Path::new(file).exists(), "{file} not installed");
    }

    // The daemon, as its unit starts it, on a private socket.
    let dir = crate::common::shim::private_dir("pkg");
    let socket = dir.join("socket");
    let daemon = start_as_unit(&dir, &socket);
    let pid = daemon.child.id().to_string();
    let read = Command::new("xenstore-read")
        .env("XENSTORED_PATH", &socket)
        .arg("/")
        .bounded_output();
    assert!(read.status.success(), "{read:?}");

    // The installed snooper attaches to it.
    let snoop = Watched::spawn(
        "the installed xenstore-snoop",
        Command::new("/usr/bin/xenstore-snoop")
            .args(["--daemon-pid", &pid])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
        false,
    );
    let seen = wait_traced(&snoop, &socket, "XS_WRITE: /pkg/key");
    assert!(seen[0].starts_with("DOM"), "header first: {seen:?}");
    assert!(snoop.stop(15, TIMEOUT).status.success());

    // man finds the installed pages by name.
    let page = ok("man", &["-w", "xenstore-snoop"]);
    assert_eq!(page.trim(), "/usr/share/man/man1/xenstore-snoop.1.gz");
    assert!(ok("man", &["-w", "8", "xenstored-shim"]).contains("man8"));

    // systemtap finds the tapset by name, and it names the installed daemon.
    let tree = crate::common::stap::stub_kernel_tree();
    let stap = run(
        "stap",
        &[
            "-p2",
            "-r",
            tree.to_str().unwrap(),
            "-e",
            r#"probe xenstore.request { printf("%s %s\n", op_name, path) }"#,
        ],
    );
    let _ = std::fs::remove_dir_all(&tree);
    let elaborated = String::from_utf8_lossy(&stap.stdout);
    assert!(
        stap.status.success() && elaborated.contains(SHIM),
        "stap -p2: {elaborated}{}",
        String::from_utf8_lossy(&stap.stderr)
    );

    // bpftrace runs the installed script against the installed daemon.
    let bt = Watched::spawn(
        "the installed bpftrace script",
        Command::new("bpftrace")
            .args([
                "--no-warnings",
                "/usr/share/xenstore-snoop/xenstore-snoop.bt",
                SHIM,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
        false,
    );
    wait_traced(&bt, &socket, "XS_WRITE: /pkg/key");
    bt.stop(2, TIMEOUT);
    drop(daemon);

    // Removed: nothing left but the conffile; purged: that too.
    ok("dpkg", &["--remove", PACKAGE]);
    for file in FILES.iter().filter(|f| **f != CONFFILE) {
        assert!(!Path::new(file).exists(), "{file} left after remove");
    }
    assert!(Path::new(CONFFILE).exists(), "conffile kept on remove");
    ok("dpkg", &["--purge", PACKAGE]);
    assert!(!Path::new(CONFFILE).exists(), "conffile gone on purge");
}

/// Starts the installed daemon with the unit's ExecStart and
/// EnvironmentFile, pointed at a private socket and pid file.
fn start_as_unit(dir: &Path, socket: &Path) -> StopOnDrop {
    let unit = std::fs::read_to_string(UNIT).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart in the unit");
    // Xen's proc-xen.mount, which the unit requires, comes with Xen's own
    // units (not Debian's): a stand-in lets systemd check the rest.
    std::fs::write(
        dir.join("proc-xen.mount"),
        "[Mount]\nWhat=xenfs\nWhere=/proc/xen\nType=xenfs\n",
    )
    .unwrap();
    let verify = Command::new("systemd-analyze")
        .args(["verify", UNIT])
        .env("SYSTEMD_UNIT_PATH", format!("{}:", dir.display()))
        .bounded_output();
    assert!(
        verify.status.success(),
        "systemd-analyze verify: {verify:?}"
    );
    let pid_file = dir.join("pid");
    let words: Vec<String> = exec
        .split_whitespace()
        // The options file is empty by default: its variable expands to nothing.
        .filter(|w| !w.starts_with('$'))
        .map(|w| {
            if w == "/run/xen/xenstored.pid" {
                pid_file.display().to_string()
            } else {
                w.to_string()
            }
        })
        .collect();
    assert_eq!(words[0], SHIM, "{exec}");
    let child = Command::new(&words[0])
        .args(&words[1..])
        .env("XENSTORED_PATH", socket)
        .env("XENSTORED_RUNDIR", dir)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let daemon = StopOnDrop { child, signal: 15 };
    crate::common::wait_for(
        "the packaged daemon's socket",
        Duration::from_secs(10),
        || std::os::unix::net::UnixStream::connect(socket).is_ok(),
    );
    daemon
}
