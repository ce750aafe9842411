//! `--follow`: after the traced daemon exits, the next process running the
//! same binary (a restart by systemd, an init script, an upgrade) is traced.

use crate::target::{self, Target};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often /proc is scanned for the new daemon.
const POLL: Duration = Duration::from_millis(50);

/// Waits for a process other than `old` running `exe` (the path the old one
/// ran; an upgraded file at the same path counts). None when `stop` is set
/// first (a signal).
pub fn next_daemon(exe: &Path, old: u32, stop: &AtomicBool) -> Option<Target> {
    let mut said_several = false;
    loop {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        let found: Vec<u32> = target::processes()
            .into_iter()
            .filter(|(pid, running)| *pid != old && running == exe && target::alive(*pid))
            .map(|(pid, _)| pid)
            .collect();
        match found.as_slice() {
            [pid] => {
                if let Ok(t) = target::find(Some(*pid), None) {
                    return Some(t);
                }
            }
            [] => {}
            many if !said_several => {
                eprintln!(
                    "xenstore-snoop: --follow: {} processes run {} ({many:?}): waiting for one",
                    many.len(),
                    exe.display()
                );
                said_several = true;
            }
            _ => {}
        }
        std::thread::sleep(POLL);
    }
}
