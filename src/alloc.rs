//! The process's memory allocator: small blocks carved in order from big
//! chunks and kept, once freed, on a list per size for the next request of
//! that size; everything else goes to the C library's `malloc`.
//!
//! Why not `malloc` alone: a run makes and drops millions of small strings
//! and vectors, and glibc's path for a block its per-thread cache does not
//! hold costs ~150 instructions (a fifth of an evaluation-heavy run went
//! there). Why not mimalloc: its size classes each start a page of their
//! own, ~100 more page faults (a third more) before an empty policy has
//! run, and with transparent huge pages a fault now and then that waits
//! tens of milliseconds for the kernel to compact memory. Carving in order
//! keeps what a run touches as dense as `malloc`'s heap, and a list per
//! size makes reuse a pop. An agent run is short: what it frees is reused
//! by the same run and given back when it exits.

use std::alloc::{GlobalAlloc, Layout, System};

/// Keeps `malloc`'s big blocks in its heap, to be used again, instead of
/// mapping each one on its own and unmapping it when it is freed: a run
/// that makes and drops a vector of ten thousand expanded promises per
/// promise touched fresh pages for each (iterate: 7,381 page faults ->
/// 6,824). A block bigger than this is still mapped on its own. An agent
/// run is short, so what its heap keeps is given back when it exits.
pub fn keep_big_blocks_in_the_heap() {
    const MMAP_THRESHOLD: libc::c_int = 32 << 20;
    const TRIM_THRESHOLD: libc::c_int = 64 << 20;
    // SAFETY: mallopt only sets malloc's parameters; called before any
    // thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}
use std::cell::Cell;
use std::ptr::null_mut;

/// Sizes are rounded up to a multiple of this, which is also the
/// alignment every block has (`malloc`'s).
const GRAIN: usize = 16;
/// Bigger blocks, and those that must be aligned more, go to `malloc`.
const MAX_SMALL: usize = 1024;
const CLASSES: usize = MAX_SMALL / GRAIN;
/// What is asked of `malloc` at a time; its pages are touched only as
/// blocks are carved from them.
const CHUNK: usize = 1 << 20;

/// One thread's chunk and free lists. A block freed on another thread
/// than the one that made it joins that thread's lists: blocks belong to
/// no thread.
struct Local {
    /// The first free block of each size; each free block holds the
    /// address of the next in its first word.
    free: [Cell<*mut u8>; CLASSES],
    /// The part of the current chunk not carved yet.
    next: Cell<*mut u8>,
    end: Cell<*mut u8>,
}

thread_local! {
    // A constant without a destructor: reached with one instruction, and
    // usable while the thread ends.
    static LOCAL: Local = const {
        Local {
            free: [const { Cell::new(null_mut()) }; CLASSES],
            next: Cell::new(null_mut()),
            end: Cell::new(null_mut()),
        }
    };
}

/// The allocator `main` installs; see the module's text.
pub struct Pool;

/// The size class of a layout that is served here, if it is.
#[inline(always)]
fn class_of(layout: Layout) -> Option<usize> {
    (layout.size() <= MAX_SMALL && layout.align() <= GRAIN)
        .then(|| layout.size().saturating_sub(1) / GRAIN)
}

impl Local {
    #[inline(always)]
    fn take(&self, class: usize) -> *mut u8 {
        let head = self.free[class].get();
        if !head.is_null() {
            // SAFETY: a free block's first word holds the next free block
            // (blocks are at least one word and aligned to GRAIN).
            self.free[class].set(unsafe { head.cast::<*mut u8>().read() });
            return head;
        }
        let size = (class + 1) * GRAIN;
        let next = self.next.get();
        if (self.end.get() as usize).wrapping_sub(next as usize) >= size {
            // SAFETY: `next + size` is within the chunk (checked above; with
            // no chunk yet both are null and the difference is 0).
            self.next.set(unsafe { next.add(size) });
            return next;
        }
        self.carve_new_chunk(size)
    }

    #[cold]
    fn carve_new_chunk(&self, size: usize) -> *mut u8 {
        // The rest of the old chunk (less than one block) is left unused.
        // SAFETY: a non-zero size and a valid alignment.
        let chunk = unsafe { System.alloc(Layout::from_size_align_unchecked(CHUNK, GRAIN)) };
        if chunk.is_null() {
            return chunk;
        }
        // SAFETY: CHUNK >= MAX_SMALL >= size.
        unsafe {
            self.next.set(chunk.add(size));
            self.end.set(chunk.add(CHUNK));
        }
        chunk
    }

    #[inline(always)]
    fn give(&self, class: usize, block: *mut u8) {
        // SAFETY: the block was made for this class, so it holds a word.
        unsafe { block.cast::<*mut u8>().write(self.free[class].get()) };
        self.free[class].set(block);
    }
}

// SAFETY: blocks are carved from memory `System` gave and never given to
// two callers: a block is on at most one free list, and leaves it before
// it is handed out. Each is aligned to GRAIN and at least as big as asked.
unsafe impl GlobalAlloc for Pool {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match class_of(layout) {
            Some(class) => LOCAL.with(|l| l.take(class)),
            // SAFETY: the caller's layout, as given.
            None => unsafe { System.alloc(layout) },
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match class_of(layout) {
            Some(class) => LOCAL.with(|l| l.give(class, ptr)),
            // SAFETY: a block `System` made for this layout.
            None => unsafe { System.dealloc(ptr, layout) },
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match class_of(layout) {
            Some(class) => {
                let p = LOCAL.with(|l| l.take(class));
                if !p.is_null() {
                    // SAFETY: the block holds at least `layout.size()` bytes.
                    unsafe { p.write_bytes(0, layout.size()) };
                }
                p
            }
            // SAFETY: the caller's layout, as given.
            None => unsafe { System.alloc_zeroed(layout) },
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller promises the new size makes a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class_of(layout), class_of(new_layout)) {
            (Some(old), Some(new)) if old == new => ptr,
            // SAFETY: a block `System` made for `layout`.
            (None, None) => unsafe { System.realloc(ptr, layout, new_size) },
            _ => {
                // SAFETY: a valid layout; the old block holds
                // `layout.size()` bytes and the new `new_size`.
                unsafe {
                    let new = self.alloc(new_layout);
                    if !new.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    new
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn classes_round_up_to_the_grain() {
        assert_eq!(class_of(layout(1, 1)), Some(0));
        assert_eq!(class_of(layout(16, 8)), Some(0));
        assert_eq!(class_of(layout(17, 8)), Some(1));
        assert_eq!(class_of(layout(MAX_SMALL, 16)), Some(CLASSES - 1));
        assert_eq!(class_of(layout(MAX_SMALL + 1, 8)), None);
        assert_eq!(class_of(layout(64, 32)), None);
    }

    #[test]
    fn blocks_are_distinct_aligned_and_reused() {
        let pool = Pool;
        unsafe {
            let l = layout(24, 8);
            let a = pool.alloc(l);
            let b = pool.alloc(l);
            assert_ne!(a, b);
            assert_eq!(a as usize % GRAIN, 0);
            a.write_bytes(0xaa, 24);
            b.write_bytes(0xbb, 24);
            assert_eq!(*a.add(23), 0xaa);
            pool.dealloc(a, l);
            // The last block freed of a size is the next one handed out.
            let c = pool.alloc(layout(32, 16));
            assert_eq!(c, a);
            pool.dealloc(b, l);
            pool.dealloc(c, layout(32, 16));
        }
    }

    #[test]
    fn realloc_keeps_the_bytes_across_classes_and_to_malloc() {
        let pool = Pool;
        unsafe {
            let mut p = pool.alloc(layout(10, 1));
            for i in 0..10 {
                *p.add(i) = i as u8;
            }
            let mut size = 10;
            for new_size in [12, 40, 700, 5000, 100_000, 300, 5] {
                p = pool.realloc(p, layout(size, 1), new_size);
                for i in 0..size.min(new_size).min(10) {
                    assert_eq!(*p.add(i), i as u8, "after {size} -> {new_size}");
                }
                size = new_size;
            }
            pool.dealloc(p, layout(size, 1));
            let z = pool.alloc_zeroed(layout(48, 8));
            assert!((0..48).all(|i| *z.add(i) == 0));
            pool.dealloc(z, layout(48, 8));
        }
    }

    #[test]
    fn chunks_are_carved_whole_and_threads_share_blocks() {
        let pool = Pool;
        let l = layout(MAX_SMALL, 8);
        // More than a chunk's worth of the biggest size.
        let blocks: Vec<usize> = (0..2 * CHUNK / MAX_SMALL + 3)
            .map(|_| unsafe { pool.alloc(l) } as usize)
            .collect();
        let mut sorted = blocks.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), blocks.len());
        // Freed on another thread, they serve that thread's requests.
        std::thread::spawn(move || unsafe {
            for &b in &blocks {
                Pool.dealloc(b as *mut u8, l);
            }
            let again = Pool.alloc(l) as usize;
            assert_eq!(again, *blocks.last().unwrap());
            Pool.dealloc(again as *mut u8, l);
        })
        .join()
        .unwrap();
    }
}
