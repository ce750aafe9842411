//! A node as the global store keeps it: one heap block holding its path,
//! generation, permissions, value and children, behind a thin pointer.
//!
//! Memory is a goal (RSS at least as low as C xenstored's TDB): a map of
//! `Box<str>` to a struct of three `Vec`s cost four allocations and ~110
//! bytes of table slot per node; this costs one slab block (slab.rs) and 8 bytes.
//! The map is a set of records keyed by the path inside them.
//!
//! Layout (native endian, unaligned: slab blocks come in 4-byte steps):
//! generation u64 | children_len u32 | value_len u16 | path_len u16 |
//! perm_count u16 | perms ([Perm], packed) | path | value | children.
//! Values and permission lists fit a payload (4096 bytes; the migration
//! stream has u16 lengths too); children lists over `listing::BIG` bytes
//! are detached, but a u32 keeps this file free of that bound.

use crate::store::children::Children;
use crate::store::node::{Node, NodeRef};
use crate::store::perms::Perm;
use crate::store::slab;
use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::ptr::NonNull;

const HEADER: usize = 18;
const ALIGN: usize = slab::ALIGN;
/// children_len of a record whose children the store keeps beside it
/// (a big directory's, see listing.rs).
const DETACHED: u32 = u32::MAX;

pub struct Record {
    ptr: NonNull<u8>,
}

// SAFETY: a Record owns its block exclusively, like a Box<[u8]>.
unsafe impl Send for Record {}
// SAFETY: as for Send; &Record only reads the block.
unsafe impl Sync for Record {}

impl Record {
    /// Packs `node` stored at `path`. Paths (XENSTORE_ABS_PATH_MAX) and
    /// permission lists (one payload) are far below u16::MAX.
    pub fn new(path: &str, node: NodeRef<'_>) -> Record {
        Record::pack(path, node, false)
    }

    /// Packs `node` without its children: the store keeps them beside
    /// the record, and `node()` gives an empty list.
    pub fn detached(path: &str, node: NodeRef<'_>) -> Record {
        Record::pack(
            path,
            NodeRef {
                children: Children::Flat(&[]),
                ..node
            },
            true,
        )
    }

    /// Whether the store keeps this node's children beside the record.
    pub fn children_detached(&self) -> bool {
        // SAFETY: as in header(), which this field belongs to.
        unsafe { self.ptr.as_ptr().add(8).cast::<u32>().read_unaligned() == DETACHED }
    }

    fn pack(path: &str, node: NodeRef<'_>, detached: bool) -> Record {
        let path_len = u16::try_from(path.len()).expect("path longer than a payload");
        let perm_count = u16::try_from(node.perms.len()).expect("perms longer than a payload");
        let value_len = u16::try_from(node.value.len()).expect("value longer than a payload");
        let children_len = u32::try_from(node.children.len())
            .ok()
            .filter(|&len| len != DETACHED)
            .expect("children over 4 GiB");
        let children_len = if detached { DETACHED } else { children_len };
        let layout = layout(
            node.perms.len(),
            path.len() + node.value.len() + node.children.len(),
        );
        // SAFETY: layout has a non-zero size (HEADER); every byte written
        // below lies inside it, and each region is written exactly once.
        unsafe {
            let ptr = allocate(layout);
            let p = ptr.as_ptr();
            p.cast::<u64>().write_unaligned(node.generation);
            p.add(8).cast::<u32>().write_unaligned(children_len);
            p.add(12).cast::<u16>().write_unaligned(value_len);
            p.add(14).cast::<u16>().write_unaligned(path_len);
            p.add(16).cast::<u16>().write_unaligned(perm_count);
            let perms = p.add(HEADER).cast::<Perm>();
            std::ptr::copy_nonoverlapping(node.perms.as_ptr(), perms, node.perms.len());
            let mut at = p.add(HEADER + size_of_val(node.perms));
            for bytes in [path.as_bytes(), node.value]
                .into_iter()
                .chain(node.children.chunks())
            {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), at, bytes.len());
                at = at.add(bytes.len());
            }
            Record { ptr }
        }
    }

    fn header(&self) -> (u64, usize, usize, usize, usize) {
        let p = self.ptr.as_ptr();
        // SAFETY: the header was written by new(); reads are unaligned.
        unsafe {
            (
                p.cast::<u64>().read_unaligned(),
                p.add(12).cast::<u16>().read_unaligned() as usize,
                match p.add(8).cast::<u32>().read_unaligned() {
                    DETACHED => 0,
                    len => len as usize,
                },
                p.add(14).cast::<u16>().read_unaligned() as usize,
                p.add(16).cast::<u16>().read_unaligned() as usize,
            )
        }
    }

    fn bytes(&self, from: usize, len: usize) -> &[u8] {
        // SAFETY: callers pass a region new() initialised from bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(from), len) }
    }

    pub fn path(&self) -> &str {
        let (_, _, _, path_len, perm_count) = self.header();
        let bytes = self.bytes(HEADER + perm_count * size_of::<Perm>(), path_len);
        // SAFETY: new() copied these bytes from a &str.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    pub fn node(&self) -> NodeRef<'_> {
        let (generation, value_len, children_len, path_len, perm_count) = self.header();
        let perms_at = HEADER;
        let value_at = perms_at + perm_count * size_of::<Perm>() + path_len;
        // SAFETY: new() wrote perm_count Perms at HEADER (Perm is packed:
        // any address is aligned for it).
        let perms = unsafe {
            std::slice::from_raw_parts(self.ptr.as_ptr().add(perms_at).cast::<Perm>(), perm_count)
        };
        NodeRef {
            generation,
            perms,
            value: self.bytes(value_at, value_len),
            children: Children::Flat(self.bytes(value_at + value_len, children_len)),
        }
    }

    pub fn to_node(&self) -> Node {
        self.node().to_node()
    }
}

