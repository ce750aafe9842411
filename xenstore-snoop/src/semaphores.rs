//! The probes' is-enabled semaphores in the traced daemon's memory: checked
//! once attached, raised by us where the kernel left them at zero, lowered
//! again at detach; and, through the same /proc/PID/mem handle, whether the
//! daemon exec'd since.
//!
//! Why: the kernel raises a semaphore only as a side effect of writing a
//! probe's breakpoint into a process (once per mm, when the instruction
//! changes). After an exec of the same file in place (a live update into the
//! same binary) the breakpoints a standing registration put into the new mm
//! while the ELF loader mapped it are there but the semaphores stayed zero
//! (seen on 6.1, 6.12, 6.18), and a later attach, finding the breakpoint
//! already written, does not raise them either: the daemon never fires.
//!
//! A /proc/PID/mem handle holds the mm it was opened on: once the process
//! exec's (or exits) that mm has no users and reads return nothing, which
//! tells an exec from an unchanged image even when the file is the same.

use crate::sdt::SdtProbe;
use crate::target::Target;
use anyhow::{Context, Result};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// How long a process that just exec'd may take to map its new image.
const MAPPING_WAIT: Duration = Duration::from_secs(10);

pub struct Semaphores {
    pid: u32,
    mem: File,
    /// Each semaphore in use: its probe's name, its address, how many
    /// times we raised it.
    sites: Vec<Site>,
    said: bool,
}

struct Site {
    name: String,
    address: u64,
    /// The probe instruction's address and its bytes in the file: while
    /// the site differs, some tracer still has a breakpoint there.
    site: Option<(u64, [u8; 5])>,
    raised: u16,
}

