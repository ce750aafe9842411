//! Shared by the end-to-end tests: the harness they share with the bench
//! (xenstore-testkit), raw wire messages, and deciding whether a root-only
//! test may skip.
#![allow(dead_code, unused_imports)]

pub mod stap;
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

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}
