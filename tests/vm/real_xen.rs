//! Issue 11 on a real hypervisor, for each supported Xen release: tests/xen/run
//! boots Debian's Xen and a dom0 in QEMU (TCG), starts a xenstored there as
//! Debian's init script does, and runs the scenario of tests/xen/dom0-init:
//! xen-init-dom0, xenconsoled, xenstore-snoop, a PV guest with a disk that
//! powers itself off and is reaped, a second one whose ring dom0 corrupts
//! (the daemon must survive) and then destroys with `xl destroy`, no zombie.
//!
//! Each release boots twice, side by side, and each boot covers all it can
//! (tests/vm/xl_matrix.rs first, on the first daemon, then the scenario):
//! - the shim started fresh, the snooper watching (recording, `--follow`
//!   across the matrix's live updates) and, from guest1's creation to the
//!   end, `xenstore-snoop --metrics` (tests/vm/real_xen/metrics.rs): guest1
//!   holds before powering off so its series are read while it lives, and
//!   every count the exporter shows is the snooper's of the same run;
//! - the release's C xenstored (`-T` trace: the matrix's reference), then
//!   its live update into the shim, which serves the rest of the scenario.
//!
//! oxenstored (4.17) boots once more, for its own live update.
//!
//! The releases: Xen 4.17 with dom0 kernel 6.1 and this host's
//! xen-utils-4.17 (Debian 12), and Xen 4.20 with kernel 6.12 and dom0's
//! userland from Debian 13 (the shim and snooper built here run on trixie's
//! libc there).
//!
//! What differs between the releases' reference runs (C xenstored's `-T`
//! trace, measured once each on 2026-11-25): not the requests. Both take
//! the same number of each type (122 DIRECTORY, 203 WRITE, 2 INTRODUCE,
//! 31 WATCH, …, 60 ENOENT errors), except READs of /local/domain/N/name,
//! which follow how often the harness's `xl list` polls ran (288 vs 293).
//! The format differs: 4.20 prefixes each line with its category (`io:`,
//! `obj:`), names the connection's domain (`(d0)`), logs a reply as
//! `OUT(START)`/`OUT(END)` when it is queued, and a failed write as
//! `OUT(ERR)` (guest2's corrupted ring: its `WATCH_EVENT device/harness`);
//! 4.17 logs write-rate-limit credit lines (`wrl:`), which 4.20 no longer
//! has. The snooper's lines on the shim show the same mix on both releases.
//!
//! Needs root, apt-get (the parts come from Debian's archive into
//! target/xen/cache) and xen-utils-4.17 (`.ci/setup`). The boots share the
//! machine's cores: each waits for a slot (tests/vm/slots.rs).

mod metrics;

use crate::common::process::BoundedOutput;
use crate::common::timeline::{assert_flows_paired, chromium, console_messages, names_of};
use crate::xen_boot::{self, Run};
use std::collections::{BTreeMap, HashMap};
use std::process::Command;

/// Every step tests/xen/dom0-init records, in order (snoop-attached only
/// when a snooper runs).
const STEPS: &[&str] = &[
    "dom0-up",
    "xenstored-daemonized",
    "xenstored-ready",
    "xen-init-dom0",
    "xenconsoled",
    "dom0-ring",
    "create-guest1",
    "guest1-reaped",
    "guest1-read-disk",
    "guest1-read-keys",
    "create-guest2",
    "guest2-ready",
    "bad-ring-input",
    "destroy-guest2",
    "no-zombie",
    "xenstored-alive",
];

/// Root, tracefs and the tools a boot uses (4.17's dom0 tools are the
/// host's; 4.20's are fetched).
fn prerequisites(test: &str) -> bool {
    crate::common::need_tools(
        test,
        &[
            "/usr/bin/apt-get",
            "/usr/bin/dpkg-deb",
            "/usr/lib/xen-4.17/bin/xl",
            "/usr/bin/promtool",
        ],
    )
}

