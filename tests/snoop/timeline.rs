//! `--timeline` and `--timeline-json` of a known boot (xs-demo: domain 6's
//! toolstack, block backend and frontend against a real shim, traced
//! live): the page opens in Debian's headless Chromium without a console
//! message, its DOM holds the boot's tracks and each device half's
//! XenbusState spans, and a screenshot is kept in target/timeline/; the
//! JSON is trace events with every flow paired; a replay of the -w
//! recording draws the same.

use crate::common::process::{BoundedOutput, Watched};
use crate::common::shim::{private_dir, Shim};
use crate::common::timeline::{assert_flows_paired, chromium, console_messages, names_of};
use crate::common::TIMEOUT;
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};

const SIGINT: i32 = 2;

#[test]
fn a_boot_as_a_timeline_in_a_browser() {
    if !crate::common::need_root("a_boot_as_a_timeline_in_a_browser") {
        return;
    }
    let shim = Shim::private_copy();
    let dir = private_dir("timeline");
    let (html, json, trace) = (
        dir.join("boot.html"),
        dir.join("boot.json"),
        dir.join("trace"),
    );
    let pid = shim.pid().to_string();
    let mut snoop = Watched::spawn(
        "xenstore-snoop",
        crate::common::snoop_command()
            .args(["--daemon-pid", &pid, "-w"])
            .arg(&trace)
            .arg("--timeline")
            .arg(&html)
            .arg("--timeline-json")
            .arg(&json)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
        false,
    );
    snoop.wait_ready("the snooper to attach", TIMEOUT, |_, err| {
        err.iter().any(|l| l.contains("Ctrl-C to end."))
    });
    let demo = Command::new(crate::common::bin("xs-demo"))
        .arg("--socket")
        .arg(&shim.socket)
        .arg("--run-dir")
        .arg(&shim.run_dir)
        .bounded_output();
    assert!(demo.status.success(), "{demo:?}");
    // The demo's last request: the backend's tree removed.
    snoop.wait_line("the boot's last request", TIMEOUT, |l| {
        l.contains("XS_RM: /local/domain/0/backend/vbd/6 -> OK")
    });
    let ended = snoop.stop(SIGINT, TIMEOUT);
    assert!(ended.status.success(), "{:?}", ended.stderr);
    assert!(
        ended.stderr.iter().any(|l| l.contains("--timeline: ")),
        "{:?}",
        ended.stderr
    );

    // The JSON: trace events, the boot's tracks, flows paired.
    let live: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let events = live["traceEvents"].as_array().unwrap();
    let flows = assert_flows_paired(events);
    assert!(flows >= 4, "{flows} flows");
    let toolstack = format!("dom0 xs-demo [{}]", ended_pid(events));
    assert_eq!(
        names_of(events, "process_name"),
        [
            "devices (XenbusState)".to_string(),
            toolstack.clone(),
            "dom6 guest6".into()
        ]
    );
    let lanes = names_of(events, "thread_name");
    for lane in ["dom6 vbd 0 frontend", "dom6 vbd 0 backend (dom0)"] {
        assert!(lanes.iter().any(|l| l == lane), "{lane}: {lanes:?}");
    }

    // The page in a browser: no console message, the tracks and the
    // device halves' spans through Connected in the DOM.
    let (dom, log) = chromium(&html, &["--dump-dom"]);
    let console = console_messages(&log);
    assert!(console.is_empty(), "console: {console:?}");
    assert!(!dom.contains("data-error"), "{dom}");
    assert!(dom.contains("data-rendered=\""), "the script did not draw");
    for track in ["devices (XenbusState)", toolstack.as_str(), "dom6 guest6"] {
        let el = format!("class=\"track\" data-name=\"{track}\"");
        assert!(dom.contains(&el), "no {el}");
    }
    for lane in ["dom6 vbd 0 frontend", "dom6 vbd 0 backend (dom0)"] {
        for state in ["1 Initialising", "4 Connected"] {
            let span = format!("data-lane=\"{lane}\" data-name=\"{state}\"");
            assert!(dom.contains(&span), "no {span}");
        }
    }
    assert!(
        dom.contains("data-name=\"2 InitWait\""),
        "the backend's InitWait"
    );
    assert!(
        dom.contains("data-name=\"3 Initialised\""),
        "the frontend's Initialised"
    );
    assert!(dom.contains("class=\"flow\""), "no flows drawn");
    assert!(
        dom.contains("class=\"transaction\""),
        "the toolstack's transaction"
    );
    assert!(dom.contains("[ERROR] XS_READ: device/vif/0/type -&gt; ENOENT"));

    // A screenshot, kept as this test's artefact.
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("../timeline");
    std::fs::create_dir_all(&shots).unwrap();
    let png = shots.join("boot.png");
    let _ = std::fs::remove_file(&png);
    chromium(
        &html,
        &[
            "--window-size=1400,400",
            &format!("--screenshot={}", png.display()),
        ],
    );
    let bytes = std::fs::read(&png).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000,
        "{}",
        png.display()
    );
    std::fs::copy(&html, shots.join("boot.html")).unwrap();

    // The -w recording replayed draws the same.
    let replayed = dir.join("replayed.json");
    let out = Command::new(crate::common::bin("xenstore-snoop"))
        .arg("-r")
        .arg(&trace)
        .arg("--timeline-json")
        .arg(&replayed)
        .stdin(Stdio::null())
        .bounded_output();
    assert!(out.status.success(), "{out:?}");
    let again: Value = serde_json::from_slice(&std::fs::read(&replayed).unwrap()).unwrap();
    let (a, b) = (&again["traceEvents"], &live["traceEvents"]);
    let differ = a
        .as_array()
        .unwrap()
        .iter()
        .zip(b.as_array().unwrap())
        .find(|(x, y)| x != y);
    assert!(differ.is_none(), "the replay drew {differ:?}");
    assert_eq!(again, live, "the replay drew something else");
}

/// The toolstack's pid, from its track's events.
fn ended_pid(events: &[Value]) -> u64 {
    events
        .iter()
        .filter_map(|e| e["args"]["line"].as_str())
        .find(|l| l.contains("XS_GET_DOMAIN_PATH"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .expect("the toolstack's XS_GET_DOMAIN_PATH")
}
