use clap::Parser;

fn main() {
    let args = xenstore_snoop::cli::Args::parse();
    match xenstore_snoop::session::run(&args) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("xenstore-snoop: {e:#}");
            std::process::exit(1);
        }
    }
}
