//! The store's records' memory: blocks cut from big chunks, one free list
//! per size in 4-byte steps, so a block costs its size rounded up to 4.
//! malloc adds an 8-byte header to each block and rounds it to 16: on the
//! ~80-byte records of a host's tree that is 14 bytes a node, this ~1.5.
//! Blocks are only 4-aligned: records read their fields unaligned.
//!
//! A freed block serves the next block of its size; chunks are never given
//! back. So what a size holds is at most the most its blocks ever held at
//! once, which the store's node and memory quotas bound.

use std::alloc::{alloc, handle_alloc_error, Layout};
use std::ptr::NonNull;
use std::sync::Mutex;

/// Blocks up to this size come from the slab; bigger ones (big values and
/// directories, rare) from malloc, where its header is noise.
pub const MAX_BLOCK: usize = 512;
const STEP: usize = 4;
const CLASSES: usize = MAX_BLOCK / STEP;
/// Cut into blocks of one size as they are needed: pages of it never
/// handed out stay untouched, so they cost no resident memory.
const CHUNK: usize = 64 * 1024;

/// The alignment of every block.
pub const ALIGN: usize = STEP;
/// A free block holds the next one's address: smaller ones are made this big.
const MIN_BLOCK: usize = size_of::<usize>();

struct Class {
    /// Freed blocks, each holding the address of the next (0: the end).
    free: usize,
    /// The current chunk's unused part: [next, end).
    next: usize,
    end: usize,
}

static SLAB: Mutex<[Class; CLASSES]> = Mutex::new(
    [const {
        Class {
            free: 0,
            next: 0,
            end: 0,
        }
    }; CLASSES],
);

/// Which class serves blocks of `size` (1..=MAX_BLOCK).
fn class_of(size: usize) -> usize {
    (size.max(MIN_BLOCK) - 1) / STEP
}

/// A block of at least `size` bytes (1..=MAX_BLOCK), aligned to ALIGN.
pub fn alloc_block(size: usize) -> NonNull<u8> {
    assert!(
        (1..=MAX_BLOCK).contains(&size),
        "slab block of {size} bytes"
    );
    let class = class_of(size);
    let block = (class + 1) * STEP;
    let mut classes = SLAB.lock().unwrap_or_else(|e| e.into_inner());
    let c = &mut classes[class];
    let at = if c.free != 0 {
        let at = c.free;
        // SAFETY: a free block's first word is the next free block's
        // address, written by free_block.
        c.free = unsafe { (at as *const usize).read_unaligned() };
        at
    } else {
        if c.end - c.next < block {
            let layout = Layout::from_size_align(CHUNK, ALIGN).expect("chunk layout");
            // SAFETY: CHUNK is non-zero.
            let chunk = unsafe { alloc(layout) };
            if chunk.is_null() {
                handle_alloc_error(layout)
            }
            c.next = chunk as usize;
            c.end = c.next + CHUNK;
        }
        let at = c.next;
        c.next += block;
        at
    };
    NonNull::new(at as *mut u8).expect("a slab block is never null")
}

/// Gives back a block alloc_block handed out for `size`.
///
/// # Safety
/// `ptr` came from `alloc_block(size)` with the same `size` and is not
/// used after this.
pub unsafe fn free_block(ptr: NonNull<u8>, size: usize) {
    let mut classes = SLAB.lock().unwrap_or_else(|e| e.into_inner());
    let c = &mut classes[class_of(size)];
    // SAFETY: the block is no longer in use (the caller's promise) and
    // holds a usize: blocks that small never come here (class_of).
    unsafe { ptr.as_ptr().cast::<usize>().write_unaligned(c.free) };
    c.free = ptr.as_ptr() as usize;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_distinct_and_reused_by_size() {
        let a = alloc_block(20);
        let b = alloc_block(24);
        let c = alloc_block(25);
        for p in [a, b, c] {
            assert_eq!(p.as_ptr() as usize % ALIGN, 0);
        }
        assert_ne!(a, b);
        // SAFETY: each freed once, with the size it was asked for.
        unsafe {
            std::ptr::write_bytes(a.as_ptr(), 0xa5, 20);
            std::ptr::write_bytes(b.as_ptr(), 0x5a, 24);
            std::ptr::write_bytes(c.as_ptr(), 0x11, 25);
            free_block(b, 24);
            free_block(c, 25);
        }
        // Tests share the slab: another thread may take the freed block
        // first, so only what must hold is asserted.
        // A block too small for the free list's link is made big enough.
        let tiny = alloc_block(3);
        // SAFETY: as above.
        unsafe { free_block(tiny, 3) };
        let d = alloc_block(32);
        let e = alloc_block(MAX_BLOCK);
        assert_ne!(d, a);
        // SAFETY: as above.
        unsafe {
            std::ptr::write_bytes(e.as_ptr(), 0, MAX_BLOCK);
            free_block(a, 20);
            free_block(d, 32);
            free_block(e, MAX_BLOCK);
        }
    }
}
