//! Shared by the end-to-end tests: the harness they share with the bench
//! (xenstore-testkit), raw wire messages, and deciding whether a root-only
//! test may skip.
#![allow(dead_code, unused_imports)]

pub mod stap;
pub mod timeline;
pub mod wire;

pub use xenstore_testkit::{bin, daemon, lines, process, signal, upstream, wait_for};

/// The shim, and the scratch directories it and other tests use.
pub mod shim {
    pub use xenstore_testkit::daemon::private_dir;
    pub use xenstore_testkit::shim::Shim;
}

/// `xenstore-snoop` on the back end `XS_SNOOP_BACKEND` names (`bpf` or
/// `tracefs`; unset: the snooper's own choice). `make test` runs the
/// snooper's suites once per back end.
pub fn snoop_command() -> std::process::Command {
    let mut cmd = std::process::Command::new(bin("xenstore-snoop"));
    if let Some(backend) = std::env::var_os("XS_SNOOP_BACKEND") {
        cmd.arg("--backend").arg(backend);
    }
    cmd
}

/// How long any one wait in a test may take: generous, for a loaded machine.
pub const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// True when the test must run; false (with a loud reason) when it may skip.
/// Under CI nothing that needs root or tracefs is skipped.
pub fn need_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc_geteuid() } == 0;
    let tracefs = std::path::Path::new("/sys/kernel/tracing/uprobe_events").exists();
    if root && tracefs {
        return true;
    }
    let why = if !root {
        "not root"
    } else {
        "no tracefs at /sys/kernel/tracing"
    };
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {why}, and CI is set: this test must run");
    }
    eprintln!("\n*** SKIPPING {test}: {why} (CI unset) ***\n");
    false
}

/// True when root, tracefs and every one of `tools` are there (.ci/setup
/// installs them); a loud skip when not and CI is unset; a failure under CI.
pub fn need_tools(test: &str, tools: &[&str]) -> bool {
    if !need_root(test) {
        return false;
    }
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|p| !std::path::Path::new(p).exists())
        .collect();
    if missing.is_empty() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{test}: missing {missing:?} (run .ci/setup), and CI is set: this test must run");
    }
    eprintln!("\n*** SKIPPING {test}: missing {missing:?} (CI unset; run .ci/setup) ***\n");
    false
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// Runs a pyxs script against the shim's socket (only /usr/bin/python3 has pyxs).
pub fn pyxs(socket: &std::path::Path, script: &str) {
    let prelude = format!(
        "from pyxs import Client\nc = Client(unix_socket_path={:?})\nc.connect()\n",
        socket.display().to_string()
    );
    let out = process::output_within(
        std::process::Command::new("/usr/bin/python3")
            .arg("-c")
            .arg(prelude + script),
        process::CLIENT_TIMEOUT,
    );
    assert!(
        out.status.success(),
        "pyxs script failed:\n{script}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Introduces domain `domid` (dom0's XS_INTRODUCE via pyxs) and gives it
/// its home /local/domain/<domid>; returns the domain's own socket.
pub fn introduce(shim: &shim::Shim, domid: u32) -> std::path::PathBuf {
    pyxs(
        &shim.socket,
        &format!("c.introduce_domain({domid}, 4242, 7)\nc.close()\n"),
    );
    let home = format!("/local/domain/{domid}");
    shim.run(
        "xenstore-write",
        &[&format!("{home}/device/vbd/0/state"), "3"],
    );
    shim.run("xenstore-chmod", &["-r", &home, &format!("n{domid}")]);
    let socket = shim.run_dir.join("domain").join(domid.to_string());
    wait_for("the domain socket", TIMEOUT, || socket.exists());
    socket
}

/// The XS_ERROR a guest request was refused with.
pub fn xs_error<T: std::fmt::Debug>(r: xenstore_guest::client::Result<T>) -> String {
    r.unwrap_err()
        .xs_error()
        .expect("an XS_ERROR reply")
        .to_string()
}
