//! The BPF program is C, so it cannot use xenstore-proto: it names the probe
//! kinds, reads the arguments' registers and unpacks bit fields by hand.
//! This reads xssnoop.bpf.c and checks each of those against the crate, so
//! a constant changed on one side only fails here rather than in a live
//! trace.

use regex::Regex;
use xenstore_proto::probe::{Extra, ARG_REGISTERS};
use xenstore_proto::{Client, Field, Ident, Probe, STRINGS_MAX};

const PROGRAM: &str = include_str!("../src/capture/bpf/xssnoop.bpf.c");
/// `--metrics`' program: it unpacks the same fields and names probe kinds.
const METRICS_PROGRAM: &str = include_str!("../src/capture/bpf/xsmetrics.bpf.c");

/// The program without its comments, which quote code they do not run.
fn code() -> String {
    code_of(PROGRAM)
}

fn code_of(program: &str) -> String {
    let block = Regex::new(r"(?s)/\*.*?\*/").unwrap();
    let line = Regex::new(r"//[^\n]*").unwrap();
    line.replace_all(&block.replace_all(program, ""), "")
        .into_owned()
}

#[test]
fn probe_kinds_are_the_crates_probes_in_order() {
    let code = code();
    let body = Regex::new(r"enum kind\s*\{([^}]*)\}")
        .unwrap()
        .captures(&code)
        .expect("xssnoop.bpf.c declares `enum kind`")[1]
        .to_string();
    let kinds: Vec<String> = body
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_string)
        .collect();
    let want: Vec<String> = Probe::ALL
        .iter()
        .map(|p| format!("K_{}", p.name().to_uppercase()))
        .collect();
    assert_eq!(kinds, want, "enum kind vs Probe::ALL (the attach cookie)");
}

#[test]
fn arguments_are_read_from_the_contracts_registers() {
    let code = code();
    let args = Probe::Reply.args();
    let index = |name: &str| args.iter().position(|(n, _)| *n == name);
    let mut reads: Vec<(String, String)> = Vec::new();
    // `ident = ctx->rsi`, `r->serial = ctx->rdi`, `strs[2] = ctx->r10`.
    let assign = Regex::new(r"(\w+)(?:\[(\d)\])?\s*=\s*ctx->(\w+)").unwrap();
    for c in assign.captures_iter(&code) {
        let name = match c.get(2) {
            Some(i) => format!("str{}", i.as_str().parse::<u32>().unwrap() + 1),
            None => c[1].to_string(),
        };
        reads.push((name, c[3].to_string()));
    }
    // `strs[3] = { ctx->r8, ctx->r9, 0 }`: str1, str2, ...
    let list = Regex::new(r"strs\[\d\]\s*=\s*\{([^}]*)\}").unwrap();
    for c in list.captures_iter(&code) {
        for (i, item) in c[1].split(',').enumerate() {
            if let Some(reg) = item.trim().strip_prefix("ctx->") {
                reads.push((format!("str{}", i + 1), reg.to_string()));
            }
        }
    }
    for (name, _) in args {
        assert!(
            reads.iter().any(|(n, _)| n == name),
            "xssnoop.bpf.c reads no register for `{name}` (found {reads:?})"
        );
    }
    for (name, reg) in &reads {
        let i = index(name).unwrap_or_else(|| panic!("ctx->{reg} read into `{name}`, no argument"));
        assert_eq!(
            reg, ARG_REGISTERS[i],
            "`{name}` is argument {i}: xenstore_proto::probe::ARG_REGISTERS says {}",
            ARG_REGISTERS[i]
        );
    }
}

#[test]
fn bit_fields_are_the_crates_shifts_and_widths() {
    // What the in-kernel filters need: -d, --op, -p and -x.
    let wants = [
        ("ident", Ident::DOM.name),
        ("ident", Ident::OP.name),
        ("client", Client::PID.name),
        ("extra", "errno"),
    ];
    check_bit_fields("xssnoop.bpf.c", &code(), &wants);
}

/// The metrics program counts by domain, op and error: the same fields.
#[test]
fn the_metrics_program_unpacks_the_crates_fields_and_kinds() {
    let code = code_of(METRICS_PROGRAM);
    let wants = [
        ("ident", Ident::DOM.name),
        ("ident", Ident::OP.name),
        ("extra", "errno"),
    ];
    check_bit_fields("xsmetrics.bpf.c", &code, &wants);
    // `K_REPLY = 6`: the attach cookie is the probe's place in the list.
    let kind = Regex::new(r"K_(\w+)\s*=\s*(\d+)").unwrap();
    let mut named = 0;
    for c in kind.captures_iter(&code) {
        let at: usize = c[2].parse().unwrap();
        let probe = Probe::ALL.get(at).map(|p| p.name().to_uppercase());
        assert_eq!(
            probe.as_deref(),
            Some(&c[1]),
            "xsmetrics.bpf.c says K_{} = {at}; Probe::ALL[{at}] is {probe:?}",
            &c[1]
        );
        named += 1;
    }
    assert!(named >= 3, "xsmetrics.bpf.c names {named} probe kinds");
}