#[test]
fn xen_4_17_shim_fresh_and_c_xenstored_updated_into_it() {
    side_by_side(
        "xen_4_17_shim_fresh_and_c_xenstored_updated_into_it",
        "4.17",
    );
}

#[test]
fn xen_4_20_shim_fresh_and_c_xenstored_updated_into_it() {
    side_by_side(
        "xen_4_20_shim_fresh_and_c_xenstored_updated_into_it",
        "4.20",
    );
}

/// A release's two boots, side by side (two slots), so that they share
/// the machine alike and the matrix's time ratio stays fair: the shim
/// fresh and C xenstored updated into it, each running the matrix first.
fn side_by_side(test: &str, release: &str) {
    if !prerequisites(test) {
        return;
    }
    let shim = crate::release_bin("xenstored-shim");
    let snoop = crate::release_bin("xenstore-snoop");
    let (shim, snoop) = (shim.to_str().unwrap(), snoop.to_str().unwrap());
    let (c, fresh) = {
        // The longest of the tier's boots: they go first.
        let mut slots = crate::slots::take(2, 200);
        xen_boot::prepare(release);
        std::thread::scope(|s| {
            let c_slot = slots.one();
            let c = s.spawn(move || {
                let _slot = c_slot;
                xen_boot::boot(
                    &format!("xen-{release}-c"),
                    release,
                    &[
                        "--live-update-from",
                        "upstream",
                        "--xenstored",
                        shim,
                        "--snoop",
                        snoop,
                        "--matrix",
                        "yes",
                    ],
                )
            });
            let fresh = xen_boot::boot(
                &format!("xen-{release}-shim"),
                release,
                &[
                    "--xenstored",
                    shim,
                    "--snoop",
                    snoop,
                    // Recorded, for the matrix's traffic, --top and the
                    // timeline of the boot (below); following the
                    // matrix's live updates.
                    "--snoop-args",
                    "--follow -w /results/boot.jsonl",
                    "--metrics",
                    "yes",
                    "--matrix",
                    "yes",
                ],
            );
            drop(slots);
            (c.join().expect("the C xenstored boot"), fresh)
        })
    };
    assert_fresh_shim(&fresh, release);
    assert_updated_into_the_shim(&c, "upstream");
    crate::xl_matrix::assert_matrix(release, &c, &fresh);
}

