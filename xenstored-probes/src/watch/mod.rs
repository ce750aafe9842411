//! Watches: which registered watch an event matches, and the path it is
//! reported with (relative watches get paths relative to the domain home).

pub(crate) mod home_filter;
pub(crate) mod inline_path;

use crate::store::tree::Change;
use crate::watch::home_filter::HomeFilters;
use crate::watch::inline_path::InlinePath;
use crate::wire::path;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watch {
    /// Absolute node path or an `@` name.
    pub path: String,
    /// In place when short (tokens are a few bytes to a few tens): firing
    /// the watch reads it, and among thousands of watches an allocation
    /// of its own is one more place in memory to miss.
    pub token: SmallVec<[u8; 24]>,
    /// Registered with a relative path: events drop `/local/domain/<id>/`.
    pub relative: bool,
}

impl Watch {
    /// The rule the table's lookups implement, as the tests' oracle.
    #[cfg(test)]
    pub fn matches(&self, change: &Change) -> bool {
        if change.exact {
            self.path == change.path
        } else {
            path::is_at_or_below(&change.path, &self.path)
        }
    }

    /// The path an event about `node` is sent with to a connection of `domid`.
    pub fn event_path<'p>(&self, node: &'p str, domid: u32) -> &'p str {
        if !self.relative {
            return node;
        }
        let home = path::domain_path(domid);
        match node.strip_prefix(home.as_str()) {
            Some(rest) => rest.strip_prefix('/').unwrap_or(rest),
            None => node,
        }
    }
}

/// Which watch: its connection, then a number counting up as watches are
/// added, so the order of keys is the order events go out in (by
/// connection, each connection's in registration order).
pub type WatchKey = (u32, u64);

/// Where a watch lives in the table's slab, stable while it is registered.
pub type Slot = u32;

/// A watch a change fires: its key (the order events go out in) and its
/// slot (where it is, found without a search).
pub type Hit = (WatchKey, Slot);

/// Every connection's watches, indexed by path so that finding the
/// watches a change fires costs the path's depth and the matches, not
/// the number of watches. Each connection's count and bytes are its
/// `WatchUsage`, which the caller keeps with the connection.
///
/// The watches sit in a slab and the path index holds their slots, so
/// firing one reads it directly: no search of a tree of every watch,
/// whose misses grew with the host.
#[derive(Debug, Default)]
pub struct WatchTable {
    /// Freed slots are reused: it is as long as the most watches held at once.
    slab: Vec<SlabEntry>,
    free: Vec<Slot>,
    /// Each connection's watches, in registration order.
    order: BTreeMap<WatchKey, Slot>,
    /// Each path's watches, in key order. Path and list in the table's
    /// slot (a path usually has one watch): finding a watcher among
    /// thousands touches that slot only, not also the path's and the
    /// list's allocations.
    by_path: FxHashMap<InlinePath, SmallVec<[Hit; 1]>>,
    /// Which paths in each domain's home may be watched: a change below a
    /// home skips its ancestors there that none is on, each of which would
    /// be a cache miss in `by_path`.
    homes: HomeFilters,
    next: u64,
}

/// A watch in one cache line of its own: firing reads its token and
/// whether it is relative, and among thousands of watches a slot that
/// straddled two lines missed twice.
#[derive(Debug, Default)]
#[repr(align(64))]
struct SlabEntry(Option<Watch>);

const _: () = assert!(std::mem::size_of::<SlabEntry>() == 64);

/// A connection's watches: how many, and the bytes of their paths and
/// tokens (the memory quota's share, as C xenstored charges them). Kept in
/// the connection, not in a map here: a watch event to an unprivileged
/// connection reads it, and a map by connection was one more cache miss
/// among a thousand domains.
#[derive(Debug, Default, Clone, Copy)]
pub struct WatchUsage {
    pub count: usize,
    pub bytes: usize,
}

fn cost(w: &Watch) -> usize {
    w.path.len() + w.token.len()
}

impl WatchTable {
    /// None when `conn` already watches the same path and token (EEXIST);
    /// `usage` is `conn`'s.
    pub fn add(&mut self, conn: u32, usage: &mut WatchUsage, w: Watch) -> Option<&Watch> {
        if self.find(conn, &w.path, &w.token).is_some() {
            return None;
        }
        let key = (conn, self.next);
        self.next += 1;
        usage.count += 1;
        usage.bytes += cost(&w);
        let path = InlinePath::from(w.path.as_str());
        self.homes.add(&w.path);
        let slot = match self.free.pop() {
            Some(s) => {
                self.slab[s as usize] = SlabEntry(Some(w));
                s
            }
            None => {
                self.slab.push(SlabEntry(Some(w)));
                (self.slab.len() - 1) as Slot
            }
        };
        self.order.insert(key, slot);
        let same_path = self.by_path.entry(path).or_default();
        let at = same_path.partition_point(|h| h.0 < key);
        same_path.insert(at, (key, slot));
        self.slot(slot)
    }

