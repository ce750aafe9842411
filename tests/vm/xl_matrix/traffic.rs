//! One run's xenstore traffic as per-step multisets of (op, path shape,
//! result), from C xenstored's `-T` trace or the snooper's JSON lines.
//! tests/xen/dom0-matrix writes each step's name to /tool/matrix/step
//! before it starts: that write splits the traffic (it is not counted).

use std::collections::{BTreeMap, HashMap, VecDeque};

pub const STEP_KEY: &str = "/tool/matrix/step";

/// What a request or watch event looks like once domids, device numbers,
/// uuids, tokens and transaction ids are gone.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub op: String,
    pub shape: String,
    /// OK, an errno name, or `-` for a watch event.
    pub result: String,
}

/// Per step (the traffic before the first mark is "setup"): each key and
/// how often it was seen.
pub type Steps = BTreeMap<String, BTreeMap<Key, usize>>;

/// A path with every number a `#` and every uuid a `U`.
pub fn shape(path: &str) -> String {
    path.split('/')
        .map(|c| {
            if !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()) {
                "#"
            } else if c.len() == 36 && c.bytes().filter(|&b| b == b'-').count() == 4 {
                "U"
            } else {
                c
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

struct Splitter {
    steps: Steps,
    current: String,
}

impl Splitter {
    fn new() -> Splitter {
        Splitter {
            steps: Steps::new(),
            current: "setup".into(),
        }
    }

    /// A request (op, first argument, rest): a mark starts the next step.
    fn is_mark(&mut self, op: &str, path: &str, value: &str) -> bool {
        if op == "WRITE" && path == STEP_KEY {
            self.current = value.trim().to_string();
            return true;
        }
        false
    }

    fn count(&mut self, step: &str, key: Key) {
        *self
            .steps
            .entry(step.to_string())
            .or_default()
            .entry(key)
            .or_default() += 1;
    }
}

/// C xenstored's `-T` trace: 4.17's `IN|OUT CONN DATE TIME TYPE (ARGS)`,
/// 4.20's `io: ` prefix, `(dN)` after the connection, and `OUT(START)` /
/// `OUT(END)` for a reply queued before it is written (counted once).
/// A reply answers its connection's oldest open request; a connection's
/// address is reused once it is destroyed, requests left unanswered.
pub fn from_c_trace(trace: &str) -> Steps {
    let mut split = Splitter::new();
    // Per connection: the open requests (op, shape, step).
    let mut open: HashMap<String, VecDeque<(String, String, String)>> = HashMap::new();
    for line in trace.lines() {
        let line = line.strip_prefix("obj: ").unwrap_or(line);
        if let Some(conn) = line
            .strip_prefix("CREATE connection ")
            .or_else(|| line.strip_prefix("DESTROY connection "))
        {
            open.remove(conn.trim());
            continue;
        }
        let line = line.strip_prefix("io: ").unwrap_or(line);
        // 4.20's "(dN)": the connection's domain, before the date.
        let line = match line.find(" (d") {
            Some(at) if line[at..].find(") ").is_some_and(|end| end < 10) => {
                let end = at + line[at..].find(") ").unwrap() + 1;
                format!("{}{}", &line[..at], &line[end..])
            }
            _ => line.to_string(),
        };
        let Some((head, args)) = line.split_once(" (") else {
            continue;
        };
        let args = args.strip_suffix(')').unwrap_or(args);
        let words: Vec<&str> = head.split_whitespace().collect();
        let (Some(&dir), Some(conn), Some(&op)) = (
            words.first(),
            words.get(1).map(|c| c.to_string()),
            words.last(),
        ) else {
            continue;
        };
        let (first, rest) = args.split_once(' ').unwrap_or((args, ""));
        match dir {
            "IN" => {
                if !split.is_mark(op, first, rest) {
                    let step = split.current.clone();
                    open.entry(conn)
                        .or_default()
                        .push_back((op.to_string(), shape(first), step));
                } else {
                    // Its reply answers nothing counted.
                    open.entry(conn).or_default().push_back((
                        "MARK".into(),
                        String::new(),
                        String::new(),
                    ));
                }
            }
            "OUT" | "OUT(START)" if op == "WATCH_EVENT" => {
                let step = split.current.clone();
                split.count(
                    &step,
                    Key {
                        op: op.into(),
                        shape: shape(first),
                        result: "-".into(),
                    },
                );
            }
            "OUT" | "OUT(START)" => {
                let Some((op, shape, step)) = open.get_mut(&conn).and_then(VecDeque::pop_front)
                else {
                    continue;
                };
                if op == "MARK" {
                    continue;
                }
                let result = if words.last() == Some(&"ERROR") {
                    first.to_string()
                } else {
                    "OK".into()
                };
                split.count(&step, Key { op, shape, result });
            }
            _ => {}
        }
    }
    split.steps
}

/// The snooper's `--json` lines (in reply order, a request's step being
/// the one its reply falls in).
pub fn from_snoop_json(lines: &str) -> Steps {
    let mut split = Splitter::new();
    for line in lines.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        let op = text("op");
        let op = op.strip_prefix("XS_").unwrap_or(&op).to_string();
        let path = text("path");
        let result = match (text("kind").as_str(), v["error"].as_str()) {
            ("watch_event", _) => "-".to_string(),
            ("op", Some(error)) => error.to_string(),
            ("op", None) => "OK".to_string(),
            _ => continue,
        };
        if result == "OK" && split.is_mark(&op, &path, &text("value")) {
            continue;
        }
        let step = split.current.clone();
        split.count(
            &step,
            Key {
                op,
                shape: shape(&path),
                result,
            },
        );
    }
    split.steps
}

/// The requests of one step (watch events left out).
pub fn requests(step: &BTreeMap<Key, usize>) -> usize {
    step.iter()
        .filter(|(k, _)| k.op != "WATCH_EVENT")
        .map(|(_, n)| n)
        .sum()
}

/// Keys one side has more of: (key, C's count, the shim's count).
pub fn differences<'a>(
    c: &'a BTreeMap<Key, usize>,
    shim: &'a BTreeMap<Key, usize>,
) -> Vec<(&'a Key, usize, usize)> {
    let mut keys: Vec<&Key> = c.keys().chain(shim.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|k| (k, *c.get(k).unwrap_or(&0), *shim.get(k).unwrap_or(&0)))
        .filter(|(_, a, b)| a != b)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_hide_numbers_and_uuids() {
        assert_eq!(
            shape("/local/domain/12/device/vbd/51712/state"),
            "/local/domain/#/device/vbd/#/state"
        );
        assert_eq!(
            shape("/vm/0a1b2c3d-0000-1111-2222-333344445555/name"),
            "/vm/U/name"
        );
    }
}
