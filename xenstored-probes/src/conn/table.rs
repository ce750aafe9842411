//! The open connections by id, each found by its own `id` field: a map
//! from id to connection kept the key apart from the connection (a
//! `Connection` is cache-line aligned, so the key took a line of its own),
//! and among a thousand watchers finding the one an event goes to missed
//! on that key's line and then again on the connection's (callgrind, S2
//! spread). Here the comparison reads the connection's first line, which
//! queueing the event reads anyway.

use crate::conn::Connection;
use hashbrown::HashTable;
use std::hash::BuildHasher;

#[derive(Default)]
pub struct ConnTable(HashTable<Connection>);

fn hash(id: u32) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(id)
}

impl ConnTable {
    pub fn get(&self, id: &u32) -> Option<&Connection> {
        self.0.find(hash(*id), |c| c.id == *id)
    }

    pub fn get_mut(&mut self, id: &u32) -> Option<&mut Connection> {
        self.0.find_mut(hash(*id), |c| c.id == *id)
    }

    pub fn contains_key(&self, id: &u32) -> bool {
        self.get(id).is_some()
    }

    /// Adds `conn`, replacing one with the same id.
    pub fn insert(&mut self, conn: Connection) {
        let id = conn.id;
        match self.0.entry(hash(id), |c| c.id == id, |c| hash(c.id)) {
            hashbrown::hash_table::Entry::Occupied(mut o) => *o.get_mut() = conn,
            hashbrown::hash_table::Entry::Vacant(v) => {
                v.insert(conn);
            }
        }
    }

    pub fn remove(&mut self, id: &u32) -> Option<Connection> {
        let found = self.0.find_entry(hash(*id), |c| c.id == *id).ok()?;
        Some(found.remove().0)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Every connection's id, in no particular order.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().map(|c| c.id)
    }
}

#[cfg(test)]
mod tests {
    use super::ConnTable;
    use crate::conn::tests::Quiet;
    use crate::conn::Connection;

    fn conn(id: u32, domid: u32) -> Connection {
        Connection::new(id, domid, domid == 0, None, Box::new(Quiet))
    }

    /// Found by id after others came and went (and grew the table).
    #[test]
    fn finds_each_connection_by_its_id() {
        let mut t = ConnTable::default();
        for id in 1..=300 {
            t.insert(conn(id, id % 7));
        }
        for id in (1..=300).step_by(2) {
            assert_eq!(t.remove(&id).map(|c| c.id), Some(id));
        }
        assert!(t.remove(&1).is_none());
        t.insert(conn(4, 9));
        assert_eq!(t.len(), 150);
        for id in 1..=300u32 {
            assert_eq!(t.contains_key(&id), id % 2 == 0, "{id}");
        }
        assert_eq!(t.get(&4).map(|c| c.domid()), Some(9));
        t.get_mut(&6).unwrap().dirty = true;
        assert!(t.get(&6).unwrap().dirty);
        let mut ids: Vec<u32> = t.ids().collect();
        ids.sort_unstable();
        assert_eq!(ids, (2..=300).step_by(2).collect::<Vec<_>>());
    }
}
