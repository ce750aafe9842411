use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=src/xenstore.d");
    // Without the `probes` feature there is no provider to generate.
    #[cfg(feature = "probes")]
    usdt::Builder::new("src/xenstore.d").build().unwrap();
    xen_glue();
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
