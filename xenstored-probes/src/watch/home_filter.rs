//! Which paths in a domain's home (`/local/domain/<id>` and below) may be
//! watched: per domain, a 256-bit filter of the watched paths' hashes.
//!
//! A change below a domain's home has several ancestors in that home
//! (`…/device/vbd/51768/state` has five), each unique to the domain: looking
//! each up in the whole host's watch index is a cache miss apiece at a
//! thousand domains, though usually only one of them is watched. The
//! domain's filter, one small entry, tells which may be.

use crate::store::domid_map::DomidMap;
use std::hash::BuildHasher;

const DOMAIN_PREFIX: &str = "/local/domain/";

/// Every domain home holding a watched path, by domain id.
#[derive(Debug, Default)]
pub struct HomeFilters {
    by_domid: DomidMap<Filter>,
    /// How many watches each home holds: apart from the filters, which a
    /// change reads, so that each is 32 bytes within one cache line.
    watches: DomidMap<u32>,
}

/// One home's watched paths. A removed path's bit stays set (another path
/// may share it) until the home holds no watch: a stale bit costs a lookup,
/// never an event.
#[derive(Debug, Default)]
#[repr(align(32))]
struct Filter {
    bits: [u64; 4],
}

impl Filter {
    fn may_hold(&self, path: &str) -> bool {
        let (word, bit) = bit_of(path);
        self.bits[word] & bit != 0
    }
}

/// Where `path`'s bit is: its hash's top byte (FxHash mixes the high bits
/// best).
fn bit_of(path: &str) -> (usize, u64) {
    let top = (rustc_hash::FxBuildHasher.hash_one(path) >> 56) as usize;
    (top / 64, 1 << (top % 64))
}

/// The domain id of the home `path` is at or below, if any, and the
/// length of the home's path.
pub fn home_of(path: &str) -> Option<(u32, usize)> {
    let rest = path.strip_prefix(DOMAIN_PREFIX)?.as_bytes();
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || rest.get(digits).is_some_and(|&c| c != b'/') {
        return None;
    }
    let mut id: u32 = 0;
    for &c in &rest[..digits] {
        id = id.checked_mul(10)?.checked_add(u32::from(c - b'0'))?;
    }
    Some((id, DOMAIN_PREFIX.len() + digits))
}

impl HomeFilters {
    /// A watch on `path` was registered.
    pub fn add(&mut self, path: &str) {
        let Some((domid, _)) = home_of(path) else {
            return;
        };
        *self.watches.entry(domid) += 1;
        let f = self.by_domid.entry(domid);
        let (word, bit) = bit_of(path);
        f.bits[word] |= bit;
    }

    /// A watch on `path` was removed.
    pub fn remove(&mut self, path: &str) {
        let Some((domid, _)) = home_of(path) else {
            return;
        };
        if let Some(count) = self.watches.get_mut(domid) {
            *count -= 1;
            if *count == 0 {
                self.watches.clear(domid);
                self.by_domid.clear(domid);
            }
        }
    }

    /// What the filters say about the ancestors of a change at `path`
    /// (one lookup of its home's filter for all of them).
    pub fn for_change(&self, path: &str) -> Ancestors<'_> {
        match home_of(path) {
            Some((domid, home_len)) => Ancestors {
                home_len,
                filter: self.by_domid.get(domid),
            },
            None => Ancestors {
                home_len: usize::MAX,
                filter: None,
            },
        }
    }
}

/// The filter of one change's home.
pub struct Ancestors<'a> {
    /// An ancestor this long or longer is in the home (usize::MAX: the
    /// change is in none).
    home_len: usize,
    filter: Option<&'a Filter>,
}

impl Ancestors<'_> {
    /// False only when no watch is on `path`, which must be the change's
    /// path or an ancestor of it; paths above its home are always maybe.
    pub fn may_be_watched(&self, path: &str) -> bool {
        path.len() < self.home_len || self.filter.is_some_and(|f| f.may_hold(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn homes_are_read_from_the_path() {
        assert_eq!(home_of("/local/domain/7"), Some((7, 15)));
        assert_eq!(home_of("/local/domain/17/device/vif"), Some((17, 16)));
        assert_eq!(home_of("/local/domain"), None);
        assert_eq!(home_of("/local/domain/"), None);
        assert_eq!(home_of("/local/domain/x7/a"), None);
        assert_eq!(home_of("/local/domain/99999999999/a"), None);
        assert_eq!(home_of("@releaseDomain"), None);
    }

    #[test]
    fn a_watched_path_is_always_maybe_and_a_home_without_watches_never() {
        let mut f = HomeFilters::default();
        f.add("/local/domain/7/device/vif/1/state");
        let a = f.for_change("/local/domain/7/device/vif/1/state/x");
        assert!(a.may_be_watched("/local/domain/7/device/vif/1/state"));
        assert!(a.may_be_watched("/local/domain"));
        assert!(a.may_be_watched("/"));
        let other = f.for_change("/local/domain/8/device/vif/1/state/x");
        assert!(!other.may_be_watched("/local/domain/8/device/vif/1/state"));
        assert!(!other.may_be_watched("/local/domain/8"));
        assert!(other.may_be_watched("/local"));
        f.remove("/local/domain/7/device/vif/1/state");
        let gone = f.for_change("/local/domain/7/device/vif/1/state/x");
        assert!(!gone.may_be_watched("/local/domain/7/device/vif/1/state"));
    }
}
