//! xs-demo: a guest boots against a running xenstored-shim, as xenstore-snoop's
//! classic output tells it. Three actors, each with its own connection:
//!
//! - the toolstack (dom0, the daemon's socket, this process's PID) writes
//!   dom0's own home (as xen-init-dom0 does at boot), gets the
//!   domain path, builds the domain's tree in one transaction (RM, MKDIR,
//!   WRITE, SET_PERMS) and introduces the domain;
//! - the block backend (dom0, its own socket connection) and
//! - the guest's frontend (domain N over its simulated ring, PID 0, relative
//!   paths) walk XenbusState 1 -> 4 through watches; the guest also looks
//!   for a node the toolstack never wrote and gets ENOENT.
//!
//! Afterwards the toolstack releases the domain and removes its tree
//! (unless --keep), and the domain's page is destroyed.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use xenstore_guest::boot::{self, GFN, PORT};
use xenstore_guest::client::{Guest, Link, SocketLink, Xs};
use xenstore_guest::sim::SimGuest;

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

/// XenbusState values the walk goes through (the toolstack writes 1).
const INIT_WAIT: u32 = 2;
const INITIALISED: u32 = 3;
const CONNECTED: u32 = 4;

const WAIT: Duration = Duration::from_secs(10);

/// Plays a guest start against xenstored-shim (started with the same
/// --socket and --run-dir): toolstack, block backend and guest frontend.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// The shim's dom0 socket.
    #[arg(long, env = "XENSTORED_PATH")]
    socket: PathBuf,
    /// The shim's --run-dir (the guest's simulated ring goes there).
    #[arg(long)]
    run_dir: PathBuf,
    /// The guest's domain id.
    #[arg(long, default_value_t = 6)]
    domid: u16,
    /// Leave the domain introduced and its tree in place.
    #[arg(long)]
    keep: bool,
}

fn main() {
    if let Err(e) = run(&Cli::parse()) {
        eprintln!("xs-demo: {e}");
        std::process::exit(1);
    }
}

/// Where the toolstack puts the guest's disk, both halves.
struct Vbd {
    frontend: String,
    backend: String,
}

fn run(cli: &Cli) -> Result<()> {
    let domid = cli.domid;
    let mut toolstack = Xs::connect(&cli.socket)?;
    init_dom0(&mut toolstack)?;
    let vbd = build_domain(&mut toolstack, domid)?;
    println!(
        "toolstack (pid {}): domain {domid} built, introducing it (gfn {GFN}, port {PORT})",
        std::process::id()
    );

    // The backend watches before the guest can move.
    let mut backend = Xs::connect(&cli.socket)?;
    backend.watch(&vbd.backend, &watch_token(&vbd.backend))?;
    let backend_thread = std::thread::spawn({
        let vbd_backend = vbd.backend.clone();
        let vbd_frontend = vbd.frontend.clone();
        move || block_backend(backend, &vbd_backend, &vbd_frontend)
    });

    // The domain builder's page and event channel, then XS_INTRODUCE.
    boot::introduce(&mut toolstack, &cli.run_dir, domid)?;
    let guest_thread = std::thread::spawn({
        let run_dir = cli.run_dir.clone();
        move || frontend(&run_dir, domid)
    });
    let frontend_result = guest_thread.join().expect("frontend thread");
    let backend_result = backend_thread.join().expect("backend thread");
    frontend_result?;
    backend_result?;
    println!("vbd 0 connected: frontend and backend both in XenbusState {CONNECTED}");

    if !cli.keep {
        toolstack.release(domid)?;
        let dom_path = toolstack.get_domain_path(domid)?;
        toolstack.rm(0, &dom_path)?;
        toolstack.rm(0, &format!("/local/domain/0/backend/vbd/{domid}"))?;
        SimGuest::destroy(&cli.run_dir, domid)?;
        println!("toolstack: domain {domid} released and its tree removed");
    }
    Ok(())
}

