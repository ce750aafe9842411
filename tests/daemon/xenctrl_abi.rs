//! The one shim binary talks to the libxenctrl of whichever Xen release the
//! host runs (xenstored-probes/src/host/xen/xenctrl_abi.h): proven here by
//! compiling xenctrl_abi_check.c's static assertions against the headers of
//! Xen 4.17 (Debian 12's libxen-dev, installed by .ci/setup) and of Xen
//! 4.20 (Debian 13's libxen-dev, downloaded by tests/xen/apt-trixie and
//! extracted under target/, nothing installed).

use std::path::{Path, PathBuf};
use std::process::Command;

const CHECK_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/xenstored-probes/src/host/xen");

/// The work directory tests/xen uses (XEN_WORK, default target/xen).
fn xen_work() -> PathBuf {
    std::env::var_os("XEN_WORK").map_or_else(
        || PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/xen")),
        PathBuf::from,
    )
}

/// True when the test can run: root (apt-get download), a C compiler and
/// the host's libxen-dev. A loud skip without CI, a failure under CI.
fn prerequisites(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { geteuid() } == 0;
    let mut missing: Vec<&str> = ["/usr/bin/cc", "/usr/bin/apt-get", "/usr/include/xenctrl.h"]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    if !root {
        missing.push("root");
    }
    if missing.is_empty() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{test}: missing {missing:?} (run .ci/setup as root), and CI is set: this test must run");
    }
    eprintln!("\n*** SKIPPING {test}: missing {missing:?} (CI unset; run .ci/setup as root) ***\n");
    false
}

extern "C" {
    fn geteuid() -> u32;
}

/// Debian 13's libxen-dev headers (Xen 4.20), extracted once (one test
/// at a time: both tests want them).
fn trixie_headers() -> PathBuf {
    static ONCE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONCE.lock().unwrap_or_else(|e| e.into_inner());
    let work = xen_work();
    let debs = work.join("debs-libxen-dev-4.20");
    let root = work.join("libxen-dev-4.20");
    let include = root.join("usr/include");
    if include.join("xenctrl.h").exists() {
        return include;
    }
    let status = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/xen/apt-trixie"))
        .arg(&debs)
        .arg("libxen-dev")
        .status()
        .expect("run tests/xen/apt-trixie");
    assert!(
        status.success(),
        "tests/xen/apt-trixie libxen-dev: {status}"
    );
    let deb = std::fs::read_dir(&debs)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("libxen-dev_")
        })
        .expect("libxen-dev's .deb");
    let status = Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(&root)
        .status()
        .expect("run dpkg-deb");
    assert!(status.success(), "dpkg-deb -x {}: {status}", deb.display());
    include
}

/// The domctl interface version a header tree belongs to (0x15: Xen 4.17,
/// 0x17: Xen 4.19 to 4.21).
fn domctl_version(include: &Path) -> String {
    let text = std::fs::read_to_string(include.join("xen/domctl.h")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("#define XEN_DOMCTL_INTERFACE_VERSION"))
        .expect("XEN_DOMCTL_INTERFACE_VERSION")
        .trim()
        .to_string()
}

/// Compiles the check (in `dir`, next to its xenctrl_abi.h) against the
/// xenctrl.h under `include`: Ok, or the compiler's errors.
fn compile_check(dir: &Path, include: &Path) -> Result<(), String> {
    let out = Command::new("cc")
        .args(["-fsyntax-only", "-Wall", "-Werror", "-I"])
        .arg(include)
        .arg(dir.join("xenctrl_abi_check.c"))
        .output()
        .expect("run cc");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn the_shared_xenctrl_abi_holds_for_xen_4_17_and_4_20() {
    if !prerequisites("the_shared_xenctrl_abi_holds_for_xen_4_17_and_4_20") {
        return;
    }
    let host = PathBuf::from("/usr/include");
    let trixie = trixie_headers();
    // Two different releases' headers, or the test proves nothing.
    assert_eq!(
        domctl_version(&host),
        "0x00000015",
        "the host's libxen-dev is not Xen 4.17's"
    );
    assert_eq!(
        domctl_version(&trixie),
        "0x00000017",
        "trixie's libxen-dev is not Xen 4.20's"
    );
    for include in [&host, &trixie] {
        if let Err(errors) = compile_check(Path::new(CHECK_DIR), include) {
            panic!(
                "xenctrl_abi.h does not hold for {}:\n{errors}",
                include.display()
            );
        }
    }
}

/// The check can fail: a copy of xenctrl_abi.h that puts `flags` elsewhere
/// is refused by both releases' headers, with the assertion's reason.
#[test]
fn the_abi_check_refuses_a_wrong_layout() {
    if !prerequisites("the_abi_check_refuses_a_wrong_layout") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("xss-xenctrl-abi-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        Path::new(CHECK_DIR).join("xenctrl_abi_check.c"),
        dir.join("xenctrl_abi_check.c"),
    )
    .unwrap();
    let header = std::fs::read_to_string(Path::new(CHECK_DIR).join("xenctrl_abi.h")).unwrap();
    let wrong = header.replace(
        "#define XSS_DOMINFO_FLAGS_OFFSET 4",
        "#define XSS_DOMINFO_FLAGS_OFFSET 8",
    );
    assert_ne!(
        wrong, header,
        "xenctrl_abi.h no longer defines the flags offset as 4"
    );
    std::fs::write(dir.join("xenctrl_abi.h"), wrong).unwrap();
    for include in [PathBuf::from("/usr/include"), trixie_headers()] {
        let errors = compile_check(&dir, &include).expect_err("a wrong offset compiled");
        assert!(errors.contains("xc_domaininfo_t.flags moved"), "{errors}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
