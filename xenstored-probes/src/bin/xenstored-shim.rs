//! xenstored-shim: a xenstore daemon with USDT probes, started as C
//! xenstored 4.17 is. All flag and environment handling lives here; the
//! daemon, the event loop and the service plumbing are the library.

use clap::{ArgAction, Parser};
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use xenstored_probes::conn::transport::{DomainBackend, SharedChannels};
use xenstored_probes::conn::{ring, unix};
use xenstored_probes::daemon::{quota::Quotas, Daemon};
use xenstored_probes::daemon::{LiveUpdate, LiveUpdateTarget};
use xenstored_probes::host::service::{detach, live, notify, pidfile::PidFile, signals};
use xenstored_probes::host::update::{adopt, handover};
use xenstored_probes::host::xen;
use xenstored_probes::log;
use xenstored_probes::log::notable::{Kind, Notable};
use xenstored_probes::migration;
use xenstored_probes::probes::trace_file;
use xenstored_probes::server::Server;

/// Upstream's XENSTORE_REL_PATH_MAX: `-M` is capped there, as upstream.
const PATH_MAX_CAP: u32 = 2048;

/// A xenstore daemon (Xen's xenstored protocol) carrying the `xenstore`
/// USDT provider; a drop-in for C xenstored 4.17. See xenstored-shim(8).
#[derive(Parser, Debug)]
#[command(
    name = "xenstored-shim",
    version,
    disable_help_flag = true,
    disable_version_flag = true
)]
struct Args {
    /// The dom0 client socket (created mode 0600). Default:
    /// $XENSTORED_PATH, else <run-dir>/socket.
    #[arg(long, env = "XENSTORED_PATH")]
    socket: Option<PathBuf>,
    /// Created if missing; holds the socket by default and the per-domain
    /// transports: INTRODUCE maps the simulated ring a guest prepared in
    /// <run-dir>/ring/<domid>/ (see xs-guest), or else creates
    /// <run-dir>/domain/<domid>, a socket whose clients act as that domain.
    #[arg(long, env = "XENSTORED_RUNDIR", default_value = "/run/xenstored")]
    run_dir: PathBuf,
    /// Write the daemon's pid here once it serves; detach (fork) first
    /// unless -N. Removed when the daemon stops.
    #[arg(short = 'F', long, value_name = "FILE")]
    pid_file: Option<PathBuf>,
    /// Stay in the foreground even with --pid-file.
    #[arg(short = 'N', long)]
    no_fork: bool,
    /// Print the daemon's pid on stdout once it serves.
    #[arg(short = 'P', long)]
    output_pid: bool,
    /// Do not serve the hypervisor's domains (no dom0 ring, no VIRQ_DOM_EXC):
    /// simulated rings and sockets, as off Xen.
    #[arg(short = 'D', long)]
    no_domain_init: bool,
    /// Log the start-up steps too (stderr, or syslog once detached).
    #[arg(short = 'V', long)]
    verbose: bool,
    /// Nodes per domain (as -Q nodes=NB).
    #[arg(short = 'E', long, value_name = "NB")]
    entry_nb: Option<u32>,
    /// Max. size of a node (as -Q node-size=SIZE).
    #[arg(short = 'S', long, value_name = "SIZE")]
    entry_size: Option<u32>,
    /// Watches per domain (as -Q watches=NB).
    #[arg(short = 'W', long, value_name = "NB")]
    watch_nb: Option<u32>,
    /// Transactions per domain (as -Q transactions=NB).
    #[arg(short = 't', long, value_name = "NB")]
    transaction: Option<u32>,
    /// Permissions per node (as -Q permissions=NB).
    #[arg(short = 'A', long, value_name = "NB")]
    perm_nb: Option<u32>,
    /// Node path length, capped at 2048 (as -Q path-max=CHARS).
    #[arg(short = 'M', long, value_name = "CHARS")]
    path_max: Option<u32>,
    /// Set a hard quota: nodes, watches, transactions, outstanding,
    /// transaction-nodes, memory, node-size, path-max, permissions.
    #[arg(short = 'Q', long = "quota", value_name = "WHAT=NB")]
    quota: Vec<String>,
    /// Set a soft quota (memory).
    #[arg(short = 'q', long = "quota-soft", value_name = "WHAT=NB")]
    quota_soft: Vec<String>,
    /// Accepted: there is no store corruption recovery to turn off.
    #[arg(short = 'R', long)]
    no_recovery: bool,
    /// "on" (the default, accepted): the store is in memory. "off" (a tdb
    /// file on disk) is refused.
    #[arg(
        short = 'I',
        long,
        value_name = "on|off",
        num_args = 0..=1,
        default_missing_value = "on"
    )]
    internal_db: Option<String>,
    /// Write the classic trace (every message in and out) to FILE;
    /// reopened on SIGHUP.
    #[arg(short = 'T', long, value_name = "FILE")]
    trace_file: Option<PathBuf>,
    /// Refused: no watch-event timeout; output is bounded by size instead.
    #[arg(short = 'w', long, value_name = "WHAT=SECONDS")]
    timeout: Vec<String>,
    /// Refused: a released domain's nodes are always removed.
    #[arg(short = 'K', long)]
    keep_orphans: bool,
    /// Refused: for xenstore in a stub domain only.
    #[arg(short = 'e', long, value_name = "PORT")]
    event: Option<String>,
    /// Refused: for xenstore in a stub domain only.
    #[arg(short = 'm', long, value_name = "DOMID")]
    master_domid: Option<String>,
    /// Refused: for xenstore in a stub domain only.
    #[arg(short = 'p', long, value_name = "DOMID")]
    priv_domid: Option<String>,
    /// Take over from the xenstored that exec'd this one, in its process:
    /// its state (<run-dir>/state_dump), its socket and connections, its
    /// domains' rings. C xenstored's live update
    /// (`xenstore-control live-update -f xenstored-shim`) passes it.
    #[arg(short = 'U', long)]
    live_update: bool,
    /// With --restart: take over from oxenstored, which exec'd this one
    /// (its dump /var/run/xenstored/db; see LIVE UPDATE).
    #[arg(long)]
    live: bool,
    /// oxenstored's: read the database at start; taken with --live.
    #[arg(long)]
    restart: bool,
    /// oxenstored's configuration: accepted (so that oxenstored can exec
    /// the shim with its own arguments) and not read.
    #[arg(long, value_name = "FILE")]
    config_file: Option<PathBuf>,
    /// oxenstored's: accepted, nothing to do.
    #[arg(long, hide = true)]
    reraise_top_level: bool,
    /// oxenstored's: accepted, there is no access log.
    #[arg(long, hide = true)]
    no_access_log: bool,
    /// Print help (upstream's -H; -h too).
    #[arg(short = 'H', long, short_alias = 'h', action = ArgAction::Help)]
    help: Option<bool>,
    /// Print the version.
    #[arg(long, action = ArgAction::Version)]
    version: Option<bool>,
}

