//! The `kadence` command for the end-to-end suites: the same entry point as the scheduler
//! crate's `kadence` binary (`kadence_scheduler::cli::main`), built with this package so a
//! suite finds it as `CARGO_BIN_EXE_kadence-cli` (Cargo gives a test the path of its own
//! package's binaries only). `tests/e2e/xxl_import.rs` runs the XXL-JOB import through it.

/// mimalloc, as the scheduler crate's `kadence` binary: the fault scenarios and the soak run
/// this binary and measure its memory, which must be the memory users see.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    kadence_scheduler::cli::main()
}
