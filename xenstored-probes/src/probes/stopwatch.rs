//! Request latencies for the probes, read from the CPU's time-stamp counter
//! where the kernel itself keeps time by it (clocksource "tsc": invariant
//! and synchronised across CPUs), else from CLOCK_MONOTONIC. A traced
//! request reads the time twice; `rdtsc` costs about half a vDSO
//! clock_gettime here (9 against 19 ns in a loop) and touches no vDSO data.
//!
//! Ticks become nanoseconds at a rate measured against CLOCK_MONOTONIC
//! from the thread's first reading on, refreshed at the 1st, 2nd, 4th, ...
//! conversion and then every [`REFRESH_EVERY`]: the span only grows, so
//! the rate only gets better (about 1% off at the first conversion, which
//! spans one request; log2 latency buckets do not tell that apart).

use std::cell::Cell;
use std::sync::atomic::{AtomicU8, Ordering};

/// Conversions between two measurements of the rate, once it is steady.
const REFRESH_EVERY: u64 = 4096;

/// A point in time: TSC ticks, or CLOCK_MONOTONIC ns without a usable TSC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp(u64);

/// Now.
#[inline]
pub fn now() -> Stamp {
    if tsc_usable() {
        // Anchors the rate at the thread's first reading, so the first
        // conversion spans at least a request.
        RATE.with(|_| ());
        Stamp(rdtsc())
    } else {
        Stamp(monotonic_ns())
    }
}

/// Nanoseconds from `start` to now (0 if `start` is later).
#[inline]
pub fn elapsed_ns(start: Stamp) -> u64 {
    if !tsc_usable() {
        return monotonic_ns().saturating_sub(start.0);
    }
    let ticks = rdtsc().saturating_sub(start.0);
    RATE.with(|cell| {
        let mut rate = cell.get();
        rate.conversions += 1;
        if rate.conversions.is_power_of_two() || rate.conversions % REFRESH_EVERY == 0 {
            rate.measure();
        }
        cell.set(rate);
        ((ticks as u128 * rate.ns_per_tick_q32 as u128) >> 32) as u64
    })
}

/// CLOCK_MONOTONIC in ns.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The tick rate, measured from an anchor (the thread's first measurement).
#[derive(Clone, Copy, Default)]
struct Rate {
    anchor_ticks: u64,
    anchor_ns: u64,
    /// ns per tick, fixed point with 32 fractional bits.
    ns_per_tick_q32: u64,
    conversions: u64,
}

impl Rate {
    fn measure(&mut self) {
        let (ticks, ns) = (rdtsc(), monotonic_ns());
        if self.anchor_ticks == 0 {
            self.anchor_ticks = ticks;
            self.anchor_ns = ns;
            // Until a span is measured: 1 ns a tick, the right order for
            // today's GHz counters.
            self.ns_per_tick_q32 = 1 << 32;
            return;
        }
        let span_ticks = ticks.saturating_sub(self.anchor_ticks);
        let span_ns = ns.saturating_sub(self.anchor_ns);
        if span_ticks > 0 && span_ns > 0 {
            self.ns_per_tick_q32 = (((span_ns as u128) << 32) / span_ticks as u128) as u64;
        }
    }
}

thread_local! {
    static RATE: Cell<Rate> = Cell::new({
        let mut rate = Rate::default();
        if tsc_usable() {
            rate.measure();
        }
        rate
    });
}

/// Whether the kernel keeps time by the TSC: read once a process.
#[inline]
fn tsc_usable() -> bool {
    // 0: not read yet, 1: usable, 2: not.
    static USABLE: AtomicU8 = AtomicU8::new(0);
    match USABLE.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let usable = cfg!(target_arch = "x86_64")
                && std::fs::read_to_string(
                    "/sys/devices/system/clocksource/clocksource0/current_clocksource",
                )
                .is_ok_and(|s| s.trim() == "tsc");
            USABLE.store(if usable { 1 } else { 2 }, Ordering::Relaxed);
            usable
        }
    }
}

#[inline]
fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc has no preconditions on x86_64.
    return unsafe { core::arch::x86_64::_rdtsc() };
    #[cfg(not(target_arch = "x86_64"))]
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Elapsed times agree with CLOCK_MONOTONIC's within a few percent,
    /// from the first conversion on (over spans long enough that the two
    /// clocks' reading costs do not matter).
    #[test]
    fn elapsed_agrees_with_the_monotonic_clock() {
        for _ in 0..3 {
            let (start, start_ns) = (now(), monotonic_ns());
            let spin_until = start_ns + 2_000_000;
            while monotonic_ns() < spin_until {}
            let (elapsed, real) = (elapsed_ns(start), monotonic_ns() - start_ns);
            let off = elapsed.abs_diff(real) as f64 / real as f64;
            assert!(off < 0.05, "elapsed {elapsed} ns, monotonic {real} ns");
        }
    }
}
