//! The `kadence` binary: `kadence serve` runs a scheduler node, the other subcommands talk to
//! one over HTTP. All logic lives in the library; see [`kadence_scheduler::cli`].

/// mimalloc rather than the system allocator: at 100 000 fires/s a third of the scheduler's
/// CPU went to glibc `malloc`/`free` (measured with `perf`, see the book's benchmarks page,
/// `docs/src/measurements/benchmarks.md`) — every fire allocates its row, record and acknowledgement.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    kadence_scheduler::cli::main()
}
