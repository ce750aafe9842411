//! The store's records' memory: blocks in 4-byte size steps cut from 64 KiB
//! chunks, each chunk serving one size. malloc adds an 8-byte header to
//! each block and rounds it to 16: on the ~80-byte records of a host's
//! tree that is 14 bytes a node, this ~1.5. Blocks are only 4-aligned:
//! records read their fields unaligned.
//!
//! Each chunk keeps its own free blocks and a count of the live ones, and
//! goes back to the kernel when its last block is freed (but for one empty
//! chunk a size keeps, so a size that empties and refills does not ask
//! the kernel each time). So what the slab holds follows what is live: a
//! client that fills the store with records of one size, removes them and
//! does the same with another size leaves nothing of the first behind, as
//! a free list per size without chunks would (up to one size's worth of
//! the store per size, 128 sizes).

use std::ptr::NonNull;
use std::sync::Mutex;

/// Blocks up to this size come from the slab; bigger ones (big values and
/// directories, rare) from malloc, where its header is noise.
pub const MAX_BLOCK: usize = 512;
const STEP: usize = 4;
const CLASSES: usize = MAX_BLOCK / STEP;
/// Chunks are aligned to their size, so a block's address names its chunk.
/// Their pages never handed out stay untouched and cost no resident memory.
const CHUNK: usize = 64 * 1024;

/// The alignment of every block.
pub const ALIGN: usize = STEP;
/// A free block holds the next one's address: smaller ones are made this big.
const MIN_BLOCK: usize = size_of::<usize>();

/// At the start of every chunk. Addresses are usize, 0 for none.
#[repr(C)]
struct Chunk {
    /// Freed blocks of this chunk, each holding the next one's address.
    free: usize,
    /// Where the never-used tail begins.
    bump: usize,
    /// Blocks handed out and not freed.
    live: usize,
    /// The class's list of chunks with room: neighbours, and whether in it.
    prev: usize,
    next: usize,
    listed: bool,
}

/// The first block's offset in a chunk: after its header, 4-aligned.
const FIRST: usize = size_of::<Chunk>().next_multiple_of(STEP);

impl Chunk {
    /// The chunk a block lies in.
    fn of(block: usize) -> *mut Chunk {
        (block & !(CHUNK - 1)) as *mut Chunk
    }

    fn has_room(&self, start: usize, block: usize) -> bool {
        self.free != 0 || self.bump + block <= start + CHUNK
    }
}

/// One size's chunks that have room, newest first.
struct Class {
    with_room: usize,
}

static SLAB: Mutex<[Class; CLASSES]> = Mutex::new([const { Class { with_room: 0 } }; CLASSES]);

/// Which class serves blocks of `size` (1..=MAX_BLOCK), and their size.
fn class_of(size: usize) -> (usize, usize) {
    let class = (size.max(MIN_BLOCK) - 1) / STEP;
    (class, (class + 1) * STEP)
}

/// A block of at least `size` bytes (1..=MAX_BLOCK), aligned to ALIGN.
pub fn alloc_block(size: usize) -> NonNull<u8> {
    assert!(
        (1..=MAX_BLOCK).contains(&size),
        "slab block of {size} bytes"
    );
    let (class, block) = class_of(size);
    let mut classes = SLAB.lock().unwrap_or_else(|e| e.into_inner());
    let c = &mut classes[class];
    if c.with_room == 0 {
        c.with_room = new_chunk();
    }
    let start = c.with_room;
    // SAFETY: chunks on the list are live chunks whose header new_chunk
    // wrote; the lock is held.
    let chunk = unsafe { &mut *(start as *mut Chunk) };
    let at = if chunk.free != 0 {
        let at = chunk.free;
        // SAFETY: a free block's first word is the next free block's
        // address, written by free_block.
        chunk.free = unsafe { (at as *const usize).read_unaligned() };
        at
    } else {
        let at = chunk.bump;
        chunk.bump += block;
        at
    };
    chunk.live += 1;
    if !chunk.has_room(start, block) {
        // SAFETY: as above.
        unsafe { unlist(c, chunk) };
    }
    NonNull::new(at as *mut u8).expect("a slab block is never null")
}

/// Gives back a block alloc_block handed out for `size`.
///
/// # Safety
/// `ptr` came from `alloc_block(size)` with the same `size` and is not
/// used after this.
pub unsafe fn free_block(ptr: NonNull<u8>, size: usize) {
    let (class, _) = class_of(size);
    let mut classes = SLAB.lock().unwrap_or_else(|e| e.into_inner());
    let c = &mut classes[class];
    let at = ptr.as_ptr() as usize;
    let start = Chunk::of(at);
    // SAFETY: the block came from a live chunk of this class (the caller's
    // promise), whose header is at its aligned start; the lock is held.
    let chunk = unsafe { &mut *start };
    // SAFETY: the block is no longer in use (the caller's promise) and
    // holds a usize: blocks that small never come here (class_of).
    unsafe { (at as *mut usize).write_unaligned(chunk.free) };
    chunk.free = at;
    chunk.live -= 1;
    if !chunk.listed {
        // SAFETY: as above.
        unsafe { list(c, chunk) };
    }
    let alone = chunk.prev == 0 && chunk.next == 0;
    if chunk.live == 0 && !alone {
        // SAFETY: nothing in the chunk is live, and once unlisted nothing
        // refers to it.
        unsafe {
            unlist(c, chunk);
            unmap(start as usize, CHUNK);
        }
    }
}

