//! Trace files (`-w FILE`, `-r FILE`): JSON lines, versioned.
//!
//! Line 1 is the header (`"trace":"header"`, the format name and version,
//! the snooper's start clock); then one line per record, exactly as
//! `--json` prints it (so `jq` and grep work on both), written before any
//! user-space filter; `"trace":"lost"` lines whenever the kernel reports
//! more lost events; last, an `"trace":"end"` line with the final counts.
//! A file without its end line (a killed snooper) replays up to the cut.
//! Records are the paired level, not raw probe firings, so a trace does
//! not depend on the back end or on which probes delivered the pair.

use crate::output::{Clock, JsonRecord};
use crate::record::Cut;
use crate::record::Record;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use xenstore_proto::{wire, Ident};

/// The header's `format`.
pub const FORMAT: &str = "xenstore-snoop-trace";
/// The format version this snooper writes and reads.
pub const VERSION: u32 = 1;
/// Longer lines are rejected rather than buffered (a probe's strings are a
/// few KiB at most).
const MAX_LINE: usize = 16 << 20;

/// The first line: what was traced, and the clock to show times with.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub format: String,
    pub version: u32,
    /// The xenstore-snoop version that wrote the file.
    pub snooper: String,
    /// The snooper's start, RFC 3339 UTC (for people; `start_mono_ns` and
    /// `realtime_offset_ns` are what -T and --relative use).
    pub started: String,
    pub start_mono_ns: u64,
    /// CLOCK_REALTIME − CLOCK_MONOTONIC at the start, ns.
    pub realtime_offset_ns: i64,
    pub daemon_pid: u32,
    pub daemon_binary: String,
    /// The in-kernel filter (`-d`): records of other domains were never seen.
    pub kernel_filter: Option<String>,
    /// The snooper's command line.
    pub command: Vec<String>,
}

impl Header {
    pub fn new(
        clock: &Clock,
        daemon_pid: u32,
        daemon_binary: &Path,
        kernel_filter: Option<String>,
    ) -> Header {
        Header {
            format: FORMAT.into(),
            version: VERSION,
            snooper: env!("CARGO_PKG_VERSION").into(),
            started: clock
                .wall(clock.start_mono_ns)
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            start_mono_ns: clock.start_mono_ns,
            realtime_offset_ns: clock.offset_ns as i64,
            daemon_pid,
            // The file itself, not /proc/PID/exe.
            daemon_binary: std::fs::canonicalize(daemon_binary)
                .unwrap_or_else(|_| daemon_binary.to_path_buf())
                .display()
                .to_string(),
            kernel_filter,
            command: std::env::args().collect(),
        }
    }

    /// The live session's clock, so -T and --relative show what they showed.
    pub fn clock(&self) -> Clock {
        Clock {
            offset_ns: self.realtime_offset_ns.into(),
            start_mono_ns: self.start_mono_ns,
        }
    }
}

/// The last line: the session's final counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct End {
    pub mono_ns: u64,
    /// Probe firings read from the kernel.
    pub seen: u64,
    /// Probe firings the kernel dropped (ring buffers full).
    pub lost: u64,
    pub undecodable: u64,
    /// Requests or replies given up unpaired to bound memory.
    pub unmatched_dropped: u64,
    pub corrupt_bytes: u64,
    /// Why the session ended (signal, duration, count, ...).
    pub stopped: String,
}

/// The lines that are not records, told apart by their `trace` key.
#[derive(Serialize, Deserialize)]
#[serde(tag = "trace", rename_all = "snake_case")]
enum Meta {
    Header(Header),
    /// The kernel's lost-event count grew to `lost` (a running total).
    Lost {
        mono_ns: u64,
        lost: u64,
    },
    End(End),
}

/// Writes a trace as the session goes; flushed after each batch so a
/// killed snooper leaves whole lines up to its last batch.
pub struct Writer {
    out: std::io::BufWriter<std::fs::File>,
    path: PathBuf,
    clock: Clock,
}