impl Semaphores {
    /// Opens `target`'s memory and finds the semaphores of `probes` (those
    /// with one) in its mappings of the daemon's binary.
    pub fn open(target: &Target, probes: &[SdtProbe]) -> Result<Semaphores> {
        let mem = File::options()
            .read(true)
            .write(true)
            .open(format!("/proc/{}/mem", target.pid))
            .with_context(|| format!("opening /proc/{}/mem", target.pid))?;
        let binary = std::fs::read(&target.binary).ok();
        // Just after an exec the loader may not have mapped the image yet.
        let deadline = Instant::now() + MAPPING_WAIT;
        let mappings = loop {
            let maps = std::fs::read_to_string(format!("/proc/{}/maps", target.pid))
                .with_context(|| format!("reading /proc/{}/maps", target.pid))?;
            let mappings = file_mappings(&maps, target.image.map(|(_, ino)| ino));
            let mapped = |p: &SdtProbe| address_of(&mappings, p.semaphore, true).is_some();
            if probes.iter().filter(|p| p.semaphore != 0).all(mapped) || Instant::now() >= deadline
            {
                break mappings;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut sites = Vec::new();
        for p in probes.iter().filter(|p| p.semaphore != 0) {
            let address = address_of(&mappings, p.semaphore, true).with_context(|| {
                format!(
                    "the semaphore of xenstore:{} (file offset {:#x}) is in no writable mapping of pid {}",
                    p.name, p.semaphore, target.pid
                )
            })?;
            let site = address_of(&mappings, p.offset, false).zip(
                binary
                    .as_ref()
                    .and_then(|b| b.get(p.offset as usize..p.offset as usize + 5))
                    .and_then(|b| <[u8; 5]>::try_from(b).ok()),
            );
            sites.push(Site {
                name: p.name.clone(),
                address,
                site,
                raised: 0,
            });
        }
        Ok(Semaphores {
            pid: target.pid,
            mem,
            sites,
            said: false,
        })
    }

    /// Whether the process no longer runs the memory this was opened on:
    /// it exec'd a new image, or exited.
    pub fn execd(&self) -> bool {
        let Some(site) = self.sites.first() else {
            return false;
        };
        let mut word = [0u8; 2];
        !matches!(self.mem.read_at(&mut word, site.address), Ok(2))
    }

    /// Raises every semaphore found at zero (the kernel did not), saying so
    /// the first time. Returns how many it raised now.
    pub fn ensure_raised(&mut self) -> Result<usize> {
        let mut now = Vec::new();
        for site in &mut self.sites {
            let Some(value) = read_u16(&self.mem, site.address) else {
                return Ok(0); // exec'd or gone: the caller sees it
            };
            if value == 0 {
                self.mem
                    .write_at(&1u16.to_ne_bytes(), site.address)
                    .with_context(|| format!("raising the semaphore of xenstore:{}", site.name))?;
                site.raised += 1;
                now.push(site.name.as_str());
            }
        }
        if !now.is_empty() && !self.said {
            self.said = true;
            eprintln!(
                "xenstore-snoop: the kernel left the semaphores of {} at 0 in pid {} (it does after \
                 an exec in place, a live update): raised them in its memory",
                now.join(", "),
                self.pid
            );
        }
        Ok(now.len())
    }

    /// Each semaphore's probe and value now (None: unreadable, the
    /// process exec'd or exited).
    pub fn values(&self) -> Vec<(String, Option<u16>)> {
        self.sites
            .iter()
            .map(|s| (s.name.clone(), read_u16(&self.mem, s.address)))
            .collect()
    }

    /// After the kernel detached: lowers what we raised where no tracer's
    /// breakpoint remains and the semaphore is still up (the kernel's own
    /// decrement at detach may have taken ours already).
    pub fn release(self) {
        for site in &self.sites {
            if site.raised == 0 {
                continue;
            }
            let Some((at, original)) = site.site else {
                continue;
            };
            let mut now = [0u8; 5];
            if !matches!(self.mem.read_at(&mut now, at), Ok(5)) || now != original {
                continue; // exec'd, or another tracer still there
            }
            if let Some(value) = read_u16(&self.mem, site.address) {
                let lowered = value.saturating_sub(site.raised);
                let _ = self.mem.write_at(&lowered.to_ne_bytes(), site.address);
            }
        }
    }
}

fn read_u16(mem: &File, at: u64) -> Option<u16> {
    let mut word = [0u8; 2];
    matches!(mem.read_at(&mut word, at), Ok(2)).then(|| u16::from_ne_bytes(word))
}

/// A mapping of the daemon's file: start, end, file offset, writable.
type Mapping = (u64, u64, u64, bool);

/// The mappings in /proc/PID/maps of the file with inode `inode` (any
/// file-backed one when unknown).
fn file_mappings(maps: &str, inode: Option<u64>) -> Vec<Mapping> {
    maps.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [range, perms, offset, _dev, ino, _path, ..] = f.as_slice() else {
                return None;
            };
            let ino: u64 = ino.parse().ok()?;
            if ino == 0 || inode.is_some_and(|want| want != ino) {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            Some((
                u64::from_str_radix(start, 16).ok()?,
                u64::from_str_radix(end, 16).ok()?,
                u64::from_str_radix(offset, 16).ok()?,
                perms.as_bytes().get(1) == Some(&b'w'),
            ))
        })
        .collect()
}

/// Where file offset `offset` is mapped (in a writable mapping if asked).
fn address_of(mappings: &[Mapping], offset: u64, writable: bool) -> Option<u64> {
    mappings
        .iter()
        .filter(|m| !writable || m.3)
        .find(|(start, end, off, _)| offset >= *off && offset < off + (end - start))
        .map(|(start, _, off, _)| start + (offset - off))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_map_through_the_files_mappings() {
        let maps = "\
56544937e000-5654494ad000 r--p 00000000 fe:00 10019327   /x/shim
5654494ad000-5654497c9000 r-xp 0012e000 fe:00 10019327   /x/shim
5654497c9000-5654497f6000 r--p 00449000 fe:00 10019327   /x/shim
5654497f6000-5654497f7000 rw-p 00475000 fe:00 10019327   /x/shim
5654497f7000-565449814000 rw-p 00000000 00:00 0
7f85270b5000-7f85270db000 rw-p 00475000 fe:00 326279   /lib/libc.so.6
";
        let m = file_mappings(maps, Some(10019327));
        assert_eq!(m.len(), 4);
        assert_eq!(address_of(&m, 0x475ed0, true), Some(0x5654497f6ed0));
        assert_eq!(
            address_of(&m, 0x17b3d5, false),
            Some(0x5654494ad000 + 0x4d3d5)
        );
        // Not writable there: no semaphore.
        assert_eq!(address_of(&m, 0x17b3d5, true), None);
        assert_eq!(address_of(&m, 0x476000, true), None);
    }
}