fn check_bit_fields(program: &str, code: &str, wants: &[(&str, &str)]) {
    let extra = match Probe::Reply.extra() {
        Extra::Packed(fields) => fields,
        other => panic!("reply's extra is {other:?}, not packed"),
    };
    let fields_of = |arg: &str| -> &[Field] {
        match arg {
            "ident" => &Ident::FIELDS,
            "client" => &Client::FIELDS,
            "extra" => extra,
            _ => unreachable!(),
        }
    };
    // `(ident >> 16) & 0xffff` and `ident & 0xffff`.
    let shifted =
        Regex::new(r"\(\s*(ident|client|extra)\s*>>\s*(\d+)\s*\)\s*&\s*(0x[0-9a-fA-F]+)").unwrap();
    let plain = Regex::new(r"[^>\w](ident|client|extra)\s*&\s*(0x[0-9a-fA-F]+)").unwrap();
    let code = code.to_string();
    let mut found: Vec<(String, &str)> = Vec::new();
    let mut check = |arg: &str, shift: u32, mask: &str| {
        let mask = u64::from_str_radix(mask.trim_start_matches("0x"), 16).unwrap();
        let field = fields_of(arg)
            .iter()
            .find(|f| f.shift == shift && f.mask() == mask)
            .unwrap_or_else(|| {
                panic!(
                    "{program} takes ({arg} >> {shift}) & {mask:#x}, which is no field of \
                     {arg} in xenstore-proto: {:?}",
                    fields_of(arg)
                )
            });
        found.push((arg.to_string(), field.name));
    };
    for c in shifted.captures_iter(&code) {
        check(&c[1], c[2].parse().unwrap(), &c[3]);
    }
    for c in plain.captures_iter(&code) {
        check(&c[1], 0, &c[2]);
    }
    for want in wants {
        assert!(
            found.iter().any(|(a, f)| a == want.0 && *f == want.1),
            "{program} no longer takes {}.{} (found {found:?})",
            want.0,
            want.1
        );
    }
}

#[test]
fn each_string_has_room_for_all_a_probe_sends() {
    let str_max: usize = Regex::new(r"#define STR_MAX (\d+)")
        .unwrap()
        .captures(&code())
        .expect("xssnoop.bpf.c defines STR_MAX")[1]
        .parse()
        .unwrap();
    assert!(
        str_max >= STRINGS_MAX,
        "STR_MAX {str_max} < xenstore_proto::STRINGS_MAX {STRINGS_MAX}"
    );
}

/// `stats_batch`'s records: the C struct has the crate's fields at the
/// crate's offsets and sizes, its kinds are the crate's codes, and its
/// batch is the crate's size.
#[test]
fn the_metrics_programs_batch_record_is_the_crates() {
    use xenstore_proto::stats::{StatsKind, BATCH_RECORDS, RECORD_FIELDS, RECORD_SIZE};
    let code = code_of(METRICS_PROGRAM);
    let body = Regex::new(r"struct stats_record\s*\{([^}]*)\}")
        .unwrap()
        .captures(&code)
        .expect("xsmetrics.bpf.c declares `struct stats_record`")[1]
        .to_string();
    let member = Regex::new(r"__u(8|16|32|64)\s+(\w+)\s*;").unwrap();
    let mut offset = 0usize;
    let mut fields = Vec::new();
    for c in member.captures_iter(&body) {
        let size = c[1].parse::<usize>().unwrap() / 8;
        offset = offset.next_multiple_of(size); // C's natural alignment
        fields.push((c[2].to_string(), offset, size));
        offset += size;
    }
    let want: Vec<(String, usize, usize)> = RECORD_FIELDS
        .iter()
        .map(|&(name, at, size)| (name.to_string(), at, size))
        .collect();
    assert_eq!(fields, want, "struct stats_record vs StatsRecord");
    assert_eq!(offset, RECORD_SIZE, "struct stats_record's size");
    let define = Regex::new(r"#define BATCH_RECORDS (\d+)").unwrap();
    let records: usize = define.captures(&code).expect("#define BATCH_RECORDS")[1]
        .parse()
        .unwrap();
    assert_eq!(records, BATCH_RECORDS);
    let kind = Regex::new(r"\bS_(\w+)\s*=\s*(\d+)").unwrap();
    let kinds: Vec<(String, u8)> = kind
        .captures_iter(&code)
        .map(|c| (c[1].to_lowercase(), c[2].parse().unwrap()))
        .collect();
    let want: Vec<(String, u8)> = StatsKind::ALL
        .iter()
        .map(|k| (k.name().to_string(), *k as u8))
        .collect();
    assert_eq!(kinds, want, "enum stats_kind vs StatsKind");
}
