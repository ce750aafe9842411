//! xenstored-shim: a xenstore daemon with USDT probes. All flag handling
//! lives here; the daemon is the library.

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use xenstored_probes::transport::DomainBackend;
use xenstored_probes::{daemon::Daemon, quota::Quotas, ring, server::Server, unix};

/// A xenstore daemon (Xen's xenstored protocol) carrying the `xenstore`
/// USDT provider; see xenstored-shim(8) and xenstored-probes(7).
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The dom0 client socket (created mode 0600).
    #[arg(long, env = "XENSTORED_PATH", default_value = "/run/xenstored/socket")]
    socket: PathBuf,
    /// Where per-domain transports live: INTRODUCE maps the simulated ring
    /// a guest prepared in <run-dir>/ring/<domid>/ (see xs-guest), or else
    /// creates <run-dir>/domain/<domid>, a socket whose clients act as that
    /// domain.
    #[arg(long, env = "XENSTORED_RUNDIR", default_value = "/run/xenstored")]
    run_dir: PathBuf,
    /// Set a hard quota, as upstream's `-Q <what>=<nb>` (nodes, watches,
    /// transactions, outstanding, transaction-nodes, memory, node-size,
    /// path-max, permissions).
    #[arg(short = 'Q', long = "quota", value_name = "WHAT=NB")]
    quota: Vec<String>,
    /// Set a soft quota, as upstream's `-q memory=<nb>`.
    #[arg(short = 'q', long = "quota-soft", value_name = "WHAT=NB")]
    quota_soft: Vec<String>,
    /// Serve real Xen domains: map their rings through /dev/xen/gntdev and
    /// /dev/xen/evtchn (needs a Xen dom0).
    #[cfg(feature = "xen")]
    #[arg(long)]
    xen: bool,
    /// Write the daemon's pid here once it listens.
    #[arg(short = 'F', long)]
    pid_file: Option<PathBuf>,
}

fn parse_quota(s: &str) -> Result<(&str, u32), String> {
    let (what, nb) = s
        .split_once('=')
        .ok_or_else(|| format!("quotas must be specified via <what>=<nb>: {s:?}"))?;
    let nb = nb
        .parse()
        .map_err(|_| format!("quota {what}: {nb:?} is not a number"))?;
    Ok((what, nb))
}

/// How INTRODUCE reaches domains: simulated rings for domains prepared
/// under <run-dir>/ring/, per-domain sockets for the others; with --xen,
/// real grant-mapped rings.
fn domain_backend(args: &Args) -> Box<dyn DomainBackend> {
    #[cfg(feature = "xen")]
    if args.xen {
        return Box::new(ring::transport::XenRingDomains);
    }
    let sockets = unix::SocketDomainBackend::new(&args.run_dir);
    Box::new(ring::transport::SimRingDomains::new(
        &args.run_dir,
        Box::new(sockets),
    ))
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xenstored-shim: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<(), String> {
    let mut quotas = Quotas::default();
    for q in &args.quota {
        let (what, nb) = parse_quota(q)?;
        if !quotas.set_global(what.as_bytes(), nb) {
            return Err(format!("unknown quota \"{what}\""));
        }
    }
    for q in &args.quota_soft {
        let (what, nb) = parse_quota(q)?;
        if !quotas.set_soft(what.as_bytes(), nb) {
            return Err(format!("unknown quota \"{what}\""));
        }
    }
    let daemon = Daemon::new(quotas, domain_backend(&args));
    let mut server = Server::new(daemon).map_err(|e| format!("epoll: {e}"))?;
    let listener =
        unix::SocketListener::bind(&args.socket, false).map_err(|e| format!("listening: {e}"))?;
    server
        .listen(Box::new(listener), 0)
        .map_err(|e| format!("polling the socket: {e}"))?;
    if let Some(p) = &args.pid_file {
        std::fs::write(p, format!("{}\n", std::process::id()))
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    server.run().map_err(|e| format!("event loop: {e}"))
}
