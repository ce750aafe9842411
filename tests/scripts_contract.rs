//! The systemtap tapset, the DTrace script and the bpftrace script are
//! checked against the single probe list, xenstored-probes/src/xenstore.d:
//! probe names, which argument each named field comes from (argument order
//! and packing), and the op/error name tables against the daemon's wire
//! tables. Runs everywhere; systemtap and DTrace themselves never run here.
mod common;

use std::collections::BTreeMap;
use xenstored_probes::wire::{msg_name, XsError};

const CONTRACT: &str = include_str!("../xenstored-probes/src/xenstore.d");
const TAPSET: &str = include_str!("../scripts/xenstore.stp");
const DTRACE: &str = include_str!("../scripts/xenstore-snoop.d");
const BPFTRACE: &str = include_str!("../scripts/xenstore-snoop.bt");

/// Where a named field comes from: argument index (0-based, as in
/// xenstore.d), and for integers the bit shift and width.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Source {
    Int { arg: u32, shift: u32, width: u32 },
    Str { arg: u32 },
}

/// The scripts' friendly names for xenstore.d's packed field names.
fn friendly(name: &str) -> &str {
    match name {
        "conn_id" => "conn",
        "domid" => "dom",
        "tx_id" => "tx",
        other => other,
    }
}

/// The names the scripts give to each probe's extra, str1 and str2 (their
/// meaning is prose in xenstore.d). None: the argument carries nothing.
fn script_names(probe: &str) -> (Option<&'static str>, &'static str, Option<&'static str>) {
    match probe {
        "request" => (None, "path", Some("value")),
        "response" => (None, "result", Some("error_reason")),
        "watch_event" => (Some("firer_conn"), "path", Some("token")),
        "conn_open" => (None, "transport", Some("peer")),
        "conn_close" => (None, "reason", None),
        "tx_end" => (Some("outcome"), "outcome_name", Some("reason")),
        other => {
            panic!("xenstore.d declares probe {other}: name its fields here and in the scripts")
        }
    }
}

/// Fields of "a << 48 | b << 32 | c" held in argument `arg`.
fn unpack(packing: &str, arg: u32) -> Vec<(String, Source)> {
    let mut parts: Vec<(String, u32)> = packing
        .split('|')
        .map(|p| {
            let mut it = p.split("<<").map(str::trim);
            let name = it.next().unwrap().to_string();
            let shift = it.next().map_or(0, |s| s.parse().unwrap());
            (name, shift)
        })
        .collect();
    parts.sort_by_key(|p| std::cmp::Reverse(p.1));
    let mut top = 64;
    parts
        .into_iter()
        .map(|(name, shift)| {
            let width = top - shift;
            top = shift;
            (
                friendly(&name).to_string(),
                Source::Int { arg, shift, width },
            )
        })
        .collect()
}

/// The contract: probe name -> every named field and where it comes from.
fn contract() -> BTreeMap<String, BTreeMap<String, Source>> {
    let probes: Vec<&str> = CONTRACT
        .lines()
        .filter_map(|l| l.trim().strip_prefix("probe "))
        .map(|l| {
            let args = l.matches(',').count() + 1;
            assert_eq!(args, 6, "every probe has six arguments: {l}");
            l.split('(').next().unwrap()
        })
        .collect();
    assert_eq!(probes.len(), 6, "{probes:?}");
    let comment_field = |prefix: &str| -> String {
        let line = CONTRACT
            .lines()
            .find_map(|l| l.trim_start_matches([' ', '*']).strip_prefix(prefix))
            .unwrap_or_else(|| panic!("xenstore.d documents {prefix:?}"));
        line.trim().to_string()
    };
    let packing = |prefix: &str| {
        comment_field(prefix)
            .split("  ")
            .next()
            .unwrap()
            .to_string()
    };
    let ident = packing("arg1 ident");
    let client = packing("arg2 client");
    assert!(comment_field("arg0 serial").starts_with("daemon-wide request serial"));
    let mut out = BTreeMap::new();
    for probe in probes {
        let mut fields = BTreeMap::new();
        fields.insert(
            "serial".to_string(),
            Source::Int {
                arg: 0,
                shift: 0,
                width: 64,
            },
        );
        fields.extend(unpack(&ident, 1));
        fields.extend(unpack(&client, 2));
        // "request      extra = flags << 32 | req_id      str1 = path ..."
        let line = comment_field(&format!("{probe} "));
        let extra = line.strip_prefix("extra = ").expect("extra first");
        let extra = extra.split("  ").next().unwrap().trim();
        let (extra_name, str1, str2) = script_names(probe);
        if extra.contains("<<") {
            fields.extend(unpack(extra, 3));
        } else if let Some(name) = extra_name {
            assert_ne!(extra, "0", "{probe}: extra is documented as 0");
            fields.insert(
                name.to_string(),
                Source::Int {
                    arg: 3,
                    shift: 0,
                    width: 64,
                },
            );
        } else {
            assert_eq!(extra, "0", "{probe}: name its extra argument");
        }
        fields.insert(str1.to_string(), Source::Str { arg: 4 });
        if let Some(str2) = str2 {
            fields.insert(str2.to_string(), Source::Str { arg: 5 });
        }
        out.insert(probe.to_string(), fields);
    }
    out
}

