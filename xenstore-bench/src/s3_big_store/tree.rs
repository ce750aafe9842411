//! A domain's tree as `xl create` leaves it (domain-tree.txt), the home
//! `rm` removes, and the paths its watchers watch.

use std::collections::BTreeSet;

/// Nodes in the home `rm` removes (its root included).
pub const SUBTREE_NODES: usize = 100;

/// The leaves below each base path, with `{domid}` and `{uuid}` in the
/// bases (and the uuid's value); in the home, an `x` in a value is the
/// domain's id.
const TREE: &str = include_str!("domain-tree.txt");

/// The guest's home: the first base.
const HOME: &str = "/local/domain/{domid}";

/// A domain's tree: (path, value) of each leaf; the directories above
/// them are created with them.
pub fn domain_tree(domid: usize) -> Vec<(String, String)> {
    let uuid = format!("00000000-0000-4000-8000-{domid:012}");
    let fill = |s: &str| {
        s.replace("{domid}", &domid.to_string())
            .replace("{uuid}", &uuid)
    };
    sections()
        .flat_map(|(base, leaves)| {
            let at = fill(base);
            let home = base == HOME;
            leaves.map(move |(p, v)| {
                let v = if home { home_value(v, domid) } else { fill(v) };
                (format!("{at}/{p}"), v)
            })
        })
        .collect()
}

/// Each `[base]` of TREE and its `path=value` leaves.
fn sections() -> impl Iterator<
    Item = (
        &'static str,
        impl Iterator<Item = (&'static str, &'static str)>,
    ),
> {
    TREE.split("\n[").skip(1).map(|s| {
        let (base, leaves) = s.split_once("]\n").expect("a [base] line");
        let leaves = leaves.lines().filter_map(|l| l.split_once('='));
        (base, leaves)
    })
}

fn home_value(v: &str, domid: usize) -> String {
    v.replace('x', &domid.to_string())
}

/// The guest's home below `/local/domain/<domid>`, relative.
pub fn home_leaves(domid: usize) -> Vec<(String, String)> {
    let (_, leaves) = sections().next().expect("the home first");
    leaves
        .map(|(p, v)| (p.to_string(), home_value(v, domid)))
        .collect()
}

/// The home `rm` removes: a guest's, with what its agents publish below
/// `data/` making it `SUBTREE_NODES` nodes.
pub fn victim_leaves(domid: usize) -> Vec<(String, String)> {
    let mut t = home_leaves(domid);
    let mut i = 0;
    while nodes(t.iter().map(|l| l.0.as_str())).len() < SUBTREE_NODES - 1 {
        t.push((format!("data/agent/k{i}"), format!("{i}")));
        i += 1;
    }
    t
}

/// The nodes `paths` make, the directories above them included.
fn nodes<'a>(paths: impl Iterator<Item = &'a str>) -> BTreeSet<&'a str> {
    let mut all = BTreeSet::new();
    for p in paths {
        all.extend(
            p.match_indices('/')
                .map(|(i, _)| &p[..i])
                .filter(|d| !d.is_empty()),
        );
        all.insert(p);
    }
    all
}

/// Nodes one domain's tree adds to a store that already has the shared
/// directories (`/local/domain`, the backend type directories, `/vm`, `/libxl`).
pub fn nodes_per_domain() -> usize {
    let shared = [
        "/local",
        "/local/domain",
        "/local/domain/0",
        "/local/domain/0/backend",
        "/local/domain/0/backend/vbd",
        "/local/domain/0/backend/vif",
        "/vm",
        "/libxl",
    ];
    let tree = domain_tree(1);
    let all = nodes(tree.iter().map(|l| l.0.as_str()));
    all.iter().filter(|p| !shared.contains(p)).count()
}

/// The paths in a domain's home its watchers watch: the home and 14
/// nodes inside (the toolstack's, the backends', the guest's own).
pub fn watched_in(home: &str) -> Vec<String> {
    let inside = [
        "control/shutdown",
        "control/sysrq",
        "memory/target",
        "device/vbd/51712/state",
        "device/vif/0/state",
        "console/tty",
        "data/updated",
        "console/port",
        "error",
        "device/vbd/51712/ring-ref",
        "device/vif/0/mac",
        "cpu/0/availability",
        "store/port",
        "drivers/0",
    ];
    std::iter::once(home.to_string())
        .chain(inside.iter().map(|p| format!("{home}/{p}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_is_about_a_hundred_nodes_and_its_home_exactly() {
        let per = nodes_per_domain();
        assert!((90..=120).contains(&per), "{per} nodes a domain");
        let home = victim_leaves(7);
        assert_eq!(
            nodes(home.iter().map(|l| l.0.as_str())).len() + 1,
            SUBTREE_NODES
        );
    }
}