/// A record's block: from the slab, unless it is too big for it.
fn allocate(layout: Layout) -> NonNull<u8> {
    if layout.size() <= slab::MAX_BLOCK {
        return slab::alloc_block(layout.size());
    }
    // SAFETY: layout has a non-zero size (HEADER at least).
    NonNull::new(unsafe { alloc(layout) }).unwrap_or_else(|| handle_alloc_error(layout))
}

/// Gives back what `allocate(layout)` returned.
///
/// # Safety
/// `ptr` came from `allocate(layout)` and is not used after this.
unsafe fn release(ptr: NonNull<u8>, layout: Layout) {
    // SAFETY: the caller's promise; the size picks the same source.
    unsafe {
        if layout.size() <= slab::MAX_BLOCK {
            slab::free_block(ptr, layout.size())
        } else {
            dealloc(ptr.as_ptr(), layout)
        }
    }
}

fn layout(perm_count: usize, bytes: usize) -> Layout {
    let size = HEADER + perm_count * size_of::<Perm>() + bytes;
    Layout::from_size_align(size, ALIGN).expect("record layout")
}

impl Drop for Record {
    fn drop(&mut self) {
        let (_, value_len, children_len, path_len, perm_count) = self.header();
        // SAFETY: the same layout new() allocated with, from the same header.
        unsafe {
            release(
                self.ptr,
                layout(perm_count, path_len + value_len + children_len),
            )
        }
    }
}

// The set is keyed by path: hashing and equality are the path's, so a
// lookup by &str finds the record (Borrow's contract).
impl Borrow<str> for Record {
    fn borrow(&self) -> &str {
        self.path()
    }
}

impl Hash for Record {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.path().hash(state)
    }
}

impl PartialEq for Record {
    fn eq(&self, other: &Record) -> bool {
        self.path() == other.path()
    }
}

impl Eq for Record {}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Record")
            .field(&self.path())
            .field(&self.node())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::perms::Perms;

    #[test]
    fn round_trips_every_field() {
        let mut node = Node::new(
            b"value\0with nul",
            Perms::parse(b"n5\0r7\0b9\0", 3).unwrap(),
        );
        node.generation = u64::MAX - 1;
        node.add_child("a");
        node.add_child("bb");
        let r = Record::new("/local/domain/5/x", node.view());
        assert_eq!(r.path(), "/local/domain/5/x");
        assert_eq!(r.to_node(), node);
    }

    #[test]
    fn a_record_past_the_slab_round_trips() {
        let mut node = Node::new(&[7; 4096], Perms::owned_by(3));
        node.generation = 9;
        node.add_child("c");
        let r = Record::new("/big", node.view());
        assert_eq!((r.path(), r.to_node()), ("/big", node));
    }

    #[test]
    fn a_detached_record_keeps_everything_but_the_children() {
        let mut node = Node::new(b"v", Perms::owned_by(4));
        node.add_child("a");
        let r = Record::detached("/d", node.view());
        assert!(r.children_detached() && !Record::new("/d", node.view()).children_detached());
        node.children.clear();
        assert_eq!((r.path(), r.to_node()), ("/d", node));
    }

    #[test]
    fn empty_fields_and_lookup_by_path() {
        let node = Node::new(b"", Perms::owned_by(0));
        let mut set = std::collections::HashSet::new();
        set.insert(Record::new("/", node.view()));
        set.insert(Record::new("/a", node.view()));
        assert_eq!(set.get("/").unwrap().to_node(), node);
        assert!(!set.contains("/b"));
        assert!(set.replace(Record::new("/a", node.view())).is_some());
        assert_eq!(set.len(), 2);
    }
}
