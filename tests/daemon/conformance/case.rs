//! The conformance case format (tests/conformance/cases/*.xs): scripted
//! byte-level sessions over several connections, with the replies recorded
//! from C xenstored. See tests/conformance/README.md for the syntax.

use std::path::{Path, PathBuf};

pub struct CaseFile {
    pub path: PathBuf,
    pub lines: Vec<String>,
    pub cases: Vec<Case>,
}

pub struct Case {
    /// "<file stem>/<case name>", unique across the suite.
    pub name: String,
    /// Why the shim deliberately differs from C xenstored (DIFFERENCES.md).
    pub differs: Option<String>,
    /// Why oxenstored differs from C xenstored here.
    pub oxenstored: Option<String>,
    /// Why C xenstored 4.20 differs from 4.17 here (DIFFERENCES.md).
    pub xen420: Option<String>,
    pub steps: Vec<Step>,
}

pub struct Step {
    /// Index into `CaseFile::lines` of the step's own line.
    pub line: usize,
    pub conn: String,
    pub action: Action,
    /// The recorded messages, rendered as in the file (without "= ").
    pub expect: Vec<String>,
    /// In a `differs:` case, what the shim must answer instead (`~` lines;
    /// `~ nothing` for no message). None: the same as C xenstored.
    pub shim_expect: Option<Vec<String>>,
    /// In a `xen-4.20:` case, what C xenstored 4.20 answers instead
    /// (`4.20 =` lines; `4.20 = nothing` for no message).
    pub xen420_expect: Option<Vec<String>>,
}

pub enum Action {
    /// A request; unless `wait` is false, read until its reply arrives.
    Send {
        ty: u32,
        req: Option<u32>,
        tx: Tx,
        len: Option<u32>,
        payload: Vec<u8>,
        wait: bool,
        capture: Option<String>,
    },
    /// Arbitrary bytes on the wire; then read one reply unless `wait` is false.
    Raw {
        bytes: Vec<u8>,
        wait: bool,
    },
    /// Read exactly one message (a watch event, usually).
    Wait,
    /// Expect no message within a short while.
    Quiet,
    Close,
}

pub enum Tx {
    Num(u32),
    Var(String),
}

pub fn load_dir(dir: &Path) -> Vec<CaseFile> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "xs"))
        .collect();
    paths.sort();
    paths.iter().map(|p| load(p)).collect()
}

pub fn load(path: &Path) -> CaseFile {
    let text = std::fs::read_to_string(path).unwrap();
    let stem = path.file_stem().unwrap().to_string_lossy().to_string();
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut cases: Vec<Case> = Vec::new();
    for (i, raw) in lines.iter().enumerate() {
        let at = || format!("{}:{}", path.display(), i + 1);
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix("case ") {
            let name = format!("{stem}/{}", name.trim());
            assert!(
                !cases.iter().any(|c| c.name == name),
                "{}: duplicate case {name}",
                at()
            );
            cases.push(Case {
                name,
                differs: None,
                oxenstored: None,
                xen420: None,
                steps: Vec::new(),
            });
            continue;
        }
        let case = cases
            .last_mut()
            .unwrap_or_else(|| panic!("{}: line outside a case", at()));
        if let Some(why) = line.strip_prefix("differs:") {
            case.differs = Some(why.trim().to_string());
        } else if let Some(why) = line.strip_prefix("oxenstored:") {
            case.oxenstored = Some(why.trim().to_string());
        } else if let Some(why) = line.strip_prefix("xen-4.20:") {
            case.xen420 = Some(why.trim().to_string());
        } else if let Some(msg) = line.strip_prefix("4.20 =") {
            let step = case
                .steps
                .last_mut()
                .unwrap_or_else(|| panic!("{}: 4.20 expectation before any step", at()));
            let list = step.xen420_expect.get_or_insert_with(Vec::new);
            if msg.trim() != "nothing" {
                list.push(msg.trim().to_string());
            }
        } else if let Some(msg) = line.strip_prefix('~') {
            let step = case
                .steps
                .last_mut()
                .unwrap_or_else(|| panic!("{}: shim expectation before any step", at()));
            let list = step.shim_expect.get_or_insert_with(Vec::new);
            if msg.trim() != "nothing" {
                list.push(msg.trim().to_string());
            }
        } else if let Some(msg) = line.strip_prefix('=') {
            case.steps
                .last_mut()
                .unwrap_or_else(|| panic!("{}: expectation before any step", at()))
                .expect
                .push(msg.trim().to_string());
        } else {
            let step = parse_step(line).unwrap_or_else(|e| panic!("{}: {e}", at()));
            case.steps.push(Step {
                line: i,
                conn: step.0,
                action: step.1,
                expect: Vec::new(),
                shim_expect: None,
                xen420_expect: None,
            });
        }
    }
    CaseFile {
        path: path.to_path_buf(),
        lines,
        cases,
    }
}