/// What xen-init-dom0 writes at host boot: dom0's own home (so
/// /local/domain exists, as on any running host).
fn init_dom0(xs: &mut Xs<SocketLink>) -> Result<()> {
    xs.write(0, "/local/domain/0/name", "Domain-0")?;
    xs.write(0, "/local/domain/0/domid", "0")?;
    Ok(())
}

/// The toolstack's transaction: the guest's home, its disk's frontend and
/// backend directories, their permissions. Retried on EAGAIN (a conflict).
fn build_domain(xs: &mut Xs<SocketLink>, domid: u16) -> Result<Vbd> {
    let dom_path = xs.get_domain_path(domid)?;
    let vbd = Vbd {
        frontend: format!("{dom_path}/device/vbd/0"),
        backend: format!("/local/domain/0/backend/vbd/{domid}/0"),
    };
    let guest_reads = format!("r{domid}");
    let guest_owns = format!("n{domid}");
    loop {
        let tx = xs.transaction_start()?;
        match xs.rm(tx, &dom_path) {
            Ok(()) => {}
            Err(e) if e.xs_error() == Some("ENOENT") => {}
            Err(e) => return Err(e.into()),
        }
        xs.mkdir(tx, &dom_path)?;
        xs.set_perms(tx, &dom_path, &["n0", &guest_reads])?;
        xs.write(tx, &format!("{dom_path}/name"), &format!("guest{domid}"))?;
        xs.write(tx, &format!("{dom_path}/domid"), &domid.to_string())?;
        for dir in ["device", "data"] {
            let path = format!("{dom_path}/{dir}");
            xs.mkdir(tx, &path)?;
            xs.set_perms(tx, &path, &[&guest_owns, "r0"])?;
        }
        // Permissions first: the keys written below inherit them.
        xs.mkdir(tx, &vbd.frontend)?;
        xs.set_perms(tx, &vbd.frontend, &[&guest_owns, "r0"])?;
        let front = [
            ("backend", vbd.backend.as_str()),
            ("backend-id", "0"),
            ("virtual-device", "51712"),
            ("device-type", "disk"),
            ("state", "1"),
        ];
        for (key, value) in front {
            xs.write(tx, &format!("{}/{key}", vbd.frontend), value)?;
        }
        xs.mkdir(tx, &vbd.backend)?;
        xs.set_perms(tx, &vbd.backend, &["n0", &guest_reads])?;
        let domid_text = domid.to_string();
        let back = [
            ("frontend", vbd.frontend.as_str()),
            ("frontend-id", domid_text.as_str()),
            ("online", "1"),
            ("type", "phy"),
            ("params", "/dev/vg0/guest-disk"),
            ("mode", "w"),
            ("state", "1"),
        ];
        for (key, value) in back {
            xs.write(tx, &format!("{}/{key}", vbd.backend), value)?;
        }
        // A network device whose "type" the toolstack leaves out.
        let vif = format!("{dom_path}/device/vif/0");
        xs.mkdir(tx, &vif)?;
        xs.set_perms(tx, &vif, &[&guest_owns, "r0"])?;
        xs.write(tx, &format!("{vif}/mac"), "00:16:3e:00:00:06")?;
        xs.write(tx, &format!("{vif}/state"), "1")?;
        match xs.transaction_end(tx, true) {
            Ok(()) => return Ok(vbd),
            Err(e) if e.xs_error() == Some("EAGAIN") => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// A token as Linux's xenbus makes them: the watch structure's address in
/// hex (here a heap string's, kept alive for the program's life).
fn watch_token(path: &str) -> String {
    let watch: &'static str = Box::leak(path.to_string().into_boxed_str());
    format!("{:X}", watch.as_ptr() as usize)
}

fn state<L: Link>(xs: &mut Xs<L>, path: &str) -> Result<u32> {
    match xs.read(0, path) {
        Ok(v) => Ok(v.trim().parse().unwrap_or(0)),
        Err(e) if e.xs_error() == Some("ENOENT") => Ok(0),
        Err(e) => Err(e.into()),
    }
}

/// Waits (through watch events) until `path` reads at least `want`.
fn await_state<L: Link>(xs: &mut Xs<L>, path: &str, want: u32, who: &str) -> Result<()> {
    loop {
        if state(xs, path)? >= want {
            return Ok(());
        }
        if xs.next_event(WAIT)?.is_none() {
            return Err(format!("{who}: {path} never reached XenbusState {want}").into());
        }
    }
}

/// dom0's block backend: InitWait once it sees the device, Connected once
/// the frontend has published its ring.
fn block_backend(mut xs: Xs<SocketLink>, backend: &str, frontend: &str) -> Result<()> {
    let params = xs.read(0, &format!("{backend}/params"))?;
    xs.write(0, &format!("{backend}/state"), &INIT_WAIT.to_string())?;
    println!("backend: {params} waiting for the frontend (state {INIT_WAIT})");
    let fe_state = format!("{frontend}/state");
    let token = watch_token(&fe_state);
    xs.watch(&fe_state, &token)?;
    await_state(&mut xs, &fe_state, INITIALISED, "backend")?;
    let ring_ref = xs.read(0, &format!("{frontend}/ring-ref"))?;
    let port = xs.read(0, &format!("{frontend}/event-channel"))?;
    for (key, value) in [
        ("sectors", "20971520"),
        ("sector-size", "512"),
        ("info", "0"),
    ] {
        xs.write(0, &format!("{backend}/{key}"), value)?;
    }
    xs.write(0, &format!("{backend}/state"), &CONNECTED.to_string())?;
    println!("backend: mapped ring-ref {ring_ref}, bound port {port} (state {CONNECTED})");
    await_state(&mut xs, &fe_state, CONNECTED, "backend")?;
    xs.unwatch(&fe_state, &token)?;
    Ok(())
}

/// The guest kernel's block frontend, over the ring with relative paths.
fn frontend(run_dir: &Path, domid: u16) -> Result<()> {
    let mut xs = Guest::open(run_dir, domid)?;
    let devices = xs.directory(0, "device")?;
    println!("guest {domid}: devices {}", devices.join(" "));
    let backend = xs.read(0, "device/vbd/0/backend")?;
    let _backend_id = xs.read(0, "device/vbd/0/backend-id")?;
    let _vdev = xs.read(0, "device/vbd/0/virtual-device")?;
    // The missing node: ENOENT, as the classic output shows.
    match xs.read(0, "device/vif/0/type") {
        Err(e) if e.xs_error() == Some("ENOENT") => {
            println!("guest {domid}: device/vif/0/type is absent (ENOENT), assuming a netfront vif")
        }
        Ok(v) => println!("guest {domid}: device/vif/0/type is {v}"),
        Err(e) => return Err(e.into()),
    }
    let be_state = format!("{backend}/state");
    let token = watch_token(&be_state);
    xs.watch(&be_state, &token)?;
    await_state(&mut xs, &be_state, INIT_WAIT, "frontend")?;
    publish_ring(&mut xs)?;
    let now = xs.read(0, "device/vbd/0/state")?;
    println!("guest {domid}: ring published, frontend state {now}");
    await_state(&mut xs, &be_state, CONNECTED, "frontend")?;
    let sectors = xs.read(0, &format!("{backend}/sectors"))?;
    xs.write(0, "device/vbd/0/state", &CONNECTED.to_string())?;
    println!("guest {domid}: xvda connected, {sectors} sectors");
    xs.unwatch(&be_state, &token)?;
    Ok(())
}

/// The frontend's transaction: ring reference, event channel, Initialised.
fn publish_ring(xs: &mut Guest) -> Result<()> {
    loop {
        let tx = xs.transaction_start()?;
        for (key, value) in [
            ("ring-ref", "8"),
            ("event-channel", "5"),
            ("protocol", "x86_64-abi"),
            ("state", &INITIALISED.to_string()),
        ] {
            xs.write(tx, &format!("device/vbd/0/{key}"), value)?;
        }
        match xs.transaction_end(tx, true) {
            Ok(()) => return Ok(()),
            Err(e) if e.xs_error() == Some("EAGAIN") => continue,
            Err(e) => return Err(e.into()),
        }
    }
}
