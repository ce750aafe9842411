//! Every xl operation on real Xen, the shim beside the release's C
//! xenstored (issue 45). Each release's two boots (tests/vm/real_xen.rs:
//! the shim fresh, with the snooper on BPF recording; C xenstored with its
//! `-T` trace, live-updated into the shim after the matrix) run the matrix
//! first (tests/xen/dom0-matrix), in order: create, save, restore, migrate
//! (to localhost: fails on Debian's Xen, the same way under both; see
//! tests/xen/dom0-matrix), its stand-in (checkpoint, rename away, restore,
//! reap), block-attach/detach, network-attach/detach (a dom0 bridge),
//! mem-set, vcpu-set up and down, pause, unpause, reboot, destroy, a second
//! guest's create and shutdown, a third guest's crash (on_crash=destroy).
//! The shim's boot also live-updates the shim into a second copy of its
//! binary, and back, with `xl save`, `xl restore` and `xl migrate` each
//! stopped in the middle, the snooper following.
//!
//! Asserted: every step's check passed under both daemons; what each
//! reported (xl's exit codes, `xl list`, what the guest saw, both ends of
//! its vif) is the same; the snooper named every dom0 client and guest and
//! lost nothing; the traffic, per step, as multisets of (op, path shape,
//! result), differs only where tests/conformance/DIFFERENCES.md says why
//! ("The xl matrix"). The report (target/tmp/xl-matrix-RELEASE.md, and
//! stderr) gives per step the requests each daemon served and the wall
//! time under each.

mod traffic;

use crate::xen_boot::Run;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::PathBuf;
use traffic::Steps;

/// Under the shim only, after migrate-standin: a live update into the
/// other copy of its binary while `xl save`, `xl restore` and `xl migrate`
/// are stopped in the middle (tests/xen/dom0-matrix, in_flight).
const LIVE_UPDATE_STEPS: &[&str] = &[
    "save-live-update",
    "restore-live-update",
    "migrate-live-update",
];

/// The steps dom0-matrix checks, in order.
const STEPS: &[&str] = &[
    "create",
    "save",
    "restore",
    "migrate",
    "migrate-standin",
    "block-attach",
    "block-detach",
    "network-attach",
    "network-detach",
    "mem-set",
    "vcpu-up",
    "vcpu-down",
    "pause",
    "unpause",
    "reboot",
    "destroy",
    "create-s",
    "shutdown",
    "crash",
    "xenstored-alive",
];

/// The matrix's checks on a release's two boots.
pub fn assert_matrix(release: &str, c: &Run, shim: &Run) {
    c.assert_steps("C xenstored", STEPS);
    shim.assert_steps("the shim", STEPS);
    shim.assert_steps("the shim's live updates", LIVE_UPDATE_STEPS);
    let updates = shim.file("observed-live-update");
    assert_eq!(
        updates
            .matches("xl stopped during the update: yes; live-update -> 0")
            .count(),
        LIVE_UPDATE_STEPS.len(),
        "{updates}\n{}",
        shim.report
    );
    assert_eq!(
        observed(c),
        observed(shim),
        "what xl answered and the guests saw: C xenstored (left), the shim (right)\n{}",
        shim.report
    );
    assert_snooper_names_everyone(shim);
    let c_steps = traffic::from_c_trace(&c.file("xenstored-trace.log"));
    let shim_steps = traffic::from_snoop_json(&shim.file("boot.jsonl"));
    let report = report(release, c, shim, &c_steps, &shim_steps);
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("xl-matrix-{release}.md"));
    std::fs::write(&path, &report).unwrap();
    eprintln!("{report}\n(written to {})", path.display());
    assert_traffic_matches(&c_steps, &shim_steps, &report);
}

/// dom0's record of what xl answered and the guest saw, vif numbers (the
/// guest's domid) as N.
fn observed(run: &Run) -> Vec<String> {
    run.file("observed")
        .lines()
        .map(|l| {
            let mut s = String::new();
            let mut rest = l;
            while let Some(at) = rest.find("vif") {
                s.push_str(&rest[..at + 3]);
                rest = rest[at + 3..].trim_start_matches(|c: char| c.is_ascii_digit());
                s.push('N');
            }
            s + rest
        })
        .collect()
}

/// Each dom0 client by its command name, each guest by its domain name,
/// nothing lost, on BPF.
fn assert_snooper_names_everyone(shim: &Run) {
    let mut names = std::collections::BTreeSet::new();
    for line in shim.file("boot.jsonl").lines() {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
            if let Some(comm) = v["comm"].as_str() {
                names.insert(comm.to_string());
            }
        }
    }
    for who in [
        "xl",
        "xenconsoled",
        "xen-init-dom0",
        // The block and vif hotplug scripts' clients.
        "xenstore-read",
        "xenstore-write",
        "guest-m",
        "guest-m--migratedaway",
        "guest-s",
        "guest-c",
    ] {
        assert!(
            names.contains(who),
            "the snooper never named {who}: {names:?}\n{}",
            shim.report
        );
    }
    let err = shim.file("snoop.err");
    assert!(err.contains(" 0 lost"), "{}", shim.report);
    // Attached at start, then after each live update (--follow).
    let tracing: Vec<&str> = err.lines().filter(|l| l.starts_with("Tracing ")).collect();
    assert!(
        tracing.len() == 1 + LIVE_UPDATE_STEPS.len()
            && tracing.iter().all(|l| l.contains("(BPF, ")),
        "the snooper did not follow every update on BPF: {err}"
    );
}

