//! Bursts and full rings: nothing lost unseen, lost events counted.

use super::*;

#[test]
fn a_burst_is_seen_whole() {
    if !common::need_root("a_burst_is_seen_whole") {
        return;
    }
    const N: usize = 3000;
    let shim = Shim::private_copy();
    let snoop = Snooper::attach(&shim, &["--op", "WRITE,READ", "--path", "^/burst/"]);
    common::pyxs(
        &shim.socket,
        &format!(
            "for i in range({N}):\n    c.write(b'/burst/%d' % (i % 50), b'v%d' % i)\n    c.read(b'/burst/%d' % (i % 50))\nc.close()\n"
        ),
    );
    snoop.wait_line("the last read", |l| {
        l.contains(&format!("XS_READ: /burst/{} -> v{}", (N - 1) % 50, N - 1))
    });
    let (out, err, status) = snoop.stop();
    assert!(status.success());
    let writes = out
        .iter()
        .filter(|l| l.contains("XS_WRITE: /burst/"))
        .count();
    let reads = out
        .iter()
        .filter(|l| l.contains("XS_READ: /burst/"))
        .count();
    assert_eq!((writes, reads), (N, N));
    assert!(
        out.iter().all(|l| !l.ends_with("-> ?")),
        "every request paired"
    );
    let stats = stats_line(&err);
    assert!(stats.ends_with(", 0 lost"), "{stats}");
}

#[test]
fn lost_events_are_counted_exactly() {
    if !common::need_root("lost_events_are_counted_exactly") {
        return;
    }
    // N reply samples of ~110 B: more than one 1 MiB ring holds. The shim
    // runs on one CPU, so they all go to that CPU's ring however many CPUs
    // the machine has.
    const N: u64 = 20_000;
    let shim = Shim::private_copy();
    pin_to_one_cpu(shim.pid());
    let snoop = Snooper::attach(&shim, &["--ring-mb", "1"]);
    // A snooper that does not read: the 1 MiB rings overflow.
    common::signal(snoop.pid(), 19); // SIGSTOP
    common::pyxs(
        &shim.socket,
        &format!("for i in range({N}):\n    c.write(b'/lost', b'%d' % i)\nc.close()\n"),
    );
    common::signal(snoop.pid(), 18); // SIGCONT
    let (_, err, status) = snoop.stop();
    assert!(status.success());
    let stats = stats_line(&err);
    // "xenstore-snoop: S events seen, L lost"
    let nums: Vec<u64> = stats
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    let (seen, lost) = (nums[0], nums[1]);
    assert!(lost > 0, "{stats}");
    // one reply a request, and pyxs's connection opening (its close is
    // attached only with -v)
    assert_eq!(seen + lost, N + 1, "{stats}");
    assert!(
        err.iter().any(|l| l.contains("events lost so far")),
        "{err:?}"
    );
}

#[test]
fn a_small_ring_wraps_losing_and_reordering_nothing() {
    if !common::need_root("a_small_ring_wraps_losing_and_reordering_nothing") {
        return;
    }
    // N reply records of ~90 B go round a 1 MiB ring (each CPU's ring,
    // tracefs) nearly twice, the reader draining as they come.
    const N: usize = 20_000;
    let shim = Shim::private_copy();
    let snoop = Snooper::attach(&shim, &["--ring-mb", "1", "--json", "--op", "WRITE"]);
    common::pyxs(
        &shim.socket,
        &format!("for i in range({N}):\n    c.write(b'/round', b'%d' % i)\nc.close()\n"),
    );
    snoop.wait_line("the last write", |l| l.contains(&format!("\"{}\"", N - 1)));
    let (out, err, status) = snoop.stop();
    assert!(status.success(), "{err:?}");
    let values: Vec<String> = json_lines(&out)
        .iter()
        .filter(|j| j["path"] == "/round")
        .map(|j| j["value"].as_str().unwrap().to_string())
        .collect();
    let expected: Vec<String> = (0..N).map(|i| i.to_string()).collect();
    assert!(
        values == expected,
        "{} values, first wrong at {:?}",
        values.len(),
        values.iter().zip(&expected).position(|(a, b)| a != b)
    );
    let stats = stats_line(&err);
    assert!(stats.ends_with(" 0 lost"), "{stats}");
}
