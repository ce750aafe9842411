//! Error reasons are a contract (xenstore_proto::Reason): the daemon fails
//! requests with those and no others, each of them is used, and
//! xenstored-probes(7) lists them all. Changing a reason on one side only
//! fails here.

use std::collections::BTreeSet;
use std::path::Path;
use xenstore_proto::Reason;

/// Every reason string the daemon's source gives a failure: `Fail(e, "…")`
/// and the `&str` constants that stand for one.
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
    let mut out = Vec::new();
    for (start, pattern) in code
        .match_indices("Fail(")
        .chain(code.match_indices(": &str = \"quota:"))
    {
        let rest = &code[start + pattern.len()..];
        // `Fail(XsError::X, "reason")`, `Fail(e, "reason")` or
        // `const Q: &str = "quota:…"`.
        let quoted = if pattern.starts_with(':') {
            Some(&rest[..rest.find('"').unwrap()]).map(|s| format!("quota:{s}"))
        } else {
            let args = &rest[..rest.find(')').unwrap_or(rest.len())];
            args.split_once(", \"")
                .map(|(_, r)| r.trim_end_matches('"').to_string())
        };
        // `Fail(e, "")` is a failure without a reason.
        out.extend(quoted.filter(|r| !r.is_empty()));
    }
    out
}

#[test]
fn the_daemon_fails_with_the_contracts_reasons_and_uses_them_all() {
    let used = daemon_reasons();
    let known: BTreeSet<String> = Reason::ALL.iter().map(|r| r.name.to_string()).collect();
    let unknown: Vec<&String> = used.difference(&known).collect();
    assert!(
        unknown.is_empty(),
        "the daemon fails with reasons xenstore_proto::Reason does not list: {unknown:?}"
    );
    let unused: Vec<&String> = known.difference(&used).collect();
    assert!(
        unused.is_empty(),
        "xenstore_proto::Reason lists reasons the daemon never gives: {unused:?}"
    );
}

#[test]
fn the_man_page_lists_every_reason() {
    let page = include_str!("../man/xenstored-probes.7");
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
            section.contains(&format!("\"{}\"", reason.name)),
            "xenstored-probes(7) does not list \"{}\" ({})",
            reason.name,
            reason.meaning
        );
    }
}
