//! The soak's CI run: `xenstore-bench soak` for 15 s (2 MiB snooper rings, so
//! a stopped snooper drains in seconds) against the debug
//! builds, with a fresh seed each run (printed: replay a failure with
//! `xenstore-bench soak --seed N --secs 15`). The minutes-long run is the
//! same command with a larger --secs (BENCHMARKS.md, "Soak").

#[test]
fn soak_short() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || !std::path::Path::new("/sys/kernel/tracing/uprobe_events").exists() {
        if std::env::var_os("CI").is_some() {
            panic!("soak_short needs root and tracefs, and CI is set: it must run");
        }
        eprintln!("\n*** SKIPPING soak_short: not root or no tracefs (CI unset) ***\n");
        return;
    }
    let out = xenstore_testkit::process::output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_xenstore-bench"))
            .args(["soak", "--secs", "15", "--snoop-ring-mb", "2", "--shim"])
            .arg(xenstore_testkit::bin("xenstored-shim"))
            .arg("--snoop")
            .arg(xenstore_testkit::bin("xenstore-snoop")),
        std::time::Duration::from_secs(600),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the soak failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("\nsoak: OK\n"), "{stdout}");
}
