//! A path stored in place when short (as nearly every watched path is),
//! on the heap when long: a hash table keyed by it compares a key without
//! following a pointer, so finding a path in a large table touches its
//! slot, not also a separate allocation somewhere else in memory.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

/// Paths up to this long are stored in place (`/local/domain/<id>/…`
/// watches are 30–50 bytes; the key is then 64 bytes with its length).
const INLINE: usize = 62;

#[derive(Clone)]
pub enum InlinePath {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<str>),
}

impl InlinePath {
    pub fn as_str(&self) -> &str {
        match self {
            // SAFETY: `bytes[..len]` was copied from a &str in `from`.
            InlinePath::Inline { len, bytes } => unsafe {
                std::str::from_utf8_unchecked(&bytes[..*len as usize])
            },
            InlinePath::Heap(s) => s,
        }
    }
}

impl From<&str> for InlinePath {
    fn from(s: &str) -> InlinePath {
        if s.len() > INLINE {
            return InlinePath::Heap(s.into());
        }
        let mut bytes = [0; INLINE];
        bytes[..s.len()].copy_from_slice(s.as_bytes());
        InlinePath::Inline {
            len: s.len() as u8,
            bytes,
        }
    }
}

impl Borrow<str> for InlinePath {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

// Hash and Eq as the str it holds, as Borrow<str> requires.
impl Hash for InlinePath {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl PartialEq for InlinePath {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for InlinePath {}

impl std::fmt::Debug for InlinePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashMap;

    #[test]
    fn short_and_long_paths_are_found_by_their_str() {
        let short = "/local/domain/1/device/vbd/51712/state";
        let long = format!("/local/domain/1/{}", "x".repeat(100));
        let edge = "/".repeat(INLINE);
        let mut m: FxHashMap<InlinePath, u32> = FxHashMap::default();
        m.insert(short.into(), 1);
        m.insert(long.as_str().into(), 2);
        m.insert(edge.as_str().into(), 3);
        assert!(matches!(InlinePath::from(short), InlinePath::Inline { .. }));
        assert!(matches!(
            InlinePath::from(edge.as_str()),
            InlinePath::Inline { .. }
        ));
        assert!(matches!(
            InlinePath::from(long.as_str()),
            InlinePath::Heap(_)
        ));
        assert_eq!(m.get(short), Some(&1));
        assert_eq!(m.get(long.as_str()), Some(&2));
        assert_eq!(m.get(edge.as_str()), Some(&3));
        assert_eq!(m.get("/local/domain/1"), None);
        assert_eq!(InlinePath::from(short).as_str(), short);
    }
}
