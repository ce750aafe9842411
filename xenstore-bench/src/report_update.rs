//! `all --only X --update`: the sections just measured replace theirs in
//! an existing BENCHMARKS.md, the others stay as they were measured, so the
//! report can be regenerated a few sections at a time. Each replaced
//! section says when it was measured; the goals and the limits keep their
//! old rows except those this run measured again.

use std::fmt::Write;

/// `old` with the sections of `new` (a report of some sections) in place of
/// its own, each headed by `measured` (e.g. "2026-11-26 00:10 UTC, `all
/// --only snoop`"); sections `old` lacks are appended.
pub fn update(old: &str, new: &str, measured: &str) -> String {
    if old.trim().is_empty() {
        return new.to_string();
    }
    let old_parts = split(old);
    let new_parts = split(new);
    let mut out = Vec::new();
    for (key, text) in &old_parts {
        let fresh = new_parts.iter().find(|(k, _)| k == key).map(|(_, t)| t);
        out.push(match (key.as_str(), fresh) {
            (_, None) => text.clone(),
            // The title and how it was measured: the old run's, which most
            // figures still are.
            ("", Some(_)) => text.clone(),
            (GOALS, Some(fresh)) => merge_goals(text, fresh),
            (_, Some(fresh)) => stamped(fresh, measured),
        });
    }
    for (key, text) in &new_parts {
        if !key.is_empty() && !old_parts.iter().any(|(k, _)| k == key) {
            out.push(stamped(text, measured));
        }
    }
    // A section rendered last in its report lacks the blank line that
    // parted it from the next.
    let last = out.len().saturating_sub(1);
    for part in &mut out[..last] {
        if !part.is_empty() && !part.ends_with("\n\n") {
            part.push('\n');
        }
    }
    let mut text = out.concat();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

const GOALS: &str = "## Goals";

/// The report cut at each `## ` heading, each part keyed by its heading's
/// number ("## 3.") or, unnumbered, its whole heading; the text before the
/// first heading has the key "".
fn split(report: &str) -> Vec<(String, String)> {
    let mut parts: Vec<(String, String)> = vec![(String::new(), String::new())];
    for line in report.split_inclusive('\n') {
        if let Some(heading) = line.strip_prefix("## ") {
            let heading = heading.trim_end();
            let key = match heading.split_once(". ") {
                Some((n, _)) if n.chars().all(|c| c.is_ascii_digit()) => format!("## {n}."),
                _ => format!("## {heading}"),
            };
            parts.push((key, String::new()));
        }
        parts.last_mut().unwrap().1 += line;
    }
    parts
}

/// A section with a line under its heading saying when it was measured.
pub fn stamped(section: &str, measured: &str) -> String {
    let (heading, rest) = section.split_once('\n').unwrap_or((section, ""));
    let mut s = String::new();
    let _ = write!(s, "{heading}\n\n_Measured {measured}._\n{rest}");
    s
}

/// The old goals part (the table, then "What limits the figures") with the
/// rows and limits this run measured in place of theirs, new ones after
/// the old.
fn merge_goals(old: &str, fresh: &str) -> String {
    let [mut rows, mut limits] = keyed(old);
    for (mine, new) in [&mut rows, &mut limits].into_iter().zip(keyed(fresh)) {
        for (key, line) in new {
            match mine.iter_mut().find(|(k, _)| *k == key) {
                Some(old) => old.1 = line,
                None => mine.push((key, line)),
            }
        }
    }
    let mut s = format!("{GOALS}\n\n| goal | target | measured | verdict |\n|---|---|---|---|\n");
    for (_, row) in rows {
        let _ = writeln!(s, "{row}");
    }
    if !limits.is_empty() {
        s += "\nWhat limits the figures:\n\n";
        for (_, limit) in limits {
            let _ = writeln!(s, "{limit}");
        }
    }
    s + "\n"
}

/// A goals part's rows, then its limits, each by its key.
fn keyed(part: &str) -> [Vec<(&str, &str)>; 2] {
    let pick =
        |key: fn(&str) -> Option<&str>| (part.lines()).filter_map(|l| Some((key(l)?, l))).collect();
    [pick(row_key), pick(limit_key)]
}

/// A goal row's goal ("| goal | target | measured | verdict |"), not the
/// table's heading or rule.
fn row_key(line: &str) -> Option<&str> {
    let goal = line.strip_prefix("| ")?.split(" | ").next()?;
    (goal != "goal" && !goal.starts_with("---")).then_some(goal)
}

/// A limit's first three words, which name what it is about ("- Snooping
/// (read, 1, pinned): …", "- Memory: each node …").
fn limit_key(line: &str) -> Option<&str> {
    let text = line.strip_prefix("- ")?;
    let end = text
        .char_indices()
        .filter(|&(_, c)| c == ' ')
        .nth(2)
        .map_or(text.len(), |(i, _)| i);
    Some(&text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "# Benchmarks\n\nold run\n\n## Goals\n\n\
        | goal | target | measured | verdict |\n|---|---|---|---|\n\
        | a | ≥ 1 | 2 | met |\n| b | ≥ 1 | 0 | **missed** |\n\n\
        What limits the figures:\n\n- Snooping (read, 1): old a\n- Memory: each node old\n\n\
        ## 1. Throughput\n\nold 1\n\n## 3. Snooping cost\n\nold 3\n\n\
        ## Scale: idle\n\nold scale\n\n## 8. Dom0 kernels\n\nold 8\n";

    #[test]
    fn only_the_sections_run_are_replaced_and_say_when() {
        let new = "# Benchmarks\n\nnew run\n\n## Goals\n\n\
            | goal | target | measured | verdict |\n|---|---|---|---|\n\
            | b | ≥ 1 | 3 | met |\n| c | ≤ 1 | 0.5 | met |\n\n\
            What limits the figures:\n\n- Snooping (read, 1): new a\n- Per firing, xenstore-snoop: new\n\n\
            ## 3. Snooping cost\n\nnew 3\n\n## 9. Metrics mode\n\nnew 9\n";
        let got = update(OLD, new, "today");
        let want = "# Benchmarks\n\nold run\n\n## Goals\n\n\
            | goal | target | measured | verdict |\n|---|---|---|---|\n\
            | a | ≥ 1 | 2 | met |\n| b | ≥ 1 | 3 | met |\n| c | ≤ 1 | 0.5 | met |\n\n\
            What limits the figures:\n\n- Snooping (read, 1): new a\n- Memory: each node old\n\
            - Per firing, xenstore-snoop: new\n\n\
            ## 1. Throughput\n\nold 1\n\n## 3. Snooping cost\n\n_Measured today._\n\nnew 3\n\n\
            ## Scale: idle\n\nold scale\n\n## 8. Dom0 kernels\n\nold 8\n\n\
            ## 9. Metrics mode\n\n_Measured today._\n\nnew 9\n";
        assert_eq!(got, want, "\n{got}");
    }

    #[test]
    fn a_replaced_section_stays_parted_from_the_next() {
        let got = update(OLD, "# B\n\n## 1. Throughput\n\nnew 1\n", "now");
        assert!(got.contains("new 1\n\n## 3. Snooping cost\n"), "{got}");
    }

    #[test]
    fn a_section_measured_again_replaces_its_earlier_stamp() {
        let new = "# B\n\n## Goals\n\n## 1. Throughput\n\nnew 1\n";
        let once = update(OLD, new, "first");
        let twice = update(&once, new, "second");
        assert!(
            twice.contains("## 1. Throughput\n\n_Measured second._\n\nnew 1\n"),
            "{twice}"
        );
        assert!(!twice.contains("first"), "{twice}");
    }

    #[test]
    fn into_no_report_the_new_one_is_written_whole() {
        let new = "# B\n\n## 1. X\n\nx\n";
        assert_eq!(update("", new, "now"), new);
    }
}
