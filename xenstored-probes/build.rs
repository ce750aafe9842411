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
/// as Rust constants (`PROVIDER`, `DECLARED`) for src/sdt.rs, which checks
/// every probe site against them; and one semaphore static a probe, named
/// as the probe, for src/probes.rs.
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

/// The C glue between the Xen backend and Xen's own headers (src/xen/glue.c):
/// compiled against xenctrl.h and the Linux xen/sys ioctl headers when
/// libxen-dev is installed, as a stub that reports their absence otherwise,
/// so the daemon builds and runs anywhere.
fn xen_glue() {
    println!("cargo:rerun-if-changed=src/xen/glue.c");
    let mut build = cc::Build::new();
    build.file("src/xen/glue.c").warnings(true);
    let include = ["/usr/include", "/usr/local/include"]
        .into_iter()
        .find(|dir| Path::new(dir).join("xenctrl.h").exists());
    match include {
        Some(_) => {
            build.define("XSS_HAVE_XEN", None);
            // dlopen the very library whose header the glue was built
            // against: libxenctrl's ABI (and soname) changes every release.
            let soname = xenctrl_soname().unwrap_or_else(|| "libxenctrl.so".into());
            build.define("XSS_XENCTRL_SONAME", Some(format!("\"{soname}\"").as_str()));
        }
        None => println!(
            "cargo:warning=xenctrl.h not found (install libxen-dev): the Xen backend will refuse to start"
        ),
    }
    build.compile("xss_xen_glue");
    println!("cargo:rustc-link-lib=dl");
}

/// Where libxenctrl.so (the development symlink) points, e.g. libxenctrl.so.4.17.
fn xenctrl_soname() -> Option<String> {
    let dirs = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/lib",
    ];
    dirs.iter().find_map(|dir| {
        let link = Path::new(dir).join("libxenctrl.so");
        let target = std::fs::read_link(&link).ok()?;
        println!("cargo:rerun-if-changed={}", link.display());
        Some(target.file_name()?.to_str()?.to_string())
    })
}
