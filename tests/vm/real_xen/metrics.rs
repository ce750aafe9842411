//! Issue 27 on a real hypervisor: what `xenstore-snoop --metrics` served
//! in dom0 (tests/xen/dom0-init's snapshots of its endpoint) checked against the
//! snooper's lines of the same run, the daemon's own CONTROL quota answers
//! and `promtool check metrics`.
//!
//! The snapshots: `guest1-live` (guest1 done with its traffic and quiet,
//! holding before it powers off), `guest1-gone` (guest1 reaped, guest2 up)
//! and `final` (every guest gone, nothing running but the harness).

use std::collections::BTreeMap;

/// One sample of an exposition: name, labels, value.
#[derive(Debug)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// The samples of Prometheus' text format or OpenMetrics. Label values here
/// are domain names, ops and numbers: no escapes to undo.
pub fn parse_exposition(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let (series, value) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("a sample without a value: {line}"));
            let value = value
                .parse()
                .unwrap_or_else(|e| panic!("{line}: value {value}: {e}"));
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => {
                    let inner = rest
                        .strip_suffix('}')
                        .unwrap_or_else(|| panic!("unclosed labels: {line}"));
                    let labels = inner
                        .split("\",")
                        .filter(|kv| !kv.is_empty())
                        .map(|kv| {
                            let (k, v) = kv
                                .split_once("=\"")
                                .unwrap_or_else(|| panic!("label {kv}: {line}"));
                            (k.to_string(), v.trim_end_matches('"').to_string())
                        })
                        .collect();
                    (name.to_string(), labels)
                }
                None => (series.to_string(), BTreeMap::new()),
            };
            Sample {
                name,
                labels,
                value,
            }
        })
        .collect()
}

/// The samples of `name` whose labels include every pair of `with`.
pub fn values<'a>(
    samples: &'a [Sample],
    name: &'a str,
    with: &'a [(&'a str, &'a str)],
) -> impl Iterator<Item = &'a Sample> + 'a {
    samples.iter().filter(move |s| {
        s.name == name
            && with
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
    })
}

/// The one value of `name` with `with`, or None.
pub fn value(samples: &[Sample], name: &str, with: &[(&str, &str)]) -> Option<f64> {
    let found: Vec<&Sample> = values(samples, name, with).collect();
    assert!(
        found.len() <= 1,
        "{name} {with:?}: several samples {found:?}"
    );
    found.first().map(|s| s.value)
}

/// What a snooper line is, as far as the metrics count it.
#[derive(Clone, Debug, PartialEq)]
pub enum Seen {
    /// A reply: the op and, for an error, its name.
    Reply {
        op: String,
        error: Option<String>,
    },
    WatchEvent,
    Other,
}

/// One line of the snooper's classic text output.
#[derive(Clone, Debug)]
pub struct Line {
    pub dom: String,
    pub pid: String,
    pub seen: Seen,
    pub text: String,
}

/// `DOM PID COMM TX [ERROR] OP: args -> result`, watch events
/// `… XS_WATCH_EVENT: path token`.
pub fn parse_snoop(out: &str) -> Vec<Line> {
    out.lines()
        .skip(1)
        .filter_map(|text| {
            let w: Vec<&str> = text.split_whitespace().collect();
            if w.len() < 5 {
                return None;
            }
            let seen = match w[4] {
                "XS_WATCH_EVENT:" => Seen::WatchEvent,
                "[ERROR]" => Seen::Reply {
                    op: w.get(5).unwrap_or(&"").trim_end_matches(':').to_string(),
                    error: text
                        .rsplit_once(" -> ")
                        .and_then(|(_, r)| r.split_whitespace().next())
                        .map(String::from),
                },
                op if op.starts_with("XS_") && op.ends_with(':') && text.contains(" -> ") => {
                    Seen::Reply {
                        op: op.trim_end_matches(':').to_string(),
                        error: None,
                    }
                }
                _ => Seen::Other,
            };
            Some(Line {
                dom: w[0].to_string(),
                pid: w[1].to_string(),
                seen,
                text: text.to_string(),
            })
        })
        .collect()
}

/// Counts of a stretch of snooper lines in the metrics' terms.
#[derive(Debug, Default, PartialEq)]
pub struct Counts {
    /// (op, result) → replies; result "ok" or the error's name.
    pub requests: BTreeMap<(String, String), u64>,
    pub watch_events: u64,
    /// outcome → transactions ended.
    pub transactions: BTreeMap<String, u64>,
    /// domid → [requests, errors, watch events].
    pub domains: BTreeMap<String, [u64; 3]>,
}

