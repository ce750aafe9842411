//! What the `stats_batch` probe carries: a run of fixed-size records, one
//! per event a counting tracer (xenstore-snoop --metrics) counts, so the
//! daemon traps once per batch instead of once per request. Declared once
//! here; xenstore-snoop's xsmetrics.bpf.c reads the C declaration
//! generated from it ([`crate::bpf::contract_header`]).

use crate::c_struct::c_struct;

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

c_struct! {
    /// One counted event, as the daemon lays it out in memory (C layout, no
    /// padding left implicit: 24 bytes).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct StatsRecord as "stats_record" {
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
}

/// A record's size in bytes.
pub const RECORD_SIZE: usize = std::mem::size_of::<StatsRecord>();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_is_24_bytes_and_the_batch_a_power_of_two() {
        assert_eq!(RECORD_SIZE, 24);
        assert!(
            BATCH_RECORDS.is_power_of_two(),
            "the BPF program masks indices"
        );
    }
}
