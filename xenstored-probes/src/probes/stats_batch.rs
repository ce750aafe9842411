//! The `stats_batch` probe: while it is traced, a record per reply, watch
//! event and transaction end is held here and the probe fires once per
//! batch, so a counting tracer takes one trap per batch rather than one
//! per request. A batch fires when full; when its first record is
//! [`FLUSH_AFTER_MS`] old, through a timer the event loop polls
//! ([`deadline_fd`]: armed once a batch, where a poll timeout would arm a
//! kernel timer at every wait, ~150 ns an op here); and before the daemon
//! exits or execs, and before it answers a CONTROL ([`flush`]: an exporter
//! asking one then counts every event before its question). One event
//! loop thread adds and fires, so the batch is the thread's own.

use std::cell::RefCell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
pub use xenstore_proto::stats::{StatsKind, StatsRecord, BATCH_RECORDS, FLUSH_AFTER_MS};

struct Batch {
    records: [StatsRecord; BATCH_RECORDS],
    len: usize,
    /// A timerfd armed at a batch's first record (None: not made yet, or
    /// the kernel refused one; then batches fire when full, or flushed).
    deadline: Option<OwnedFd>,
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
            deadline: None,
        })
    };
}

/// Whether a tracer is attached to `stats_batch` now: only then are
/// records kept.
#[inline]
pub fn enabled() -> bool {
    #[cfg(feature = "probes")]
    return crate::probes::sdt::semaphore::stats_batch.enabled();
    #[cfg(not(feature = "probes"))]
    false
}

/// Holds `record` (call only when [`enabled`]); fires the batch it fills.
#[inline]
pub fn add(record: StatsRecord) {
    BATCH.with(|cell| {
        // Never nested; were it, the record is lost, not the daemon.
        let Ok(mut batch) = cell.try_borrow_mut() else {
            return;
        };
        if batch.len == 0 {
            arm(&mut batch);
        }
        let at = batch.len;
        batch.records[at] = record;
        batch.len += 1;
        if batch.len == BATCH_RECORDS {
            fire(&mut batch);
        }
    });
}

/// The timer the event loop polls for readable: when it is, call
/// [`on_deadline`]. None when the kernel refused a timerfd.
pub fn deadline_fd() -> Option<RawFd> {
    BATCH.with(|cell| {
        let mut batch = cell.try_borrow_mut().ok()?;
        Some(timer(&mut batch)?.as_raw_fd())
    })
}

/// The deadline timer expired: fires what is held (a batch that filled
/// since leaves nothing, or a newer one whose timer was re-armed).
pub fn on_deadline() {
    BATCH.with(|cell| {
        let Ok(mut batch) = cell.try_borrow_mut() else {
            return;
        };
        if let Some(fd) = &batch.deadline {
            let mut expirations = [0u8; 8];
            // SAFETY: reads at most 8 bytes into the array we own; the fd
            // is non-blocking, so an early read only fails with EAGAIN.
            unsafe { libc::read(fd.as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
        }
        if due(&batch) {
            fire(&mut batch);
        }
    });
}

/// Whether the held records' timer has run out: those records (a newer
/// batch re-armed it) are due.
fn due(batch: &Batch) -> bool {
    let Some(fd) = &batch.deadline else {
        return batch.len > 0;
    };
    let mut left = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
    };
    // SAFETY: writes the itimerspec we own.
    let got = unsafe { libc::timerfd_gettime(fd.as_raw_fd(), &mut left) };
    batch.len > 0 && got == 0 && left.it_value.tv_sec == 0 && left.it_value.tv_nsec == 0
}

/// The batch's timerfd, made on first use.
fn timer(batch: &mut Batch) -> Option<&OwnedFd> {
    if batch.deadline.is_none() {
        // SAFETY: no pointers; a new fd or -1.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd >= 0 {
            // SAFETY: a fresh fd that nothing else owns.
            batch.deadline = Some(unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }
    batch.deadline.as_ref()
}

/// Arms the deadline [`FLUSH_AFTER_MS`] from now: a batch's first record.
fn arm(batch: &mut Batch) {
    let Some(fd) = timer(batch) else {
        return;
    };
    let after = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (FLUSH_AFTER_MS / 1000) as libc::time_t,
            tv_nsec: ((FLUSH_AFTER_MS % 1000) * 1_000_000) as libc::c_long,
        },
    };
    // SAFETY: reads the itimerspec we own; no old value asked for.
    unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &after, std::ptr::null_mut()) };
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
        use crate::probes::sdt::semaphore;
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
    /// empties at once, and a held one empties when its timer runs out
    /// (waited for on the timerfd itself, with a timeout).
    #[test]
    fn a_full_batch_empties_and_a_held_one_comes_due() {
        assert_eq!(held(), 0);
        let fd = deadline_fd().expect("a timerfd");
        for d in 0..BATCH_RECORDS {
            assert_eq!(held(), d);
            add(record(d as u16));
        }
        assert_eq!(held(), 0, "the batch fired when full");
        add(record(7));
        on_deadline();
        assert_eq!(held(), 1, "not due yet");
        let mut ready = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let bound = 10 * FLUSH_AFTER_MS as i32;
        // SAFETY: one pollfd we own.
        let ran_out = unsafe { libc::poll(&mut ready, 1, bound) };
        assert_eq!(ran_out, 1, "the timer ran out");
        on_deadline();
        assert_eq!(held(), 0, "fired on its deadline");
    }
}
