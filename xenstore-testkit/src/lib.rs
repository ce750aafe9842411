//! The harness shared by the end-to-end tests (tests/) and the benchmarks
//! (xenstore-bench): the shim and Debian's upstream daemons on private
//! sockets, bounded waits for readiness, and child output collected line by
//! line. Fallible constructors return `io::Result` for the bench; the
//! panicking shorthands are for tests.

pub mod daemon;
pub mod lines;
pub mod process;
pub mod shim;
pub mod upstream;
pub mod wait;

pub use daemon::{scratch_dir, Daemon};
pub use lines::Lines;
pub use process::Watched;
pub use shim::Shim;
pub use upstream::{Flavor, Upstream};
pub use wait::{wait_for, wait_until};

use std::path::PathBuf;

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xenstore-testkit lives in the workspace")
        .to_path_buf()
}

/// A binary of this workspace, built by `cargo build --workspace` into the
/// same profile directory as the running test executable.
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

/// Sends `sig` to `pid`.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) takes no pointers; a stale pid only gets ESRCH.
    unsafe { kill(pid as i32, sig) };
}

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}

/// An `io::Error` that says what failed.
pub(crate) fn error(what: String) -> std::io::Error {
    std::io::Error::other(what)
}
