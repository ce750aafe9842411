//! Error reasons are a contract (xenstore_proto::Reason): the daemon's
//! `Fail` carries that enum, so it gives no other reason; here, it gives
//! each of them, and xenstored-probes(7) lists them all. Dropping a reason's
//! last use, or its line in the man page, fails here.

use std::collections::BTreeSet;
use std::path::Path;
use xenstore_proto::Reason;

/// Every `Reason::Variant` the daemon's source names outside unit tests.
fn daemon_reasons() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut stack = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("xenstored-probes/src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let name = path.file_name().unwrap().to_string_lossy();
            // Unit tests assert on reasons; they do not give them.
            if !name.ends_with(".rs") || name == "tests.rs" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]\nmod tests {").next().unwrap();
            found.extend(reasons_in(code));
        }
    }
    found
}

fn reasons_in(code: &str) -> Vec<String> {
    code.match_indices("Reason::")
        .map(|(start, pattern)| {
            let rest = &code[start + pattern.len()..];
            let end = rest
                .find(|c: char| !c.is_ascii_alphanumeric())
                .unwrap_or(rest.len());
            rest[..end].to_string()
        })
        // `Reason::name`, `Reason::quota`: methods, not reasons.
        .filter(|word| word.starts_with(|c: char| c.is_ascii_uppercase()))
        .collect()
}

#[test]
fn the_daemon_gives_every_reason() {
    let used = daemon_reasons();
    let unused: Vec<String> = Reason::ALL
        .iter()
        .map(|r| format!("{r:?}"))
        .filter(|variant| !used.contains(variant))
        .collect();
    assert!(
        unused.is_empty(),
        "xenstore_proto::Reason lists reasons the daemon never gives: {unused:?}"
    );
}

#[test]
fn the_man_page_lists_every_reason() {
    let page = include_str!("../../man/xenstored-probes.7");
    let section = page
        .split(".SS Error reasons")
        .nth(1)
        .expect("xenstored-probes.7 has an Error reasons section")
        .split("\n.S")
        .next()
        .unwrap()
        .replace("\\-", "-");
    for reason in Reason::ALL {
        assert!(
            section.contains(&format!("\"{}\"", reason.name())),
            "xenstored-probes(7) does not list \"{}\" ({})",
            reason.name(),
            reason.meaning()
        );
    }
}
