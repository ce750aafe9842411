//! CI's only benchmark run: seconds long, against the debug shim. It checks
//! that the bench client speaks the protocol (every workload completes ops,
//! transactions really commit), not how fast anything is.

#[test]
fn bench_client_drives_every_workload() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xenstore-bench"))
        .arg("smoke")
        .arg("--shim")
        .arg(xenstore_testkit::bin("xenstored-shim"))
        .output()
        .expect("run xenstore-bench smoke");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "smoke failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "read x1",
        "write x2",
        "directory x1",
        "txn (r-m-w) x2",
        "read, 8 in flight x2",
    ] {
        assert!(
            stdout.contains(&format!("smoke: {line}:")),
            "no {line} in:\n{stdout}"
        );
    }
}

/// The scale section's scenarios at N = 0, 10, 40 idle connections and
/// idle ring domains with 15 watches each, a tenth of a second each: every
/// fan-out write's event reaches the one connection or domain watching it,
/// and no idle one is sent anything else, on the shim and on the floor (the
/// bare sender). Then S2's broad watch (each
/// backend write's event reaches the broad watcher) and S3 at 2 and 12
/// domains' trees (the walk sees every node, each `rm` of a home sends its
/// watcher its 15 events). Then S4 at N = 10, 40: the dying tenth
/// released, every @releaseDomain watcher told, one state query a firing;
/// S4 at N = 10 on C xenstored and oxenstored under the stub's simulated
/// hypervisor (the dying released, every watcher told, every domain asked
/// about); and S4 beside 5 background trees: the dying released, their
/// homes gone. And S2 spread's sends and doorbells timed at N = 10 and 40.
#[test]
fn scale_scenarios_deliver_each_event_to_its_watcher_only() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xenstore-bench"))
        .arg("scale-smoke")
        .arg("--shim")
        .arg(xenstore_testkit::bin("xenstored-shim"))
        .arg("--floor")
        .arg(env!("CARGO_BIN_EXE_xsbench-bare-sender"))
        .output()
        .expect("run xenstore-bench scale-smoke");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "scale smoke failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for n in [0, 10, 40] {
        for who in ["", "floor "] {
            assert!(
                stdout.contains(&format!("scale smoke: {who}N={n}:")),
                "no {who}N={n} in:\n{stdout}"
            );
        }
    }
    for line in [
        "S2 broad watch at N=2:",
        "S2 broad watch at N=12:",
        "S3 at 2 domains:",
        "S3 at 12 domains:",
        "S3 big directory of 2500 children (11390 bytes, 3 pages)",
        "S4 N=10:",
        "S4 N=40:",
        "S4 C xenstored N=10:",
        "S4 oxenstored N=10:",
        "S4 big store,",
    ] {
        assert!(
            stdout.contains(&format!("scale smoke: {line}")),
            "no {line} in:\n{stdout}"
        );
    }
    assert_sends_timed(&stdout);
}

/// S2 spread's sends, timed with bpftrace as the scale section times them
/// (scale_sends.rs), as the smoke run printed them: at N = 10 and 40 every
/// write sent one reply on the writer's socket and one event, and the
/// events went to all N watchers' sockets.
fn assert_sends_timed(stdout: &str) {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        if std::env::var_os("CI").is_some() {
            panic!("timing the scale smoke's sends needs root (bpftrace), and CI is set");
        }
        eprintln!("\n*** SKIPPING the scale smoke's timed sends: not root (CI unset) ***\n");
        return;
    }
    for n in [10, 40] {
        let prefix = format!("scale smoke: sends timed at N={n}: ");
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no sends timed at N={n} in:\n{stdout}"));
        let numbers: Vec<u64> = line
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        let [replies, events, watchers] = numbers[..] else {
            panic!("unexpected line {line:?}");
        };
        assert!(replies > 0, "no send timed at N={n}: {line}");
        assert_eq!(replies, events, "one event a reply at N={n}: {line}");
        assert_eq!(watchers, n, "every watcher sent to at N={n}: {line}");
    }
    // The same run with every write for an idle domain: one doorbell a
    // reply, rung on every domain's socket.
    for n in [10, 40] {
        let prefix = format!("scale smoke: doorbells timed at N={n}: ");
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no doorbells timed at N={n} in:\n{stdout}"));
        let numbers: Vec<u64> = line
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        let [replies, doorbells, domains] = numbers[..] else {
            panic!("unexpected line {line:?}");
        };
        assert!(replies > 0, "no reply timed at N={n}: {line}");
        assert_eq!(replies, doorbells, "one doorbell a reply at N={n}: {line}");
        assert_eq!(domains, n, "every domain rung at N={n}: {line}");
    }
}

/// S1 boot storm at 10 idle domains and 10 lifecycles at once on the
/// shim, guests on simulated rings: every lifecycle (tests/data/
/// xl-lifecycle.txt, create to release) runs to its end, its transactions
/// commit (EAGAIN retried), and the unrelated reader is answered.
#[test]
fn boot_storm_runs_every_lifecycle_to_its_end() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xenstore-bench"))
        .arg("storm-smoke")
        .arg("--shim")
        .arg(xenstore_testkit::bin("xenstored-shim"))
        .output()
        .expect("run xenstore-bench storm-smoke");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "storm smoke failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("storm smoke: K=10 P=10: 10 lifecycles,"),
        "no storm in:\n{stdout}"
    );
}

/// S1 on oxenstored 4.17 as the benchmark runs it (10 idle domains, 100
/// lifecycles at once): its DIRECTORY reply over 4096 bytes is refused by
/// a strict client and taken whole by the lenient one, and with its EINVAL
/// commits run again the storm still makes every lifecycle's commits.
/// Whether EINVAL came this run (it usually does at P=100) is printed.
#[test]
fn oxenstored_storm_runs_to_its_end_with_its_failures_retried() {
    use xenstore_testkit::upstream::{available, Flavor};
    if !available(Flavor::Ocaml, "oxenstored's lenient storm smoke") {
        return;
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xenstore-bench"))
        .arg("storm-smoke-oxenstored")
        .output()
        .expect("run xenstore-bench storm-smoke-oxenstored");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "oxenstored storm smoke failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{stdout}");
    for line in [
        "a 4400-byte listing refused by a strict client, taken whole by the lenient one",
        "K=10 P=100: 100 lifecycles, 1700 commits,",
    ] {
        assert!(
            stdout.contains(&format!("storm smoke oxenstored: {line}")),
            "no {line} in:\n{stdout}"
        );
    }
}