impl Args {
    /// Upstream options the shim does not implement, with the reason.
    fn refusal(&self) -> Option<String> {
        let why = if self.internal_db.as_deref().is_some_and(|v| v != "on") {
            "-I/--internal-db: the store is always in memory (\"on\"); an on-disk tdb is not supported"
        } else if !self.timeout.is_empty() {
            "-w/--timeout: no watch-event timeout; a client's pending output is bounded by size \
             (it is dropped beyond 64 MiB)"
        } else if self.keep_orphans {
            "-K/--keep-orphans: a released domain's nodes are always removed (upstream's default)"
        } else if self.event.is_some() || self.master_domid.is_some() || self.priv_domid.is_some() {
            "-e/-m/-p: only for xenstore in a stub domain (XENSTORETYPE=domain), which the shim is not"
        } else {
            return None;
        };
        Some(format!("unsupported option {why}"))
    }

    fn quotas(&self) -> Result<Quotas, String> {
        let mut quotas = Quotas::default();
        let legacy = [
            ("nodes", self.entry_nb),
            ("node-size", self.entry_size),
            ("watches", self.watch_nb),
            ("transactions", self.transaction),
            ("permissions", self.perm_nb),
            ("path-max", self.path_max.map(|n| n.min(PATH_MAX_CAP))),
        ];
        for (what, nb) in legacy {
            if let Some(nb) = nb {
                quotas.set_global(what.as_bytes(), nb);
            }
        }
        for q in &self.quota {
            let (what, nb) = parse_quota(q)?;
            if !quotas.set_global(what.as_bytes(), nb) {
                return Err(format!("unknown quota \"{what}\""));
            }
        }
        for q in &self.quota_soft {
            let (what, nb) = parse_quota(q)?;
            if !quotas.set_soft(what.as_bytes(), nb) {
                return Err(format!("unknown quota \"{what}\""));
            }
        }
        Ok(quotas)
    }

