use std::path::{Path, PathBuf};

fn main() {
    declared_probes();
    nop_size();
    xen_glue();
}

/// XSS_SDT_NOP1=1 builds the probe sites as 1-byte nops, as usdt 0.6 did,
/// for the benchmark that compares them with the 5-byte ones; never for
/// use.
fn nop_size() {
    println!("cargo::rustc-check-cfg=cfg(sdt_nop1)");
    println!("cargo:rerun-if-env-changed=XSS_SDT_NOP1");
    if std::env::var_os("XSS_SDT_NOP1").is_some_and(|v| v == "1") {
        println!("cargo:rustc-cfg=sdt_nop1");
    }
}

/// xenstore.d's provider and probes, with how many arguments each takes,
/// as Rust constants (`PROVIDER`, `DECLARED`) for src/probes/sdt.rs, which checks
/// every probe site against them; and one semaphore static a probe, named
/// as the probe, for src/probes/mod.rs.
fn declared_probes() {
    println!("cargo:rerun-if-changed=src/xenstore.d");
    let text = std::fs::read_to_string("src/xenstore.d").expect("reading src/xenstore.d");
    // Comments first: the prose names probes too.
    let mut code = String::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find("/*") {
        code.push_str(&rest[..start]);
        let end = rest[start..]
            .find("*/")
            .expect("unterminated comment in xenstore.d");
        rest = &rest[start + end + 2..];
    }
    code.push_str(rest);
    let provider = code
        .split_once("provider ")
        .and_then(|(_, r)| r.split_whitespace().next())
        .expect("xenstore.d names no provider");
    let mut out = format!("/// xenstore.d's provider.\npub const PROVIDER: &str = {provider:?};\n");
    out += "/// xenstore.d's probes: (name, argument count), in order.\n";
    out += "pub const DECLARED: &[(&str, usize)] = &[\n";
    let mut semaphores = String::new();
    for line in code.lines() {
        let Some(decl) = line.trim().strip_prefix("probe ") else {
            continue;
        };
        let (name, args) = decl.split_once('(').expect("probe NAME(ARGS);");
        let (name, count) = (
            name.trim(),
            args.split(',')
                .filter(|a| !a.trim().trim_end_matches(");").is_empty())
                .count(),
        );
        out += &format!("    ({name:?}, {count}),\n");
        // Where sys/sdt.h puts semaphores; tools find them by the note's address.
        semaphores += &format!(
            "#[link_section = \".probes\"]\npub static {name}: Semaphore = Semaphore::new();\n"
        );
    }
    out += "];\n";
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    std::fs::write(out_dir.join("xenstore_d.rs"), out).expect("writing xenstore_d.rs");
    std::fs::write(out_dir.join("semaphores.rs"), semaphores).expect("writing semaphores.rs");
}

/// The C glue between the Xen backend and Xen's C side (src/host/xen/glue.c):
/// libxenctrl through dlopen on the ABI all supported releases share
/// (xenctrl_abi.h, checked against the installed xenctrl.h when there is
/// one), and the Linux xen/sys ioctl numbers for the tests when libxen-dev
/// is installed; without it those are stubs and the daemon still builds.
fn xen_glue() {
    for file in ["glue.c", "xenctrl_abi.h", "xenctrl_abi_check.c"] {
        println!("cargo:rerun-if-changed=src/host/xen/{file}");
    }
    let mut build = cc::Build::new();
    build.file("src/host/xen/glue.c").warnings(true);
    let have_headers = ["/usr/include", "/usr/local/include"]
        .iter()
        .any(|dir| Path::new(dir).join("xenctrl.h").exists());
    if have_headers {
        build.define("XSS_HAVE_XEN", None);
    } else {
        println!(
            "cargo:warning=xenctrl.h not found (install libxen-dev): xenctrl_abi.h is not checked at build time"
        );
    }
    build.compile("xss_xen_glue");
    println!("cargo:rustc-link-lib=dl");
}