/// A fresh chunk, its header written, not yet listed. Straight from mmap,
/// aligned by mapping twice its size and unmapping the rest: malloc's
/// aligned allocations of 64 KiB leave a gap beside each chunk, which cost
/// 12 B a node in S3's trees.
fn new_chunk() -> usize {
    // SAFETY: an anonymous private mapping, which aliases nothing.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            2 * CHUNK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if at == libc::MAP_FAILED {
        // As the global allocator does when memory runs out.
        let layout = std::alloc::Layout::from_size_align(CHUNK, CHUNK).expect("chunk layout");
        std::alloc::handle_alloc_error(layout)
    }
    let at = at as usize;
    let start = at.next_multiple_of(CHUNK);
    // SAFETY: both pieces lie in the mapping just made, outside the chunk.
    unsafe {
        unmap(at, start - at);
        unmap(start + CHUNK, at + 2 * CHUNK - (start + CHUNK));
    }
    // SAFETY: the chunk is ours, mapped, and aligned for its header.
    unsafe {
        (start as *mut Chunk).write(Chunk {
            free: 0,
            bump: start + FIRST,
            live: 0,
            prev: 0,
            next: 0,
            listed: true,
        })
    };
    start
}

/// Unmaps `len` bytes at `at` (nothing if `len` is 0).
///
/// # Safety
/// The range is mapped by this file and nothing in it is used after.
unsafe fn unmap(at: usize, len: usize) {
    if len > 0 {
        // SAFETY: the caller's promise.
        let done = unsafe { libc::munmap(at as *mut libc::c_void, len) };
        assert_eq!(
            done,
            0,
            "munmap of a slab chunk: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Puts `chunk` at the head of `c`'s chunks with room.
///
/// # Safety
/// `chunk` and every listed chunk are live chunks of `c`'s class.
unsafe fn list(c: &mut Class, chunk: &mut Chunk) {
    let start = chunk as *mut Chunk as usize;
    chunk.prev = 0;
    chunk.next = c.with_room;
    chunk.listed = true;
    if c.with_room != 0 {
        // SAFETY: the caller's promise.
        unsafe { (*(c.with_room as *mut Chunk)).prev = start };
    }
    c.with_room = start;
}

/// Takes `chunk` off `c`'s chunks with room.
///
/// # Safety
/// `chunk` is listed in `c`, and every listed chunk is live.
unsafe fn unlist(c: &mut Class, chunk: &mut Chunk) {
    // SAFETY: the caller's promise: neighbours are listed chunks.
    unsafe {
        match chunk.prev {
            0 => c.with_room = chunk.next,
            prev => (*(prev as *mut Chunk)).next = chunk.next,
        }
        if chunk.next != 0 {
            (*(chunk.next as *mut Chunk)).prev = chunk.prev;
        }
    }
    chunk.prev = 0;
    chunk.next = 0;
    chunk.listed = false;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chunks of `size`'s class: how many are listed as having room.
    fn listed(size: usize) -> usize {
        let classes = SLAB.lock().unwrap();
        let mut at = classes[class_of(size).0].with_room;
        let mut n = 0;
        while at != 0 {
            n += 1;
            // SAFETY: listed chunks are live; the lock is held.
            at = unsafe { (*(at as *const Chunk)).next };
        }
        n
    }

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

    /// A size no other test uses, so the counts below are this test's.
    const ALONE: usize = 499;

    #[test]
    fn emptied_chunks_go_back_but_one() {
        let per_chunk = (CHUNK - FIRST) / class_of(ALONE).1;
        // Five chunks' worth and one more block, each written whole.
        let blocks: Vec<NonNull<u8>> = (0..5 * per_chunk + 1)
            .map(|_| {
                let b = alloc_block(ALONE);
                // SAFETY: the block has ALONE bytes.
                unsafe { std::ptr::write_bytes(b.as_ptr(), 0x77, ALONE) };
                b
            })
            .collect();
        let chunks: std::collections::BTreeSet<usize> = blocks
            .iter()
            .map(|b| Chunk::of(b.as_ptr() as usize) as usize)
            .collect();
        assert_eq!(chunks.len(), 6, "{per_chunk} blocks a chunk");
        // Only the sixth, with one block, has room.
        assert_eq!(listed(ALONE), 1);
        // Freeing one block of each full chunk lists it again.
        for b in blocks.iter().step_by(per_chunk).take(5) {
            // SAFETY: freed once, with its size.
            unsafe { free_block(*b, ALONE) };
        }
        assert_eq!(listed(ALONE), 6);
        // Freed blocks are handed out again before any new chunk is cut.
        let again: Vec<NonNull<u8>> = (0..5).map(|_| alloc_block(ALONE)).collect();
        for b in &again {
            assert!(chunks.contains(&(Chunk::of(b.as_ptr() as usize) as usize)));
        }
        // Everything freed: every chunk but one goes back to the kernel.
        let live = blocks
            .iter()
            .enumerate()
            .filter(|(i, _)| i % per_chunk != 0 || *i / per_chunk >= 5)
            .map(|(_, b)| *b)
            .chain(again);
        for b in live {
            // SAFETY: each live block freed once, with its size.
            unsafe { free_block(b, ALONE) };
        }
        assert_eq!(listed(ALONE), 1);
    }
}
