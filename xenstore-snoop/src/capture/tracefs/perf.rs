//! Tracepoint events read through perf: one perf event per (event, CPU),
//! all events of a CPU writing into that CPU's mmap'd ring buffer.
//!
//! Killing the reader closes the fds, which unregisters the uprobes and
//! drops the daemon's semaphores back to zero: nothing is left firing.

use crate::capture::mapping::page_size;
use crate::capture::tracefs::perf_ring::Ring;
use anyhow::{Context, Result};
use perf_event_open_sys as sys;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const SAMPLE_TYPE: u64 = sys::bindings::PERF_SAMPLE_TID as u64
    | sys::bindings::PERF_SAMPLE_TIME as u64
    | sys::bindings::PERF_SAMPLE_RAW as u64;

/// One sample as it sits in the ring.
pub struct Sample<'a> {
    pub time_ns: u64,
    pub pid: u32,
    pub tid: u32,
    /// The tracepoint record (starts with common_type).
    pub raw: &'a [u8],
}

pub struct Rings {
    /// One per CPU, mapped from its first event; the CPU's other events
    /// write into it.
    rings: Vec<Ring>,
    /// Every event fd, kept open for as long as we trace.
    fds: Vec<OwnedFd>,
    scratch: Vec<u8>,
    /// Whether read() on the fds reports lost samples (PERF_FORMAT_LOST).
    read_lost: bool,
    /// Lost samples announced by PERF_RECORD_LOST records.
    lost_records: u64,
    /// Ring bytes skipped past a record whose size could not be right.
    pub corrupt_bytes: u64,
}

impl Drop for Rings {
    /// Closing the last perf event of a uprobe unregisters it, which waits
    /// for an RCU grace period (~0.1 s on a busy host): close all at once.
    fn drop(&mut self) {
        let fds = std::mem::take(&mut self.fds);
        let rings = std::mem::take(&mut self.rings);
        std::thread::scope(|s| {
            for fd in fds {
                s.spawn(move || drop(fd));
            }
            for ring in rings {
                s.spawn(move || drop(ring));
            }
        });
    }
}

/// The CPUs the kernel has online (`/sys/devices/system/cpu/online`, e.g. "0-3,6").
pub fn online_cpus() -> Result<Vec<u32>> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .context("reading /sys/devices/system/cpu/online")?;
    parse_cpu_list(&text)
}

fn parse_cpu_list(text: &str) -> Result<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (u32, u32) = (a.parse()?, b.parse()?);
        cpus.extend(a..=b);
    }
    Ok(cpus)
}

impl Rings {
    /// Opens tracepoint `ids` on every CPU with a ring of `ring_bytes` (a
    /// power of two of pages) per CPU. `filter` is an in-kernel event filter
    /// (`dom == 6 || dom == 7`) applied to every event.
    pub fn open(ids: &[u16], ring_bytes: usize, filter: Option<&str>) -> Result<Rings> {
        let data_size = ring_bytes.next_power_of_two().max(page_size());
        let mut rings = Vec::new();
        let mut fds = Vec::new();
        for cpu in online_cpus()? {
            let mut ring_fd = None;
            for &id in ids {
                let fd = open_event(id, cpu, data_size)?;
                if let Some(f) = filter {
                    let c = std::ffi::CString::new(f)?;
                    // SAFETY: a NUL-terminated filter the kernel only reads.
                    if unsafe { sys::ioctls::SET_FILTER(fd.as_raw_fd(), c.as_ptr() as *mut _) } < 0
                    {
                        return Err(std::io::Error::last_os_error())
                            .with_context(|| format!("setting event filter `{f}`"));
                    }
                }
                match ring_fd {
                    None => {
                        ring_fd = Some(fd.as_raw_fd());
                        rings.push(Ring::map(&fd, data_size)?);
                    }
                    Some(out) => {
                        // SAFETY: both fds are open perf events of ours.
                        if unsafe { sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), out) } < 0 {
                            return Err(std::io::Error::last_os_error())
                                .context("redirecting a perf event into its CPU's ring");
                        }
                    }
                }
                fds.push(fd);
            }
        }
        let read_lost = fds.iter().all(|fd| fd_lost(fd).is_some());
        Ok(Rings {
            rings,
            fds,
            scratch: Vec::new(),
            read_lost,
            lost_records: 0,
            corrupt_bytes: 0,
        })
    }

    /// Samples dropped because a ring was full. PERF_RECORD_LOST only
    /// arrives with the next sample that fits, so when the kernel can say
    /// (PERF_FORMAT_LOST, Linux 6.0+) we ask it, which counts the tail too.
    pub fn lost(&self) -> u64 {
        if self.read_lost {
            let counted: u64 = self.fds.iter().filter_map(fd_lost).sum();
            counted.max(self.lost_records)
        } else {
            self.lost_records
        }
    }

    pub fn enable(&self) -> Result<()> {
        for fd in &self.fds {
            // SAFETY: an open perf event fd of ours.
            if unsafe { sys::ioctls::ENABLE(fd.as_raw_fd(), 0) } < 0 {
                return Err(std::io::Error::last_os_error()).context("enabling a perf event");
            }
        }
        Ok(())
    }

    /// Waits up to `timeout_ms` for any ring to pass its wake-up mark.
    pub fn wait(&self, timeout_ms: i32) -> Result<()> {
        let mut pfds: Vec<libc::pollfd> = self
            .rings
            .iter()
            .map(|r| libc::pollfd {
                fd: r.fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: pfds is a live array of pfds.len() pollfds.
        let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as _, timeout_ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e).context("poll on perf rings");
            }
        }
        Ok(())
    }

    /// Hands every sample now in the rings to `f`, and frees their space.
    pub fn drain(&mut self, mut f: impl FnMut(Sample)) {
        let lost = &mut self.lost_records;
        for ring in &self.rings {
            self.corrupt_bytes += ring.drain(&mut self.scratch, |rec| {
                let ty = u32::from_ne_bytes(rec[0..4].try_into().unwrap());
                match ty {
                    sys::bindings::PERF_RECORD_SAMPLE => {
                        if let Some(s) = parse_sample(rec) {
                            f(s);
                        }
                    }
                    sys::bindings::PERF_RECORD_LOST if rec.len() >= 24 => {
                        *lost += u64::from_ne_bytes(rec[16..24].try_into().unwrap());
                    }
                    _ => {}
                }
            });
        }
    }
}