impl Writer {
    /// Creates (or truncates) `path`, readable by its owner only (values
    /// in the store can be secrets), and writes the header.
    pub fn create(path: &Path, header: &Header) -> Result<Writer> {
        use std::os::unix::fs::OpenOptionsExt;
        if path == Path::new("-") {
            bail!("-w -: write the trace to a file (--json prints the same records on stdout)");
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("-w: creating {}", path.display()))?;
        let mut w = Writer {
            out: std::io::BufWriter::with_capacity(1 << 16, file),
            path: path.to_path_buf(),
            clock: header.clock(),
        };
        w.meta(&Meta::Header(header.clone()))?;
        w.flush()?;
        Ok(w)
    }

    pub fn record(&mut self, r: &Record) -> Result<()> {
        let line = JsonRecord::new(r, &self.clock);
        self.line(|out| serde_json::to_writer(out, &line))
    }

    /// The kernel's lost-event count is now `total`.
    pub fn lost(&mut self, mono_ns: u64, total: u64) -> Result<()> {
        self.meta(&Meta::Lost {
            mono_ns,
            lost: total,
        })
    }

    pub fn flush(&mut self) -> Result<()> {
        self.out
            .flush()
            .with_context(|| format!("-w: writing {}", self.path.display()))
    }

    /// Writes the end line and closes the file (which may be a pipe, as
    /// with `-w >(gzip >trace.gz)`: no fsync).
    pub fn finish(mut self, end: End) -> Result<()> {
        self.meta(&Meta::End(end))?;
        self.flush()
    }

    fn meta(&mut self, m: &Meta) -> Result<()> {
        self.line(|out| serde_json::to_writer(out, m))
    }

    fn line(
        &mut self,
        write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> serde_json::Result<()>,
    ) -> Result<()> {
        write(&mut self.out)
            .map_err(std::io::Error::from)
            .and_then(|()| self.out.write_all(b"\n"))
            .with_context(|| format!("-w: writing {}", self.path.display()))
    }
}

/// One line of a trace after the header.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Record(Record),
    Lost { mono_ns: u64, total: u64 },
    End(End),
}

/// Reads a trace line by line; every problem names the line.
pub struct Reader<R> {
    input: R,
    name: String,
    pub header: Header,
    line_no: usize,
    buf: Vec<u8>,
    ended: bool,
    /// Set at the end of input when the trace has no end line: why.
    pub cut: Option<String>,
}

impl<R: BufRead> Reader<R> {
    /// Reads and checks the header; `name` is the file's name for messages.
    pub fn open(input: R, name: &str) -> Result<Reader<R>> {
        let mut r = Reader {
            input,
            name: name.to_string(),
            header: Header::default(),
            line_no: 0,
            buf: Vec::new(),
            ended: false,
            cut: None,
        };
        let not_a_trace =
            || format!("{name} is not a {FORMAT} file (written by xenstore-snoop -w)");
        let Some((text, _)) = r.read_line()? else {
            bail!("{}: the file is empty", not_a_trace());
        };
        let v: serde_json::Value = serde_json::from_str(&text).with_context(not_a_trace)?;
        if v["trace"] != "header" || v["format"] != FORMAT {
            bail!(not_a_trace());
        }
        match v["version"].as_u64() {
            Some(n) if n == u64::from(VERSION) => {}
            Some(n) => bail!(
                "{name}: trace format version {n}; this xenstore-snoop reads version {VERSION}"
            ),
            None => bail!("{name}:1: the header has no version number"),
        }
        match serde_json::from_value(v) {
            Ok(Meta::Header(h)) => r.header = h,
            Ok(_) => unreachable!("checked the tag above"),
            Err(e) => bail!("{name}:1: bad header: {e}"),
        }
        Ok(r)
    }

