//! The `kadence` binary: `kadence serve` runs a scheduler node, the other subcommands talk to
//! one over HTTP. All logic lives in the library; see [`kadence_scheduler::cli`].

fn main() -> std::process::ExitCode {
    kadence_scheduler::cli::main()
}
