//! Xen's own xenstore test program (tools/tests/xenstore, shipped by
//! xen-utils as test-xenstore) of each release against the shim: 4.17's
//! from the host, 4.20's from Debian 13 under trixie's loader. It runs each
//! of its tests (reads, writes, directories, removals, transactions with
//! and without conflicts) and exits non-zero on the first wrong answer.
//! The same program against C xenstored of its release is the reference.
use crate::common::process::output_within;
use crate::common::shim::Shim;
use crate::common::upstream::{Peer, Release, Upstream};
use std::path::Path;

/// test-xenstore of `release` against the daemon on `socket`: its test
/// names with the time each took, after asserting it passed.
fn run(release: Release, socket: &Path, against: &str) -> Vec<String> {
    let program = release.program("test-xenstore");
    let out = output_within(
        release
            .command(&program)
            .args(["-i", "10"])
            .env("XENSTORED_PATH", socket),
        crate::common::process::CLIENT_TIMEOUT,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "test-xenstore {} against {against}: {}\n{stdout}{stderr}",
        release.version(),
        out.status
    );
    eprintln!(
        "test-xenstore {} against {against}:\n{stdout}",
        release.version()
    );
    stdout
        .lines()
        .map(|l| l.split(':').next().unwrap_or_default().trim().to_string())
        .collect()
}

/// The tests test-xenstore of `release` has (`-l`).
fn listed(release: Release) -> Vec<String> {
    let out = output_within(
        release.command(&release.program("test-xenstore")).arg("-l"),
        crate::common::process::CLIENT_TIMEOUT,
    );
    assert!(out.status.success(), "test-xenstore -l: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split(':').next().unwrap_or_default().trim().to_string())
        .collect()
}

fn passes_on_the_shim(release: Release, test: &str) {
    if !crate::common::upstream::available(Peer::c(release), test) {
        return;
    }
    let tests = listed(release);
    assert!(tests.len() >= 12, "only {tests:?}");
    let upstream = Upstream::start(Peer::c(release));
    assert_eq!(run(release, &upstream.socket, upstream.peer.name()), tests);
    let mut shim = Shim::start();
    assert_eq!(run(release, &shim.socket, "the shim"), tests);
    assert!(shim.alive(), "the shim died");
}

#[test]
fn test_xenstore_417_passes_on_the_shim() {
    passes_on_the_shim(Release::Xen417, "test_xenstore_417_passes_on_the_shim");
}

#[test]
fn test_xenstore_420_passes_on_the_shim() {
    passes_on_the_shim(Release::Xen420, "test_xenstore_420_passes_on_the_shim");
}