    /// The next item, or None at the end of the input (see `cut`).
    pub fn next_item(&mut self) -> Result<Option<Item>> {
        loop {
            let Some((text, whole)) = self.read_line()? else {
                if !self.ended && self.cut.is_none() {
                    self.cut = Some(format!(
                        "{} ends after line {} without its end line \
                         (the snooper was killed, or is still writing)",
                        self.name, self.line_no
                    ));
                }
                return Ok(None);
            };
            if text.trim().is_empty() {
                continue;
            }
            let at = format!("{}:{}", self.name, self.line_no);
            if self.ended {
                bail!("{at}: a line after the end line");
            }
            let item = serde_json::from_str::<serde_json::Value>(&text)
                .map_err(anyhow::Error::from)
                .and_then(item_of);
            match item {
                Ok(item) => {
                    self.ended = matches!(item, Item::End(_));
                    return Ok(Some(item));
                }
                // The last line of a killed snooper's file.
                Err(_) if !whole => {
                    self.cut = Some(format!(
                        "{at}: the last line is cut short \
                         (the snooper was killed, or is still writing)"
                    ));
                    return Ok(None);
                }
                Err(e) => return Err(e.context(at)),
            }
        }
    }

    /// A line without its newline, and whether it had one; None at the end.
    fn read_line(&mut self) -> Result<Option<(String, bool)>> {
        self.buf.clear();
        let limit = MAX_LINE as u64 + 1;
        let n = (&mut self.input)
            .take(limit)
            .read_until(b'\n', &mut self.buf)
            .with_context(|| format!("reading {}", self.name))?;
        if n == 0 {
            return Ok(None);
        }
        self.line_no += 1;
        let whole = self.buf.last() == Some(&b'\n');
        if whole {
            self.buf.pop();
        } else if self.buf.len() > MAX_LINE {
            bail!(
                "{}:{}: line longer than {} MiB",
                self.name,
                self.line_no,
                MAX_LINE >> 20
            );
        }
        match std::str::from_utf8(&self.buf) {
            Ok(s) => Ok(Some((s.to_owned(), whole))),
            Err(e) if whole => bail!("{}:{}: not UTF-8: {e}", self.name, self.line_no),
            // cut inside a character: the caller reports the cut
            Err(_) => Ok(Some((
                String::from_utf8_lossy(&self.buf).into_owned(),
                false,
            ))),
        }
    }
}

fn item_of(v: serde_json::Value) -> Result<Item> {
    if !v.is_object() {
        bail!("not a JSON object");
    }
    if v.get("trace").is_some() {
        return Ok(match serde_json::from_value(v)? {
            Meta::Header(_) => bail!("a second header"),
            Meta::Lost { mono_ns, lost } => Item::Lost {
                mono_ns,
                total: lost,
            },
            Meta::End(e) => Item::End(e),
        });
    }
    Ok(Item::Record(
        serde_json::from_value::<JsonRecord>(v)?.into_record()?,
    ))
}

/// A record line read back: `ts` is derived, not read.
impl JsonRecord<'_> {
    fn into_record(self) -> Result<Record> {
        let op = self.op.as_deref().map(op_number).transpose()?;
        let latency_ns = match self.latency_us {
            None => None,
            // Written as ns / 1e3: exact back to the ns for any real latency.
            Some(us) if us.is_finite() && (0.0..1.8e13).contains(&us) => {
                Some((us * 1e3).round() as u64)
            }
            Some(us) => bail!("bad latency_us {us}"),
        };
        // The line keeps only the total cut: put it where the daemon cuts
        // (a request's value gives way first; a value-less request's result).
        let cut = match (self.truncated, self.truncated_bytes) {
            (false, _) => Cut::Whole,
            (true, Some(n)) => Cut::Bytes(n),
            (true, None) => Cut::Unknown,
        };
        let (request_cut, reply_cut) = if self.value.is_empty() && self.result.is_some() {
            (Cut::Whole, cut)
        } else {
            (cut, Cut::Whole)
        };
        Ok(Record {
            kind: self.kind,
            comm: self.comm.map(|c| std::rc::Rc::from(c.as_ref())),
            request_cut,
            reply_cut,
            mono_ns: self.mono_ns,
            serial: self.serial,
            conn: self.conn,
            dom: self.dom,
            pid: self.pid,
            tx: self.tx,
            req_id: self.req_id,
            op,
            path: self.path.into_owned(),
            value: self.value.into_owned(),
            result: self.result.map(Cow::into_owned),
            error: self.error.map(Cow::into_owned),
            error_reason: self.error_reason.map(Cow::into_owned),
            latency_ns,
            fired_by: self.fired_by,
            token: self.token.map(Cow::into_owned),
            truncated: self.truncated,
        })
    }
}