    fn socket(&self) -> PathBuf {
        self.socket
            .clone()
            .unwrap_or_else(|| self.run_dir.join("socket"))
    }

    /// Fork only when a pid file says where the daemon went: every start
    /// script passes one (C xenstored also forks without it).
    fn detaches(&self) -> bool {
        self.pid_file.is_some() && !self.no_fork
    }
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

/// How INTRODUCE reaches domains: on a Xen dom0, real rings; elsewhere
/// simulated rings for domains prepared under <run-dir>/ring/ and
/// per-domain sockets for the others.
fn domain_backend(args: &Args, on_xen: bool) -> Box<dyn DomainBackend> {
    if on_xen {
        return Box::new(xen::XenDomains);
    }
    let sockets = unix::SocketDomainBackend::new(&args.run_dir);
    Box::new(ring::transport::SimRingDomains::new(
        &args.run_dir,
        Box::new(sockets),
    ))
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    log::set_verbose(args.verbose);
    // A handler's panic is contained and answered EIO (daemon::dispatch);
    // its message and place go where the daemon logs, syslog once detached.
    std::panic::set_hook(Box::new(|info| log::error(format_args!("{info}"))));
    match run(&mut args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error(format_args!("{e}"));
            ExitCode::FAILURE
        }
    }
}

fn run(args: &mut Args) -> Result<(), String> {
    if let Some(why) = args.refusal() {
        // The daemon being replaced ran with it: better served without it
        // than a host left without xenstore.
        if !(args.live_update || args.live) {
            return Err(why);
        }
        log::error(format_args!("live update: ignoring {why}"));
    }
    let quotas = args.quotas()?;
    // The daemon moves to / when it detaches: keep the paths it owns valid.
    let absolute = |p: &Path| std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()));
    args.run_dir = absolute(&args.run_dir)?;
    let socket = absolute(&args.socket())?;
    let pid_path = args.pid_file.as_deref().map(absolute).transpose()?;
    let trace_path = args.trace_file.as_deref().map(absolute).transpose()?;
    log::verbose(format_args!(
        "xenstored-shim {}: socket {}, run dir {}",
        env!("CARGO_PKG_VERSION"),
        socket.display(),
        args.run_dir.display()
    ));
    if let Some(root) = std::env::var_os("XENSTORED_ROOTDIR") {
        // C xenstored 4.16+ ignores it too; it named the tdb's directory.
        log::verbose(format_args!(
            "XENSTORED_ROOTDIR={} unused: the store is in memory",
            Path::new(&root).display()
        ));
    }
    // A live update: the socket is ours already, served by this process.
    let restoring = if args.live_update {
        Some(adopt::take_state(&args.run_dir))
    } else if args.live && args.restart {
        Some(adopt::take_oxenstored_state(Path::new(
            migration::oxenstored::DUMP_FILE,
        )))
    } else {
        None
    }
    .transpose()
    .map_err(|e| format!("live update: {e}"))?;
    if restoring.is_none() {
        live::refuse_if_served(&socket).map_err(|e| e.to_string())?;
    }
    if let Some(path) = &trace_path {
        trace_file::open(path).map_err(|e| e.to_string())?;
    }
    std::fs::create_dir_all(&args.run_dir)
        .map_err(|e| format!("run dir {}: {e}", args.run_dir.display()))?;

    // -D: no domains of the hypervisor's, as upstream (the simulated
    // backend then serves, even on a dom0).
    let on_xen = !args.no_domain_init && xen::is_dom0(Path::new(xen::PROC_XEN));
    if let Some(state) = &restoring {
        adopt::release_event_channels(state);
    }
    let daemon = Daemon::new(quotas, domain_backend(args, on_xen));
    let mut server = Server::new(daemon).map_err(|e| format!("epoll: {e}"))?;
    let dom0_ring = on_xen
        .then(|| xen::serve_dom0(&mut server, Path::new(xen::PROC_XEN)))
        .transpose()
        .map_err(|e| format!("xen: {e}"))?;
    if !on_xen {
        // Simulated domains die as real ones do: VIRQ_DOM_EXC, then queries.
        let virq = xen::simulated::SimDomExc::bind(&args.run_dir)
            .map_err(|e| format!("simulated VIRQ_DOM_EXC: {e}"))?;
        server
            .monitor_domains(Box::new(virq))
            .map_err(|e| format!("polling the simulated VIRQ_DOM_EXC: {e}"))?;
    }
    let listener_fd = match &restoring {
        Some(state) => {
            let adopted = adopt::adopt(&mut server, state, &socket, dom0_ring)
                .map_err(|e| format!("live update: {e}"))?;
            log::info(format_args!(
                "live update: took over {} nodes, {} connections, {} watches",
                adopted.nodes, adopted.connections, adopted.watches
            ));
            for s in &adopted.skipped {
                log::error(format_args!("live update: not taken over: {s}"));
            }
            // Domains may have died while no daemon listened for it.
            server.check_domains();
            if args.live {
                server.daemon_mut().live_update_completed();
            }
            adopted.listener_fd
        }
        None => {
            let listener = unix::SocketListener::bind(&socket, false)
                .map_err(|e| format!("listening: {e}"))?;
            let fd = listener.raw_fd();
            server
                .listen(Box::new(listener), 0)
                .map_err(|e| format!("polling the socket: {e}"))?;
            fd
        }
    };

    // A live update runs in the detached daemon's process already.
    let detached = if args.detaches() && restoring.is_none() {
        let detached = detach::detach().map_err(|e| format!("detaching: {e}"))?;
        log::to_syslog();
        Some(detached)
    } else {
        if args.detaches() {
            log::to_syslog();
        }
        None
    };
    let started = finish_start(&mut server, pid_path.as_deref(), args.output_pid);
    let (signals, pid_file) = match (started, detached) {
        (Ok(s), Some(d)) => {
            d.ready().map_err(|e| format!("detaching: {e}"))?;
            s
        }
        (Ok(s), None) => s,
        (Err(e), d) => {
            if let Some(d) = d {
                d.failed(&e);
            }
            return Err(e);
        }
    };
    log::notable(Notable::new(
        Kind::Started,
        format!(
            "ready: serving {} as pid {}",
            socket.display(),
            std::process::id()
        ),
    ));

    loop {
        server.run().map_err(|e| format!("event loop: {e}"))?;
        if let Some(update) = server.daemon_mut().take_ready_update() {
            hand_over(&mut server, listener_fd, args, on_xen, &update);
        }
        let got = signals.drain();
        if got.hangup {
            if let Err(e) = trace_file::reopen() {
                log::error(format_args!("SIGHUP: {e}"));
            }
        }
        if let Some(signal) = got.stop {
            log::notable(Notable::new(Kind::Stopping, format!("{signal}: stopping")));
            break;
        }
    }
    // Removes the socket (and the per-domain sockets), then the pid file.
    drop(server);
    drop(pid_file);
    Ok(())
}

