//! Which ready connection the event loop serves next: the one that has
//! consumed the least service, as a fair CPU scheduler runs the task with
//! the least virtual runtime. Each connection's virtual time counts the
//! requests it has had executed; one request is one turn. A connection
//! that becomes ready is placed within CREDIT turns of the clock (the
//! virtual time last served): a light client's request is served before a
//! busy one's backlog, no client gains more than CREDIT turns by sleeping,
//! and none falls more than CREDIT behind for what it was served before.

use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How many turns ahead of the busy connections a woken one may start.
const CREDIT: u64 = 4;

#[derive(Default)]
struct Account {
    vtime: u64,
    /// Turns it ever had (see `place`).
    served: u64,
    queued: bool,
}

#[derive(Default)]
pub struct Turns {
    /// (virtual time, rank, arrival, connection): least served first, then
    /// by rank (see `place`), then first come.
    heap: BinaryHeap<Reverse<(u64, u64, u64, u32)>>,
    accounts: FxHashMap<u32, Account>,
    /// The virtual time of the connection served last (never goes back).
    clock: u64,
    arrivals: u64,
}

impl Turns {
    /// Connection `id` may have input: it gets a place (once) in the queue.
    /// One `in_transaction` is not put behind the clock: the longer a
    /// transaction stays open, the likelier it conflicts, and its client
    /// then runs it again from the start.
    pub fn push(&mut self, id: u32, in_transaction: bool) {
        let latest = if in_transaction {
            self.clock
        } else {
            self.clock + CREDIT
        };
        self.place(id, latest, false);
    }

    /// Connection `id` has new input (it was waiting, not backed up). One
    /// in a transaction goes first among those at its virtual time: its
    /// transaction conflicts with every commit that changes what it read
    /// before this request is served, so a storm's transactions wait on
    /// each other less, as a database favours old transactions. Only a
    /// wake-up earns it (a backlog is `push`ed), so it is at most one turn
    /// a poll.
    pub fn wake(&mut self, id: u32, in_transaction: bool) {
        if in_transaction {
            self.place(id, self.clock, true);
        } else {
            self.push(id, false);
        }
    }

    /// Queues `id` (once) with its virtual time at most `latest`, and at
    /// least CREDIT behind the clock. Every connection that slept is put
    /// at that floor, so among them the one with the fewest turns ever
    /// goes first (after a woken transaction): a client that asks once in
    /// a while (an unrelated READ) is not queued behind every busy one
    /// that waited for its own client.
    fn place(&mut self, id: u32, latest: u64, first: bool) {
        let a = self.accounts.entry(id).or_default();
        if a.queued {
            return;
        }
        a.queued = true;
        a.vtime = a.vtime.clamp(self.clock.saturating_sub(CREDIT), latest);
        self.arrivals += 1;
        let rank = if first { 0 } else { 1 + a.served };
        self.heap.push(Reverse((a.vtime, rank, self.arrivals, id)));
    }

    /// The connection to serve now; its turn is charged to it.
    pub fn pop(&mut self) -> Option<u32> {
        let Reverse((vtime, _, _, id)) = self.heap.pop()?;
        if let Some(a) = self.accounts.get_mut(&id) {
            a.queued = false;
            a.vtime += 1;
            a.served += 1;
        }
        self.clock = self.clock.max(vtime);
        Some(id)
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Drops the accounts of closed connections (`live` says which are
    /// not), once they outnumber the live ones: the table stays in
    /// proportion to the connections, at O(1) amortized per connection.
    pub fn forget_closed(&mut self, live: usize, is_live: impl Fn(u32) -> bool) {
        if self.accounts.len() <= 2 * live + 64 {
            return;
        }
        self.accounts.retain(|&id, a| a.queued || is_live(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(t: &mut Turns) -> Vec<u32> {
        std::iter::from_fn(|| t.pop()).collect()
    }

    #[test]
    fn a_connection_is_queued_once() {
        let mut t = Turns::default();
        t.push(1, false);
        t.push(1, false);
        assert_eq!(order(&mut t), [1]);
    }

    #[test]
    fn the_least_served_goes_first() {
        let mut t = Turns::default();
        // connection 1 has had 10 turns in a row
        for _ in 0..10 {
            t.push(1, false);
            t.pop();
        }
        t.push(1, false);
        t.push(2, false);
        assert_eq!(order(&mut t), [2, 1]);
    }

    #[test]
    fn a_transaction_is_not_put_behind_the_clock() {
        let mut t = Turns::default();
        // 1 and 2 served alike, 2 last; 1 then opens a transaction
        for _ in 0..10 {
            for id in [2, 1] {
                t.push(id, false);
                t.pop();
            }
        }
        t.push(2, false);
        t.push(1, true);
        assert_eq!(order(&mut t), [1, 2]);
    }

    #[test]
    fn a_woken_transaction_goes_first_a_backlogged_one_does_not() {
        let mut t = Turns::default();
        // 1, 2 and 3 served alike, 3 last
        for _ in 0..10 {
            for id in [1, 2, 3] {
                t.push(id, false);
                t.pop();
            }
        }
        t.push(1, false);
        t.push(2, true);
        t.wake(3, true);
        t.wake(4, false);
        assert_eq!(order(&mut t), [4, 3, 2, 1], "a new one first");
        t.push(1, true);
        t.wake(2, true);
        assert_eq!(order(&mut t), [2, 1], "a backlog is not");
    }

    #[test]
    fn a_sleeper_gets_at_most_credit_turns_ahead() {
        let mut t = Turns::default();
        // 1 and 2 busy for 100 turns each, 3 asleep
        for _ in 0..100 {
            t.push(1, false);
            t.push(2, false);
            t.pop();
            t.pop();
        }
        let mut served = Vec::new();
        t.push(1, false);
        t.push(2, false);
        t.push(3, false);
        for _ in 0..3 * CREDIT {
            let id = t.pop().unwrap();
            served.push(id);
            t.push(id, false);
        }
        let ahead = served.iter().take_while(|&&id| id == 3).count() as u64;
        // at its last virtual time it ties with the busy ones, and wins
        // the tie as the one served least
        assert!((1..=CREDIT + 2).contains(&ahead), "{served:?}");
        assert!(served.contains(&1) && served.contains(&2), "{served:?}");
    }

    #[test]
    fn closed_connections_are_forgotten() {
        let mut t = Turns::default();
        for id in 0..1000 {
            t.push(id, false);
            t.pop();
        }
        t.forget_closed(1, |id| id == 999);
        assert_eq!(t.accounts.len(), 1);
    }
}