fn report(release: &str, c: &Run, shim: &Run, c_steps: &Steps, shim_steps: &Steps) -> String {
    let mut r = format!(
        "## xl matrix, Xen {release}: C xenstored against the shim\n\n\
         | operation | requests C | requests shim | wall s C | wall s shim | shim/C time | keys differing |\n\
         |---|---:|---:|---:|---:|---:|---:|\n"
    );
    let empty = BTreeMap::new();
    for step in STEPS.iter().filter(|s| **s != "xenstored-alive") {
        let a = c_steps.get(*step).unwrap_or(&empty);
        let b = shim_steps.get(*step).unwrap_or(&empty);
        let (ta, tb) = (c.steps[*step].1, shim.steps[*step].1);
        let ratio = if ta > 0.0 {
            format!("{:.2}", tb / ta)
        } else {
            "-".into()
        };
        writeln!(
            r,
            "| {step} | {} | {} | {ta:.2} | {tb:.2} | {ratio} | {} |",
            traffic::requests(a),
            traffic::requests(b),
            traffic::differences(a, b).len()
        )
        .unwrap();
    }
    r.push_str("\nWhere the multisets differ (op, path shape, result: C's count, the shim's):\n");
    let mut steps: Vec<&String> = c_steps.keys().chain(shim_steps.keys()).collect();
    steps.sort();
    steps.dedup();
    for step in steps {
        let a = c_steps.get(step).unwrap_or(&empty);
        let b = shim_steps.get(step).unwrap_or(&empty);
        for (k, x, y) in traffic::differences(a, b) {
            writeln!(r, "- {step}: {} {} {}: {x} / {y}", k.op, k.shape, k.result).unwrap();
        }
    }
    r
}

/// Requests that change the store, a watch or a domain, and commits:
/// their counts per step, by path shape and result, are the same under
/// both daemons, but for one request a key that a client sends at its own
/// pace crossing a step's end (xenconsoled drops a dying guest's console
/// watch when it notices, which was once after the next step's mark): the
/// whole boot's counts are the same. Reads, read-only transactions (started, then aborted) and
/// watch events follow timing (xl and xenconsoled poll, a watch set later
/// misses earlier writes, a dying guest's last abort may not reach the
/// daemon), so the report lists their differences without failing on them
/// (tests/conformance/DIFFERENCES.md, "The xl matrix"), as it does the
/// traffic before the snooper attached (setup).
fn assert_traffic_matches(c: &Steps, shim: &Steps, report: &str) {
    let changes_state = |k: &traffic::Key| match k.op.as_str() {
        "READ"
        | "DIRECTORY"
        | "DIRECTORY_PART"
        | "GET_PERMS"
        | "GET_DOMAIN_PATH"
        | "IS_DOMAIN_INTRODUCED"
        | "WATCH_EVENT"
        | "TRANSACTION_START" => false,
        "TRANSACTION_END" => k.shape == "T",
        // The harness's own cue and the guest's answer: as many rounds as
        // the guest took to see the change.
        _ => !(k.shape.ends_with("data/cue") || k.shape.ends_with("data/obs")),
    };
    let empty = BTreeMap::new();
    let mut differing = Vec::new();
    let mut drift: BTreeMap<traffic::Key, i64> = BTreeMap::new();
    for step in STEPS {
        let a = c.get(*step).unwrap_or(&empty);
        let b = shim.get(*step).unwrap_or(&empty);
        assert!(
            traffic::requests(a) > 0 && traffic::requests(b) > 0 || *step == "xenstored-alive",
            "no traffic in step {step}: the marks were not found\n{report}"
        );
        for (k, x, y) in traffic::differences(a, b) {
            if !changes_state(k) {
                continue;
            }
            // C's count less the shim's so far, this step included.
            let ahead = drift.entry(k.clone()).or_default();
            *ahead += x as i64 - y as i64;
            if ahead.abs() > 1 {
                differing.push(format!(
                    "{step}: {} {} {}: C {x}, shim {y}",
                    k.op, k.shape, k.result
                ));
            }
        }
    }
    // Over the whole boot every such request is there under both.
    for (k, ahead) in drift {
        if ahead != 0 {
            differing.push(format!(
                "the whole boot: {} {} {}: C {ahead:+} against the shim",
                k.op, k.shape, k.result
            ));
        }
    }
    assert!(
        differing.is_empty(),
        "requests that change state, counted per step, differ:\n{}\n{report}",
        differing.join("\n")
    );
}
