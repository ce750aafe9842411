//! The `xenstore` USDT provider: its probes, in declaration order, and what
//! each argument carries: the six every probe has, then what a probe
//! appends (only `reply` does). xenstored-probes/src/xenstore.d
//! declares the same list for the linker; tests/contract/scripts_contract.rs checks
//! that file, the man page and the scripts against this one.

use crate::packing::{CutExtra, Field, RequestExtra, ResponseExtra};

/// The USDT provider's name.
pub const PROVIDER: &str = "xenstore";

/// The probes, in the order xenstore.d declares them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Probe {
    Request,
    Response,
    WatchEvent,
    ConnOpen,
    ConnClose,
    TxEnd,
    /// Appended after the first six: a request and its reply in one firing.
    Reply,
    /// Fired just before a probe (same serial, ident, client) that may cut
    /// a long string: how long its strings were.
    Truncated,
    /// `reply`'s numbers without its strings, for tracers that only count:
    /// the daemon renders nothing for it.
    ReplyStats,
    /// What `reply_stats`, `watch_event` and `tx_end` count, batched: a
    /// pointer to [`crate::stats::StatsRecord`]s and their number, one
    /// firing per batch (full, or [`crate::stats::FLUSH_AFTER_MS`] old).
    StatsBatch,
}

/// The arguments every probe starts with, in order: (name, C type in
/// xenstore.d). [`Probe::args`] gives a probe's whole list.
pub const ARGS: [(&str, &str); 6] = [
    ("serial", "uint64_t"),
    ("ident", "uint64_t"),
    ("client", "uint64_t"),
    ("extra", "uint64_t"),
    ("str1", "char*"),
    ("str2", "char*"),
];

/// Where each argument is at the probe site, by index: the registers the
/// notes name (`8@%rdi` ...). Fixed, so a tool that reads no more than six
/// USDT arguments (bpftrace 0.17) can read `reply`'s last two by register.
pub const ARG_REGISTERS: [&str; 8] = ["rdi", "rsi", "rdx", "rcx", "r8", "r9", "r10", "r11"];

/// `reply`'s arguments: the six, then str3 and latency_ns.
const REPLY_ARGS: [(&str, &str); 8] = [
    ARGS[0],
    ARGS[1],
    ARGS[2],
    ARGS[3],
    ARGS[4],
    ARGS[5],
    ("str3", "char*"),
    ("latency_ns", "uint64_t"),
];

/// `reply_stats`'s arguments: the six, then elapsed_ns (`reply`'s
/// latency_ns, named apart because a name has one position in the
/// contract and arg6 is `reply`'s str3).
const REPLY_STATS_ARGS: [(&str, &str); 7] = [
    ARGS[0],
    ARGS[1],
    ARGS[2],
    ARGS[3],
    ARGS[4],
    ARGS[5],
    ("elapsed_ns", "uint64_t"),
];

/// `stats_batch`'s arguments: the six (serial, ident and client 0, extra
/// the record count, str1 the layout's name, str2 ""), then the records'
/// address.
const STATS_BATCH_ARGS: [(&str, &str); 7] = [
    ARGS[0],
    ARGS[1],
    ARGS[2],
    ARGS[3],
    ARGS[4],
    ARGS[5],
    ("records", "uint64_t"),
];

