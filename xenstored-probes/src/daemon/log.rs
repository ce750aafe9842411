//! Bad input logged (stderr, or syslog once detached) without letting a
//! client flood it.

use crate::service::log;
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
        let now = Instant::now();
        if self
            .window
            .is_none_or(|w| now.duration_since(w).as_secs() >= 1)
        {
            if self.suppressed > 0 {
                log::error(format_args!(
                    "{} more bad-input messages suppressed",
                    self.suppressed
                ));
            }
            self.window = Some(now);
            self.lines = 0;
            self.suppressed = 0;
        }
        if self.lines < Self::BURST {
            self.lines += 1;
            log::error(format_args!("conn {conn}: {what}"));
        } else {
            self.suppressed += 1;
        }
    }
}