/// The shim started fresh serves the scenario, the snooper and the
/// exporter watching.
fn assert_fresh_shim(run: &Run, release: &str) {
    let mut steps = STEPS.to_vec();
    steps.insert(3, "snoop-attached");
    for (after, step) in [
        ("dom0-ring", "metrics-attached"),
        ("create-guest1", "metrics-guest1-live"),
        ("guest2-ready", "metrics-guest1-gone"),
        ("xenstored-alive", "metrics-final"),
    ] {
        let at = steps.iter().position(|s| *s == after).unwrap() + 1;
        steps.insert(at, step);
    }
    run.assert_steps("the shim", &steps);
    run.assert_only_dom0("xl-list-final.txt");

    let snoop_out = run.file("snoop.out");
    // COMM (a name: `xl`, a guest's domain name, `-`) is left out below;
    // the columns the checks read are the classic ones.
    let lines: Vec<Vec<&str>> = snoop_out
        .lines()
        .map(|l| {
            let mut w: Vec<&str> = l.split_whitespace().collect();
            if w.len() > 2 {
                w.remove(2);
            }
            w
        })
        .collect();
    let has = |what: &str, pred: &dyn Fn(&[&str]) -> bool| {
        assert!(
            lines.iter().any(|w| pred(w)),
            "no snooper line with {what}\n{snoop_out}\n{}",
            run.report
        )
    };
    let guest1 = run.domid("guest1");
    let guest2 = run.domid("guest2");
    assert_eq!(
        snoop_out
            .lines()
            .next()
            .map(|l| l.split_whitespace().collect::<Vec<_>>()),
        Some(vec!["DOM", "PID", "COMM", "TX", "OP"])
    );
    assert!(
        snoop_out
            .lines()
            .any(|l| l.split_whitespace().nth(2) == Some("xl")),
        "no request named xl in COMM\n{snoop_out}\n{}",
        run.report
    );
    // The guests over their real rings: their domid, pid 0, relative paths.
    has("guest1 reading its name over its ring", &|w| {
        w.get(..5) == Some(&[guest1.as_str(), "0", "0", "XS_READ:", "name"][..])
    });
    has("guest1 reading its disk's state", &|w| {
        w.get(..5)
            == Some(
                &[
                    guest1.as_str(),
                    "0",
                    "0",
                    "XS_READ:",
                    "device/vbd/51712/state",
                ][..],
            )
    });
    has("guest1 writing data/harness", &|w| {
        w.get(..5) == Some(&[guest1.as_str(), "0", "0", "XS_WRITE:", "data/harness"][..])
    });
    has("guest2 over its ring", &|w| {
        w.first() == Some(&guest2.as_str())
    });
    // dom0's toolstack: real pids, in transactions.
    has("a dom0 request in a transaction with a real pid", &|w| {
        w.len() >= 4 && w[0] == "0" && w[1] != "0" && w[2] != "0" && w[2] != "-"
    });
    for guest in [&guest1, &guest2] {
        has("XS_INTRODUCE of each guest by xl", &|w| {
            w.len() >= 5 && w[0] == "0" && w[1] != "0" && w[3] == "XS_INTRODUCE:" && w[4] == guest
        });
    }
    has("xl watching @releaseDomain", &|w| {
        w.len() >= 5 && w[0] == "0" && w[3] == "XS_WATCH:" && w[4] == "@releaseDomain"
    });
    // A watch fires once when set: only a second event on the same watch
    // (pid, token) says a domain died (VIRQ_DOM_EXC).
    let mut releases: HashMap<(&str, &str), usize> = HashMap::new();
    for w in &lines {
        if w.len() >= 6 && w[2] == "-" && w[3] == "XS_WATCH_EVENT:" && w[4] == "@releaseDomain" {
            *releases.entry((w[1], w[5])).or_default() += 1;
        }
    }
    assert!(
        releases.values().any(|&n| n >= 2),
        "@releaseDomain never fired after its first event: {releases:?}\n{snoop_out}\n{}",
        run.report
    );
    // The reaped guest: xl removes its home before creating it and again
    // once it is gone.
    let home = format!("/local/domain/{guest1}");
    let home_removed = lines
        .iter()
        .filter(|w| w.len() >= 5 && w[0] == "0" && w[3] == "XS_RM:" && w[4] == home)
        .count();
    assert!(
        home_removed >= 2,
        "xl removed {home} {home_removed} times\n{snoop_out}\n{}",
        run.report
    );
    let snoop_err = run.file("snoop.err");
    assert!(snoop_err.contains(" 0 lost"), "{}", run.report);
    assert_exporter_series(run, release, &guest1, &guest2);
    assert_boot_drawn(run, &guest1);
    // Last, so that everything else is known to hold when it fails: the
    // snooper ran its default back end, BPF, on this dom0's kernel, not
    // the tracefs fallback.
    let tracing = snoop_err
        .lines()
        .find(|l| l.starts_with("Tracing "))
        .unwrap_or_else(|| panic!("no Tracing line\n{}", run.report));
    assert!(
        tracing.contains("(BPF, ") && !snoop_err.contains("BPF back end unavailable"),
        "the snooper fell back from BPF on Xen {release}'s dom0 kernel: {snoop_err}"
    );
}