/// Execs the live update's target with this daemon's state; returns only
/// when that failed, the daemon still serving and the error answered.
///
/// C xenstored and oxenstored take every ring's event channel bound on
/// one fd (oxenstored VIRQ_DOM_EXC too): each is moved onto a fresh one
/// here, just before the exec, and back if it fails. (Binding them on one
/// fd always would have the event loop read pending ports and route them;
/// moving them costs the loop nothing and only a handover pays it.)
fn hand_over(
    server: &mut Server,
    listener_fd: i32,
    args: &Args,
    on_xen: bool,
    update: &LiveUpdate,
) {
    let mut channels = None;
    if update.kind != LiveUpdateTarget::Shim {
        match move_channels(server, on_xen, update.kind) {
            Ok(moved) => channels = Some(moved),
            Err(why) => return update_failed(server, update, &why),
        }
    }
    let shared = channels.as_ref().map(|m| (m.shared.fd(), &m.local));
    let state = server
        .daemon_mut()
        .export_state(listener_fd, update, shared);
    log::info(format_args!(
        "live update: {} connections, {} nodes to {}",
        state.connections.len(),
        state.nodes.len(),
        update.target.display()
    ));
    let err = match (update.kind, &channels) {
        (LiveUpdateTarget::Oxenstored, Some(moved)) => {
            let dump =
                server
                    .daemon()
                    .oxenstored_dump(&state, moved.virq_port.unwrap_or(0), &moved.local);
            match dump {
                Ok(dump) => {
                    let argv = handover::oxenstored_arguments(
                        update.cmdline.as_deref(),
                        oxenstored_options(args),
                    );
                    handover::exec_oxenstored(&state, &dump, &update.target, &argv)
                }
                Err(why) => std::io::Error::other(format!("oxenstored cannot take it: {why}")),
            }
        }
        _ => {
            let argv = handover::arguments(update.cmdline.as_deref(), std::env::args_os().skip(1));
            handover::exec(&state, &args.run_dir, &update.target, &argv)
        }
    };
    if let Some(moved) = channels {
        move_channels_back(server, moved);
    }
    update_failed(server, update, &err.to_string());
}

