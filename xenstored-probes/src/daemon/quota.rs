//! Per-domain quotas with upstream C xenstored 4.17's names, defaults and
//! descriptions (`xenstored -Q`, CONTROL quota). Privileged connections
//! (dom0) are exempt, as upstream.

use rustc_hash::FxHashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Nodes,
    Watches,
    Transactions,
    Outstanding,
    TransactionNodes,
    Memory,
    NodeSize,
    PathMax,
    Permissions,
}

/// (kind, name, default, description) in upstream's listing order.
const HARD: [(Kind, &str, u32, &str); 9] = [
    (Kind::Nodes, "nodes", 1000, "Nodes per domain"),
    (Kind::Watches, "watches", 128, "Watches per domain"),
    (
        Kind::Transactions,
        "transactions",
        10,
        "Transactions per domain",
    ),
    (
        Kind::Outstanding,
        "outstanding",
        20,
        "Outstanding requests per domain",
    ),
    (
        Kind::TransactionNodes,
        "transaction-nodes",
        1024,
        "Max. number of accessed nodes per transaction",
    ),
    (
        Kind::Memory,
        "memory",
        2 * 1024 * 1024 + 512 * 1024,
        "Total Xenstore memory per domain (error level)",
    ),
    (Kind::NodeSize, "node-size", 2048, "Max. size of a node"),
    (
        Kind::PathMax,
        "path-max",
        2048,
        "Max. length of a node path",
    ),
    (
        Kind::Permissions,
        "permissions",
        5,
        "Max. number of permissions per node",
    ),
];

const SOFT_MEMORY: (&str, u32, &str) = (
    "memory",
    2 * 1024 * 1024,
    "Total Xenstore memory per domain (warning level)",
);

#[derive(Clone, Debug)]
pub struct Quotas {
    hard: [u32; 9],
    soft_memory: u32,
    /// SET_QUOTA with a domid (newest xenstore.txt).
    per_domain: FxHashMap<(u32, Kind), u32>,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            hard: HARD.map(|q| q.2),
            soft_memory: SOFT_MEMORY.1,
            per_domain: FxHashMap::default(),
        }
    }
}

fn index(kind: Kind) -> usize {
    HARD.iter().position(|q| q.0 == kind).unwrap()
}

impl Quotas {
    /// The limit for `domid`.
    pub fn get(&self, kind: Kind, domid: u32) -> u32 {
        if domid != 0 {
            if let Some(v) = self.per_domain.get(&(domid, kind)) {
                return *v;
            }
        }
        self.hard[index(kind)]
    }

    pub fn global(&self, kind: Kind) -> u32 {
        self.hard[index(kind)]
    }

    pub fn kind_by_name(name: &[u8]) -> Option<Kind> {
        HARD.iter().find(|q| q.1.as_bytes() == name).map(|q| q.0)
    }

    pub fn names() -> impl Iterator<Item = &'static str> {
        HARD.iter().map(|q| q.1)
    }

    /// `xenstored -Q name=value` / CONTROL quota set.
    pub fn set_global(&mut self, name: &[u8], value: u32) -> bool {
        match Self::kind_by_name(name) {
            Some(k) => {
                self.hard[index(k)] = value;
                true
            }
            None => false,
        }
    }

    pub fn set_domain(&mut self, domid: u32, kind: Kind, value: u32) {
        self.per_domain.insert((domid, kind), value);
    }

    /// The warning level of the memory quota.
    pub fn soft_memory(&self) -> u32 {
        self.soft_memory
    }

    pub fn set_soft(&mut self, name: &[u8], value: u32) -> bool {
        if name == SOFT_MEMORY.0.as_bytes() {
            self.soft_memory = value;
            true
        } else {
            false
        }
    }

    /// CONTROL quota (no arguments): upstream's "Quota settings:" table.
    pub fn show_hard(&self) -> String {
        let mut s = String::from("Quota settings:\n");
        for (i, q) in HARD.iter().enumerate() {
            s += &format!("{:<17}: {:>8} {}\n", q.1, self.hard[i], q.3);
        }
        s
    }

    pub fn show_soft(&self) -> String {
        format!(
            "Quota settings:\n{:<17}: {:>8} {}\n",
            SOFT_MEMORY.0, self.soft_memory, SOFT_MEMORY.2
        )
    }

    pub fn forget_domain(&mut self, domid: u32) {
        // one removal a kind, not a pass over every domain's overrides
        for (kind, ..) in HARD {
            self.per_domain.remove(&(domid, kind));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_upstreams() {
        let q = Quotas::default();
        assert_eq!(q.get(Kind::Nodes, 5), 1000);
        assert_eq!(q.get(Kind::Watches, 5), 128);
        assert_eq!(q.get(Kind::Transactions, 5), 10);
        assert_eq!(q.get(Kind::NodeSize, 5), 2048);
        assert_eq!(q.get(Kind::Permissions, 5), 5);
        assert!(q
            .show_hard()
            .contains("nodes            :     1000 Nodes per domain\n"));
    }

    #[test]
    fn set_global_and_per_domain() {
        let mut q = Quotas::default();
        assert!(q.set_global(b"nodes", 5));
        assert!(!q.set_global(b"bogus", 5));
        q.set_domain(7, Kind::Nodes, 9);
        assert_eq!(q.get(Kind::Nodes, 7), 9);
        assert_eq!(q.get(Kind::Nodes, 8), 5);
        q.forget_domain(7);
        assert_eq!(q.get(Kind::Nodes, 7), 5);
    }
}
