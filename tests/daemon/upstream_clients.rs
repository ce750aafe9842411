//! Debian's clients (xenstore-utils, pyxs) must not tell the shim from C
//! xenstored: tests/conformance/clients/transcript.txt and pyxs_session.py
//! run against both, and every command's exit status, stdout and stderr must
//! match, except lines marked `## differs: <reason>` (see DIFFERENCES.md).
//! C xenstored 4.20 runs them too, held to 4.17's answers (`## xen-4.20:`).
use crate::common::process::{output_within, BoundedOutput, Watched, CLIENT_TIMEOUT};
use crate::common::shim::Shim;
use crate::common::upstream::{Flavor, Peer, Release, Upstream};
use crate::common::TIMEOUT;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/clients")
}

struct Line {
    command: Vec<String>,
    /// Why the shim differs here (`## differs: <reason>`).
    differs: Option<String>,
    /// Why oxenstored differs here (`## oxenstored: <reason>`).
    oxenstored: Option<String>,
    /// Why C xenstored 4.20 differs from 4.17 here (`## xen-4.20: <reason>`).
    xen420: Option<String>,
}

fn transcript() -> Vec<Line> {
    std::fs::read_to_string(clients_dir().join("transcript.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mark = |key: &str| {
                l.split("## ")
                    .find_map(|m| m.strip_prefix(key))
                    .map(|why| why.trim().to_string())
            };
            Line {
                command: l
                    .split("##")
                    .next()
                    .unwrap()
                    .split_whitespace()
                    .map(str::to_string)
                    .collect(),
                differs: mark("differs:"),
                oxenstored: mark("oxenstored:"),
                xen420: mark("xen-4.20:"),
            }
        })
        .collect()
}