/// Parses a right-hand side such as `($arg2 >> 16) & 0xffff`,
/// `((uint64_t)arg1 >> 0) & 0xffff`, `user_string_n($arg5, 4096)` or
/// `copyinstr(arg4)`; `base` is 1 for systemtap's $arg1.., 0 for DTrace.
fn source(rhs: &str, base: u32) -> Option<Source> {
    let s: String = rhs.chars().filter(|c| !c.is_whitespace()).collect();
    let s = s
        .trim_end_matches(';')
        .replace("(uint64_t)", "")
        .replace('$', "");
    let arg_at = |t: &str| -> Option<u32> {
        let digits: String = t
            .strip_prefix("arg")?
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        Some(digits.parse::<u32>().ok()? - base)
    };
    for f in ["user_string_n(", "copyinstr("] {
        if let Some(rest) = s.strip_prefix(f) {
            return Some(Source::Str { arg: arg_at(rest)? });
        }
    }
    let (value, mask) = match s.split_once(")&0x") {
        Some((v, m)) => (
            v.trim_start_matches('('),
            Some(u64::from_str_radix(m, 16).ok()?),
        ),
        None => (s.as_str(), None),
    };
    let (arg, shift) = match value.split_once(">>") {
        Some((a, sh)) => (arg_at(a)?, sh.parse().ok()?),
        None if value.len() <= 5 => (arg_at(value)?, 0),
        None => return None,
    };
    let width = match mask {
        Some(m) => {
            assert_eq!(m & (m + 1), 0, "mask {m:#x} is not a run of ones: {rhs}");
            m.count_ones()
        }
        None => 64 - shift,
    };
    Some(Source::Int { arg, shift, width })
}

/// Each `open` ... `\n}` block of `text`, keyed by probe name.
fn blocks<'a>(text: &'a str, open: &str) -> BTreeMap<String, &'a str> {
    let mut out = BTreeMap::new();
    for (i, _) in text.match_indices(open) {
        let rest = &text[i + open.len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let body = &rest[name.len()..rest.find("\n}").expect("block ends")];
        assert!(
            out.insert(name.clone(), body).is_none(),
            "{open}{name} twice"
        );
    }
    out
}

/// `name = rhs` assignments whose rhs reads a probe argument.
fn fields(body: &str, base: u32) -> BTreeMap<String, Source> {
    let mut out = BTreeMap::new();
    for line in body.lines() {
        let Some((lhs, rhs)) = line.split_once(" = ") else {
            continue;
        };
        let Some(src) = source(rhs, base) else {
            continue;
        };
        let lhs = lhs.trim().trim_start_matches("this->");
        let lhs = lhs.split('[').next().unwrap().to_string();
        assert!(out.insert(lhs.clone(), src).is_none(), "{lhs} set twice");
    }
    out
}

#[test]
fn tapset_has_every_probe_with_its_contract_fields() {
    let contract = contract();
    let aliases = blocks(TAPSET, "\nprobe xenstore.");
    assert_eq!(
        aliases.keys().collect::<Vec<_>>(),
        contract.keys().collect::<Vec<_>>(),
        "xenstore.stp aliases != xenstore.d probes"
    );
    for (probe, body) in &aliases {
        assert!(
            body.starts_with(&format!(
                " = process(@XS_BINARY).provider(\"xenstore\").mark(\"{probe}\")"
            )),
            "alias xenstore.{probe} attaches elsewhere: {body}"
        );
        assert_eq!(&fields(body, 1), &contract[probe], "xenstore.{probe}");
        assert!(body.contains("op_name = xenstore_op_name(op)"), "{probe}");
    }
    assert!(aliases["response"].contains("error = errno ? xenstore_error_name(errno) : \"\""));
}

