//! Watches: which registered watch an event matches, and the path it is
//! reported with (relative watches get paths relative to the domain home).

use crate::path;
use crate::tree::Change;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watch {
    /// Absolute node path or an `@` name.
    pub path: String,
    pub token: Vec<u8>,
    /// Registered with a relative path: events drop `/local/domain/<id>/`.
    pub relative: bool,
}

impl Watch {
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

/// A connection's watches, in registration order (events go out in it),
/// and the bytes of their paths and tokens (the memory quota's share).
#[derive(Debug, Default)]
pub struct Watches {
    list: Vec<Watch>,
    bytes: usize,
}

fn cost(w: &Watch) -> usize {
    w.path.len() + w.token.len()
}

impl Watches {
    /// False when the same path and token are already watched (EEXIST).
    pub fn add(&mut self, w: Watch) -> bool {
        if self
            .list
            .iter()
            .any(|x| x.path == w.path && x.token == w.token)
        {
            return false;
        }
        self.bytes += cost(&w);
        self.list.push(w);
        true
    }

    /// False when no such watch exists (ENOENT).
    pub fn remove(&mut self, path: &str, token: &[u8]) -> bool {
        let Some(i) = self
            .list
            .iter()
            .position(|x| x.path == path && x.token == token)
        else {
            return false;
        };
        self.bytes -= cost(&self.list.remove(i));
        true
    }

    pub fn all(&self) -> &[Watch] {
        &self.list
    }

    /// Bytes of their paths and tokens, as C xenstored charges them.
    pub fn memory(&self) -> usize {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn clear(&mut self) {
        self.list.clear();
        self.bytes = 0;
    }
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
            token: b"t".to_vec(),
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
        let mut ws = Watches::default();
        assert!(ws.add(watch("/a", false)));
        assert!(!ws.add(watch("/a", false)));
        assert!(!ws.remove("/b", b"t"));
        assert_eq!(ws.memory(), 3);
        assert!(ws.remove("/a", b"t"));
        assert!(ws.is_empty());
        assert_eq!(ws.memory(), 0);
    }
}
