//! The tier's boots share the machine: at most `XS_VM_SLOTS` QEMUs run at
//! once (default 4; each needs 1.3–2.5 GB, and keeps a core busy as long as
//! it runs: QEMU is niced, tests/xen/run, so that the boots take what the
//! rest of `make test` leaves), and a boot waiting for slots goes before
//! every waiting boot of smaller weight, so that the longest boots start
//! first and the short ones fill in at the end. `make test` runs the tier
//! with a thread per test; the boots asked for in the first second (all
//! of them: the threads start at once, the short boots' first) are
//! ordered before any starts.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

struct Queue {
    free: usize,
    /// The weights of the boots waiting.
    waiting: Vec<u32>,
    /// Until when the boots asked for are gathered before any starts.
    gathering: Instant,
}

/// How long the first boot asked for waits for the others to be asked.
const GATHER: Duration = Duration::from_secs(1);

static QUEUE: Mutex<Option<Queue>> = Mutex::new(None);
static FREED: Condvar = Condvar::new();

/// Slots held; given back when dropped (also when a test panics).
pub struct Slots(usize);

impl Drop for Slots {
    fn drop(&mut self) {
        let mut queue = QUEUE.lock().unwrap_or_else(|e| e.into_inner());
        queue.as_mut().expect("slots taken").free += self.0;
        FREED.notify_all();
    }
}

impl Slots {
    /// One of the slots held, given back on its own when dropped (none when
    /// only one is held: `XS_VM_SLOTS=1`): of boots started side by side,
    /// the first to end frees its slot for a waiting boot at once, not when
    /// the last ends.
    pub fn one(&mut self) -> Option<Slots> {
        (self.0 > 1).then(|| {
            self.0 -= 1;
            Slots(1)
        })
    }
}

fn capacity() -> usize {
    std::env::var("XS_VM_SLOTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(4)
}

/// Waits for `n` slots (the QEMUs a test runs at once); `weight` is the
/// boot's usual length in seconds. A test never waits on more slots than
/// there are, nor longer than the whole tier may take (every boot before
/// it ends within its own timeout).
pub fn take(n: usize, weight: u32) -> Slots {
    let deadline = Instant::now() + Duration::from_secs(3600);
    let mut guard = QUEUE.lock().unwrap_or_else(|e| e.into_inner());
    let queue = guard.get_or_insert_with(|| Queue {
        free: capacity(),
        waiting: Vec::new(),
        gathering: Instant::now() + GATHER,
    });
    let n = n.min(capacity());
    queue.waiting.push(weight);
    loop {
        let queue = guard.as_mut().unwrap();
        let first = queue.waiting.iter().all(|&w| w <= weight);
        let gathered = Instant::now() >= queue.gathering;
        if gathered && first && queue.free >= n {
            queue.free -= n;
            let at = queue.waiting.iter().position(|&w| w == weight).unwrap();
            queue.waiting.swap_remove(at);
            // A boot of the same weight may fit in what is left.
            FREED.notify_all();
            return Slots(n);
        }
        let left = deadline
            .checked_duration_since(Instant::now())
            .expect("no VM slot in an hour: a boot before it never ended");
        // While gathering, nothing frees a slot: wake when it ends.
        let wake = if gathered {
            left
        } else {
            left.min(queue.gathering.saturating_duration_since(Instant::now()))
        };
        guard = FREED
            .wait_timeout(guard, wake)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}
