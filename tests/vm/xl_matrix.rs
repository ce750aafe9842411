//! Every xl operation on real Xen, the shim beside the release's C
//! xenstored (issue 45). For each release (4.17 + dom0 6.1, 4.20 + dom0
//! 6.12) two boots of tests/xen/run with dom0's init tests/xen/dom0-matrix:
//! one under C xenstored (`-T` trace), one under the shim with the snooper
//! on BPF (`--json`). Each boot runs, in order: create, save, restore,
//! migrate (to localhost: fails on Debian's Xen, the same way under both;
//! see tests/xen/dom0-matrix), its stand-in (checkpoint, rename away,
//! restore, reap), block-attach/detach, network-attach/detach (a dom0
//! bridge), mem-set, vcpu-set up and down, pause, unpause, reboot, destroy,
//! a second guest's create and shutdown, a third guest's crash
//! (on_crash=destroy). The shim's boot also live-updates the shim into a
//! second copy of its binary, and back, with `xl save`, `xl restore` and
//! `xl migrate` each stopped in the middle, the snooper following.
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

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use traffic::Steps;

/// One release's two boots run side by side (each QEMU one CPU), so that
/// they share the machine alike and the time ratio stays fair; the
/// releases take turns.
static ONE_RELEASE_AT_A_TIME: Mutex<()> = Mutex::new(());

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

fn prerequisites(test: &str) -> bool {
    crate::common::need_tools(
        test,
        &[
            "/usr/bin/apt-get",
            "/usr/bin/dpkg-deb",
            "/usr/lib/xen-4.17/bin/xl",
        ],
    )
}

/// What one boot left in its --out directory.
struct Run {
    out: PathBuf,
    /// Step name -> (ok|fail, seconds).
    steps: BTreeMap<String, (String, f64)>,
    report: String,
}

impl Run {
    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.out.join(name)).unwrap_or_default()
    }

    fn assert_steps(&self, daemon: &str, steps: &[&str]) {
        let failed: Vec<String> = steps
            .iter()
            .filter(|s| self.steps.get(**s).map(|(r, _)| r.as_str()) != Some("ok"))
            .map(|s| format!("{s}: {:?}", self.steps.get(*s)))
            .collect();
        assert!(
            failed.is_empty(),
            "{daemon}: failed steps {failed:?}\n{}",
            self.report
        );
    }

    /// dom0's record of what xl answered and the guest saw, vif numbers
    /// (the guest's domid) as N.
    fn observed(&self) -> Vec<String> {
        self.file("observed")
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
}

fn boot(name: &str, release: &str, args: &[&str]) -> Run {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let here = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/xen");
    let status = Command::new(format!("{here}/run"))
        .args(["--xen", release, "--init", &format!("{here}/dom0-matrix")])
        .args(args)
        .arg("--out")
        .arg(&out)
        .args(["--timeout", "900"])
        .status()
        .expect("run tests/xen/run");
    let text = |f: &str| std::fs::read_to_string(out.join(f)).unwrap_or_default();
    let steps_text = text("steps");
    let report = format!(
        "tests/xen/run {args:?}: {status}\n--- {}/steps\n{steps_text}--- times\n{}--- observed\n{}\
         --- dom0.log\n{}--- snoop.err\n{}--- serial.log (HARNESS lines)\n{}",
        out.display(),
        text("times"),
        text("observed"),
        text("dom0.log"),
        text("snoop.err"),
        text("serial.log")
            .lines()
            .filter(|l| l.contains("HARNESS"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    eprintln!("{report}");
    assert!(
        steps_text.lines().any(|l| l.starts_with("total done")),
        "the VM did not finish the matrix\n{report}"
    );
    let steps = steps_text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next()?.to_string();
            let result = w.next()?.to_string();
            Some((name, (result, w.next()?.parse().ok()?)))
        })
        .collect();
    Run { out, steps, report }
}

#[test]
fn xl_matrix_on_xen_4_17_shim_beside_c_xenstored() {
    matrix("xl_matrix_on_xen_4_17_shim_beside_c_xenstored", "4.17");
}

#[test]
fn xl_matrix_on_xen_4_20_shim_beside_c_xenstored() {
    matrix("xl_matrix_on_xen_4_20_shim_beside_c_xenstored", "4.20");
}

fn matrix(test: &str, release: &str) {
    if !prerequisites(test) {
        return;
    }
    let shim_bin = crate::common::bin("xenstored-shim");
    let snoop_bin = crate::common::bin("xenstore-snoop");
    let shim_args = [
        "--xenstored",
        shim_bin.to_str().unwrap(),
        "--snoop",
        snoop_bin.to_str().unwrap(),
        "--snoop-args",
        "--json --follow",
    ];
    let (c, shim) = {
        let _turn = ONE_RELEASE_AT_A_TIME
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // The parts fetched and dom0's base initramfs built once, before
        // two runs would race to build it.
        let prepared = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/xen/prepare"))
            .args(["--xen", release])
            .status()
            .expect("run tests/xen/prepare");
        assert!(
            prepared.success(),
            "tests/xen/prepare --xen {release}: {prepared}"
        );
        std::thread::scope(|s| {
            let c = s.spawn(|| {
                boot(
                    &format!("xl-matrix-{release}-c"),
                    release,
                    &["--xenstored", "upstream"],
                )
            });
            let shim = boot(&format!("xl-matrix-{release}-shim"), release, &shim_args);
            (c.join().expect("the C xenstored boot"), shim)
        })
    };
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
        c.observed(),
        shim.observed(),
        "what xl answered and the guests saw: C xenstored (left), the shim (right)\n{}",
        shim.report
    );
    assert_snooper_names_everyone(&shim);
    let c_steps = traffic::from_c_trace(&c.file("xenstored-trace.log"));
    let shim_steps = traffic::from_snoop_json(&shim.file("snoop.out"));
    let report = report(release, &c, &shim, &c_steps, &shim_steps);
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("xl-matrix-{release}.md"));
    std::fs::write(&path, &report).unwrap();
    eprintln!("{report}\n(written to {})", path.display());
    assert_traffic_matches(&c_steps, &shim_steps, &report);
}

/// Each dom0 client by its command name, each guest by its domain name,
/// nothing lost, on BPF.
fn assert_snooper_names_everyone(shim: &Run) {
    let mut names = std::collections::BTreeSet::new();
    for line in shim.file("snoop.out").lines() {
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
