//! Shared by the end-to-end tests: locating the workspace's binaries and
//! deciding whether a root-only test may skip.
#![allow(dead_code)]

pub mod shim;
pub mod stap;
pub mod upstream;
pub mod wire;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

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

/// Sends `sig` to `pid` (the tests' only use of kill(2)).
pub fn signal(pid: u32, sig: i32) {
    unsafe { libc_kill(pid as i32, sig) };
}

/// Collects a child's output lines on a thread, for tests that wait for a
/// line to appear while the child keeps running.
pub fn collect_lines(pipe: impl std::io::Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    use std::io::{BufRead, BufReader};
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&lines);
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            match line {
                Ok(l) => sink.lock().unwrap().push(l),
                Err(_) => break,
            }
        }
    });
    lines
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}
