//! The C header xenstore-snoop's BPF programs include, generated from this
//! crate (as libbpf-tools share one .h between a BPF program and its
//! reader): the probe kinds, where each argument is at a probe site, the
//! packed fields, the flags, the limits and the record layouts.
//! xenstore-snoop's build.rs writes [`contract_header`] where it compiles
//! the programs, so changing this crate changes what they compile to;
//! `cargo run -p xenstore-proto --example bpf-header` prints it.

use crate::c_struct::{c_struct, declare};
use crate::packing::{flag, Client, CutExtra, Field, Ident, RequestExtra, ResponseExtra};
use crate::probe::{Probe, TxOutcome, ARG_REGISTERS, STR1_MAX, STRINGS_MAX};
use crate::stats::{StatsKind, StatsRecord, BATCH_RECORDS, RECORD_SIZE};

/// Room for each string in a [`SnoopRecord`]: the daemon keeps all of a
/// probe's strings under [`STRINGS_MAX`]; a power of two, so the program
/// can mask offsets into `str`.
pub const STR_MAX: usize = 4096;
const _: () = assert!(STR_MAX >= STRINGS_MAX && STR_MAX.is_power_of_two());

c_struct! {
    /// What xssnoop.bpf.c writes into its ring buffer for one firing: the
    /// first `str` bytes the strings take, not the whole struct.
    pub struct SnoopRecord as "record" {
        /// CLOCK_MONOTONIC ns, 0 when the output shows no times.
        pub mono_ns: u64,
        pub serial: u64,
        pub ident: u64,
        pub client: u64,
        pub extra: u64,
        /// `reply`'s latency_ns, else 0.
        pub latency_ns: u64,
        /// The probe's [`Probe::ALL`] index (the attach cookie).
        pub kind: u32,
        /// Bytes of each string, its NUL included (0: none).
        pub len: [u16; 3],
        /// Where in `str` each string starts.
        pub at: [u16; 3],
        pub str: [u8; 4 * STR_MAX],
    }
}

/// Bytes of a [`SnoopRecord`] before its strings.
pub const SNOOP_HEADER_LEN: usize = std::mem::offset_of!(SnoopRecord, str);

/// The probe's attach cookie: its place in [`Probe::ALL`].
pub fn cookie_of(probe: Probe) -> u32 {
    Probe::ALL
        .iter()
        .position(|&p| p == probe)
        .expect("every probe is in Probe::ALL") as u32
}

/// The probe whose firings carry `cookie`.
pub fn probe_of(cookie: u32) -> Option<Probe> {
    Probe::ALL.get(cookie as usize).copied()
}