    /// False when `conn` has no such watch (ENOENT); `usage` is `conn`'s.
    pub fn remove(&mut self, conn: u32, usage: &mut WatchUsage, path: &str, token: &[u8]) -> bool {
        match self.find(conn, path, token) {
            Some(hit) => {
                self.forget(hit, usage);
                true
            }
            None => false,
        }
    }

    /// Drops all of `conn`'s watches (it closed, or reset them); `usage`
    /// is `conn`'s.
    pub fn clear(&mut self, conn: u32, usage: &mut WatchUsage) {
        let hits: Vec<Hit> = self
            .order
            .range((conn, 0)..=(conn, u64::MAX))
            .map(|(k, s)| (*k, *s))
            .collect();
        for hit in hits {
            self.forget(hit, usage);
        }
    }

    fn find(&self, conn: u32, path: &str, token: &[u8]) -> Option<Hit> {
        let same_path = self.by_path.get(path)?;
        let first = same_path.partition_point(|(k, _)| k.0 < conn);
        same_path[first..]
            .iter()
            .take_while(|(k, _)| k.0 == conn)
            .find(|&&(_, s)| self.slot(s).is_some_and(|w| w.token[..] == *token))
            .copied()
    }

    fn forget(&mut self, (key, slot): Hit, usage: &mut WatchUsage) {
        let Some(w) = self.slab.get_mut(slot as usize).and_then(|e| e.0.take()) else {
            return;
        };
        self.free.push(slot);
        self.order.remove(&key);
        self.homes.remove(&w.path);
        usage.count -= 1;
        usage.bytes -= cost(&w);
        if let Some(same_path) = self.by_path.get_mut(w.path.as_str()) {
            if let Ok(i) = same_path.binary_search_by_key(&key, |h| h.0) {
                same_path.remove(i);
            }
            if same_path.is_empty() {
                self.by_path.remove(w.path.as_str());
            }
        }
    }

    /// `conn`'s watches, in registration order.
    pub fn of(&self, conn: u32) -> impl Iterator<Item = &Watch> {
        self.order
            .range((conn, 0)..=(conn, u64::MAX))
            .filter_map(|(_, &s)| self.slot(s))
    }

    /// The watch in `slot`, if one is registered there.
    pub fn slot(&self, slot: Slot) -> Option<&Watch> {
        self.slab.get(slot as usize)?.0.as_ref()
    }

    /// Replaces `out` with the watches `change` fires, in key order: for
    /// a change below a node, the watches on the path and on each
    /// ancestor; for an exact one, those on the path only.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub fn matching(&self, change: &Change, out: &mut Vec<Hit>) {
        out.clear();
        let mut lists = 0;
        if change.exact {
            lists += self.add_hits(&change.path, out);
        } else {
            let home = self.homes.for_change(&change.path);
            for p in ancestors(&change.path).filter(|p| home.may_be_watched(p)) {
                lists += self.add_hits(p, out);
            }
        }
        // One path's list is in key order already.
        if lists > 1 {
            out.sort_unstable_by_key(|h| h.0);
        }
    }

    /// Appends the watches on `path` to `out`; how many lists that was (0
    /// or 1). Inlined: a call per ancestor of every change, where the
    /// compiler's own choice (a closure it did not inline) cost ~100
    /// instructions a write.
    #[inline(always)]
    fn add_hits(&self, path: &str, out: &mut Vec<Hit>) -> usize {
        match self.by_path.get(path) {
            Some(hits) => {
                out.extend_from_slice(hits);
                1
            }
            None => 0,
        }
    }
}

