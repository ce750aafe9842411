//! The probe contract is xenstore-proto's (probe list, argument order,
//! packing by named shift and width, op and error tables). Checked against
//! it here: xenstored-probes/src/xenstore.d (the declaration the linker
//! sees), what xenstore.d and man/xenstored-probes.7 say in prose, and
//! every script that reads the probes: the systemtap tapset, the DTrace
//! script and the bpftrace scripts, which field each reads from which
//! argument, bits and all. Runs everywhere; systemtap and DTrace themselves
//! never run here.
use std::collections::BTreeMap;
use xenstore_proto::packing::describe;
use xenstore_proto::probe::ARG_REGISTERS;
use xenstore_proto::wire::{msg_name, XsError};
use xenstore_proto::{
    flag, Client, CutExtra, Extra, Field, Ident, Probe, RequestExtra, ResponseExtra, TxOutcome,
    PROVIDER, STR1_MAX, STRINGS_MAX,
};

const CONTRACT: &str = include_str!("../../xenstored-probes/src/xenstore.d");
const MAN: &str = include_str!("../../man/xenstored-probes.7");
const TAPSET: &str = include_str!("../../scripts/xenstore.stp");
const DTRACE: &str = include_str!("../../scripts/xenstore-snoop.d");
const BPFTRACE: &str = include_str!("../../scripts/xenstore-snoop.bt");
const XS_STACKS: &str = include_str!("../../scripts/xs-stacks.bt");
const XS_LATENCY: &str = include_str!("../../scripts/xs-latency.bt");

/// Where a named field comes from: argument index (0-based, as in
/// xenstore.d), and for integers the bit shift and width.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Source {
    Int { arg: u32, shift: u32, width: u32 },
    Str { arg: u32 },
}

/// The index of the argument named `name` in xenstore-proto's lists
/// (probes only append, so an argument has one index in all).
fn arg(name: &str) -> u32 {
    Probe::ALL
        .iter()
        .find_map(|p| p.args().iter().position(|a| a.0 == name))
        .expect("a contract argument") as u32
}

/// The contract: probe name -> every named field and where it comes from,
/// all from xenstore-proto.
fn contract() -> BTreeMap<String, BTreeMap<String, Source>> {
    let int = |arg: u32, f: &Field| {
        let (shift, width) = (f.shift, f.width);
        (f.name.to_string(), Source::Int { arg, shift, width })
    };
    // A 64-bit argument read as it is.
    let whole = |name: &str, at: &str| {
        let (arg, shift, width) = (arg(at), 0, 64);
        (name.to_string(), Source::Int { arg, shift, width })
    };
    Probe::ALL
        .into_iter()
        .map(|probe| {
            let mut fields: BTreeMap<String, Source> = BTreeMap::new();
            fields.extend([whole("serial", "serial")]);
            fields.extend(Ident::FIELDS.iter().map(|f| int(arg("ident"), f)));
            fields.extend(Client::FIELDS.iter().map(|f| int(arg("client"), f)));
            match probe.extra() {
                Extra::Packed(packed) => fields.extend(packed.iter().map(|f| int(arg("extra"), f))),
                Extra::Whole(name) => fields.extend([whole(name, "extra")]),
                Extra::Zero => {}
            }
            let (str1, str2) = probe.strings();
            fields.insert(str1.to_string(), Source::Str { arg: arg("str1") });
            if let Some(str2) = str2 {
                fields.insert(str2.to_string(), Source::Str { arg: arg("str2") });
            }
            if let Some(str3) = probe.str3() {
                fields.insert(str3.to_string(), Source::Str { arg: arg("str3") });
            }
            // Appended integers are read whole, under their own name.
            let appended = &probe.args()[xenstore_proto::probe::ARGS.len()..];
            fields.extend(
                appended
                    .iter()
                    .filter(|a| a.1 != "char*")
                    .map(|a| whole(a.0, a.0)),
            );
            (probe.name().to_string(), fields)
        })
        .collect()
}

