//! The shipped Prometheus alerting rules: valid (`promtool check rules`)
//! and firing when they should (`promtool test rules`, series and expected
//! alerts in xenstore-alerts.test.yml). Debian's prometheus ships promtool.

use crate::common::process::output_within;
use crate::common::TIMEOUT;
use std::path::Path;
use std::process::Command;

fn promtool(args: &[&str]) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("xenstore-snoop/prometheus");
    let out = output_within(
        Command::new("promtool").args(args).current_dir(dir),
        TIMEOUT,
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?}: {said}");
    said
}

#[test]
fn the_alerting_rules_are_valid() {
    let said = promtool(&["check", "rules", "xenstore-alerts.yml"]);
    assert!(said.contains("SUCCESS: 5 rules found"), "{said}");
}

#[test]
fn the_alerting_rules_fire_as_their_tests_expect() {
    let said = promtool(&["test", "rules", "xenstore-alerts.test.yml"]);
    assert!(said.contains("SUCCESS"), "{said}");
}
