//! Polling for a condition with a deadline: the only way tests and the bench
//! wait for another process to become ready.

use std::time::{Duration, Instant};

/// How often a condition is polled.
const POLL: Duration = Duration::from_millis(10);

/// Polls `ok` until it holds; an error naming `what` after `timeout`.
pub fn wait_until(
    what: &str,
    timeout: Duration,
    mut ok: impl FnMut() -> bool,
) -> std::io::Result<()> {
    let deadline = Instant::now() + timeout;
    while !ok() {
        if Instant::now() >= deadline {
            return Err(crate::error(format!(
                "timed out after {timeout:?} waiting for {what}"
            )));
        }
        std::thread::sleep(POLL);
    }
    Ok(())
}

/// As `wait_until`, panicking on timeout (for tests).
pub fn wait_for(what: &str, timeout: Duration, ok: impl FnMut() -> bool) {
    if let Err(e) = wait_until(what, timeout, ok) {
        panic!("{e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_that_never_holds_times_out_by_name() {
        let err = wait_until("the moon", Duration::from_millis(50), || false).unwrap_err();
        assert!(err.to_string().contains("waiting for the moon"), "{err}");
        let mut polls = 0;
        wait_until("the third poll", Duration::from_secs(10), || {
            polls += 1;
            polls == 3
        })
        .unwrap();
    }
}
