//! The BPF programs take the probe contract from xenstore_contract.h, which
//! build.rs generates from xenstore-proto (`xenstore_proto::bpf`), and the
//! compiled programs' record layouts are checked against Rust's by the
//! header's static assertions and the unit tests beside the skeletons.
//! What generation cannot cover is what the C does by hand: this checks
//! that it reads no argument register, unpacks no packed argument and
//! defines none of the header's names itself, and that a shift changed in
//! the header changes the compiled programs.

use regex::Regex;
use std::path::Path;
use xenstore_proto::bpf::contract_header;
use xenstore_proto::{Field, Ident};

const PROGRAMS: [(&str, &str); 2] = [
    (
        "xssnoop.bpf.c",
        include_str!("../src/capture/bpf/xssnoop.bpf.c"),
    ),
    (
        "xsmetrics.bpf.c",
        include_str!("../src/capture/bpf/xsmetrics.bpf.c"),
    ),
];

/// A program without its comments, which quote code they do not run.
fn code_of(program: &str) -> String {
    let block = Regex::new(r"(?s)/\*.*?\*/").unwrap();
    let line = Regex::new(r"//[^\n]*").unwrap();
    line.replace_all(&block.replace_all(program, ""), "")
        .into_owned()
}

fn matches(pattern: &str, code: &str) -> Vec<String> {
    Regex::new(pattern)
        .unwrap()
        .find_iter(code)
        .map(|m| m.as_str().to_string())
        .collect()
}

#[test]
fn the_programs_include_the_generated_header() {
    for (name, program) in PROGRAMS {
        assert!(
            program.contains("#include \"xenstore_contract.h\""),
            "{name} does not include xenstore_contract.h"
        );
    }
}

/// Registers are the header's `ARG_<NAME>(ctx)`.
#[test]
fn no_program_reads_an_argument_register_by_hand() {
    for (name, program) in PROGRAMS {
        let reads = matches(r"ctx\s*->\s*\w+", &code_of(program));
        assert!(reads.is_empty(), "{name} reads {reads:?}: use ARG_*(ctx)");
    }
}

/// Fields are the header's `IDENT_DOM(v)`, `RESPONSE_EXTRA_ERRNO(v)`, ...
#[test]
fn no_program_unpacks_a_packed_argument_by_hand() {
    for (name, program) in PROGRAMS {
        let unpacked = matches(
            r"\b(ident|client|extra)\s*(>>|&[^&])|(>>|[^&]&)\s*(ident|client|extra)\b",
            &code_of(program),
        );
        assert!(
            unpacked.is_empty(),
            "{name} unpacks {unpacked:?} by hand: use the header's field macros"
        );
    }
}

/// A name the header generates, defined again in a program, would be a
/// hand-kept copy (or fail to compile only when the values differ).
#[test]
fn no_program_defines_a_name_the_header_generates() {
    let header = contract_header();
    let defined =
        Regex::new(r"(?m)^#define (\w+)|^enum (\w+) \{|^struct (\w+) \{|^\t([A-Z]\w*) = ").unwrap();
    let names: Vec<&str> = defined
        .captures_iter(&header)
        .filter_map(|c| (1..=4).find_map(|i| c.get(i)).map(|m| m.as_str()))
        .filter(|n| *n != "XENSTORE_CONTRACT_H")
        .collect();
    assert!(
        names.contains(&"K_REPLY") && names.contains(&"stats_record"),
        "{names:?}"
    );
    for (name, program) in PROGRAMS {
        let code = code_of(program);
        for generated in &names {
            let n = regex::escape(generated);
            let again = matches(
                &format!(r"#define\s+{n}\b|\b(enum|struct)\s+{n}\s*\{{|\b{n}\s*=[^=]"),
                &code,
            );
            assert!(
                again.is_empty(),
                "{name} defines {again:?}, which xenstore_contract.h generates"
            );
        }
    }
}

/// The instructions of `program` compiled with `header` as
/// xenstore_contract.h (in `dir`, the same path each time, so only the
/// header differs): the bytes of its uprobe sections.
fn compiled(program: &str, header: &str, dir: &Path) -> Vec<u8> {
    std::fs::write(dir.join("xenstore_contract.h"), header).unwrap();
    let obj = dir.join("program.o");
    let multiarch = format!("-I/usr/include/{}-linux-gnu", std::env::consts::ARCH);
    let include = format!("-I{}", dir.display());
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/capture/bpf")
        .join(program);
    libbpf_cargo::SkeletonBuilder::new()
        .source(&source)
        .obj(&obj)
        .clang_args([include.as_str(), multiarch.as_str()])
        .build()
        .unwrap_or_else(|e| panic!("compiling {program} (needs clang): {e:#}"));
    let bytes = std::fs::read(&obj).unwrap();
    let elf = goblin::elf::Elf::parse(&bytes).unwrap();
    let mut code = Vec::new();
    for section in &elf.section_headers {
        let name = elf.shdr_strtab.get_at(section.sh_name).unwrap_or("");
        if name.starts_with("uprobe") {
            code.extend_from_slice(&bytes[section.file_range().unwrap()]);
        }
    }
    assert!(!code.is_empty(), "{program}: no uprobe section");
    code
}

/// No hand-kept copy left: moving `op` one bit in the header changes what
/// both programs compile to (each uses it: the --op filter, the metrics
/// per op), while the same header compiles to the same code.
#[test]
fn a_changed_shift_in_the_header_changes_the_compiled_programs() {
    let dir = std::env::temp_dir().join(format!("xs-bpf-contract-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let header = contract_header();
    let define = |f: Field| format!("#define IDENT_OP(v) {}", f.c_expr("(v)"));
    let moved = Field {
        shift: Ident::OP.shift + 1,
        ..Ident::OP
    };
    assert!(header.contains(&define(Ident::OP)), "{header}");
    let altered = header.replace(&define(Ident::OP), &define(moved));
    for (program, _) in PROGRAMS {
        let code = compiled(program, &header, &dir);
        assert_eq!(
            code,
            compiled(program, &header, &dir),
            "{program} compiles reproducibly"
        );
        assert_ne!(
            code,
            compiled(program, &altered, &dir),
            "{program} compiles the same with IDENT_OP moved: it unpacks op by hand"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
