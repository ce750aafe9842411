//! The shim binary carries every probe declared in xenstore.d.
mod common;
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
        .output()
        .expect("readelf (binutils) must be installed");
    let notes = String::from_utf8_lossy(&out.stdout);
    for name in &declared {
        assert!(
            notes.contains(&format!("Name: {name}\n")),
            "probe {name} missing:\n{notes}"
        );
    }
}