#[test]
fn xenstore_d_declares_the_crates_probes_in_order() {
    assert!(
        CONTRACT.contains(&format!("\nprovider {PROVIDER} {{\n")),
        "xenstore.d declares another provider"
    );
    let declared: Vec<(&str, Vec<String>)> = CONTRACT
        .lines()
        .filter_map(|l| l.trim().strip_prefix("probe "))
        .map(|l| {
            let (name, args) = l.split_once('(').expect("probe NAME(ARGS);");
            let args = args.trim_end_matches(");").split(',');
            (name, args.map(|a| a.replace(' ', "")).collect())
        })
        .collect();
    let names: Vec<&str> = declared.iter().map(|d| d.0).collect();
    assert_eq!(
        names,
        Probe::ALL.map(Probe::name),
        "xenstore.d != xenstore-proto"
    );
    for (name, args) in &declared {
        let probe = Probe::from_name(name).unwrap();
        let types: Vec<&str> = probe.args().iter().map(|a| a.1).collect();
        assert_eq!(args, &types, "probe {name}'s argument types");
    }
}

/// The prose of xenstore.d and the man page, whitespace and comment stars
/// collapsed, states the crate's packing, flags, outcomes and limits.
#[test]
fn the_docs_state_the_crates_packing() {
    let mut expected = vec![
        describe(&Ident::FIELDS),
        describe(&Client::FIELDS),
        format!("extra = {}", describe(&RequestExtra::FIELDS)),
        format!("extra = {}", describe(&ResponseExtra::FIELDS)),
        format!("extra = {}", describe(&CutExtra::FIELDS)),
        format!("under {STRINGS_MAX} bytes"),
    ];
    expected.extend(TxOutcome::ALL.map(|o| format!("{} {}", o.code(), o.name())));
    expected.extend(
        flag::ALL.map(|(bit, meaning)| format!("bit {} = {meaning}", bit.trailing_zeros())),
    );
    let flat = |text: &str| {
        let words = text.split_whitespace().filter(|w| *w != "*");
        words.collect::<Vec<_>>().join(" ")
    };
    for (doc, text) in [
        ("xenstore.d", flat(CONTRACT)),
        ("xenstored-probes.7", flat(MAN)),
    ] {
        for e in &expected {
            assert!(text.contains(e.as_str()), "{doc} does not say {e:?}");
        }
    }
    for (doc, text) in [("xenstore.d", CONTRACT), ("xenstored-probes.7", MAN)] {
        assert!(
            flat(text).contains(&format!("\"{}\"", xenstore_proto::peer::SOCKET_PEER)),
            "{doc} gives conn_open's peer format"
        );
    }
    assert!(
        flat(MAN).contains(&format!("str1 at most {STR1_MAX}")),
        "xenstored-probes.7 gives str1's limit"
    );
}

