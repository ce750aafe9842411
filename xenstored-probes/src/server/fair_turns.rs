//! Which ready connection the event loop serves next: the one that has
//! consumed the least service, as a fair CPU scheduler runs the task with
//! the least virtual runtime. Each connection's virtual time counts the
//! requests it has had executed; one request is one turn. A connection
//! that becomes ready is placed within CREDIT turns of the clock (the
//! virtual time last served): a light client's request is served before a
//! busy one's backlog, no client gains more than CREDIT turns by sleeping,
//! and none falls more than CREDIT behind for what it was served before.
//!
//! That order is fair, and so a woken connection waits for about every
//! other one that is ready: with hundreds busy (a boot storm) a client
//! that asks once in a while would wait for hundreds of turns. One that
//! was silent for longer than the ready ones take to be served twice
//! each therefore goes ahead of them all (`light`), the longest silent
//! first: it waits only for connections that were even quieter.

use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How many turns ahead of the busy connections a woken one may start.
const CREDIT: u64 = 4;
/// Turns of silence that make a connection light whatever the queue's
/// length (see `is_light`).
const LIGHT_SILENCE: u64 = 16;

#[derive(Default)]
struct Account {
    vtime: u64,
    /// Turns it ever had (see `place`).
    served: u64,
    /// The daemon's turn count at its last turn (or its first queueing).
    last_turn: u64,
    queued: bool,
}

#[derive(Default)]
pub struct Turns {
    /// (virtual time, rank, arrival, connection): least served first, then
    /// by rank (see `place`), then first come.
    heap: BinaryHeap<Reverse<(u64, u64, u64, u32)>>,
    /// (last turn, connection): woken after a long silence, served before
    /// the heap, the longest silent first (see `is_light`).
    light: BinaryHeap<Reverse<(u64, u32)>>,
    accounts: FxHashMap<u32, Account>,
    /// Turns served so far.
    turns: u64,
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
        if self.is_light(id) {
            self.place_light(id);
        } else if in_transaction {
            self.place(id, self.clock, true);
        } else {
            self.push(id, false);
        }
    }

    /// Whether `id`, woken, was silent for longer than every connection
    /// now waiting takes to be served twice (and LIGHT_SILENCE turns): a
    /// busy one is served about once in that many, so a light one asks
    /// less than half as often as its fair share. Each connection is light
    /// at most once in that many turns, so the heap is not starved.
    fn is_light(&mut self, id: u32) -> bool {
        let turns = self.turns;
        let waiting = (self.heap.len() + self.light.len()) as u64;
        let a = self.account(id);
        !a.queued && turns - a.last_turn > 2 * waiting + LIGHT_SILENCE
    }

    /// Queues light connection `id` ahead of the heap; its virtual time
    /// is placed as a sleeper's.
    fn place_light(&mut self, id: u32) {
        let (floor, latest) = (self.clock.saturating_sub(CREDIT), self.clock + CREDIT);
        let a = self.account(id);
        a.queued = true;
        a.vtime = a.vtime.clamp(floor, latest);
        let last_turn = a.last_turn;
        self.light.push(Reverse((last_turn, id)));
    }

    /// `id`'s account; a new one counts as served now, so a connection is
    /// light only after a silence, not for being new.
    fn account(&mut self, id: u32) -> &mut Account {
        let turns = self.turns;
        self.accounts.entry(id).or_insert_with(|| Account {
            last_turn: turns,
            ..Account::default()
        })
    }

    /// Queues `id` (once) with its virtual time at most `latest`, and at
    /// least CREDIT behind the clock. Every connection that slept is put
    /// at that floor, so among them the one with the fewest turns ever
    /// goes first (after a woken transaction): a client that asks once in
    /// a while (an unrelated READ) is not queued behind every busy one
    /// that waited for its own client.
    fn place(&mut self, id: u32, latest: u64, first: bool) {
        let clock = self.clock;
        let a = self.account(id);
        if a.queued {
            return;
        }
        a.queued = true;
        a.vtime = a.vtime.clamp(clock.saturating_sub(CREDIT), latest);
        let (vtime, served) = (a.vtime, a.served);
        self.arrivals += 1;
        let rank = if first { 0 } else { 1 + served };
        self.heap.push(Reverse((vtime, rank, self.arrivals, id)));
    }

    /// The connection to serve now; its turn is charged to it.
    pub fn pop(&mut self) -> Option<u32> {
        let id = match self.light.pop() {
            Some(Reverse((_, id))) => id,
            None => self.heap.pop()?.0 .3,
        };
        self.turns += 1;
        if let Some(a) = self.accounts.get_mut(&id) {
            a.queued = false;
            self.clock = self.clock.max(a.vtime);
            a.vtime += 1;
            a.served += 1;
            a.last_turn = self.turns;
        }
        Some(id)
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty() && self.light.is_empty()
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

    /// Connections 1..=n served round after round, each woken by its
    /// client's next request as its turn ends (a storm's clients).
    fn busy_rounds(t: &mut Turns, n: u32, rounds: usize) {
        for id in 1..=n {
            t.wake(id, false);
        }
        for _ in 0..rounds * n as usize {
            let id = t.pop().unwrap();
            t.wake(id, false);
        }
    }

    #[test]
    fn a_long_silent_connection_goes_ahead_of_a_busy_crowd() {
        let mut t = Turns::default();
        t.wake(1000, false);
        t.pop();
        busy_rounds(&mut t, 300, 10);
        t.wake(1000, false);
        assert!(t.light.iter().any(|e| e.0 .1 == 1000), "it was light");
        assert_eq!(t.pop(), Some(1000), "the silent one first");
        assert!(!t.is_light(1000), "light again at once");
    }

    #[test]
    fn the_busy_crowd_is_never_light() {
        let mut t = Turns::default();
        busy_rounds(&mut t, 300, 3);
        // the next is served and woken again, as each round does
        let id = t.pop().unwrap();
        assert!(!t.is_light(id), "a busy connection was light");
        t.wake(id, false);
        for id in 1..=300 {
            assert!(t.accounts[&id].queued, "{id} waits in the heap");
        }
        assert!(t.light.is_empty());
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