/// The header's text (the same for the same crate).
pub fn contract_header() -> String {
    let mut h = String::from(
        "/* Generated from xenstore-proto by xenstore_proto::bpf::contract_header():\n \
         * do not edit (xenstore-snoop's build.rs writes it where the programs are\n \
         * compiled). Needs linux/types.h. */\n\
         #ifndef XENSTORE_CONTRACT_H\n#define XENSTORE_CONTRACT_H\n\n",
    );
    h += "/* Probe kinds: the attach cookie, a probe's place in Probe::ALL. */\n";
    let kinds = Probe::ALL.map(|p| (upper(p.name()), cookie_of(p) as u64));
    h += &c_enum("probe_kind", "K_", &kinds);

    h += "\n/* Each probe argument where the probe site has it (ARG_REGISTERS). */\n";
    let mut named: Vec<&str> = Vec::new();
    for probe in Probe::ALL {
        for (i, (name, _)) in probe.args().iter().enumerate() {
            if !named.contains(name) {
                named.push(name);
                h += &format!(
                    "#define ARG_{}(ctx) ((ctx)->{})\n",
                    upper(name),
                    ARG_REGISTERS[i]
                );
            }
        }
    }

    h += "\n/* The packed arguments' fields (xenstore_proto::packing). */\n";
    let packings: [(&str, &[Field]); 5] = [
        ("IDENT", &Ident::FIELDS),
        ("CLIENT", &Client::FIELDS),
        ("REQUEST_EXTRA", &RequestExtra::FIELDS),
        ("RESPONSE_EXTRA", &ResponseExtra::FIELDS),
        ("CUT_EXTRA", &CutExtra::FIELDS),
    ];
    for (packing, fields) in packings {
        for f in fields {
            h += &format!(
                "#define {packing}_{}(v) {}\n",
                upper(f.name),
                f.c_expr("(v)")
            );
        }
    }
    h += "/* Bits of the flags fields. */\n";
    for (name, bit) in [
        ("STR1_TRUNCATED", flag::STR1_TRUNCATED),
        ("STR2_TRUNCATED", flag::STR2_TRUNCATED),
        ("STR3_TRUNCATED", flag::STR3_TRUNCATED),
    ] {
        h += &format!("#define FLAG_{name} {bit:#x}\n");
    }

    h += "\n/* The daemon's string limits: all of a probe's strings, str1. */\n";
    h += &format!("#define STRINGS_MAX {STRINGS_MAX}\n#define STR1_MAX {STR1_MAX}\n");
    h += "\n/* tx_end's extra. */\n";
    let outcomes = TxOutcome::ALL.map(|o| (upper(o.name()), o.code()));
    h += &c_enum("tx_outcome", "TX_", &outcomes);
    h += &format!("#define TX_OUTCOMES {}\n", TxOutcome::ALL.len());

    h += "\n/* stats_batch: up to BATCH_RECORDS records a firing. */\n";
    h += &format!("#define BATCH_RECORDS {BATCH_RECORDS}\n");
    let stats_kinds = StatsKind::ALL.map(|k| (upper(k.name()), k as u64));
    h += &c_enum("stats_kind", "S_", &stats_kinds);
    h += &declare(StatsRecord::C_NAME, StatsRecord::C_FIELDS, RECORD_SIZE);

    h += "\n/* xssnoop.bpf.c's ring record (xenstore_proto::bpf::SnoopRecord). */\n";
    h += &format!("#define STR_MAX {STR_MAX}\n");
    h += &declare(
        SnoopRecord::C_NAME,
        SnoopRecord::C_FIELDS,
        std::mem::size_of::<SnoopRecord>(),
    );
    h += "\n#endif\n";
    h
}

fn upper(name: &str) -> String {
    name.to_uppercase()
}

fn c_enum(tag: &str, prefix: &str, values: &[(String, u64)]) -> String {
    let mut c = format!("enum {tag} {{\n");
    for (name, value) in values {
        c += &format!("\t{prefix}{name} = {value},\n");
    }
    c + "};\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_round_trip() {
        for p in Probe::ALL {
            assert_eq!(probe_of(cookie_of(p)), Some(p));
        }
        assert_eq!(probe_of(Probe::ALL.len() as u32), None);
    }

    /// Spot checks of the generated C against the crate's values.
    #[test]
    fn the_header_says_the_crates_values() {
        let h = contract_header();
        for line in [
            "\tK_REPLY = 6,",
            "#define ARG_IDENT(ctx) ((ctx)->rsi)",
            "#define ARG_LATENCY_NS(ctx) ((ctx)->r11)",
            "#define ARG_ELAPSED_NS(ctx) ((ctx)->r10)",
            "#define IDENT_OP(v) (((v) >> 16) & 0xffff)",
            "#define RESPONSE_EXTRA_ERRNO(v) (((v) >> 32) & 0xffff)",
            "#define CLIENT_PID(v) ((v) & 0xffffffff)",
            "#define FLAG_STR3_TRUNCATED 0x4",
            "\tTX_DROPPED = 3,",
            "\t__u16 len[3];",
            "\t__u8 str[16384];",
            "_Static_assert(__builtin_offsetof(struct record, kind) == 48, \"record.kind as in Rust\");",
            "_Static_assert(sizeof(struct stats_record) == 24, \"stats_record's size as in Rust\");",
        ] {
            assert!(h.lines().any(|l| l == line), "no `{line}` in:\n{h}");
        }
        assert_eq!(SNOOP_HEADER_LEN, 64);
    }
}
