//! Rendering records: the classic text line and JSON lines.

use crate::record::{Kind, Record};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt::Write as _;

/// Maps perf's CLOCK_MONOTONIC stamps to wall clock and to "since start".
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// realtime − monotonic, ns.
    pub offset_ns: i128,
    pub start_mono_ns: u64,
}

impl Clock {
    pub fn now() -> Clock {
        let mono = clock_ns(libc::CLOCK_MONOTONIC);
        let real = clock_ns(libc::CLOCK_REALTIME);
        Clock {
            offset_ns: real as i128 - mono as i128,
            start_mono_ns: mono,
        }
    }

    pub fn wall(&self, mono_ns: u64) -> DateTime<Utc> {
        let ns = (mono_ns as i128 + self.offset_ns) as i64;
        DateTime::from_timestamp_nanos(ns)
    }
}

pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Escapes what could break or forge a line: control characters (newline,
/// carriage return, escape sequences...) and the backslash itself.
pub fn escape(s: &str) -> Cow<'_, str> {
    // Control characters are U+0000-001F, U+007F and U+0080-009F (C2 80-9F
    // in UTF-8): bytes tell most strings clean without decoding chars.
    let suspect = |b: u8| b < 0x20 || b == 0x7f || b == 0xc2 || b == b'\\';
    if !s.bytes().any(suspect) || !s.chars().any(|c| c.is_control() || c == '\\') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x100 && c.is_control() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TimeColumn {
    #[default]
    None,
    Wall,
    Relative,
}

/// How text lines look.
#[derive(Clone, Copy, Debug, Default)]
pub struct TextStyle {
    pub time: TimeColumn,
    pub latency: bool,
    /// Error reasons after error names.
    pub verbose: bool,
}

impl TextStyle {
    pub fn header(&self) -> String {
        let mut h = String::new();
        match self.time {
            TimeColumn::None => {}
            TimeColumn::Wall => h.push_str(&format!("{:<15} ", "TIME")),
            TimeColumn::Relative => h.push_str(&format!("{:<12} ", "TIME(s)")),
        }
        h.push_str("DOM PID    COMM            TX  ");
        if self.latency {
            h.push_str(&format!("{:>9} ", "LAT(us)"));
        }
        h.push_str("OP");
        h
    }

    /// Appends the line of `r` (no newline) to `l`.
    pub fn write_line(&self, r: &Record, clock: &Clock, l: &mut String) {
        match self.time {
            TimeColumn::None => {}
            TimeColumn::Wall => {
                let _ = write!(l, "{} ", clock.wall(r.mono_ns).format("%H:%M:%S%.6f"));
            }
            TimeColumn::Relative => {
                let secs = r.mono_ns.saturating_sub(clock.start_mono_ns) as f64 / 1e9;
                let _ = write!(l, "{secs:<12.6} ");
            }
        }
        push_column(l, Some(r.dom.into()), 3);
        push_column(l, Some(r.pid.into()), 6);
        push_name(l, r.comm.as_deref());
        push_column(l, r.tx.map(u64::from), 3);
        if self.latency {
            match r.latency_ns {
                Some(ns) => {
                    let _ = write!(l, "{:>9.1} ", ns as f64 / 1e3);
                }
                None => {
                    let _ = write!(l, "{:>9} ", "-");
                }
            }
        }
        match r.kind {
            Kind::Op => {
                if r.error.is_some() {
                    l.push_str("[ERROR] ");
                }
                l.push_str(&r.op_name());
                l.push(':');
                for arg in [&r.path, &r.value] {
                    if !arg.is_empty() {
                        l.push(' ');
                        l.push_str(&escape(arg));
                    }
                }
                if let Some(mark) = r.request_cut.mark() {
                    l.push_str(&mark);
                }
                l.push_str(" -> ");
                l.push_str(&escape(r.result.as_deref().unwrap_or("?")));
                if let Some(mark) = r.reply_cut.mark() {
                    l.push_str(&mark);
                }
                if self.verbose {
                    if let Some(reason) = &r.error_reason {
                        let _ = write!(l, " ({})", escape(reason));
                    }
                }
            }
            Kind::WatchEvent => {
                l.push_str(&r.op_name());
                l.push_str(": ");
                l.push_str(&escape(&r.path));
                l.push(' ');
                l.push_str(&escape(r.token.as_deref().unwrap_or("")));
            }
            Kind::ConnOpen => {
                let _ = write!(
                    l,
                    "[CONN_OPEN] conn {}: {} {}",
                    r.conn,
                    escape(&r.path),
                    escape(&r.value)
                );
            }
            Kind::ConnClose => {
                let _ = write!(
                    l,
                    "[CONN_CLOSE] conn {}: {}",
                    r.conn,
                    escape(r.result.as_deref().unwrap_or(""))
                );
            }
            Kind::TxEnd => {
                let _ = write!(l, "[TX_END] {}", escape(r.result.as_deref().unwrap_or("")));
                if let Some(reason) = &r.error_reason {
                    let _ = write!(l, " ({})", escape(reason));
                }
            }
        }
    }
}

/// The COMM column: the name (or `-`), escaped, left-aligned in
/// COMM_MAX columns (a longer domain name widens it), then a space.
fn push_name(l: &mut String, name: Option<&str>) {
    let start = l.len();
    l.push_str(&escape(name.unwrap_or("-")));
    let width = l[start..].chars().count();
    l.extend(std::iter::repeat_n(
        ' ',
        crate::names::COMM_MAX.saturating_sub(width) + 1,
    ));
}

/// `n` (or `-`) left-aligned in `width` columns, then a space: the classic
/// columns, without core::fmt's padding machinery on every line.
fn push_column(l: &mut String, n: Option<u64>, width: usize) {
    let start = l.len();
    match n {
        Some(mut n) => {
            let mut digits = [0u8; 20];
            let mut i = digits.len();
            loop {
                i -= 1;
                digits[i] = b'0' + (n % 10) as u8;
                n /= 10;
                if n == 0 {
                    break;
                }
            }
            l.push_str(std::str::from_utf8(&digits[i..]).expect("ASCII digits"));
        }
        None => l.push('-'),
    }
    let pad = width.saturating_sub(l.len() - start);
    l.extend(std::iter::repeat_n(' ', pad + 1));
}

/// The keys of every JSON line, in the order written: [`JsonRecord`]'s
/// fields (its unit test checks they agree).
pub const JSON_KEYS: [&str; 21] = [
    "kind",
    "ts",
    "mono_ns",
    "serial",
    "conn",
    "dom",
    "pid",
    "comm",
    "tx",
    "req_id",
    "op",
    "path",
    "value",
    "result",
    "error",
    "error_reason",
    "latency_us",
    "fired_by",
    "token",
    "truncated",
    "truncated_bytes",
];

/// The JSON line schema shared with scripts/xs-stack-correlate: what
/// --json prints and a trace file's record lines hold, written from a
/// [`Record`] here and read back into one by trace_file.rs.
#[derive(Serialize, Deserialize)]
pub struct JsonRecord<'a> {
    pub kind: Kind,
    /// Derived from mono_ns and the clock; not read back.
    pub ts: Cow<'a, str>,
    pub mono_ns: u64,
    pub serial: u64,
    pub conn: u32,
    pub dom: u16,
    pub pid: u32,
    pub comm: Option<Cow<'a, str>>,
    pub tx: Option<u32>,
    pub req_id: Option<u32>,
    pub op: Option<Cow<'a, str>>,
    pub path: Cow<'a, str>,
    pub value: Cow<'a, str>,
    pub result: Option<Cow<'a, str>>,
    pub error: Option<Cow<'a, str>>,
    pub error_reason: Option<Cow<'a, str>>,
    pub latency_us: Option<f64>,
    pub fired_by: Option<u64>,
    pub token: Option<Cow<'a, str>>,
    pub truncated: bool,
    /// Bytes cut, when the daemon said how many (null otherwise).
    pub truncated_bytes: Option<u64>,
}

