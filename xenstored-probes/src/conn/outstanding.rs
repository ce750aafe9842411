//! The outstanding-requests quota's bookkeeping, as C xenstored 4.17 keeps
//! it: a request of an unprivileged domain is outstanding from the moment
//! it is read until its reply, and every watch event it caused, have been
//! written out to whoever they are for. A domain with as many outstanding
//! requests as its quota is not read from until some are delivered.
//!
//! A request's [`Ticket`] is shared by the messages it queued; the last
//! one written out (or dropped with its connection) releases it.

use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::rc::Rc;

/// One outstanding request; dropping the last holder releases it.
#[derive(Debug)]
pub struct Ticket(Rc<Cell<u32>>);

impl Drop for Ticket {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// Outstanding requests by domain.
#[derive(Debug, Default)]
pub struct Outstanding(FxHashMap<u32, Rc<Cell<u32>>>);

impl Outstanding {
    /// A request of `domid` was read.
    pub fn ticket(&mut self, domid: u32) -> Rc<Ticket> {
        let count = self.0.entry(domid).or_default();
        count.set(count.get() + 1);
        Rc::new(Ticket(count.clone()))
    }

    pub fn count(&self, domid: u32) -> u32 {
        self.0.get(&domid).map_or(0, |c| c.get())
    }

    /// The domain is gone: a new one with its domid starts from zero
    /// (messages still queued release the old count).
    pub fn forget(&mut self, domid: u32) {
        self.0.remove(&domid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_counts_until_its_last_holder_goes() {
        let mut o = Outstanding::default();
        let t = o.ticket(5);
        let event = t.clone();
        let _other = o.ticket(5);
        assert_eq!(o.count(5), 2);
        drop(t);
        assert_eq!(o.count(5), 2, "an event still holds it");
        drop(event);
        assert_eq!(o.count(5), 1);
        assert_eq!(o.count(6), 0);
        o.forget(5);
        assert_eq!(o.count(5), 0);
    }
}