/// The lost-sample count read() reports with PERF_FORMAT_LOST.
fn fd_lost(fd: &OwnedFd) -> Option<u64> {
    let mut buf = [0u64; 2]; // value, lost
                             // SAFETY: buf has room for the 16 bytes asked.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), 16) };
    (n == 16).then_some(buf[1])
}

fn open_event(id: u16, cpu: u32, data_size: usize) -> Result<OwnedFd> {
    match open_event_with(id, cpu, data_size, sys::bindings::PERF_FORMAT_LOST as u64) {
        // Kernels before 6.0 reject PERF_FORMAT_LOST; records still count.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => open_event_with(id, cpu, data_size, 0),
        r => r,
    }
    .map_err(|e| {
        if e.raw_os_error() == Some(libc::EACCES) || e.raw_os_error() == Some(libc::EPERM) {
            anyhow::anyhow!("perf_event_open on CPU {cpu}: {e}: run xenstore-snoop as root")
        } else {
            anyhow::Error::new(e).context(format!("perf_event_open for event {id} on CPU {cpu}"))
        }
    })
}

fn open_event_with(
    id: u16,
    cpu: u32,
    data_size: usize,
    read_format: u64,
) -> std::io::Result<OwnedFd> {
    let mut attr = sys::bindings::perf_event_attr {
        type_: sys::bindings::PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<sys::bindings::perf_event_attr>() as u32,
        config: id as u64,
        sample_type: SAMPLE_TYPE,
        read_format,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = 1;
    attr.set_disabled(1);
    attr.set_use_clockid(1);
    attr.clockid = libc::CLOCK_MONOTONIC;
    // Wake the reader when an eighth of the ring is full; a poll timeout
    // picks up the stragglers at low rates.
    attr.set_watermark(1);
    attr.__bindgen_anon_2.wakeup_watermark = (data_size / 8) as u32;
    // SAFETY: attr is a valid perf_event_attr of its declared size.
    let fd = unsafe {
        sys::perf_event_open(
            &mut attr,
            -1,
            cpu as i32,
            -1,
            sys::bindings::PERF_FLAG_FD_CLOEXEC as _,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new fd nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// header, pid/tid, time, raw size, raw data (SAMPLE_TYPE's order).
fn parse_sample(rec: &[u8]) -> Option<Sample<'_>> {
    let u32_at = |o: usize| Some(u32::from_ne_bytes(rec.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_ne_bytes(rec.get(o..o + 8)?.try_into().ok()?));
    let raw_len = u32_at(24)? as usize;
    Some(Sample {
        pid: u32_at(8)?,
        tid: u32_at(12)?,
        time_ns: u64_at(16)?,
        raw: rec.get(28..28 + raw_len)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-1\n").unwrap(), [0, 1]);
        assert_eq!(parse_cpu_list("0,2-3,7").unwrap(), [0, 2, 3, 7]);
        assert!(parse_cpu_list("x").is_err());
    }

    #[test]
    fn sample_layout() {
        let mut rec = vec![0u8; 8];
        rec.extend_from_slice(&5u32.to_ne_bytes());
        rec.extend_from_slice(&6u32.to_ne_bytes());
        rec.extend_from_slice(&77u64.to_ne_bytes());
        rec.extend_from_slice(&3u32.to_ne_bytes());
        rec.extend_from_slice(b"abc");
        let s = parse_sample(&rec).unwrap();
        assert_eq!((s.pid, s.tid, s.time_ns, s.raw), (5, 6, 77, &b"abc"[..]));
        assert!(parse_sample(&rec[..30]).is_none());
    }
}