/// What a probe's `extra` argument (arg3) holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extra {
    /// Bit fields, highest first.
    Packed(&'static [Field]),
    /// One 64-bit value of this name.
    Whole(&'static str),
    /// Always 0.
    Zero,
}

impl Probe {
    pub const ALL: [Probe; 10] = [
        Probe::Request,
        Probe::Response,
        Probe::WatchEvent,
        Probe::ConnOpen,
        Probe::ConnClose,
        Probe::TxEnd,
        Probe::Reply,
        Probe::Truncated,
        Probe::ReplyStats,
        Probe::StatsBatch,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Probe::Request => "request",
            Probe::Response => "response",
            Probe::WatchEvent => "watch_event",
            Probe::ConnOpen => "conn_open",
            Probe::ConnClose => "conn_close",
            Probe::TxEnd => "tx_end",
            Probe::Reply => "reply",
            Probe::Truncated => "truncated",
            Probe::ReplyStats => "reply_stats",
            Probe::StatsBatch => "stats_batch",
        }
    }

    /// Every argument, in order: (name, C type in xenstore.d).
    pub const fn args(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Probe::Reply => &REPLY_ARGS,
            Probe::ReplyStats => &REPLY_STATS_ARGS,
            Probe::StatsBatch => &STATS_BATCH_ARGS,
            _ => &ARGS,
        }
    }

    /// Its stapsdt note's arguments: each 8 bytes, in [`ARG_REGISTERS`]
    /// (`8@%rdi 8@%rsi ...`).
    pub fn note_args(self) -> Vec<String> {
        ARG_REGISTERS[..self.args().len()]
            .iter()
            .map(|r| format!("8@%{r}"))
            .collect()
    }

    pub fn from_name(name: &str) -> Option<Probe> {
        Probe::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The layout of arg3.
    pub const fn extra(self) -> Extra {
        match self {
            Probe::Request => Extra::Packed(&RequestExtra::FIELDS),
            Probe::Response | Probe::Reply | Probe::ReplyStats => {
                Extra::Packed(&ResponseExtra::FIELDS)
            }
            // The connection whose request fired the event.
            Probe::WatchEvent => Extra::Whole("firer_conn"),
            Probe::ConnOpen | Probe::ConnClose => Extra::Zero,
            // A [`TxOutcome`] code.
            Probe::TxEnd => Extra::Whole("outcome"),
            Probe::Truncated => Extra::Packed(&CutExtra::FIELDS),
            // How many records `records` points at.
            Probe::StatsBatch => Extra::Whole("record_count"),
        }
    }

    /// The names of what str1 and str2 (arg4, arg5) hold; str2 `None` is
    /// always "".
    pub const fn strings(self) -> (&'static str, Option<&'static str>) {
        match self {
            // The first argument of the request, then the rest.
            Probe::Request => ("path", Some("value")),
            // The reply payload or the error name; the error's reason.
            Probe::Response => ("result", Some("error_reason")),
            Probe::WatchEvent => ("path", Some("token")),
            Probe::ConnOpen => ("transport", Some("peer")),
            Probe::ConnClose => ("reason", None),
            Probe::TxEnd => ("outcome_name", Some("reason")),
            // As `request`; the outcome is str3.
            Probe::Reply => ("path", Some("value")),
            // The name of the probe whose strings may be cut.
            Probe::Truncated => ("cut_probe", None),
            // A static string: the error's name, "" for success.
            Probe::ReplyStats => ("error_name", None),
            // [`crate::stats::LAYOUT`].
            Probe::StatsBatch => ("layout", None),
        }
    }

    /// The name of what str3 (arg6) holds, for the probes that have it:
    /// `reply`'s reply payload, or the error reason when errno is set.
    pub const fn str3(self) -> Option<&'static str> {
        match self {
            Probe::Reply => Some("result"),
            _ => None,
        }
    }
}

/// A probe's strings together (str1 + str2, and str3 for `reply`) stay
/// under this many bytes, so one event fits the kernel's per-event page
/// along with the fixed fields.
pub const STRINGS_MAX: usize = 3900;
/// str1 alone stays under this (a path is at most 3072 bytes anyway).
pub const STR1_MAX: usize = 3072;

/// How a transaction ended: `tx_end`'s extra and str1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxOutcome {
    Commit = 0,
    Abort = 1,
    Conflict = 2,
    /// The connection or domain went away with the transaction open.
    Dropped = 3,
}

impl TxOutcome {
    pub const ALL: [TxOutcome; 4] = [
        TxOutcome::Commit,
        TxOutcome::Abort,
        TxOutcome::Conflict,
        TxOutcome::Dropped,
    ];

    pub const fn code(self) -> u64 {
        self as u64
    }

    pub const fn name(self) -> &'static str {
        match self {
            TxOutcome::Commit => "commit",
            TxOutcome::Abort => "abort",
            TxOutcome::Conflict => "conflict",
            TxOutcome::Dropped => "dropped",
        }
    }

    pub fn from_code(code: u64) -> Option<TxOutcome> {
        TxOutcome::ALL.into_iter().find(|o| o.code() == code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packing::{Client, Ident};

    #[test]
    fn names_are_unique_and_found() {
        for p in Probe::ALL {
            assert_eq!(Probe::from_name(p.name()), Some(p));
        }
        assert_eq!(Probe::from_name("nope"), None);
        for o in TxOutcome::ALL {
            assert_eq!(TxOutcome::from_code(o.code()), Some(o));
        }
        assert_eq!(TxOutcome::from_code(4), None);
    }

    /// Probes only ever append arguments to the common six.
    #[test]
    fn every_probe_starts_with_the_common_arguments() {
        for p in Probe::ALL {
            assert_eq!(&p.args()[..ARGS.len()], &ARGS, "{}", p.name());
            let strings = p.args().iter().filter(|a| a.1 == "char*").count();
            assert_eq!(strings, 2 + p.str3().iter().count(), "{}", p.name());
        }
        assert_eq!(Probe::Reply.args().len(), 8);
        let longest = Probe::ALL.map(|p| p.args().len()).into_iter().max();
        assert_eq!(longest, Some(ARG_REGISTERS.len()));
    }

    /// Every named field of a probe is named once: scripts bind them all
    /// as variables of one scope.
    #[test]
    fn field_names_do_not_clash() {
        for p in Probe::ALL {
            let mut names = vec!["serial"];
            names.extend(Ident::FIELDS.iter().chain(&Client::FIELDS).map(|f| f.name));
            match p.extra() {
                Extra::Packed(fields) => names.extend(fields.iter().map(|f| f.name)),
                Extra::Whole(name) => names.push(name),
                Extra::Zero => {}
            }
            let (s1, s2) = p.strings();
            names.push(s1);
            names.extend(s2);
            names.extend(p.str3());
            names.extend(
                p.args()[ARGS.len()..]
                    .iter()
                    .filter(|a| a.1 != "char*")
                    .map(|a| a.0),
            );
            let count = names.len();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), count, "{}: {names:?}", p.name());
        }
    }
}
