//! Checking a drawn timeline (`--timeline`, `--timeline-json`): the page
//! in Debian's headless Chromium, the trace events' flows and names.
//! Shared by tests/snoop/timeline.rs (xs-demo's boot) and tests/vm/real_xen.rs (a
//! real guest's boot, from the snooper's -w recording in dom0).

use super::process::BoundedOutput;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs headless Chromium on `page` with `args`; its DOM (stdout) and
/// what it logged (stderr).
pub fn chromium(page: &Path, args: &[&str]) -> (String, String) {
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .bounded_output();
    assert!(out.status.success(), "chromium: {out:?}");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every flow start ("s") has one finish ("f") with its id, and back.
pub fn assert_flows_paired(events: &[Value]) -> usize {
    let mut ends: HashMap<u64, (u32, u32)> = HashMap::new();
    for e in events {
        let id = || e["id"].as_u64().expect("a flow id");
        match e["ph"].as_str().unwrap() {
            "s" => ends.entry(id()).or_default().0 += 1,
            "f" => {
                assert_eq!(e["bp"], "e", "{e}");
                ends.entry(id()).or_default().1 += 1
            }
            "X" => {
                assert!(e["dur"].as_f64().unwrap() > 0.0, "{e}");
                assert!(e["ts"].as_f64().unwrap() >= 0.0, "{e}");
            }
            "M" => assert!(e["args"]["name"].is_string() || e["args"]["sort_index"].is_number()),
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    for (id, n) in &ends {
        assert_eq!(*n, (1, 1), "flow {id} not paired");
    }
    ends.len()
}

pub fn names_of(events: &[Value], what: &str) -> Vec<String> {
    let mut names: Vec<String> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == what)
        .map(|e| e["args"]["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

/// What the page logged to the browser's console (an error, a warning).
pub fn console_messages(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains(":CONSOLE")).collect()
}
