use clap::Parser;

fn main() {
    let args = xenstore_snoop::cli::Args::parse();
    // A trace file (-r) replays without root or a daemon; --metrics
    // exports counters; else trace live.
    let run = match &args.read {
        Some(path) => xenstore_snoop::replay::run(&args, path),
        None if args.metrics => xenstore_snoop::metrics::run(&args),
        None => xenstore_snoop::session::run(&args),
    };
    match run {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("xenstore-snoop: {e:#}");
            std::process::exit(1);
        }
    }
}
