//! xs-guest: be a guest domain talking to xenstored over its (simulated) ring.
//! The protocol lives in xenstore_guest::client; this file is flags and
//! output. See xs-guest(1).

use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use xenstore_guest::client::{Guest, XsClientError};
use xenstore_guest::sim::SimGuest;

/// Be domain N's guest: xenstore requests over its shared ring, simulated
/// under DIR/ring/N/ (the --run-dir of xenstored-shim). Paths may be
/// relative to /local/domain/N. An error reply exits 1.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// xenstored-shim's --run-dir.
    #[arg(long)]
    run_dir: PathBuf,
    /// The guest's domain id.
    #[arg(long)]
    domid: u16,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create the domain's page and port; prints "GFN PORT" for XS_INTRODUCE.
    Prepare {
        #[arg(long, default_value_t = 0xfeffc)]
        gfn: u64,
        #[arg(long, default_value_t = 1)]
        port: u32,
    },
    /// The domain dies: its page disappears, VIRQ_DOM_EXC is raised.
    Destroy,
    /// Requests from stdin, one a line, on one connection; an error is
    /// printed ("error: ...") and the session goes on.
    Session,
    #[command(flatten)]
    Request(Request),
}

/// What one request line says, on the command line or in a session.
#[derive(Subcommand)]
enum Request {
    /// Print a node's value.
    Read { path: String },
    /// Write the VALUE words, joined by spaces.
    Write {
        path: String,
        #[arg(allow_hyphen_values = true, num_args = 0..)]
        value: Vec<String>,
    },
    /// Create a node (and missing parents).
    Mkdir { path: String },
    /// Remove a node and its children.
    Rm { path: String },
    /// List the children, one a line.
    Ls { path: String },
    /// Print a node's permissions (n6 r0 ...).
    GetPerms { path: String },
    /// PERMs in text form: n6 r0 ...
    SetPerms { path: String, perms: Vec<String> },
    /// Print a domain's home path.
    DomainPath {
        /// Default: this domain.
        domid: Option<u16>,
    },
    /// Watch PATH (token PATH), print "path token" per event, COUNT times
    /// or forever.
    Watch { path: String, count: Option<u64> },
    /// The ring's reconnect handshake.
    Reconnect,
    /// Start a transaction for the session's following requests.
    Start,
    /// Commit the session's transaction.
    Commit,
    /// Abort the session's transaction.
    Abort,
    /// Register a watch without waiting for events.
    WatchAdd { path: String, token: String },
    /// Print up to N queued watch events, waiting up to MS for each.
    Events {
        #[arg(default_value_t = 1)]
        n: usize,
        #[arg(default_value_t = 5000)]
        ms: u64,
    },
    /// Pause the session for MS milliseconds.
    Sleep { ms: u64 },
}

/// A session line, parsed like the command line.
#[derive(Parser)]
#[command(no_binary_name = true, disable_help_flag = true)]
struct Line {
    #[command(subcommand)]
    request: Request,
}

/// One request; `tx` is the session's open transaction (0: none).
fn run(guest: &mut Guest, domid: u16, tx: &mut u32, req: Request) -> Result<(), XsClientError> {
    match req {
        Request::Read { path } => println!("{}", guest.read(*tx, &path)?),
        Request::Write { path, value } => guest.write(*tx, &path, &value.join(" "))?,
        Request::Mkdir { path } => guest.mkdir(*tx, &path)?,
        Request::Rm { path } => guest.rm(*tx, &path)?,
        Request::Ls { path } => {
            for name in guest.directory(*tx, &path)? {
                println!("{name}");
            }
        }
        Request::GetPerms { path } => println!("{}", guest.get_perms(*tx, &path)?.join(" ")),
        Request::SetPerms { path, perms } => {
            let perms: Vec<&str> = perms.iter().map(String::as_str).collect();
            guest.set_perms(*tx, &path, &perms)?
        }
        Request::DomainPath { domid: of } => {
            println!("{}", guest.get_domain_path(of.unwrap_or(domid))?)
        }
        Request::Watch { path, count } => {
            guest.watch(&path, &path)?;
            let mut seen = 0;
            while seen < count.unwrap_or(u64::MAX) {
                if let Some(ev) = guest.next_event(Duration::from_secs(3600))? {
                    println!("{} {}", ev.path, ev.token);
                    seen += 1;
                }
            }
        }
        Request::Reconnect => {
            guest.reconnect()?;
            *tx = 0;
        }
        Request::Start => {
            *tx = guest.transaction_start()?;
            println!("{tx}");
        }
        Request::Commit => guest.transaction_end(std::mem::take(tx), true)?,
        Request::Abort => guest.transaction_end(std::mem::take(tx), false)?,
        Request::WatchAdd { path, token } => guest.watch(&path, &token)?,
        Request::Events { n, ms } => {
            for _ in 0..n {
                match guest.next_event(Duration::from_millis(ms))? {
                    Some(ev) => println!("{} {}", ev.path, ev.token),
                    None => break,
                }
            }
        }
        Request::Sleep { ms } => std::thread::sleep(Duration::from_millis(ms)),
    }
    Ok(())
}

/// Runs stdin's lines; true if every one succeeded.
fn session(guest: &mut Guest, domid: u16) -> Result<bool, XsClientError> {
    let mut tx = 0;
    let mut all_ok = true;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() || words[0].starts_with('#') {
            continue;
        }
        let outcome = match Line::try_parse_from(words) {
            Ok(l) => run(guest, domid, &mut tx, l.request).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string().lines().next().unwrap_or("").to_string()),
        };
        if let Err(why) = outcome {
            println!("error: {}", why.trim_start_matches("error: "));
            all_ok = false;
        }
    }
    Ok(all_ok)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Prepare { gfn, port } => SimGuest::prepare(&cli.run_dir, cli.domid, gfn, port)
            .map(|_| {
                println!("{gfn} {port}");
                true
            })
            .map_err(XsClientError::from),
        Command::Destroy => SimGuest::destroy(&cli.run_dir, cli.domid)
            .map(|_| true)
            .map_err(XsClientError::from),
        Command::Session => {
            Guest::open(&cli.run_dir, cli.domid).and_then(|mut g| session(&mut g, cli.domid))
        }
        Command::Request(req) => Guest::open(&cli.run_dir, cli.domid)
            .and_then(|mut g| run(&mut g, cli.domid, &mut 0, req))
            .map(|_| true),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("xs-guest: {e}");
            ExitCode::FAILURE
        }
    }
}