fn describe(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs every transcript line against the daemon on `socket`; one rendered
/// result per line.
fn run_transcript(socket: &Path, lines: &[Line]) -> Vec<String> {
    // A background command: the child, its first stdout line, the rest.
    let mut background: Option<(Watched, String)> = None;
    let mut results = Vec::new();
    for line in lines {
        let cmd = &line.command;
        if cmd[0] == "wait" {
            let (child, first) = background.take().expect("wait without &");
            let ended = child.end(TIMEOUT);
            let text =
                |lines: &[String]| lines.iter().map(|l| format!("{l}\n")).collect::<String>();
            let out = std::process::Output {
                status: ended.status,
                stdout: text(&ended.stdout[1..]).into_bytes(),
                stderr: text(&ended.stderr).into_bytes(),
            };
            results.push(format!("first line: {first}{}", describe(&out)));
            continue;
        }
        let (background_start, argv) = match cmd[0].as_str() {
            "&" => (true, &cmd[1..]),
            _ => (false, &cmd[..]),
        };
        let mut command = Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .env("XENSTORED_PATH", socket)
            .stdin(Stdio::null());
        if background_start {
            let child = Watched::spawn(
                &argv[0],
                command.stdout(Stdio::piped()).stderr(Stdio::piped()),
                false,
            );
            // Its first line (the watch's initial event) proves the watch is
            // registered before the next command runs.
            let first = child.line(0, TIMEOUT) + "\n";
            background = Some((child, first));
            results.push(String::new());
        } else {
            let out = output_within(&mut command, CLIENT_TIMEOUT);
            results.push(describe(&out));
        }
    }
    results
}

fn pyxs_session(socket: &Path) -> String {
    let out = Command::new("/usr/bin/python3")
        .arg(clients_dir().join("pyxs_session.py"))
        .arg(socket)
        .bounded_output();
    describe(&out)
}

fn clients_installed(test: &str) -> bool {
    let missing = ["/usr/bin/xenstore-read", "/usr/bin/python3"]
        .into_iter()
        .find(|p| !Path::new(p).exists());
    match missing {
        None => true,
        Some(p) if std::env::var_os("CI").is_some() => {
            panic!("{test}: {p} missing, and CI is set: this test must run")
        }
        Some(p) => {
            eprintln!("\n*** SKIPPING {test}: {p} missing (CI unset) ***\n");
            false
        }
    }
}

/// Compares a transcript run with the C xenstored one; `allowed` picks
/// the mark that excuses a line. Panics on unexcused differences.
fn compare(who: &str, lines: &[Line], got: &[String], allowed: fn(&Line) -> Option<&str>) {
    let reference = run_transcript(&Upstream::start(Flavor::C).socket, lines);
    let mut undocumented = 0;
    let mut differing = 0;
    for ((line, c), s) in lines.iter().zip(&reference).zip(got) {
        if c != s {
            differing += 1;
            let why = allowed(line).unwrap_or_else(|| {
                undocumented += 1;
                "UNDOCUMENTED"
            });
            eprintln!(
                "- `{}` [{why}]\n  C xenstored: {c:?}\n  {who}: {s:?}",
                line.command.join(" ")
            );
        }
    }
    let tally = format!(
        "xenstore-utils transcript vs {who}: {} commands, {differing} differ from C xenstored ({undocumented} undocumented)\n",
        lines.len()
    );
    // Past the test harness's capture: printed on success too.
    let _ = std::io::Write::write_all(&mut std::io::stderr(), tally.as_bytes());
    assert_eq!(undocumented, 0, "undocumented differences (see above)");
}

#[test]
fn xenstore_utils_transcript_matches_c_xenstored() {
    let test = "xenstore_utils_transcript_matches_c_xenstored";
    if !clients_installed(test) || !crate::common::upstream::available(Flavor::C, test) {
        return;
    }
    let lines = transcript();
    let shim = Shim::start();
    let got = run_transcript(&shim.socket, &lines);
    compare("the shim", &lines, &got, |l| l.differs.as_deref());
}

#[test]
fn xenstore_utils_transcript_oxenstored_second_opinion() {
    let test = "xenstore_utils_transcript_oxenstored_second_opinion";
    if !clients_installed(test) || !crate::common::upstream::available(Flavor::Ocaml, test) {
        return;
    }
    let lines = transcript();
    let got = run_transcript(&Upstream::start(Flavor::Ocaml).socket, &lines);
    compare("oxenstored", &lines, &got, |l| l.oxenstored.as_deref());
}

#[test]
fn pyxs_session_matches_c_xenstored() {
    let test = "pyxs_session_matches_c_xenstored";
    if !clients_installed(test) || !crate::common::upstream::available(Flavor::C, test) {
        return;
    }
    let reference = pyxs_session(&Upstream::start(Flavor::C).socket);
    assert!(
        reference.starts_with("exit Some(0)"),
        "the pyxs session fails against C xenstored itself:\n{reference}"
    );
    let shim = Shim::start();
    let got = pyxs_session(&shim.socket);
    assert_eq!(got, reference, "pyxs: shim vs C xenstored");
}

/// The transcript is meaningful: against C xenstored the commands really
/// read back what they wrote, and the watch really saw the writes.
#[test]
fn transcript_exercises_c_xenstored() {
    let test = "transcript_exercises_c_xenstored";
    if !clients_installed(test) || !crate::common::upstream::available(Flavor::C, test) {
        return;
    }
    let lines = transcript();
    let out = run_transcript(&Upstream::start(Flavor::C).socket, &lines);
    let all = out.join("\n");
    assert!(all.contains("stdout: 1\ntwo\ndeep\n"), "{all}");
    assert!(all.contains("/t/w/one"), "{all}");
    assert!(out.iter().any(|o| o.starts_with("exit Some(1)")), "{all}");
}

#[test]
fn pyxs_session_oxenstored_second_opinion() {
    let test = "pyxs_session_oxenstored_second_opinion";
    if !clients_installed(test)
        || !crate::common::upstream::available(Flavor::C, test)
        || !crate::common::upstream::available(Flavor::Ocaml, test)
    {
        return;
    }
    let reference = pyxs_session(&Upstream::start(Flavor::C).socket);
    let got = pyxs_session(&Upstream::start(Flavor::Ocaml).socket);
    assert_eq!(got, reference, "pyxs: oxenstored vs C xenstored");
}

#[test]
fn xenstore_utils_transcript_c_xenstored_420() {
    let test = "xenstore_utils_transcript_c_xenstored_420";
    let c_420 = Peer::c(Release::Xen420);
    if !clients_installed(test) || !crate::common::upstream::available(c_420, test) {
        return;
    }
    let lines = transcript();
    let got = run_transcript(&Upstream::start(c_420).socket, &lines);
    compare("C xenstored 4.20", &lines, &got, |l| l.xen420.as_deref());
}

#[test]
fn pyxs_session_c_xenstored_420() {
    let test = "pyxs_session_c_xenstored_420";
    let c_420 = Peer::c(Release::Xen420);
    if !clients_installed(test) || !crate::common::upstream::available(c_420, test) {
        return;
    }
    let reference = pyxs_session(&Upstream::start(Flavor::C).socket);
    let got = pyxs_session(&Upstream::start(c_420).socket);
    assert_eq!(got, reference, "pyxs: C xenstored 4.20 vs 4.17");
}
