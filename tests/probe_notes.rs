//! The shim binary carries every probe declared in xenstore.d.
mod common;

use common::process::BoundedOutput;
use std::process::Command;

#[test]
fn every_declared_probe_is_in_the_binary() {
    let declared: Vec<String> = include_str!("../xenstored-probes/src/xenstore.d")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("probe "))
        .map(|l| l.split('(').next().unwrap().to_string())
        .collect();
    assert!(declared.len() >= 6, "{declared:?}");
    let out = Command::new("readelf")
        .arg("-n")
        .arg(common::bin("xenstored-shim"))
        .bounded_output();
    let notes = String::from_utf8_lossy(&out.stdout);
    for name in &declared {
        assert!(
            notes.contains(&format!("Name: {name}\n")),
            "probe {name} missing:\n{notes}"
        );
    }
}

/// The bench's probe loop links the probes in twice, and the linker throws
/// one copy away, so it carries stale notes that point outside executable
/// code. The snooper must attach only the real sites.
#[test]
fn stale_notes_of_discarded_code_are_skipped() {
    let binary = common::bin("xsbench-probe-loop");
    let out = Command::new("readelf")
        .arg("-n")
        .arg(&binary)
        .bounded_output();
    let notes = String::from_utf8_lossy(&out.stdout)
        .matches("Name: request\n")
        .count();
    let sites = xenstore_snoop::sdt::read_probes(&binary).unwrap();
    let requests = sites.iter().filter(|p| p.name == "request").count();
    assert!(
        notes > requests,
        "no stale notes to skip: {notes} notes, {requests} sites"
    );
    assert_eq!(requests, 1);
    let bytes = std::fs::read(&binary).unwrap();
    for site in &sites {
        assert_eq!(
            bytes[site.offset as usize], 0x90,
            "{site:?} is not at a nop"
        );
    }
}
