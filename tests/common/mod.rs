//! Shared by the end-to-end tests: locating the workspace's binaries and
//! deciding whether a root-only test may skip.
#![allow(dead_code)]

pub mod shim;
pub mod upstream;

use std::path::PathBuf;

/// A binary of this workspace, built by `cargo build --workspace` into the
/// same profile directory as the running test.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} not built: run `cargo build --workspace` before `cargo test --workspace`",
        path.display()
    );
    path
}

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
