//! One boot of tests/xen/run and what it left: its steps and files, and
//! its logs for a failing assertion's message.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

/// What one boot left in its --out directory.
pub struct Run {
    pub out: PathBuf,
    /// Step name -> (ok|fail, seconds).
    pub steps: BTreeMap<String, (String, f64)>,
    /// The run's logs, for a failing assertion's message.
    pub report: String,
}

impl Run {
    pub fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.out.join(name)).unwrap_or_default()
    }

    /// Every one of `steps` passed under `daemon`.
    pub fn assert_steps(&self, daemon: &str, steps: &[&str]) {
        let failed: Vec<String> = steps
            .iter()
            .filter(|s| self.steps.get(**s).map(|(r, _)| r.as_str()) != Some("ok"))
            .map(|s| format!("{s}: {:?}", self.steps.get(*s)))
            .collect();
        assert!(
            failed.is_empty(),
            "{daemon}: failed steps {failed:?}\n{}",
            self.report
        );
    }

    /// The domid a guest printed on its console.
    pub fn domid(&self, guest: &str) -> String {
        let console = self.file(&format!("guest-{guest}.log"));
        console
            .lines()
            .find_map(|l| l.strip_prefix("GUEST domid="))
            .unwrap_or_else(|| panic!("{guest} printed no domid\n{}", self.report))
            .trim()
            .to_string()
    }

    /// Only Domain-0 left, in `xl list` as Xen sees it (a zombie shows as
    /// "(null)").
    pub fn assert_only_dom0(&self, file: &str) {
        let list = self.file(file);
        let domains: Vec<&str> = list
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(domains, ["Domain-0"], "{file}:\n{list}\n{}", self.report);
    }
}

/// Boots `release` with tests/xen/run's `args` into target/tmp/`name`;
/// the caller holds the slot (tests/vm/slots.rs). With XS_VM_REUSE=1 the
/// last boot's results are checked again, without booting (for work on
/// the checks).
pub fn boot(name: &str, release: &str, args: &[&str]) -> Run {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let status = if std::env::var_os("XS_VM_REUSE").is_some_and(|v| v == "1") {
        "reused".to_string()
    } else {
        let status = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/xen/run"))
            .args(["--xen", release])
            .args(args)
            .arg("--out")
            .arg(&out)
            .args(["--timeout", "1500"])
            .status()
            .expect("run tests/xen/run");
        status.to_string()
    };
    let text = |f: &str| std::fs::read_to_string(out.join(f)).unwrap_or_default();
    let steps_text = text("steps");
    let report = format!(
        "tests/xen/run {args:?}: {status}\n--- {}/steps\n{steps_text}--- times\n{}--- observed\n{}\
         --- dom0.log\n{}--- xenstored.out\n{}--- syslog.txt\n{}--- snoop.err\n{}\
         --- serial.log (HARNESS lines)\n{}",
        out.display(),
        text("times"),
        text("observed"),
        text("dom0.log"),
        text("xenstored.out"),
        text("syslog.txt"),
        text("snoop.err"),
        text("serial.log")
            .lines()
            .filter(|l| l.contains("HARNESS") || l.contains("(XEN)"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    eprintln!("{report}");
    assert!(
        steps_text.lines().any(|l| l.starts_with("total done")),
        "the VM did not finish its scenario\n{report}"
    );
    let steps = steps_text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next()?.to_string();
            let result = w.next()?.to_string();
            Some((name, (result, w.next()?.parse().ok()?)))
        })
        .collect();
    Run { out, steps, report }
}

/// Fetches `release`'s parts and builds dom0's base initramfs once, before
/// boots side by side would race to build it.
pub fn prepare(release: &str) {
    let prepared = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/xen/prepare"))
        .args(["--xen", release])
        .status()
        .expect("run tests/xen/prepare");
    assert!(
        prepared.success(),
        "tests/xen/prepare --xen {release}: {prepared}"
    );
}
