//! What the `stats_batch` probe carries: a run of fixed-size records, one
//! per event a counting tracer (xenstore-snoop --metrics) counts, so the
//! daemon traps once per batch instead of once per request. Declared once
//! here; xenstore-snoop/src/capture/bpf/xsmetrics.bpf.c has a C copy that
//! xenstore-snoop/tests/bpf_contract.rs checks against this one.

/// Records a batch holds: the daemon fires when it has this many.
pub const BATCH_RECORDS: usize = 256;

/// The daemon fires a batch at most this long after its first record was
/// added, busy or idle: counts reach a tracer up to this late.
pub const FLUSH_AFTER_MS: u64 = 100;

/// `stats_batch`'s str1: the record layout's name and version, a static
/// string, so a tracer can refuse a layout it does not know.
pub const LAYOUT: &std::ffi::CStr = c"stats_record/1";

/// What a record counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum StatsKind {
    /// A reply was queued (what `reply_stats` says).
    Reply = 0,
    /// A watch event was queued to `domid`'s connection.
    WatchEvent = 1,
    /// A transaction ended: `outcome` is its [`crate::TxOutcome`] code.
    TxEnd = 2,
}

impl StatsKind {
    pub const ALL: [StatsKind; 3] = [StatsKind::Reply, StatsKind::WatchEvent, StatsKind::TxEnd];

    pub const fn name(self) -> &'static str {
        match self {
            StatsKind::Reply => "reply",
            StatsKind::WatchEvent => "watch_event",
            StatsKind::TxEnd => "tx_end",
        }
    }
}

/// One counted event, as the daemon lays it out in memory (C layout, no
/// padding left implicit: 24 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct StatsRecord {
    /// Reply: CLOCK_MONOTONIC ns from the request's decode to its reply
    /// being queued (`reply_stats`' elapsed_ns); otherwise 0.
    pub elapsed_ns: u64,
    /// The connection's dom0 client pid (SO_PEERCRED), 0 for a domain's.
    pub pid: u32,
    /// The connection's domid.
    pub domid: u16,
    /// Reply: the request's XS_* message type; otherwise 0.
    pub op: u16,
    /// Reply: the Linux errno of an error reply, 0 for success.
    pub errno: u16,
    /// A [`StatsKind`].
    pub kind: u8,
    /// TxEnd: the [`crate::TxOutcome`] code; otherwise 0.
    pub outcome: u8,
    /// Always 0: makes the record's size a multiple of 8 explicitly.
    pub reserved: u32,
}

/// Each field's (name, byte offset, byte size), in declaration order: what
/// the C copy must match.
pub const RECORD_FIELDS: [(&str, usize, usize); 8] = [
    ("elapsed_ns", 0, 8),
    ("pid", 8, 4),
    ("domid", 12, 2),
    ("op", 14, 2),
    ("errno", 16, 2),
    ("kind", 18, 1),
    ("outcome", 19, 1),
    ("reserved", 20, 4),
];

/// A record's size in bytes.
pub const RECORD_SIZE: usize = std::mem::size_of::<StatsRecord>();

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of_val};

    #[test]
    fn record_fields_are_the_structs() {
        let r = StatsRecord::default();
        let actual = [
            (
                "elapsed_ns",
                offset_of!(StatsRecord, elapsed_ns),
                size_of_val(&r.elapsed_ns),
            ),
            ("pid", offset_of!(StatsRecord, pid), size_of_val(&r.pid)),
            (
                "domid",
                offset_of!(StatsRecord, domid),
                size_of_val(&r.domid),
            ),
            ("op", offset_of!(StatsRecord, op), size_of_val(&r.op)),
            (
                "errno",
                offset_of!(StatsRecord, errno),
                size_of_val(&r.errno),
            ),
            ("kind", offset_of!(StatsRecord, kind), size_of_val(&r.kind)),
            (
                "outcome",
                offset_of!(StatsRecord, outcome),
                size_of_val(&r.outcome),
            ),
            (
                "reserved",
                offset_of!(StatsRecord, reserved),
                size_of_val(&r.reserved),
            ),
        ];
        assert_eq!(actual, RECORD_FIELDS);
        assert_eq!(RECORD_SIZE, 24);
        assert!(
            BATCH_RECORDS.is_power_of_two(),
            "the BPF program masks indices"
        );
    }
}