/// Parses a right-hand side such as `($arg2 >> 16) & 0xffff`,
/// `((uint64_t)arg1 >> 0) & 0xffff`, `arg2 >> 32`, `user_string_n($arg5,
/// 4096)`, `copyinstr(arg4)`, `str(arg4)` or bpftrace's `reg("r11")` (the
/// argument the notes put in that register); `base` is 1 for systemtap's
/// $arg1.., 0 for DTrace and bpftrace. None: it reads no argument this way.
fn source(rhs: &str, base: u32) -> Option<Source> {
    let s: String = rhs.chars().filter(|c| !c.is_whitespace()).collect();
    let mut s = s
        .trim_end_matches(';')
        .replace("(uint64_t)", "")
        .replace('$', "");
    for (i, reg) in ARG_REGISTERS.iter().enumerate() {
        s = s.replace(
            &format!("reg(\"{reg}\")"),
            &format!("arg{}", i as u32 + base),
        );
    }
    let arg_at = |t: &str| -> Option<u32> {
        let digits: String = t
            .strip_prefix("arg")?
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        Some(digits.parse::<u32>().ok()? - base)
    };
    for f in ["user_string_n(", "copyinstr(", "str("] {
        if let Some(rest) = s.strip_prefix(f) {
            return Some(Source::Str { arg: arg_at(rest)? });
        }
    }
    let s = strip_parens(&s);
    let (value, mask) = match s.rsplit_once("&0x") {
        Some((v, m)) => (strip_parens(v), Some(u64::from_str_radix(m, 16).ok()?)),
        None => (s, None),
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

/// `t` without the parentheses around all of it, if any.
fn strip_parens(t: &str) -> &str {
    let mut t = t;
    while let Some(inner) = t.strip_prefix('(').and_then(|i| i.strip_suffix(')')) {
        // "(a)&(b)" is not wrapped: its first ")" closes the first "(".
        let mut depth = 0;
        let balanced = inner.chars().all(|c| {
            depth += match c {
                '(' => 1,
                ')' => -1,
                _ => 0,
            };
            depth >= 0
        });
        if !balanced {
            break;
        }
        t = inner;
    }
    t
}

#[test]
fn right_hand_sides_parse() {
    let int = |arg, shift, width| Some(Source::Int { arg, shift, width });
    assert_eq!(source("($arg2 >> 16) & 0xffff", 1), int(1, 16, 16));
    assert_eq!(source("((uint64_t)arg1 >> 0) & 0xffff;", 0), int(1, 0, 16));
    assert_eq!(source("arg1 & 0xffff;", 0), int(1, 0, 16));
    assert_eq!(source("arg2 >> 32;", 0), int(2, 32, 32));
    assert_eq!(source("(arg3 >> 48)", 0), int(3, 48, 16));
    assert_eq!(source("(uint64_t)arg3;", 0), int(3, 0, 64));
    assert_eq!(source("$arg4", 1), int(3, 0, 64));
    assert_eq!(source("str(arg4);", 0), Some(Source::Str { arg: 4 }));
    assert_eq!(
        source("user_string_n($arg6, 4096)", 1),
        Some(Source::Str { arg: 5 })
    );
    for f in Ident::FIELDS.iter().chain(&ResponseExtra::FIELDS) {
        assert_eq!(
            source(&f.c_expr("arg1"), 0),
            int(1, f.shift, f.width),
            "{f:?}"
        );
    }
    assert_eq!(source("reg(\"r11\");", 0), int(7, 0, 64));
    assert_eq!(source("str(reg(\"r10\"))", 0), Some(Source::Str { arg: 6 }));
    assert_eq!(source("@shown[arg0];", 0), None);
    assert_eq!(source("27;", 0), None);
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

/// `name = rhs` assignments whose rhs reads a probe argument (`name`,
/// `this->name`, `$name`, `@name[key]`, `name[key]`). Every other line
/// that touches a packed argument (ident, client, extra) is an error: a
/// shift written inline would go unchecked.
fn fields(body: &str, base: u32) -> BTreeMap<String, Source> {
    let packed = ["ident", "client", "extra"].map(|a| format!("arg{}", arg(a) + base));
    let touches_packed = |line: &str| {
        packed.iter().any(|a| {
            line.match_indices(a.as_str())
                .any(|(i, _)| !line[i + a.len()..].starts_with(|c: char| c.is_ascii_digit()))
        })
    };
    let mut out = BTreeMap::new();
    for line in body.lines() {
        let parsed = line
            .split_once(" = ")
            .and_then(|(lhs, rhs)| Some((lhs, source(rhs, base)?)));
        let Some((lhs, src)) = parsed else {
            assert!(
                !touches_packed(line),
                "unchecked read of a packed argument: {line}"
            );
            continue;
        };
        let lhs = lhs
            .trim()
            .trim_start_matches("this->")
            .trim_start_matches(['$', '@']);
        let lhs = lhs.split('[').next().unwrap().to_string();
        assert!(out.insert(lhs.clone(), src).is_none(), "{lhs} set twice");
    }
    out
}

/// `script` reads only fields of `probe`, each from its contract place.
fn reads_the_contract(script: &str, probe: &str, found: &BTreeMap<String, Source>) {
    let contract = contract();
    let Some(fields) = contract.get(probe) else {
        panic!("{script} attaches to {probe}, which xenstore-proto does not list");
    };
    for (name, src) in found {
        assert_eq!(
            fields.get(name),
            Some(src),
            "{script}: {probe} reads {name} from the wrong place"
        );
    }
}

#[test]
fn tapset_has_every_probe_with_its_contract_fields() {
    let contract = contract();
    let aliases = blocks(TAPSET, &format!("\nprobe {PROVIDER}."));
    assert_eq!(
        aliases.keys().collect::<Vec<_>>(),
        contract.keys().collect::<Vec<_>>(),
        "xenstore.stp aliases != xenstore-proto's probes"
    );
    for (probe, body) in &aliases {
        assert!(
            body.starts_with(&format!(
                " = process(@XS_BINARY).provider(\"{PROVIDER}\").mark(\"{probe}\")"
            )),
            "alias xenstore.{probe} attaches elsewhere: {body}"
        );
        assert_eq!(&fields(body, 1), &contract[probe], "xenstore.{probe}");
        assert!(body.contains("op_name = xenstore_op_name(op)"), "{probe}");
    }
    for probe in ["response", "reply"] {
        assert!(
            aliases[probe].contains("error = errno ? xenstore_error_name(errno) : \"\""),
            "{probe}"
        );
    }
}

#[test]
fn dtrace_script_reads_the_contract_fields() {
    let clauses = blocks(DTRACE, &format!("\n{PROVIDER}*:::"));
    assert_eq!(
        clauses.keys().collect::<Vec<_>>(),
        ["request", "response", "watch_event"]
    );
    for (probe, body) in &clauses {
        let found = fields(body, 0);
        assert!(found.len() >= 3, "{probe}: {found:?}");
        reads_the_contract("xenstore-snoop.d", probe, &found);
    }
}

/// Both bpftrace scripts: every `usdt:BINARY:xenstore:PROBE` block reads
/// its fields from the contract's places. xs-stacks.bt traces the clients,
/// not the daemon, so it has none today; one added later is checked too.
#[test]
fn bpftrace_scripts_read_the_contract_fields() {
    for (script, text, probes) in [
        (
            "xenstore-snoop.bt",
            BPFTRACE,
            &["request", "response", "watch_event"][..],
        ),
        ("xs-stacks.bt", XS_STACKS, &[]),
        ("xs-latency.bt", XS_LATENCY, &["reply"]),
    ] {
        let mut used = BTreeMap::new();
        for (i, _) in text.match_indices("\nusdt:") {
            // usdt:BINARY:PROVIDER:PROBE
            let head = text[i + 1..].lines().next().unwrap();
            let mut parts = head.rsplit(':');
            let (probe, provider) = (parts.next().unwrap(), parts.next());
            assert_eq!(provider, Some(PROVIDER), "{script}: {head}");
            let body = &text[i + 1..];
            let body = &body[..body.find("\n}").expect("block ends")];
            used.insert(probe.to_string(), fields(body, 0));
        }
        assert_eq!(used.keys().collect::<Vec<_>>(), probes, "{script}");
        for (probe, found) in &used {
            reads_the_contract(script, probe, found);
        }
    }
    for (script, text) in [
        ("xenstore-snoop.bt", BPFTRACE),
        ("xs-latency.bt", XS_LATENCY),
    ] {
        assert!(
            text.contains(&format!("if ($op > {})", msg_max())),
            "{script} maps ops past the table to XS_UNKNOWN"
        );
    }
}

/// The highest message type the wire tables name.
fn msg_max() -> u32 {
    (0..).take_while(|&n| msg_name(n).is_some()).last().unwrap()
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
    for (script, text) in [
        ("xenstore-snoop.bt", BPFTRACE),
        ("xs-latency.bt", XS_LATENCY),
    ] {
        let mut bt = table(text, "@op_name[", "]");
        assert_eq!(bt.remove(&27).as_deref(), Some("XS_UNKNOWN"), "{script}");
        assert_eq!(bt, wire, "{script}");
    }

    let errors = table(TAPSET, "if (errno == ", ")");
    assert_eq!(errors.len(), 16);
    for (errno, name) in &errors {
        let e = XsError::from_errno(*errno).unwrap_or_else(|| panic!("errno {errno}"));
        assert_eq!(e.name(), name);
    }
}

/// Where systemtap is installed (.ci/setup installs it), the tapset
/// also goes through stap's pass 2 (parse and elaborate) against the real
/// shim's probe notes: every alias resolves and every field has a type.
/// stap insists on a kernel build tree even for pass 2; a stub one is
/// enough because nothing is compiled.
#[test]
fn tapset_elaborates_with_stap_when_installed() {
    let Ok(version) = std::process::Command::new("stap").arg("-V").output() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "under CI stap must be installed (.ci/setup does)"
        );
        eprintln!("\n*** tapset_elaborates_with_stap_when_installed: no stap, only the static checks ran ***\n");
        return;
    };
    assert!(version.status.success());
    let tree = crate::common::stap::stub_kernel_tree();
    let shim_dir = crate::common::bin("xenstored-shim")
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        shim_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Every contract field of every alias, and the tapset's own names.
    let mut uses = format!("probe {PROVIDER}.* {{ println(op_name) }}\n");
    uses += &format!("probe {PROVIDER}.response {{ println(error) }}\n");
    uses += &format!("probe {PROVIDER}.reply {{ println(error) }}\n");
    for (probe, fields) in contract() {
        let names: Vec<String> = fields.into_keys().collect();
        uses += &format!(
            "probe {PROVIDER}.{probe} {{ println({}) }}\n",
            names.join(", ")
        );
    }
    let out = std::process::Command::new("stap")
        .args(["-p2", "-r"])
        .arg(&tree)
        .arg("-I")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts"))
        .arg("-e")
        .arg(&uses)
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