/// Every ring's channel (into oxenstored VIRQ_DOM_EXC's too) bound on one
/// fresh fd for the target: the fd, the local ports there by connection.
struct Moved {
    shared: SharedChannels,
    local: HashMap<u32, u32>,
    /// Into oxenstored: VIRQ_DOM_EXC's port there.
    virq_port: Option<u32>,
}

fn move_channels(
    server: &mut Server,
    on_xen: bool,
    kind: LiveUpdateTarget,
) -> Result<Moved, String> {
    let mut shared = if on_xen {
        xen::evtchn::open_shared()
    } else {
        ring::sim::open_shared()
    }
    .map_err(|e| format!("event channels for the target: {e}"))?;
    let local = match server.daemon_mut().move_ring_channels(&mut shared) {
        Ok(local) => local,
        Err((why, moved)) => {
            // Closing the shared fd unbinds what moved there, so each can
            // be bound back on its own.
            drop(shared);
            server
                .daemon_mut()
                .move_ring_channels_back(moved.keys().copied());
            return Err(why);
        }
    };
    let mut moved = Moved {
        shared,
        local,
        virq_port: None,
    };
    if kind == LiveUpdateTarget::Oxenstored {
        match server.move_monitor(&mut moved.shared) {
            Some(Ok(port)) => moved.virq_port = Some(port),
            failed => {
                let why = match failed {
                    Some(Err(e)) => format!("VIRQ_DOM_EXC: {e}"),
                    _ => "no VIRQ_DOM_EXC to hand over".to_string(),
                };
                move_channels_back(server, moved);
                return Err(why);
            }
        }
    }
    Ok(moved)
}

fn move_channels_back(server: &mut Server, moved: Moved) {
    let Moved {
        shared,
        local,
        virq_port,
    } = moved;
    // Closing the shared fd unbinds what moved there.
    drop(shared);
    server
        .daemon_mut()
        .move_ring_channels_back(local.keys().copied());
    if virq_port.is_some() {
        if let Err(e) = server.move_monitor_back() {
            log::error(format_args!(
                "live update: VIRQ_DOM_EXC not bound back: {e} (domain deaths go unseen)"
            ));
        }
    }
}

fn update_failed(server: &mut Server, update: &LiveUpdate, why: &str) {
    log::error(format_args!(
        "live update to {}: {why}",
        update.target.display()
    ));
    let why = format!("Error activating new binary: {why}");
    server.daemon_mut().live_update_failed(update, &why);
}

/// This image's options that oxenstored takes too (it exits on any
/// other): the rest are the shim's own (quotas, tracing) or C's.
fn oxenstored_options(args: &Args) -> Vec<OsString> {
    let mut own: Vec<OsString> = Vec::new();
    let flags = [
        (args.no_domain_init, "--no-domain-init"),
        (args.no_fork, "--no-fork"),
        (args.reraise_top_level, "--reraise-top-level"),
        (args.no_access_log, "--no-access-log"),
    ];
    for (set, flag) in flags {
        if set {
            own.push(flag.into());
        }
    }
    let valued = [
        ("--config-file", &args.config_file),
        ("--pid-file", &args.pid_file),
    ];
    for (option, value) in valued {
        if let Some(v) = value {
            own.push(option.into());
            own.push(v.into());
        }
    }
    own
}

/// What follows the socket: stop signals, the pid file, -P, systemd's
/// READY=1. Runs in the daemon, after detaching.
fn finish_start(
    server: &mut Server,
    pid_path: Option<&Path>,
    output_pid: bool,
) -> Result<(signals::StopSignals, Option<PidFile>), String> {
    let signals = signals::StopSignals::new().map_err(|e| format!("signalfd: {e}"))?;
    server
        .stop_when_readable(signals.fd())
        .map_err(|e| format!("polling the signalfd: {e}"))?;
    let pid_file = pid_path
        .map(PidFile::write)
        .transpose()
        .map_err(|e| e.to_string())?;
    if output_pid {
        println!("{}", std::process::id());
    }
    if notify::ready().map_err(|e| e.to_string())? {
        log::verbose(format_args!("READY=1 sent to $NOTIFY_SOCKET"));
    }
    Ok((signals, pid_file))
}