fn parse_step(line: &str) -> Result<(String, Action), String> {
    let (conn, rest) = line.split_once(':').ok_or("expected `<conn>: <action>`")?;
    let conn = conn.trim().to_string();
    let tokens = tokenize(rest)?;
    let mut it = tokens.into_iter();
    let op = match it.next() {
        Some(Token::Word(w)) => w,
        _ => return Err("missing action".into()),
    };
    let mut req = None;
    let mut tx = Tx::Num(0);
    let mut len = None;
    let mut payload = Vec::new();
    let mut wait = true;
    let mut capture = None;
    while let Some(tok) = it.next() {
        match tok {
            Token::Bytes(b) => payload.extend(b),
            Token::Word(w) if w == "nowait" => wait = false,
            Token::Word(w) if w == "->" => match it.next() {
                Some(Token::Word(v)) if v.starts_with('$') => capture = Some(v[1..].to_string()),
                _ => return Err("`->` needs a $variable".into()),
            },
            Token::Word(w) => {
                let (k, v) = w.split_once('=').ok_or(format!("unknown word {w}"))?;
                let num = || v.parse::<u32>().map_err(|e| format!("{k}={v}: {e}"));
                match k {
                    "req" => req = Some(num()?),
                    "len" => len = Some(num()?),
                    "tx" => {
                        tx = match v.strip_prefix('$') {
                            Some(var) => Tx::Var(var.to_string()),
                            None => Tx::Num(num()?),
                        }
                    }
                    _ => return Err(format!("unknown key {k}")),
                }
            }
        }
    }
    let action = match op.as_str() {
        "wait" => Action::Wait,
        "quiet" => Action::Quiet,
        "close" => Action::Close,
        "raw" => Action::Raw {
            bytes: payload,
            wait,
        },
        _ => {
            let ty = op
                .parse::<u32>()
                .ok()
                .or_else(|| xenstore_proto::wire::msg_type_by_name(&op))
                .ok_or(format!("unknown message type {op}"))?;
            Action::Send {
                ty,
                req,
                tx,
                len,
                payload,
                wait,
                capture,
            }
        }
    };
    Ok((conn, action))
}

enum Token {
    Word(String),
    Bytes(Vec<u8>),
}

/// Words, and quoted byte strings with C escapes (\0 \n \t \\ \" \xHH),
/// optionally repeated: "ab"*3 is "ababab".
fn tokenize(s: &str) -> Result<Vec<Token>, String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_whitespace() {
            i += 1;
        } else if b[i] == b'#' {
            break;
        } else if b[i] == b'"' {
            i += 1;
            let mut bytes = Vec::new();
            loop {
                let c = *b.get(i).ok_or("unterminated string")?;
                i += 1;
                match c {
                    b'"' => break,
                    b'\\' => {
                        let e = *b.get(i).ok_or("dangling escape")?;
                        i += 1;
                        bytes.push(match e {
                            b'0' => 0,
                            b'n' => b'\n',
                            b't' => b'\t',
                            b'\\' => b'\\',
                            b'"' => b'"',
                            b'x' => {
                                let hex = s.get(i..i + 2).ok_or("short \\x escape")?;
                                i += 2;
                                u8::from_str_radix(hex, 16).map_err(|e| e.to_string())?
                            }
                            _ => return Err(format!("unknown escape \\{}", e as char)),
                        });
                    }
                    _ => bytes.push(c),
                }
            }
            if b.get(i) == Some(&b'*') {
                let end = (i + 1..b.len())
                    .find(|&j| !b[j].is_ascii_digit())
                    .unwrap_or(b.len());
                let n: usize = s[i + 1..end].parse().map_err(|_| "bad repeat count")?;
                bytes = bytes.repeat(n);
                i = end;
            }
            out.push(Token::Bytes(bytes));
        } else {
            let end = (i..b.len())
                .find(|&j| b[j].is_ascii_whitespace())
                .unwrap_or(b.len());
            out.push(Token::Word(s[i..end].to_string()));
            i = end;
        }
    }
    Ok(out)
}