impl Counts {
    pub fn of(lines: &[Line]) -> Counts {
        let mut c = Counts::default();
        for l in lines {
            let dom = c.domains.entry(l.dom.clone()).or_default();
            match &l.seen {
                Seen::Reply { op, error } => {
                    dom[0] += 1;
                    if error.is_some() {
                        dom[1] += 1;
                    }
                    if op == "XS_TRANSACTION_END" {
                        *c.transactions
                            .entry(tx_outcome(l, error.as_deref()))
                            .or_default() += 1;
                    }
                    let result = error.clone().unwrap_or_else(|| "ok".to_string());
                    *c.requests.entry((op.clone(), result)).or_default() += 1;
                }
                Seen::WatchEvent => {
                    dom[2] += 1;
                    c.watch_events += 1;
                }
                Seen::Other => {}
            }
        }
        c.domains.retain(|_, v| v.iter().any(|&n| n > 0));
        c
    }

    /// The same numbers as an exposition shows them (per-domain ones only
    /// for `domids`: the exporter drops a dead domain's).
    pub fn of_exposition(samples: &[Sample], domids: &[&str]) -> Counts {
        let mut c = Counts::default();
        for s in values(samples, "xenstore_requests_total", &[]) {
            let key = (s.labels["op"].clone(), s.labels["result"].clone());
            c.requests.insert(key, s.value as u64);
        }
        // Absent: a count no stretch of lines has.
        c.watch_events =
            value(samples, "xenstore_watch_events_total", &[]).map_or(u64::MAX, |v| v as u64);
        for s in values(samples, "xenstore_transactions_total", &[]) {
            if s.value > 0.0 {
                c.transactions
                    .insert(s.labels["outcome"].clone(), s.value as u64);
            }
        }
        for domid in domids {
            let mut v = [0u64; 3];
            for (slot, name) in [
                "xenstore_domain_requests_total",
                "xenstore_domain_errors_total",
                "xenstore_domain_watch_events_total",
            ]
            .iter()
            .enumerate()
            {
                v[slot] = value(samples, name, &[("domid", domid)]).unwrap_or(0.0) as u64;
            }
            if v.iter().any(|&n| n > 0) {
                c.domains.insert(domid.to_string(), v);
            }
        }
        c
    }
}

/// How a transaction ended, from its XS_TRANSACTION_END line (the
/// snooper's default lines have no `[TX_END]`): `T` commits, `F` aborts,
/// EAGAIN is a conflict.
fn tx_outcome(line: &Line, error: Option<&str>) -> String {
    let commit = line.text.contains("XS_TRANSACTION_END: T ");
    match error {
        Some("EAGAIN") => "conflict",
        Some(_) => "failed",
        None if commit => "commit",
        None => "abort",
    }
    .to_string()
}

/// `name : value …` lines of a CONTROL quota answer as xenstore-control
/// prints it; headings skipped.
pub fn parse_quota(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let value = rest.split_whitespace().next()?.parse().ok()?;
            let name = name.trim();
            (!name.is_empty() && !name.contains(' ')).then(|| (name.to_string(), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snooper_lines_count_as_the_exporter_counts() {
        let out = "DOM PID    COMM            TX  OP\n\
            0   207    xen-init-dom0   0   [ERROR] XS_READ: /local/domain/0/name -> ENOENT\n\
            1   0      guest1          0   XS_WRITE: data/harness read-ok -> OK\n\
            0   214    xenconsoled     -   XS_WATCH_EVENT: @introduceDomain domlist\n\
            0   250    xl              3   XS_TRANSACTION_END: T -> OK\n\
            0   250    xl              4   XS_TRANSACTION_END: F -> OK\n";
        let c = Counts::of(&parse_snoop(out));
        let key = |op: &str, r: &str| (op.to_string(), r.to_string());
        assert_eq!(c.requests[&key("XS_READ", "ENOENT")], 1);
        assert_eq!(c.requests[&key("XS_WRITE", "ok")], 1);
        assert_eq!(c.requests[&key("XS_TRANSACTION_END", "ok")], 2);
        assert_eq!(c.watch_events, 1);
        assert_eq!(c.transactions["commit"], 1);
        assert_eq!(c.transactions["abort"], 1);
        assert_eq!(c.domains["0"], [3, 1, 1]);
        assert_eq!(c.domains["1"], [1, 0, 0]);
    }

    #[test]
    fn expositions_parse_into_labelled_samples() {
        let text = "# TYPE xenstore_domain_info gauge\n\
            xenstore_domain_info{domid=\"0\",name=\"Domain-0\"} 1\n\
            xenstore_watch_events_total 78\n";
        let s = parse_exposition(text);
        assert_eq!(
            value(&s, "xenstore_domain_info", &[("name", "Domain-0")]),
            Some(1.0)
        );
        assert_eq!(value(&s, "xenstore_domain_info", &[("domid", "1")]), None);
        assert_eq!(value(&s, "xenstore_watch_events_total", &[]), Some(78.0));
        assert_eq!(
            parse_quota("Domain 1:\nnodes           :       24\n")["nodes"],
            24.0
        );
    }
}