/// The wire type of an op name as `Record::op_name` writes it.
fn op_number(name: &str) -> Result<u16> {
    if name == "XS_UNKNOWN(>65534)" {
        return Ok(Ident::OP_OUT_OF_RANGE);
    }
    if let Some(n) = name
        .strip_prefix("XS_UNKNOWN(")
        .and_then(|s| s.strip_suffix(')'))
    {
        return n
            .parse()
            .ok()
            .filter(|&n| n != Ident::OP_OUT_OF_RANGE)
            .with_context(|| format!("bad op {name:?}"));
    }
    match wire::msg_type_by_name(name) {
        Some(t) if name.starts_with("XS_") => Ok(t as u16),
        _ => bail!("unknown op {name:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Probe;
    use crate::pairing::tests::{ev, response_extra};
    use crate::pairing::Pairing;
    use crate::record::Kind;

    fn clock() -> Clock {
        Clock {
            offset_ns: 1_700_000_000_000_000_000,
            start_mono_ns: 500,
        }
    }

    fn header() -> Header {
        Header::new(&clock(), 42, Path::new("/usr/sbin/xenstored-shim"), None)
    }

    /// Every field set, none at its default: a field added to Record must
    /// be added here (the literal has no `..`) and so to the trace.
    fn full_record() -> Record {
        Record {
            kind: Kind::Op,
            mono_ns: 123_456_789,
            serial: 77,
            conn: 0x8000_0003,
            dom: 6,
            pid: 4242,
            comm: Some("xl".into()),
            tx: Some(930),
            req_id: Some(12),
            op: Some(11),
            path: "/local/domain/6/a\nb".into(),
            value: "v\u{0}w é".into(),
            result: Some("EACCES".into()),
            error: Some("EACCES".into()),
            error_reason: Some("no write permission".into()),
            latency_ns: Some(12_345_678),
            fired_by: Some(76),
            token: Some("tok".into()),
            truncated: true,
            request_cut: Cut::Bytes(1234),
            reply_cut: Cut::Whole,
        }
    }

    fn records() -> Vec<Record> {
        let mut p = Pairing::new();
        let mut out = vec![full_record()];
        p.push(ev(Probe::Request, 1, 2, "/a", ""));
        let mut resp = ev(Probe::Response, 1, 2, "ENOENT", "");
        resp.extra = response_extra(2, 9);
        out.extend(p.push(resp));
        out.extend(p.push(ev(Probe::WatchEvent, 1, 15, "/a", "t")));
        out.extend(p.push(ev(Probe::ConnOpen, 2, 0, "unix", "pid 7")));
        out.extend(p.push(ev(Probe::ConnClose, 3, 0, "EOF", "")));
        out.extend(p.push(ev(Probe::TxEnd, 4, 0, "conflict", "EAGAIN")));
        p.push(ev(Probe::Request, 5, 0xffff, "/x", ""));
        p.push(ev(Probe::Request, 6, 300, "/y", ""));
        out.extend(p.unanswered());
        out
    }

    fn write(items: &[Item]) -> Vec<u8> {
        let path = std::env::temp_dir().join(format!(
            "xs-trace-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let mut w = Some(Writer::create(&path, &header()).unwrap());
        for item in items {
            let open = w.as_mut().expect("nothing after the end");
            match item {
                Item::Record(r) => open.record(r).unwrap(),
                Item::Lost { mono_ns, total } => open.lost(*mono_ns, *total).unwrap(),
                Item::End(e) => w.take().unwrap().finish(e.clone()).unwrap(),
            }
        }
        if let Some(mut w) = w {
            w.flush().unwrap();
        }
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        bytes
    }

    fn read_all(bytes: &[u8]) -> Result<(Vec<Item>, Option<String>)> {
        let mut r = Reader::open(bytes, "t.jsonl")?;
        assert_eq!(r.header, header());
        let mut items = Vec::new();
        while let Some(item) = r.next_item()? {
            items.push(item);
        }
        Ok((items, r.cut))
    }

    fn session() -> Vec<Item> {
        let mut items: Vec<Item> = records().into_iter().map(Item::Record).collect();
        items.insert(
            2,
            Item::Lost {
                mono_ns: 900,
                total: 17,
            },
        );
        items.push(Item::End(End {
            mono_ns: 1000,
            seen: 10,
            lost: 17,
            undecodable: 1,
            unmatched_dropped: 2,
            corrupt_bytes: 3,
            stopped: "signal".into(),
        }));
        items
    }

    #[test]
    fn every_record_and_count_round_trips() {
        let items = session();
        let bytes = write(&items);
        let (back, cut) = read_all(&bytes).unwrap();
        assert_eq!(back, items);
        assert_eq!(cut, None);
        // Written again from what was read: the same bytes, so no key of
        // the --json line is dropped on the way (a new one must be read too).
        assert_eq!(write(&back), bytes);
        let text = String::from_utf8(bytes).unwrap();
        let first = text.lines().next().unwrap();
        assert!(
            first.starts_with(r#"{"trace":"header","format":"xenstore-snoop-trace","version":1,"#),
            "{first}"
        );
        assert!(text
            .lines()
            .last()
            .unwrap()
            .starts_with(r#"{"trace":"end","#));
        // A record line is exactly the --json line.
        let line = text.lines().nth(1).unwrap();
        let json = serde_json::to_string(&JsonRecord::new(&full_record(), &clock())).unwrap();
        assert_eq!(line, json);
        assert_eq!(text.lines().count(), items.len() + 1);
    }

    #[test]
    fn a_cut_file_replays_up_to_the_cut() {
        let items = session();
        let bytes = write(&items);
        let text = String::from_utf8(bytes.clone()).unwrap();
        // Cut inside the third record line (line 5 of the file).
        let upto: usize = text.lines().take(4).map(|l| l.len() + 1).sum();
        for cut_at in [upto, upto + 10] {
            let (back, cut) = read_all(&bytes[..cut_at]).unwrap();
            assert_eq!(back, items[..3], "cut at {cut_at}");
            let why = cut.unwrap();
            assert!(why.contains("killed"), "{why}");
            if cut_at > upto {
                assert!(
                    why.starts_with("t.jsonl:5: the last line is cut short"),
                    "{why}"
                );
            } else {
                assert!(why.contains("after line 4 without its end line"), "{why}");
            }
        }
        // Cut inside a multi-byte character of the last line.
        let full = serde_json::to_string(&JsonRecord::new(&full_record(), &clock())).unwrap();
        let at = full.find('é').unwrap() + 1;
        let mut partial = text.lines().next().unwrap().as_bytes().to_vec();
        partial.push(b'\n');
        partial.extend_from_slice(&full.as_bytes()[..at]);
        let (back, cut) = read_all(&partial).unwrap();
        assert!(back.is_empty());
        assert!(cut
            .unwrap()
            .contains("t.jsonl:2: the last line is cut short"));
    }

    #[test]
    fn bad_files_are_clear_errors() {
        let good = String::from_utf8(write(&session())).unwrap();
        let header = good.lines().next().unwrap();
        let err = |text: &str| match read_all(text.as_bytes()) {
            Ok(r) => panic!("accepted {text:?}: {r:?}"),
            Err(e) => format!("{e:#}"),
        };
        assert!(err("").contains("not a xenstore-snoop-trace file"));
        assert!(err("DOM PID TX OP\n").contains("not a xenstore-snoop-trace file"));
        assert!(err("{\"kind\":\"op\"}\n").contains("not a xenstore-snoop-trace file"));
        let v2 = header.replace("\"version\":1", "\"version\":2");
        assert!(err(&format!("{v2}\n")).contains("version 2; this xenstore-snoop reads version 1"));
        let no_version = header.replace("\"version\":1,", "");
        assert!(err(&no_version).contains("no version"));
        let bad_header = header.replace("\"daemon_pid\":42", "\"daemon_pid\":\"x\"");
        assert!(err(&bad_header).contains("t.jsonl:1: bad header"));

        let line2 = good.lines().nth(1).unwrap();
        let edit = |from: &str, to: &str| {
            assert!(line2.contains(from), "{from}");
            line2.replace(from, to)
        };
        let cases = [
            ("not json".to_string(), "t.jsonl:3"),
            ("[1,2]".into(), "not a JSON object"),
            (
                edit("\"kind\":\"op\"", "\"kind\":\"nope\""),
                "unknown variant `nope`",
            ),
            (edit("\"XS_WRITE\"", "\"XS_NOPE\""), "unknown op"),
            (edit("\"XS_WRITE\"", "\"WRITE\""), "unknown op"),
            (edit("\"serial\":77,", ""), "missing field `serial`"),
            (edit("\"dom\":6", "\"dom\":70000"), "t.jsonl:3"),
            (
                edit("\"latency_us\":12345.678", "\"latency_us\":-1"),
                "bad latency",
            ),
            (
                r#"{"trace":"header","format":"xenstore-snoop-trace","version":1}"#.into(),
                "t.jsonl:3",
            ),
            (good.lines().next().unwrap().into(), "a second header"),
            (r#"{"trace":"what"}"#.into(), "t.jsonl:3"),
        ];
        for (bad, want) in cases {
            let text = format!("{header}\n{line2}\n{bad}\n{line2}\n");
            let e = err(&text);
            assert!(e.contains(want), "{bad}: {e}");
            assert!(e.contains("t.jsonl:3"), "{bad}: {e}");
        }
        // Nothing may follow the end line.
        assert!(err(&format!("{good}{line2}\n")).contains("after the end line"));
        // Invalid UTF-8 in a whole line.
        let mut bytes = format!("{header}\n").into_bytes();
        bytes.extend_from_slice(b"\xff\xfe\n");
        let e = format!("{:#}", read_all(&bytes).unwrap_err());
        assert!(e.contains("t.jsonl:2: not UTF-8"), "{e}");
    }

    #[test]
    fn no_trace_to_stdout() {
        let e = Writer::create(Path::new("-"), &header()).err().unwrap();
        assert!(format!("{e:#}").contains("--json prints the same records"));
    }

    #[test]
    fn op_names_map_back_to_numbers() {
        for op in [1u16, 2, 11, 15, 30, 300, Ident::OP_OUT_OF_RANGE] {
            let r = Record {
                op: Some(op),
                ..full_record()
            };
            assert_eq!(op_number(&r.op_name()).unwrap(), op, "{}", r.op_name());
        }
        assert!(op_number("XS_UNKNOWN(65535)").is_err());
        assert!(op_number("XS_UNKNOWN(x)").is_err());
        assert!(op_number("read").is_err());
    }

    #[test]
    fn blank_lines_are_skipped_and_a_huge_line_refused() {
        let good = String::from_utf8(write(&session())).unwrap();
        let spaced = good.replace('\n', "\n\n");
        let (items, cut) = read_all(spaced.as_bytes()).unwrap();
        assert_eq!((items.len(), cut), (session().len(), None));
        let header = good.lines().next().unwrap();
        let huge = format!("{header}\n{}", "x".repeat(MAX_LINE + 2));
        let e = format!("{:#}", read_all(huge.as_bytes()).unwrap_err());
        assert!(e.contains("t.jsonl:2: line longer than 16 MiB"), "{e}");
    }
}