/// Every watch path `path` is at or below (as `path::is_at_or_below`),
/// each once: the path itself, each prefix ending before a `/`, and `/`.
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    let cuts = path
        .match_indices('/')
        .map(|(i, _)| i)
        .filter(|&i| i > 0 && i < path.len());
    let root = (path.starts_with('/') && path != "/").then_some("/");
    std::iter::once(path)
        .chain(cuts.map(|i| &path[..i]))
        .chain(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(p: &str, exact: bool) -> Change {
        Change {
            path: p.into(),
            exact,
            old_perms: None,
        }
    }

    fn watch(p: &str, relative: bool) -> Watch {
        Watch {
            path: p.into(),
            token: b"t"[..].into(),
            relative,
        }
    }

    #[test]
    fn node_and_descendants_match_exact_only_the_node() {
        let w = watch("/a", false);
        assert!(w.matches(&change("/a", false)));
        assert!(w.matches(&change("/a/b", false)));
        assert!(!w.matches(&change("/ab", false)));
        assert!(!w.matches(&change("/a/b", true)));
        assert!(watch("/", false).matches(&change("/x", false)));
        assert!(!watch("/", false).matches(&change("@releaseDomain", true)));
        assert!(watch("@releaseDomain", false).matches(&change("@releaseDomain", true)));
    }

    #[test]
    fn relative_event_paths() {
        let w = watch("/local/domain/6/device", true);
        assert_eq!(w.event_path("/local/domain/6/device/vbd", 6), "device/vbd");
        assert_eq!(watch("/x", false).event_path("/x/y", 6), "/x/y");
    }

    #[test]
    fn duplicates_and_missing() {
        let mut ws = WatchTable::default();
        let (mut one, mut two) = (WatchUsage::default(), WatchUsage::default());
        assert!(ws.add(1, &mut one, watch("/a", false)).is_some());
        assert!(ws.add(1, &mut one, watch("/a", false)).is_none());
        assert!(ws.add(2, &mut two, watch("/a", false)).is_some());
        assert!(!ws.remove(1, &mut one, "/b", b"t"));
        assert_eq!(one.bytes, 3);
        assert!(ws.remove(1, &mut one, "/a", b"t"));
        assert_eq!((one.count, one.bytes, two.count), (0, 0, 1));
        ws.clear(2, &mut two);
        assert!(ws.is_empty());
        assert_eq!((two.count, two.bytes), (0, 0));
    }

    #[test]
    fn ancestors_are_every_path_a_watch_may_hold_to_match() {
        let all = |p| ancestors(p).collect::<Vec<_>>();
        assert_eq!(all("/a/b"), ["/a/b", "/a", "/"]);
        assert_eq!(all("/"), ["/"]);
        assert_eq!(all("@releaseDomain"), ["@releaseDomain"]);
    }

    /// The index finds exactly what testing every watch finds, in
    /// connection then registration order.
    #[test]
    fn index_agrees_with_matching_every_watch() {
        let names = ["a", "b", "ab"];
        let mut paths = vec!["/".to_string(), "@releaseDomain".into(), "@x".into()];
        // domain homes, which the home filters cover
        for home in ["/local/domain/1", "/local/domain/2"] {
            paths.push(home.into());
            for x in names {
                paths.push(format!("{home}/{x}"));
                paths.push(format!("{home}/{x}/c"));
            }
        }
        paths.push("/local/domain".into());
        paths.push("/local".into());
        for x in names {
            paths.push(format!("/{x}"));
            for y in names {
                paths.push(format!("/{x}/{y}"));
                paths.push(format!("/{x}/{y}/c"));
            }
        }
        let mut below = crate::test_rng::below(0x2545_f491_4f6c_dd1du64);
        let mut next = |n: usize| below(n as u64) as usize;
        let mut table = WatchTable::default();
        let mut usage = [WatchUsage::default(); 5];
        let mut naive: Vec<(WatchKey, Watch)> = Vec::new();
        for _ in 0..3000 {
            let conn = next(5) as u32;
            let mut w = watch(&paths[next(paths.len())], false);
            w.token = [b'0' + next(2) as u8][..].into();
            match next(10) {
                0 => {
                    table.clear(conn, &mut usage[conn as usize]);
                    naive.retain(|(k, _)| k.0 != conn);
                }
                1..=3 => {
                    let removed = table.remove(conn, &mut usage[conn as usize], &w.path, &w.token);
                    let before = naive.len();
                    naive.retain(|(k, x)| !(k.0 == conn && *x == w));
                    assert_eq!(removed, naive.len() < before);
                }
                _ => {
                    let dup = naive.iter().any(|(k, x)| k.0 == conn && *x == w);
                    let added = table.add(conn, &mut usage[conn as usize], w.clone());
                    assert_eq!(added.is_none(), dup);
                    if !dup {
                        naive.push(((conn, table.next - 1), w));
                    }
                }
            }
            for (conn, u) in usage.iter().enumerate() {
                let mine = naive.iter().filter(|(k, _)| k.0 == conn as u32);
                let bytes: usize = mine.clone().map(|(_, w)| cost(w)).sum();
                assert_eq!((u.count, u.bytes), (mine.count(), bytes));
            }
            let c = change(&paths[next(paths.len())], next(2) == 0);
            let mut hits = Vec::new();
            table.matching(&c, &mut hits);
            let found: Vec<WatchKey> = hits.iter().map(|h| h.0).collect();
            for &(k, s) in &hits {
                let w = table.slot(s).expect("a hit's slot holds its watch");
                assert!(naive.iter().any(|(nk, nw)| *nk == k && nw == w));
            }
            let mut expected: Vec<WatchKey> = naive
                .iter()
                .filter(|(_, w)| w.matches(&c))
                .map(|(k, _)| *k)
                .collect();
            expected.sort_unstable();
            assert_eq!(found, expected, "{c:?}");
        }
    }
}
