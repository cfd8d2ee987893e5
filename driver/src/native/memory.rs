//! Giving freed memory back to the system between code objects: glibc's
//! allocator keeps what a thread freed in that thread's arena, so two
//! threads that each instrumented a large code object would hold both
//! working sets at once, though one was already done.

extern "C" {
    fn malloc_trim(pad: usize) -> i32;
}

/// Returns the free memory of every allocator arena to the system.
pub fn release_free_memory() {
    // SAFETY: malloc_trim only walks glibc's own heap structures under
    // their locks; it reads and writes no memory of ours.
    unsafe {
        malloc_trim(0);
    }
}
