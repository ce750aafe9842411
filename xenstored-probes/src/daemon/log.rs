//! Bad input logged (stderr, or syslog once detached) without letting a
//! client flood it.

use crate::log;
use crate::log::notable::Notable;
use std::time::Instant;

/// At most BURST lines per second; the rest are counted.
#[derive(Default)]
pub(super) struct RateLimitedLog {
    window: Option<Instant>,
    lines: u32,
    suppressed: u64,
}

impl RateLimitedLog {
    const BURST: u32 = 10;

    pub(super) fn log(&mut self, conn: u32, what: std::fmt::Arguments) {
        if self.allow() {
            log::error(format_args!("conn {conn}: {what}"));
        }
    }

    /// A notable event, within the same budget.
    pub(super) fn notable(&mut self, event: Notable) {
        if self.allow() {
            log::notable(event);
        }
    }

    fn allow(&mut self) -> bool {
        let now = Instant::now();
        if self
            .window
            .is_none_or(|w| now.duration_since(w).as_secs() >= 1)
        {
            if self.suppressed > 0 {
                log::error(format_args!("{} more messages suppressed", self.suppressed));
            }
            self.window = Some(now);
            self.lines = 0;
            self.suppressed = 0;
        }
        if self.lines < Self::BURST {
            self.lines += 1;
            true
        } else {
            self.suppressed += 1;
            false
        }
    }
}
