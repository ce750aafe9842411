//! The `stats_batch` probe: while it is traced, a record per reply, watch
//! event and transaction end is held here and the probe fires once per
//! batch, so a counting tracer takes one trap per batch rather than one
//! per request. A batch fires when full, when its first record is
//! [`FLUSH_AFTER_MS`] old (the event loop wakes for that: [`until_due`]),
//! before the daemon exits or execs, and before it answers a CONTROL
//! ([`flush`]: an exporter asking one then counts every event before its
//! question). One event loop thread
//! adds and fires, so the batch is the thread's own.

use std::cell::RefCell;
use std::time::Duration;
pub use xenstore_proto::stats::{StatsKind, StatsRecord, BATCH_RECORDS, FLUSH_AFTER_MS};

const FLUSH_AFTER_NS: u64 = FLUSH_AFTER_MS * 1_000_000;

struct Batch {
    records: [StatsRecord; BATCH_RECORDS],
    len: usize,
    /// CLOCK_MONOTONIC ns by which the held records fire (when len > 0).
    due_ns: u64,
}

thread_local! {
    static BATCH: RefCell<Batch> = const {
        RefCell::new(Batch {
            records: [StatsRecord {
                elapsed_ns: 0,
                pid: 0,
                domid: 0,
                op: 0,
                errno: 0,
                kind: 0,
                outcome: 0,
                reserved: 0,
            }; BATCH_RECORDS],
            len: 0,
            due_ns: 0,
        })
    };
}

/// Whether a tracer is attached to `stats_batch` now: only then are
/// records kept.
#[inline]
pub fn enabled() -> bool {
    #[cfg(feature = "probes")]
    return crate::probes::semaphore::stats_batch.enabled();
    #[cfg(not(feature = "probes"))]
    false
}

/// Holds `record` (call only when [`enabled`]); fires the batch it fills.
/// `now_ns`: CLOCK_MONOTONIC ns if the caller has it, read here otherwise
/// (only a batch's first record needs it).
#[inline]
pub fn add(record: StatsRecord, now_ns: Option<u64>) {
    BATCH.with(|cell| {
        // Never nested; were it, the record is lost, not the daemon.
        let Ok(mut batch) = cell.try_borrow_mut() else {
            return;
        };
        if batch.len == 0 {
            let now = now_ns.unwrap_or_else(crate::probes::monotonic_ns);
            batch.due_ns = now + FLUSH_AFTER_NS;
        }
        let at = batch.len;
        batch.records[at] = record;
        batch.len += 1;
        if batch.len == BATCH_RECORDS {
            fire(&mut batch);
        }
    });
}

/// How long until the held records are due; None when none are held.
pub fn until_due() -> Option<Duration> {
    BATCH.with(|cell| {
        let batch = cell.try_borrow().ok()?;
        (batch.len > 0).then(|| {
            let now = crate::probes::monotonic_ns();
            Duration::from_nanos(batch.due_ns.saturating_sub(now))
        })
    })
}

/// Fires the held records if they are due.
pub fn flush_if_due() {
    if until_due() == Some(Duration::ZERO) {
        flush();
    }
}

/// Fires the held records now (before an exit or an exec).
pub fn flush() {
    BATCH.with(|cell| {
        if let Ok(mut batch) = cell.try_borrow_mut() {
            fire(&mut batch);
        }
    });
}

/// Fires `batch` if it holds records and is still traced (records held
/// when the last tracer left are dropped), and empties it. Never inlined:
/// one probe site in the binary (copies inlined into code the linker drops
/// leave notes pointing nowhere), and it runs once a batch.
#[inline(never)]
fn fire(batch: &mut Batch) {
    if batch.len == 0 {
        return;
    }
    #[cfg(feature = "probes")]
    if enabled() {
        use crate::probes::semaphore;
        let count = batch.len as u64;
        let records = batch.records.as_ptr() as u64;
        crate::sdt_site!(
            xenstore,
            stats_batch,
            semaphore::stats_batch,
            [
                "rdi" = 0u64,
                "rsi" = 0u64,
                "rdx" = 0u64,
                "rcx" = count,
                "r8" = xenstore_proto::stats::LAYOUT.as_ptr(),
                "r9" = c"".as_ptr(),
                "r10" = records,
            ]
        );
    }
    batch.len = 0;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many records are held now.
    fn held() -> usize {
        BATCH.with(|cell| cell.try_borrow().map_or(0, |b| b.len))
    }

    fn record(domid: u16) -> StatsRecord {
        StatsRecord {
            domid,
            kind: StatsKind::WatchEvent as u8,
            ..Default::default()
        }
    }

    /// Untraced in a unit test, so firing only empties: a full batch
    /// empties at once, and a held one is due within the bound.
    #[test]
    fn a_full_batch_empties_and_a_held_one_comes_due() {
        assert_eq!(held(), 0);
        assert_eq!(until_due(), None);
        add(record(1), None);
        let due = until_due().expect("a record is held");
        assert!(due <= Duration::from_millis(FLUSH_AFTER_MS), "{due:?}");
        for d in 1..BATCH_RECORDS {
            assert_eq!(held(), d);
            add(record(d as u16), None);
        }
        assert_eq!(held(), 0, "the batch fired when full");
        add(record(7), Some(0));
        assert_eq!(until_due(), Some(Duration::ZERO), "due long ago");
        flush_if_due();
        assert_eq!(held(), 0);
    }
}