/// The snooper's recording of the real boot, as `--top` and the timeline
/// show it (issue 48): --top's plain frames have guest1's row; the page
/// opens in headless Chromium without a console message, with guest1's
/// track and its disk's frontend and backend reaching Connected; the
/// trace events' flows are paired.
fn assert_boot_drawn(run: &Run, guest1: &str) {
    let recording = run.out.join("boot.jsonl");
    let snoop = |args: &[&str]| {
        let out = Command::new(crate::common::bin("xenstore-snoop"))
            .arg("-r")
            .arg(&recording)
            .args(args)
            .stdin(std::process::Stdio::null())
            .bounded_output();
        assert!(out.status.success(), "xenstore-snoop -r {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // A frame a second of the recording: the whole boot.
    let top = snoop(&["--top", "--count", "1000"]);
    assert!(
        top.lines()
            .any(|l| l.split_whitespace().take(3).collect::<Vec<_>>() == [guest1, "0", "guest1"]),
        "no guest1 row in --top's frames:\n{top}"
    );
    let (html, json) = (run.out.join("boot.html"), run.out.join("boot.trace.json"));
    snoop(&[
        "--timeline",
        html.to_str().unwrap(),
        "--timeline-json",
        json.to_str().unwrap(),
    ]);
    let events: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let events = events["traceEvents"].as_array().unwrap();
    assert!(assert_flows_paired(events) > 0, "no flows");
    let track = format!("dom{guest1} guest1");
    assert!(
        names_of(events, "process_name").contains(&track),
        "{track}: {:?}",
        names_of(events, "process_name")
    );
    let (dom, log) = chromium(&html, &["--dump-dom"]);
    assert!(console_messages(&log).is_empty(), "console: {log}");
    assert!(dom.contains(&format!("class=\"track\" data-name=\"{track}\"")));
    for half in ["frontend", "backend (dom0)"] {
        let span = format!("data-lane=\"dom{guest1} vbd 51712 {half}\" data-name=\"4 Connected\"");
        assert!(dom.contains(&span), "no {span} in the page");
    }
}

/// The exporter's snapshots (tests/vm/real_xen/metrics.rs) against
/// the snooper's lines from the exporter's first request on (it attached
/// just before; nothing else ran then), excluding the exporter's own.
fn assert_exporter_series(run: &Run, release: &str, guest1: &str, guest2: &str) {
    use metrics::{parse_exposition, parse_quota, parse_snoop, value, values, Counts, Seen};
    use xenstore_snoop::metrics::encode::prometheus_text;
    let exporter = run.file("metrics.pid").trim().to_string();
    let metrics_err = run.file("metrics.err");
    let lines = parse_snoop(&run.file("snoop.out"));
    let start = lines
        .iter()
        .position(|l| l.pid == exporter)
        .unwrap_or_else(|| panic!("no request of the exporter {exporter}\n{}", run.report));
    let window: Vec<metrics::Line> = lines[start..]
        .iter()
        .filter(|l| l.pid != exporter)
        .cloned()
        .collect();
    // What the endpoint served (OpenMetrics), which promtool reads as the
    // textfile has it (the exporter's own rendering); the textfile the
    // exporter wrote in dom0 as it is.
    let snapshot = |name: &str| {
        let text = run.file(&format!("metrics-{name}.om"));
        assert!(
            text.ends_with("# EOF\n"),
            "snapshot {name}: {text}\n{}",
            run.report
        );
        promtool_accepts(name, &prometheus_text(&text));
        (parse_exposition(&text), text)
    };
    let textfile = run.file("metrics-textfile.prom");
    assert!(
        textfile.contains("xenstore_domain_info{domid=\"0\",name=\"Domain-0\"} 1"),
        "{textfile}\n{}",
        run.report
    );
    promtool_accepts("the textfile", &textfile);
    let domids = |samples: &[metrics::Sample]| -> Vec<String> {
        values(samples, "xenstore_domain_info", &[])
            .map(|s| format!("{}={}", s.labels["domid"], s.labels["name"]))
            .collect()
    };

    // guest1 alive, done with its traffic: everything it did until dom0's
    // first CONTROL (xenstore-control quota, right after the snapshot).
    let (live, live_text) = snapshot("guest1-live");
    let cut = window
        .iter()
        .position(|l| matches!(&l.seen, Seen::Reply { op, .. } if op == "XS_CONTROL"))
        .unwrap_or_else(|| panic!("no xenstore-control quota in snoop.out\n{}", run.report));
    let before_quota = Counts::of(&window[..cut]);
    assert_eq!(
        domids(&live),
        ["0=Domain-0".to_string(), format!("{guest1}=guest1")],
        "{live_text}"
    );
    let guest1_counts = Counts::of_exposition(&live, &[guest1]).domains;
    let guest1_seen = before_quota
        .domains
        .get(guest1)
        .copied()
        .unwrap_or_default();
    assert_eq!(
        guest1_counts.get(guest1).copied().unwrap_or_default(),
        guest1_seen,
        "guest1 {guest1}'s [requests, errors, watch events]: the exporter's, the snooper's\n{live_text}"
    );
    // The ops a frontend must make: its state and the harness's key.
    for (op, path) in [
        ("XS_WRITE:", "device/vbd/51712/state"),
        ("XS_WRITE:", "data/harness"),
    ] {
        assert!(
            window[..cut].iter().any(|l| {
                let w: Vec<&str> = l.text.split_whitespace().collect();
                l.dom == guest1 && w.get(4) == Some(&op) && w.get(5) == Some(&path)
            }),
            "guest1 never did {op} {path}: not in what the exporter counted\n{}",
            run.report
        );
    }
    assert!(guest1_seen[0] > 10, "{guest1_seen:?}");
    // Quotas as the daemon answered xenstore-control right after.
    for (file, metric) in [
        ("quota-guest1.txt", "xenstore_domain_quota_used"),
        ("quota-limits.txt", "xenstore_domain_quota_limit"),
    ] {
        let want = parse_quota(&run.file(file));
        let got: BTreeMap<String, f64> = values(&live, metric, &[("domid", guest1)])
            .map(|s| (s.labels["quota"].clone(), s.value))
            .collect();
        assert!(want.contains_key("nodes"), "{file}: {}", run.file(file));
        assert_eq!(got, want, "{metric} of guest1 against {file}\n{live_text}");
    }
    assert!(
        value(
            &live,
            "xenstore_domain_quota_used",
            &[("domid", guest1), ("quota", "nodes")]
        ) > Some(0.0),
        "{live_text}"
    );

    // guest1 reaped: none of its series left; guest2 has its own.
    let (gone, gone_text) = snapshot("guest1-gone");
    assert_eq!(
        domids(&gone),
        ["0=Domain-0".to_string(), format!("{guest2}=guest2")],
        "{gone_text}"
    );
    assert!(
        !gone
            .iter()
            .any(|s| s.labels.get("domid").map(String::as_str) == Some(guest1)),
        "guest1 {guest1} reaped but still in the metrics\n{gone_text}"
    );
    assert!(
        value(
            &gone,
            "xenstore_domain_requests_total",
            &[("domid", guest2)]
        ) > Some(0.0)
            && value(
                &gone,
                "xenstore_domain_quota_used",
                &[("domid", guest2), ("quota", "nodes")]
            ) > Some(0.0),
        "{gone_text}"
    );

    // The end: every count of the exporter's whole run is the snooper's,
    // by op and result (errors by kind), watch events, transactions, and
    // dom0's, the only domain left.
    let (last, last_text) = snapshot("final");
    assert_eq!(domids(&last), ["0=Domain-0"], "{last_text}");
    let mut seen = Counts::of(&window);
    seen.domains.retain(|domid, _| domid == "0");
    assert_eq!(
        Counts::of_exposition(&last, &["0"]),
        seen,
        "the exporter's counts (left) against the snooper's lines\n{last_text}"
    );
    assert!(
        seen.requests.keys().any(|(_, result)| result != "ok"),
        "no error in the scenario: {seen:?}"
    );
    assert_eq!(value(&last, "xenstore_events_lost_total", &[]), Some(0.0));
    // The histogram counts every reply once.
    let mut replies: BTreeMap<&str, u64> = BTreeMap::new();
    for ((op, _), n) in &seen.requests {
        *replies.entry(op).or_default() += n;
    }
    for (op, n) in replies {
        assert_eq!(
            value(
                &last,
                "xenstore_request_duration_seconds_count",
                &[("op", op)]
            ),
            Some(n as f64),
            "{last_text}"
        );
    }
    // The kernel side counted with BPF on this dom0's kernel.
    let how = if release == "4.17" {
        "a uprobe link per site"
    } else {
        "one uprobe-multi link"
    };
    assert!(
        metrics_err.contains("metrics of daemon") && metrics_err.contains(how),
        "the exporter on Xen {release}'s dom0 (want {how}): {metrics_err}"
    );
}

/// `promtool check metrics` passes on an exposition.
fn promtool_accepts(name: &str, text: &str) {
    let check = crate::common::process::output_fed(
        Command::new("promtool").args(["check", "metrics"]),
        text.as_bytes(),
        crate::common::TIMEOUT,
    );
    assert!(
        check.status.success(),
        "promtool check metrics on {name}: {}{}\n{text}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}

/// Issue 25 on a real hypervisor: dom0 starts the release's C xenstored
/// (or oxenstored), guest2 boots and writes xenstore every half second, a
/// dom0 watch is open, and `xenstore-control live-update -f xenstored-shim`
/// turns the daemon into the shim in place. The same pid then serves the
/// guest's ring, the open watch, dom0's socket and ring, and the scenario
/// after it (a guest with a disk created and reaped), with the snooper
/// attached to the shim it became. On the way the shim refuses a target
/// that is no xenstored-shim and, while `xl create` builds guest1, updates
/// itself into a second copy of its binary, the snooper following
/// (--follow); coming from C, a snooper without --follow and the exporter
/// are attached across that update too. Then the shim gives the host back
/// (issue 44): the same pid runs the daemon it came from, guest2 pings
/// on, a dom0 watch set before the first update fires, dom0's store is the
/// same, and xl creates guest1 again and reaps it; guest2 is destroyed,
/// no zombie.
fn live_update_into_the_shim(test: &str, release: &str, from: &str) {
    if !prerequisites(test) {
        return;
    }
    let shim = crate::release_bin("xenstored-shim");
    let snoop = crate::release_bin("xenstore-snoop");
    let run = {
        let _slot = crate::slots::take(1, 80);
        xen_boot::boot(
            &format!("xen-{release}-{from}"),
            release,
            &[
                "--live-update-from",
                from,
                "--xenstored",
                shim.to_str().unwrap(),
                "--snoop",
                snoop.to_str().unwrap(),
            ],
        )
    };
    assert_updated_into_the_shim(&run, from);
}

/// After the live update from `from` (C or oxenstored), the shim serves
/// the rest of the scenario.
fn assert_updated_into_the_shim(run: &Run, from: &str) {
    let mut steps = STEPS.to_vec();
    // guest2 comes up before the update, then the update's own steps.
    steps.retain(|s| *s != "guest2-ready" && *s != "create-guest2");
    let at = steps.iter().position(|s| *s == "dom0-ring").unwrap() + 1;
    for (i, s) in [
        "create-guest2",
        "guest2-ready",
        "live-update",
        "live-update-same-pid",
        "live-update-guest-pings",
        "live-update-watch-fires",
        "live-update-dom0-rw",
        "snoop-attached",
        "live-update-refused",
        "shim-update",
        "shim-update-same-pid",
        "shim-update-guest-pings",
        "shim-update-snoop-follows",
    ]
    .into_iter()
    .enumerate()
    {
        steps.insert(at + i, s);
    }
    let at = steps.iter().position(|s| *s == "guest1-read-keys").unwrap() + 1;
    // Across the shim's update of itself, coming from C.
    let from_c: &[&str] = &[
        "snoop-nofollow-attached",
        "metrics-attached",
        "metrics-before-update",
        "snoop-nofollow-exits",
        "snoop-after-sees-guest",
        "metrics-after-update",
    ];
    // The host given back to the daemon it came from.
    let give_back = [
        "give-back",
        "give-back-guest-pings",
        "give-back-watch-fires",
        "create-guest1-again",
        "guest1-again-reaped",
    ];
    let more = if from == "oxenstored" {
        &[][..]
    } else {
        from_c
    };
    for (i, s) in more.iter().chain(&give_back).enumerate() {
        steps.insert(at + i, s);
    }
    run.assert_steps(from, &steps);
    if from != "oxenstored" {
        assert_exporter_follows(run);
    }
    run.assert_only_dom0("xl-list-final.txt");
    // The same store before and after each way: the same nodes, values
    // and permissions, but for the value guest2 rewrites every half
    // second. oxenstored lists a directory's children in its own order,
    // the shim (as C) in creation order, and its root's children include
    // @introduceDomain and @releaseDomain (tests/conformance/
    // DIFFERENCES.md), which C and the shim keep apart.
    let store = |t: &str| {
        let mut nodes: Vec<String> = t
            .lines()
            .skip(1)
            .filter(|l| !l.starts_with("/@"))
            .map(|l| match l.split_once("/data/ping = ") {
                Some((node, _)) => format!("{node}/data/ping"),
                None => l.to_string(),
            })
            .collect();
        nodes.sort_unstable();
        nodes
    };
    for way in ["live-update", "give-back"] {
        let before = run.file(&format!("{way}-before.txt"));
        let after = run.file(&format!("{way}-after.txt"));
        assert!(
            before.lines().count() > 3,
            "{way}: {before}\n{}",
            run.report
        );
        assert_eq!(store(&before), store(&after), "{way}\n{}", run.report);
    }
    // After the update the snooper sees guest1's whole life on the shim.
    let guest1 = run.domid("guest1");
    let snoop_out = run.file("snoop.out");
    assert!(
        snoop_out
            .lines()
            .any(|l| l.split_whitespace().next() == Some(guest1.as_str())),
        "no line of guest1 {guest1}\n{snoop_out}\n{}",
        run.report
    );
    let snoop_err = run.file("snoop.err");
    let tracing: Vec<&str> = snoop_err
        .lines()
        .filter(|l| l.starts_with("Tracing "))
        .collect();
    assert!(
        tracing.len() == 2 && tracing.iter().all(|t| t.contains("(BPF, ")),
        "the snooper attached twice, on BPF, across the shim's update: {snoop_err}"
    );
}

/// The exporter attached before the shim's update of itself counts on
/// after it: guest2's requests rise, the exec counted as a gap.
fn assert_exporter_follows(run: &Run) {
    use metrics::{parse_exposition, value};
    let guest2 = run.domid("guest2");
    let at = |name: &str| {
        let samples = parse_exposition(&run.file(&format!("metrics-{name}.om")));
        let requests = value(
            &samples,
            "xenstore_domain_requests_total",
            &[("domid", &guest2)],
        );
        let gaps = value(
            &samples,
            "xenstore_exporter_gaps_total",
            &[("reason", "exec")],
        );
        (requests.unwrap_or(0.0), gaps.unwrap_or(0.0))
    };
    let (before, gaps_before) = at("before-update");
    let (after, gaps_after) = at("after-update");
    assert!(
        before > 0.0 && after > before,
        "guest2's requests counted {before} before the update, {after} after\n{}",
        run.report
    );
    assert!(
        gaps_after > gaps_before,
        "no exec gap counted\n{}",
        run.report
    );
}

/// oxenstored is Debian 12's default xenstored.
#[test]
fn oxenstored_4_17_updates_live_into_the_shim() {
    live_update_into_the_shim(
        "oxenstored_4_17_updates_live_into_the_shim",
        "4.17",
        "oxenstored",
    );
}
