//! A counting global allocator, for the tests that assert a path allocates nothing: it
//! counts the allocations of the current thread only, while counting is on, so the
//! other tests of the binary (run on other threads) do not interfere; on a count, it
//! prints a backtrace of the first few, which names the code that allocated.

use std::alloc::{GlobalAlloc, Layout, System};
use std::backtrace::Backtrace;
use std::cell::Cell;

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
    pub static TRACES: Cell<u32> = const { Cell::new(0) };
}

/// How many allocations get a backtrace printed, per counted section.
pub const TRACED: u32 = 4;

impl Counting {
    fn record(&self, what: &str, size: usize) {
        // `try_with`: the thread-locals may be gone while a thread shuts down.
        if !COUNTING.try_with(Cell::get).unwrap_or(false) {
            return;
        }
        COUNT.set(COUNT.get() + 1);
        if TRACES.get() < TRACED {
            TRACES.set(TRACES.get() + 1);
            // The backtrace allocates: not counted.
            COUNTING.set(false);
            let trace = Backtrace::force_capture();
            eprintln!("counted {what} of {size} bytes at:\n{trace}");
            COUNTING.set(true);
        }
    }
}

// SAFETY: every call is passed on to `System` unchanged; counting touches only
// thread-locals that need no allocation (`const`-initialised `Cell`s without `Drop`).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.record("alloc", layout.size());
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.record("alloc_zeroed", layout.size());
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.record("realloc", new_size);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Starts counting this thread's allocations.
pub fn start_counting() {
    COUNT.set(0);
    TRACES.set(0);
    COUNTING.set(true);
}

/// Stops counting: the allocations since `start_counting`.
pub fn stop_counting() -> u64 {
    COUNTING.set(false);
    COUNT.get()
}

/// The allocations `f` makes on this thread.
pub fn allocations<T>(f: impl FnOnce() -> T) -> (T, u64) {
    start_counting();
    let out = f();
    (out, stop_counting())
}