impl<'a> JsonRecord<'a> {
    pub fn new(r: &'a Record, clock: &Clock) -> JsonRecord<'a> {
        JsonRecord {
            kind: r.kind,
            ts: Cow::Owned(
                clock
                    .wall(r.mono_ns)
                    .to_rfc3339_opts(SecondsFormat::Micros, true),
            ),
            mono_ns: r.mono_ns,
            serial: r.serial,
            conn: r.conn,
            dom: r.dom,
            pid: r.pid,
            comm: r.comm.as_deref().map(Cow::Borrowed),
            tx: r.tx,
            req_id: r.req_id,
            op: r.op.map(|_| r.op_name()),
            path: Cow::Borrowed(&r.path),
            value: Cow::Borrowed(&r.value),
            result: r.result.as_deref().map(Cow::Borrowed),
            error: r.error.as_deref().map(Cow::Borrowed),
            error_reason: r.error_reason.as_deref().map(Cow::Borrowed),
            latency_us: r.latency_ns.map(|ns| ns as f64 / 1e3),
            fired_by: r.fired_by,
            token: r.token.as_deref().map(Cow::Borrowed),
            truncated: r.truncated,
            truncated_bytes: cut_bytes(r),
        }
    }
}

/// The bytes cut from the record's strings, when known.
fn cut_bytes(r: &Record) -> Option<u64> {
    use crate::record::Cut;
    match (r.request_cut, r.reply_cut) {
        (Cut::Bytes(a), Cut::Bytes(b)) => Some(a + b),
        (Cut::Bytes(n), _) | (_, Cut::Bytes(n)) => Some(n),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Probe;
    use crate::pairing::tests::{ev, response_extra};
    use crate::pairing::Pairing;

    // The snooper writes both into its output buffer; tests want strings.
    impl TextStyle {
        pub(crate) fn line(&self, r: &Record, clock: &Clock) -> String {
            let mut l = String::new();
            self.write_line(r, clock, &mut l);
            l
        }
    }

    fn json_line(r: &Record, clock: &Clock) -> String {
        serde_json::to_string(&JsonRecord::new(r, clock)).unwrap()
    }

    fn clock() -> Clock {
        Clock {
            offset_ns: 1_700_000_000_000_000_000,
            start_mono_ns: 0,
        }
    }

    #[test]
    fn payloads_cannot_forge_lines() {
        assert_eq!(escape("plain /a b"), "plain /a b");
        assert_eq!(escape("a\nb\r\t\\"), "a\\nb\\r\\t\\\\");
        assert_eq!(escape("\x1b[31m"), "\\x1b[31m");
        assert_eq!(escape("\u{85}x\u{2028}"), "\\x85x\u{2028}");
        let mut p = Pairing::new();
        p.push(ev(
            Probe::Request,
            1,
            11,
            "/a",
            "v\n6   0      0   XS_READ: forged",
        ));
        let r = p.push(ev(Probe::Response, 1, 11, "OK", "")).unwrap();
        let line = TextStyle::default().line(&r, &clock());
        assert_eq!(line.lines().count(), 1, "{line}");
        assert!(line.contains("\\n6   0"), "{line}");
        let json = json_line(&r, &clock());
        assert_eq!(json.lines().count(), 1);
    }

    #[test]
    fn classic_lines() {
        let style = TextStyle::default();
        assert_eq!(style.header(), "DOM PID    COMM            TX  OP");
        let mut p = Pairing::new();
        p.push(ev(Probe::Request, 1, 10, "6", ""));
        let r = p
            .push(ev(Probe::Response, 1, 10, "/local/domain/6", ""))
            .unwrap();
        assert_eq!(
            style.line(&r, &clock()),
            "0   100    -               0   XS_GET_DOMAIN_PATH: 6 -> /local/domain/6"
        );
        p.push(ev(Probe::Request, 2, 2, "device/vif/0/type", ""));
        let mut resp = ev(Probe::Response, 2, 2, "ENOENT", "no such node");
        resp.extra = response_extra(2, 0);
        let r = p.push(resp).unwrap();
        assert_eq!(
            style.line(&r, &clock()),
            "0   100    -               0   [ERROR] XS_READ: device/vif/0/type -> ENOENT"
        );
        let verbose = TextStyle {
            verbose: true,
            ..style
        };
        assert!(verbose
            .line(&r, &clock())
            .ends_with("-> ENOENT (no such node)"));
        let w = p
            .push(ev(
                Probe::WatchEvent,
                3,
                15,
                "/local/domain/6/x",
                "FFFF0001",
            ))
            .unwrap();
        assert_eq!(
            style.line(&w, &clock()),
            "0   100    -               -   XS_WATCH_EVENT: /local/domain/6/x FFFF0001"
        );
        p.push(ev(Probe::Request, 5, 6, "", ""));
        let r = p.push(ev(Probe::Response, 5, 6, "930", "")).unwrap();
        assert!(style
            .line(&r, &clock())
            .ends_with("XS_TRANSACTION_START: -> 930"));
        p.push(ev(Probe::Request, 4, 2, "/n", ""));
        let left = p.unanswered();
        assert!(style.line(&left[0], &clock()).ends_with("XS_READ: /n -> ?"));
    }

    #[test]
    fn time_and_latency_columns() {
        let style = TextStyle {
            time: TimeColumn::Relative,
            latency: true,
            verbose: false,
        };
        assert_eq!(
            style.header(),
            "TIME(s)      DOM PID    COMM            TX    LAT(us) OP"
        );
        let mut p = Pairing::new();
        p.push(ev(Probe::Request, 2, 2, "/a", ""));
        let mut resp = ev(Probe::Response, 2, 2, "x", "");
        resp.mono_ns = 2000 + 12_500;
        let r = p.push(resp).unwrap();
        assert_eq!(
            style.line(&r, &clock()),
            "0.000002     0   100    -               0        12.5 XS_READ: /a -> x"
        );
    }

    #[test]
    fn json_has_the_schema_keys() {
        let mut p = Pairing::new();
        p.push(ev(Probe::Request, 5, 2, "/a", ""));
        let mut resp = ev(Probe::Response, 5, 2, "ENOENT", "");
        resp.extra = response_extra(2, 9);
        let r = p.push(resp).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json_line(&r, &clock())).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut schema = JSON_KEYS.to_vec();
        schema.sort();
        assert_eq!(keys, schema, "JSON_KEYS is not what JsonRecord writes");
        assert_eq!(v["kind"], "op");
        assert_eq!(v["op"], "XS_READ");
        assert_eq!(v["error"], "ENOENT");
        assert_eq!(v["error_reason"], serde_json::Value::Null);
        assert_eq!(v["latency_us"], 0.0);
        assert_eq!(v["ts"], "2023-11-14T22:13:20.000005Z");
    }
}
