//! What libbpf said while it failed: its print stream carries the kernel
//! verifier's log of a refused program, and the verifier's reason is the
//! log's last line before its statistics. That reason (or, with no
//! verifier log, libbpf's first warning, the cause of the ones after it)
//! becomes the error, in their own words and once.

use std::sync::Mutex;

/// What libbpf said since the last `take`: the verifier's reason for a
/// refused program if one came, else libbpf's first warning.
static SAID: Mutex<Said> = Mutex::new(Said {
    verifier: None,
    first_warning: None,
});

struct Said {
    verifier: Option<String>,
    first_warning: Option<String>,
}

/// Starts keeping what libbpf says (warnings and worse), for `take`.
pub fn listen() {
    libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Warn, keep)));
    take();
}

fn keep(_level: libbpf_rs::PrintLevel, msg: String) {
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if said.verifier.is_none() {
        said.verifier = verifier_reason(&msg);
    }
    if said.first_warning.is_none() {
        let line = msg.trim();
        let line = line.strip_prefix("libbpf: ").unwrap_or(line);
        if !line.is_empty() {
            said.first_warning = Some(line.to_string());
        }
    }
}

/// What libbpf said since the last call, best reason first; forgets it.
pub fn take() -> Option<String> {
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    let verifier = said.verifier.take();
    let first = said.first_warning.take();
    verifier.or(first)
}

/// From one libbpf message holding a program's load log: "the kernel's
/// verifier refused PROGRAM: REASON", with the source line the verifier
/// last annotated when there is one ("(at FILE:LINE: CODE)").
fn verifier_reason(msg: &str) -> Option<String> {
    const BEGIN: &str = "-- BEGIN PROG LOAD LOG --";
    let (head, log) = msg.split_once(BEGIN)?;
    let log = log.split("-- END PROG LOAD LOG --").next().unwrap_or(log);
    let program = head
        .split_once("prog '")
        .and_then(|(_, rest)| rest.split_once('\''))
        .map_or("the program", |(name, _)| name);
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !is_statistics(l))
        .collect();
    let (reason_at, reason) = lines.iter().enumerate().rev().find(|(_, l)| !is_trace(l))?;
    let mut said = format!("the kernel's verifier refused {program}: {reason}");
    // libbpf annotates the log with source lines: "; CODE @ FILE:LINE".
    // (The kernel adds " @ FILE:LINE" since 6.3.)
    let annotation = lines[..reason_at]
        .iter()
        .rev()
        .take(40)
        .find_map(|l| l.strip_prefix(';'));
    match annotation.map(|a| a.rsplit_once(" @ ").unwrap_or((a, ""))) {
        Some((code, "")) => said += &format!(" (at `{}`)", code.trim()),
        Some((code, place)) => said += &format!(" (at {}: {})", place.trim(), code.trim()),
        None => {}
    }
    Some(said)
}

/// The verifier's closing statistics, not its reason.
fn is_statistics(line: &str) -> bool {
    [
        "processed ",
        "verification time ",
        "stack depth ",
        "max_states_per_insn ",
    ]
    .iter()
    .any(|p| line.starts_with(p))
}

/// The verifier's trace of what it walked: instructions ("202: (0f) r1 +=
/// r2"), register states, source annotations; the reason is none of them.
fn is_trace(line: &str) -> bool {
    let numbered = line
        .split_once(':')
        .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    let branch = line.starts_with("from ") && line.contains(':');
    numbered || branch || line.starts_with(';') || line.starts_with('R') && line.contains('=')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// libbpf's message around a log, as libbpf 1.7 prints it.
    fn wrapped(log: &str) -> String {
        format!(
            "libbpf: prog 'xenstore_probe': -- BEGIN PROG LOAD LOG --\n{log}-- END PROG LOAD LOG --\n"
        )
    }

    #[test]
    fn the_cfg_checks_one_line_is_the_reason() {
        // Debian 12's 6.1 on a loop it cannot bound (the whole log).
        let said = verifier_reason(&wrapped("back-edge from insn 352 to 353\n"));
        assert_eq!(
            said.as_deref(),
            Some("the kernel's verifier refused xenstore_probe: back-edge from insn 352 to 353")
        );
    }

    #[test]
    fn the_reason_comes_with_its_source_line_not_the_statistics() {
        // Shaped as 6.12 ends its log on copy_window() before this branch's
        // fix (the real one, 5 385 instructions long, gave "... is not
        // allowed (at xssnoop.bpf.c:203: for (__u32 k = 0; ...)").
        let log = "; at[i] = strs[i] - strs[0]; @ xssnoop.bpf.c:202\n\
                   201: (1f) r2 -= r6                     ; R2_w=scalar() R6=scalar()\n\
                   ; if (at[i] == 0 || at[i] >= WINDOW) @ xssnoop.bpf.c:203\n\
                   202: (0f) r1 += r2\n\
                   math between map_value pointer and register with unbounded min value is not allowed\n\
                   processed 5385 insns (limit 1000000) max_states_per_insn 4 total_states 67 peak_states 67 mark_read 22\n";
        assert_eq!(
            verifier_reason(&wrapped(log)).as_deref(),
            Some(
                "the kernel's verifier refused xenstore_probe: math between map_value pointer and \
                 register with unbounded min value is not allowed (at xssnoop.bpf.c:203: \
                 if (at[i] == 0 || at[i] >= WINDOW))"
            )
        );
    }

    #[test]
    fn other_messages_hold_no_verifier_reason() {
        assert_eq!(
            verifier_reason("libbpf: failed to load object 'xssnoop_bpf'\n"),
            None
        );
        assert_eq!(verifier_reason(&wrapped("")), None);
    }

    #[test]
    fn the_verifiers_reason_beats_libbpfs_first_warning() {
        listen();
        keep(
            libbpf_rs::PrintLevel::Warn,
            "libbpf: prog 'p': BPF program load failed: Invalid argument\n".into(),
        );
        keep(
            libbpf_rs::PrintLevel::Warn,
            wrapped("back-edge from insn 1 to 2\n"),
        );
        keep(
            libbpf_rs::PrintLevel::Warn,
            "libbpf: failed to load BPF skeleton 'x': -EINVAL\n".into(),
        );
        let said = take().unwrap();
        assert!(
            said.ends_with("xenstore_probe: back-edge from insn 1 to 2"),
            "{said}"
        );
        assert_eq!(take(), None, "taken once");
        keep(
            libbpf_rs::PrintLevel::Warn,
            "libbpf: map 'events': failed to create: -ENOMEM\n".into(),
        );
        keep(
            libbpf_rs::PrintLevel::Warn,
            "libbpf: failed to load object 'x'\n".into(),
        );
        assert_eq!(
            take().as_deref(),
            Some("map 'events': failed to create: -ENOMEM")
        );
    }
}
