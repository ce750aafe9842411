//! The snooper's record: one output line (an operation, or a lone event),
//! what pairing makes of events and what filters, names, output, summaries
//! and trace files read. Types only, so every stage can name them without
//! naming the stage that builds them.

use std::borrow::Cow;
use xenstore_proto::{wire, Ident};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Op,
    WatchEvent,
    ConnOpen,
    ConnClose,
    TxEnd,
}

/// One output line: an operation or a lone event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub kind: Kind,
    /// For an op, the request's time.
    pub mono_ns: u64,
    pub serial: u64,
    pub conn: u32,
    pub dom: u16,
    pub pid: u32,
    /// The client's name (see names.rs); None when unknown. Set by the
    /// session, not by pairing.
    pub comm: Option<std::rc::Rc<str>>,
    /// None for watch events and connection events (printed `-`).
    pub tx: Option<u32>,
    pub req_id: Option<u32>,
    pub op: Option<u16>,
    pub path: String,
    pub value: String,
    /// Reply payload or error name; None when no reply came ("?").
    pub result: Option<String>,
    pub error: Option<String>,
    pub error_reason: Option<String>,
    pub latency_ns: Option<u64>,
    pub fired_by: Option<u64>,
    pub token: Option<String>,
    pub truncated: bool,
    /// What the daemon cut from the request's strings, and the reply's.
    pub request_cut: Cut,
    pub reply_cut: Cut,
}

impl Record {
    pub fn op_name(&self) -> Cow<'static, str> {
        match self.op {
            Some(Ident::OP_OUT_OF_RANGE) => Cow::Borrowed("XS_UNKNOWN(>65534)"),
            Some(op) => wire::msg_name(op as u32)
                .map(Cow::Borrowed)
                .unwrap_or_else(|| Cow::Owned(format!("XS_UNKNOWN({op})"))),
            None => Cow::Borrowed(""),
        }
    }
}

/// What the daemon cut from one side (request or reply) of a record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Cut {
    /// Nothing.
    #[default]
    Whole,
    /// This many bytes.
    Bytes(u64),
    /// Something, but how much is unknown (a daemon without the
    /// `truncated` probe, or its event lost).
    Unknown,
}

impl Cut {
    pub fn is_cut(self) -> bool {
        self != Cut::Whole
    }

    /// The text mark after a cut string: `…[+N bytes]`, or `…[cut]`.
    pub fn mark(self) -> Option<String> {
        match self {
            Cut::Whole => None,
            Cut::Bytes(n) => Some(format!("…[+{n} bytes]")),
            Cut::Unknown => Some("…[cut]".to_string()),
        }
    }
}
