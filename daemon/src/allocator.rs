//! How camdnnd uses glibc's allocator, so reloads keep memory flat.
//!
//! glibc gives threads their own arenas (up to 8 per core) and keeps freed
//! memory in the arena that held it. Every pipeline a reload builds has
//! threads of its own (scheduler, preparation, one worker per processor),
//! whose allocations land in whichever arenas they get; the old pipeline's
//! freed memory then stays spread over many arenas, part of it in pages still
//! shared with live data. Resident memory grew with each reload this way
//! without a leak (docs/operations.md, "Reloads and memory": flat with few
//! arenas). So the daemon bounds the number of arenas at start and returns
//! free pages after each torn-down pipeline.

/// Arenas glibc may create (`M_ARENA_MAX`) unless the `MALLOC_ARENA_MAX`
/// environment variable sets another number. Two is what kept resident
/// memory flat over 100 reloads (docs/operations.md, "Reloads and memory");
/// what fewer arenas cost in allocation contention on a board with more
/// cores than the 2-core host it was measured on is not measured.
pub const MALLOC_ARENAS: i32 = 2;

/// Bounds glibc's arenas to [`MALLOC_ARENAS`] (or leaves the environment's
/// `MALLOC_ARENA_MAX` in charge). Call it before any thread starts.
pub fn bound_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only changes a limit glibc reads when a thread
        // needs an arena; it is called before the daemon starts threads.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENAS);
        }
    }
}

/// Hands the free pages of every arena back to the system (after a
/// pipeline is torn down: its models and buffers were just freed).
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}
