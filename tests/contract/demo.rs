//! README's main command: scripts/demo boots domain 6 against a shim while
//! xenstore-snoop watches, and exits 0 having cleaned up.

use crate::common::process::BoundedOutput;
use std::process::Command;

#[test]
fn demo_script_shows_the_classic_story() {
    if !crate::common::need_root("demo_script_shows_the_classic_story") {
        return;
    }
    let bin_dir = crate::common::bin("xenstored-shim")
        .parent()
        .unwrap()
        .to_path_buf();
    let drawn = crate::common::shim::private_dir("demo");
    let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/demo"))
        .env("BIN_DIR", &bin_dir)
        .env("DEMO_OUT", &drawn)
        .bounded_output();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "demo failed: {:?}\n{stdout}\n{stderr}",
        out.status
    );
    let lines: Vec<&str> = stdout.lines().collect();
    let has = |pred: &dyn Fn(&[&str]) -> bool| {
        lines
            .iter()
            .any(|l| pred(&l.split_whitespace().collect::<Vec<_>>()))
    };
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["DOM", "PID", "COMM", "TX", "OP"]
    );
    // dom0's toolstack by pid and name, in a transaction
    let toolstack = |w: &[&str]| w.len() >= 5 && w[0] == "0" && w[1] != "0" && w[2] == "xs-demo";
    assert!(
        has(&|w| toolstack(w) && w[3] != "0" && w[4] == "XS_RM:"),
        "{stdout}"
    );
    assert!(
        has(&|w| toolstack(w) && w[4] == "XS_GET_DOMAIN_PATH:"),
        "{stdout}"
    );
    // the guest over its ring: domain 6, pid 0, named after the
    // /local/domain/6/name the toolstack wrote; relative paths
    assert!(
        has(&|w| w.get(..6)
            == Some(&["6", "0", "guest6", "0", "XS_READ:", "device/vbd/0/state"][..])),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "6   0      guest6          0   [ERROR] XS_READ: device/vif/0/type -> ENOENT"
        ),
        "{stdout}"
    );
    assert!(
        has(&|w| w.len() >= 5 && w[3] == "-" && w[4] == "XS_WATCH_EVENT:"),
        "{stdout}"
    );
    assert!(stderr.contains(" 0 lost"), "{stderr}");
    // The boot's --top frame and its timeline (tests/snoop/timeline.rs opens one).
    let top = std::fs::read_to_string(drawn.join("top.txt")).unwrap();
    assert!(stdout.contains(top.lines().next().unwrap()), "{stdout}");
    assert!(
        top.lines()
            .any(|l| l.split_whitespace().take(3).eq(["6", "0", "guest6"])),
        "{top}"
    );
    let page = std::fs::read_to_string(drawn.join("boot.html")).unwrap();
    let trace = std::fs::read_to_string(drawn.join("boot.trace.json")).unwrap();
    for text in [&page, &trace] {
        assert!(text.contains("dom6 vbd 0 backend (dom0)"));
    }
}