#[test]
fn dtrace_script_reads_the_contract_fields() {
    let contract = contract();
    let clauses = blocks(DTRACE, "\nxenstore*:::");
    assert_eq!(
        clauses.keys().collect::<Vec<_>>(),
        ["request", "response", "watch_event"]
    );
    for (probe, body) in &clauses {
        let found = fields(body, 0);
        assert!(found.len() >= 3, "{probe}: {found:?}");
        for (name, src) in &found {
            assert_eq!(
                contract[probe].get(name),
                Some(src),
                "xenstore-snoop.d: {probe} reads {name} from the wrong place"
            );
        }
    }
}

#[test]
fn bpftrace_script_uses_declared_probes() {
    let contract = contract();
    let used = blocks(BPFTRACE, "\nusdt:$1:xenstore:");
    assert_eq!(
        used.keys().collect::<Vec<_>>(),
        ["request", "response", "watch_event"]
    );
    assert!(used.keys().all(|p| contract.contains_key(p)));
}

/// `N` -> `NAME` from lines holding `prefix N suffix "NAME"`.
fn table(text: &str, prefix: &str, suffix: &str) -> BTreeMap<u32, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((_, rest)) = line.split_once(prefix) else {
            continue;
        };
        let Some((n, rest)) = rest.split_once(suffix) else {
            continue;
        };
        let Ok(n) = n.trim().parse::<u32>() else {
            continue;
        };
        let name = rest.split('"').nth(1).expect("quoted name");
        assert!(
            out.insert(n, name.to_string()).is_none(),
            "{prefix}{n} twice"
        );
    }
    out
}

#[test]
fn op_and_error_names_match_the_wire_tables() {
    let wire: BTreeMap<u32, String> = (0..)
        .map_while(|n| msg_name(n).map(|s| (n, s.to_string())))
        .collect();
    assert_eq!(wire.len(), 27);
    assert_eq!(table(TAPSET, "if (op == ", ")"), wire, "xenstore.stp");
    assert_eq!(table(DTRACE, "\top_name[", "]"), wire, "xenstore-snoop.d");
    let mut bt = table(BPFTRACE, "@op_name[", "]");
    assert_eq!(bt.remove(&27).as_deref(), Some("XS_UNKNOWN"));
    assert_eq!(bt, wire, "xenstore-snoop.bt");

    let errors = table(TAPSET, "if (errno == ", ")");
    assert_eq!(errors.len(), 16);
    for (errno, name) in &errors {
        let e = XsError::from_errno(*errno).unwrap_or_else(|| panic!("errno {errno}"));
        assert_eq!(e.name(), name);
    }
}

/// Where systemtap is installed (it is not part of .ci/setup), the tapset
/// also goes through stap's pass 2 (parse and elaborate) against the real
/// shim's probe notes: every alias resolves and every field has a type.
/// stap insists on a kernel build tree even for pass 2; a stub one is
/// enough because nothing is compiled.
#[test]
fn tapset_elaborates_with_stap_when_installed() {
    let Ok(version) = std::process::Command::new("stap").arg("-V").output() else {
        eprintln!("\n*** tapset_elaborates_with_stap_when_installed: no stap, only the static checks ran ***\n");
        return;
    };
    assert!(version.status.success());
    let tree = common::shim::private_dir("stap-kernel");
    let release = String::from_utf8(
        std::process::Command::new("uname")
            .arg("-r")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    std::fs::create_dir_all(tree.join("include/config")).unwrap();
    std::fs::write(tree.join("include/config/kernel.release"), release).unwrap();
    std::fs::write(tree.join("Module.symvers"), "").unwrap();
    std::fs::write(
        tree.join(".config"),
        "CONFIG_UPROBES=y\nCONFIG_UPROBE_EVENTS=y\nCONFIG_TRACEPOINTS=y\nCONFIG_ARCH_SUPPORTS_UPROBES=y\n",
    )
    .unwrap();
    let shim_dir = common::bin("xenstored-shim")
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        shim_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let uses = "probe xenstore.* { printf(\"%d %d %d %d %d %d %s\\n\", serial, conn, dom, op, tx, pid, op_name) }\n\
        probe xenstore.request { println(path, value, flags, req_id) }\n\
        probe xenstore.response { println(result, error, error_reason, errno, flags, req_id) }\n\
        probe xenstore.watch_event { println(path, token, firer_conn) }\n\
        probe xenstore.conn_open { println(transport, peer) }\n\
        probe xenstore.conn_close { println(reason) }\n\
        probe xenstore.tx_end { println(outcome, outcome_name, reason) }\n";
    let out = std::process::Command::new("stap")
        .args(["-p2", "-r"])
        .arg(&tree)
        .arg("-I")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts"))
        .arg("-e")
        .arg(uses)
        .env("PATH", path)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&tree);
    assert!(
        out.status.success(),
        "stap -p2 failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
