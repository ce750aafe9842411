use clap::Parser;
use xenstore_bench::cli::{Cli, Command};

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match &cli.command {
        Command::All(args) => xenstore_bench::run::all(args),
        Command::Load(args) => xenstore_bench::run::load(args),
        Command::Kernel(args) => xenstore_bench::kernel::run(args),
        Command::Soak(args) => xenstore_bench::soak::run(args),
        Command::Smoke {
            shim,
            floor,
            snoop,
            probe_loop,
            only,
            upstream,
        } => {
            let (snoop, probe_loop) = (snoop.as_deref(), probe_loop.as_deref());
            xenstore_bench::run::smoke(shim, floor, snoop, probe_loop, only, upstream)
        }
    }
}