/// A step's action in the case syntax (without its connection); a request
/// with its type's name, its transaction and its capture.
pub fn action_text(action: &Action) -> String {
    match action {
        Action::Send {
            ty,
            tx,
            payload,
            capture,
            ..
        } => {
            let name = xenstore_proto::wire::msg_name(*ty)
                .map(|n| n.trim_start_matches("XS_").to_string())
                .unwrap_or_else(|| ty.to_string());
            let tx = match tx {
                Tx::Num(0) => String::new(),
                Tx::Num(n) => format!(" tx={n}"),
                Tx::Var(v) => format!(" tx=${v}"),
            };
            let capture = capture
                .as_ref()
                .map(|v| format!(" -> ${v}"))
                .unwrap_or_default();
            format!("{name}{tx} {}{capture}", quote(payload))
        }
        Action::Quiet => "quiet".to_string(),
        Action::Wait => "wait".to_string(),
        Action::Close => "close".to_string(),
        Action::Raw { bytes, .. } => format!("raw {}", quote(bytes)),
    }
}

/// Bytes as a quoted string in the same escape syntax, long runs of one
/// byte folded into `"x"*N`.
pub fn quote(bytes: &[u8]) -> String {
    let mut out = String::new();
    let mut i = 0;
    let mut open = false;
    while i < bytes.len() {
        let run = bytes[i..].iter().take_while(|&&c| c == bytes[i]).count();
        if run >= 16 {
            if open {
                out.push_str("\" ");
                open = false;
            }
            out.push_str(&format!("\"{}\"*{run} ", escape(bytes[i])));
            i += run;
            continue;
        }
        if !open {
            out.push('"');
            open = true;
        }
        out.push_str(&escape(bytes[i]));
        i += 1;
    }
    if open {
        out.push('"');
    }
    if out.is_empty() {
        out.push_str("\"\"");
    }
    out.trim_end().to_string()
}

fn escape(c: u8) -> String {
    match c {
        0 => "\\0".into(),
        b'\n' => "\\n".into(),
        b'\t' => "\\t".into(),
        b'\\' => "\\\\".into(),
        b'"' => "\\\"".into(),
        0x20..=0x7e => (c as char).to_string(),
        _ => format!("\\x{c:02x}"),
    }
}

/// The file with every step's expectations replaced by `recorded` (indexed
/// like the steps of each case, in file order).
pub fn rewrite(file: &CaseFile, recorded: &[Vec<Vec<String>>]) -> String {
    let mut by_line = std::collections::HashMap::new();
    for (case, steps) in file.cases.iter().zip(recorded) {
        for (step, msgs) in case.steps.iter().zip(steps) {
            by_line.insert(step.line, msgs);
        }
    }
    let mut out = String::new();
    for (i, line) in file.lines.iter().enumerate() {
        if line.trim_start().starts_with('=') {
            continue;
        }
        out.push_str(line);
        out.push('\n');
        if let Some(msgs) = by_line.get(&i) {
            let indent: String = line.chars().take_while(|c| c.is_whitespace()).collect();
            for m in msgs.iter() {
                out.push_str(&format!("{indent}  = {m}\n"));
            }
        }
    }
    out
}

/// The file with its `4.20 =` lines replaced by `pins` (step line index ->
/// C xenstored 4.20's messages), each after its step's `=` lines.
pub fn rewrite_xen420(
    file: &CaseFile,
    pins: &std::collections::HashMap<usize, Vec<String>>,
) -> String {
    let mut out = String::new();
    let mut pending: Option<(String, &Vec<String>)> = None;
    let flush = |out: &mut String, pending: &mut Option<(String, &Vec<String>)>| {
        if let Some((indent, msgs)) = pending.take() {
            if msgs.is_empty() {
                out.push_str(&format!("{indent}  4.20 = nothing\n"));
            }
            for m in msgs {
                out.push_str(&format!("{indent}  4.20 = {m}\n"));
            }
        }
    };
    for (i, line) in file.lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("4.20 =") {
            continue;
        }
        if !trimmed.starts_with('=') {
            flush(&mut out, &mut pending);
        }
        out.push_str(line);
        out.push('\n');
        if let Some(msgs) = pins.get(&i) {
            let indent: String = line.chars().take_while(|c| c.is_whitespace()).collect();
            pending = Some((indent, msgs));
        }
    }
    flush(&mut out, &mut pending);
    out
}
