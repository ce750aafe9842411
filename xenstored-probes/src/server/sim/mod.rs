//! Deterministic simulation of the event loop (as FoundationDB and
//! TigerBeetle test theirs): the real `Server`, turns, connections and
//! daemon run over a simulated poller, sockets and rings (`world.rs`,
//! `net.rs`), driven by one seeded schedule (`choice.rs`) that is
//! adversarial within epoll's edge-triggered contract. Clients
//! (`client.rs`) pipeline requests, cut their bytes anywhere, stop reading
//! and resume, hang up mid-burst; fan-outs reach more than 16 and more
//! than 80 watchers; transactions conflict; guests put several requests in
//! their rings under one doorbell. `check.rs` says what every run must
//! show. A seed replays bit for bit; a fuzz target feeds the schedule its
//! input (xenstore-fuzz's `event_loop`).

mod check;
mod choice;
mod client;
mod net;
mod world;

pub use choice::Choice;

use crate::daemon::quota::Quotas;
use crate::daemon::Daemon;
use crate::server::{Server, Step};
use client::{Client, Op, Role, FAN, SHARED};
use world::{lock, prepare_guest, SimDomains, SimListener, SimPoller, World, EMPTY_PASSES_MAX};
use xenstore_proto::wire::MsgType;

/// Passes a run may take before it counts as never settling.
const MAX_PASSES: u64 = 200_000;
/// Passes in a row the daemon may owe a client a reply (its request in,
/// the client reading, no reply of its on the way).
pub const REPLY_BOUND: u64 = 64;

/// What a run did, for the tests' and the long run's reports.
#[derive(Debug, Default, Clone)]
pub struct Report {
    pub passes: u64,
    pub choices: u64,
    pub requests: u64,
    pub clients: usize,
    pub watchers: usize,
    pub guests: usize,
    /// The most passes in a row the daemon owed a client a reply.
    pub slowest: u64,
    pub tally: net::Tally,
}

/// Runs one simulation; Err says what it violated.
pub fn run(choice: Choice) -> Result<Report, String> {
    let world = std::sync::Arc::new(std::sync::Mutex::new(World::new(choice)));
    let (watchers, guests) = populate(&mut lock(&world));
    let daemon = Daemon::new(
        Quotas::default(),
        Box::new(SimDomains {
            world: world.clone(),
        }),
    );
    let poller = SimPoller::new(world.clone()).map_err(|e| e.to_string())?;
    let mut server = Server::with_poller(daemon, Box::new(poller)).map_err(|e| e.to_string())?;
    server
        .listen(Box::new(SimListener::new(&world)), 0)
        .map_err(|e| e.to_string())?;
    lock(&world).connect_clients();
    let mut report = Report {
        watchers,
        guests,
        clients: lock(&world).clients.len(),
        ..Report::default()
    };
    let mut draining = false;
    loop {
        {
            let mut w = lock(&world);
            w.started = w.started || setup_done(&w.clients);
            let n = w.choice.below(4) as usize + usize::from(w.last_timeout.is_none());
            w.act(n);
            if draining {
                // Every client reads all it has now, so the run settles
                // (a client picked now and then, with a socket buffer of a
                // byte, could otherwise take longer than MAX_PASSES).
                w.drain_clients();
            }
        }
        if server.step().map_err(|e| e.to_string())? == Step::Stopping {
            return Err("the loop stopped".to_string());
        }
        let mut w = lock(&world);
        let w = &mut *w;
        w.pass += 1;
        let mut wrong: Vec<String> = w.net.violations.drain(..).collect();
        for c in &mut w.clients {
            wrong.append(&mut c.violations);
        }
        wrong.extend(check::overdue(&mut w.clients, &w.net, REPLY_BOUND));
        wrong.extend(check::events_before_replies(
            &mut w.clients,
            &w.net,
            server.daemon(),
        ));
        let slept = w.slept;
        if slept && w.started {
            wrong.extend(check::sleeping_on(&w.clients, &w.net));
        }
        if w.busy_loops > 0 {
            wrong.push(format!(
                "busy loop: more than {EMPTY_PASSES_MAX} passes in a row polled without \
                 sleeping and moved nothing"
            ));
        }
        if !wrong.is_empty() {
            return Err(format!("pass {}: {}", w.pass, wrong.join("; ")));
        }
        if w.pass > MAX_PASSES {
            let unsettled: Vec<String> = w
                .clients
                .iter()
                .filter(|c| !c.done())
                .map(|c| c.describe(&w.net))
                .collect();
            let unread: Vec<(usize, usize, bool)> = w
                .net
                .endpoints
                .iter()
                .enumerate()
                .filter(|(_, e)| !e.to_client.is_empty())
                .map(|(i, e)| (i, e.to_client.len(), e.client_closed))
                .collect();
            return Err(format!(
                "not settled after {MAX_PASSES} passes (last poll's timeout {:?}, \
                 endpoints with unread output {unread:?}): {}",
                w.last_timeout,
                unsettled.join("; ")
            ));
        }
        draining = w.started && w.clients.iter().all(Client::done);
        let quiet = w.net.endpoints.iter().all(|e| e.to_client.is_empty());
        if draining && slept && quiet {
            let mut wrong = check::fan_out(&w.clients);
            wrong.extend(w.clients.iter().filter_map(check::agreement));
            if !wrong.is_empty() {
                return Err(wrong.join("; "));
            }
            report.passes = w.pass;
            report.choices = w.choice.made;
            report.requests = w.clients.iter().map(|c| c.answered as u64).sum();
            report.slowest = w.clients.iter().map(|c| c.slowest).max().unwrap_or(0);
            report.tally = w.net.tally;
            break;
        }
    }
    // The server's transports lock the world as they drop: not under it.
    drop(server);
    Ok(report)
}

/// The run's cast, as the schedule picks it: (watchers, guests).
fn populate(w: &mut World) -> (usize, usize) {
    let ch = &mut w.choice;
    let workers = ch.between(1, 12) as usize;
    // Fan-outs below, between and above the loop's limits (16 at once,
    // 64 a pass, and a hundred xl monitors' @releaseDomain).
    let watchers = [0, 3, 17, 90][ch.below(4) as usize];
    let guests = ch.below(4) as usize;
    let mut clients = Vec::new();
    let mut setup = Vec::new();
    for g in 0..guests {
        let domid = 10 + g as u32;
        let home = format!("/local/domain/{domid}");
        setup.push(plain(MsgType::Mkdir, format!("{home}\0"), false));
        setup.push(plain(
            MsgType::SetPerms,
            format!("{home}\0n{domid}\0"),
            false,
        ));
        setup.push(plain(
            MsgType::Introduce,
            format!("{domid}\x00{}\x001\0", 0xfeffc),
            false,
        ));
    }
    let in_flight = ch.between(1, 6) as usize;
    clients.push(Client::new(
        "setup".into(),
        Role::Setup,
        setup,
        in_flight,
        1 << 16,
    ));
    for i in 0..watchers {
        let ops = vec![plain(MsgType::Watch, format!("{FAN}\0fan{i}\0"), false)];
        let capacity = capacity(ch);
        clients.push(Client::new(
            format!("watcher {i}"),
            Role::Watcher,
            ops,
            1,
            capacity,
        ));
    }
    for i in 0..workers {
        let ops = worker_script(ch, i);
        let in_flight = ch.between(1, 20) as usize;
        let capacity = capacity(ch);
        clients.push(Client::new(
            format!("worker {i}"),
            Role::Worker,
            ops,
            in_flight,
            capacity,
        ));
    }
    let mut scripts = Vec::new();
    for g in 0..guests {
        let domid = 10 + g as u32;
        let ops = guest_script(ch);
        // Past the outstanding quota (20) now and then: the daemon stops
        // reading the ring until replies go out.
        let in_flight = ch.between(1, 24) as usize;
        clients.push(Client::new(
            format!("guest {domid}"),
            Role::Guest { domid },
            ops,
            in_flight,
            0,
        ));
        scripts.push(domid);
    }
    for domid in scripts {
        // Nothing else can fail here but running out of memory.
        prepare_guest(w, domid).expect("a page for a simulated guest");
    }
    w.clients = clients;
    (watchers, guests)
}

/// A socket buffer: mostly roomy, sometimes a few bytes (writes go in part).
fn capacity(ch: &mut Choice) -> usize {
    if ch.percent(30) {
        ch.between(1, 200) as usize
    } else {
        1 << 16
    }
}

fn plain(ty: MsgType, payload: String, loose: bool) -> Op {
    Op::Plain {
        ty,
        payload: payload.into_bytes(),
        loose,
    }
}

/// A dom0 tool's requests in its own subtree (so its replies depend only
/// on them), fan-out writes, and transactions fighting over SHARED.
fn worker_script(ch: &mut Choice, i: usize) -> Vec<Op> {
    let base = format!("/sim/c{i}");
    let mut ops = Vec::new();
    let mut watching = false;
    let mut fan = 0;
    for _ in 0..ch.between(5, 60) {
        let k = ch.below(6);
        let op = match ch.below(14) {
            0 | 1 => plain(
                MsgType::Write,
                format!("{base}/k{k}\0v{}", ch.below(1000)),
                false,
            ),
            2 | 3 => plain(MsgType::Read, format!("{base}/k{k}\0"), false),
            4 => plain(MsgType::Mkdir, format!("{base}/d{k}\0"), false),
            5 => plain(MsgType::Rm, format!("{base}/k{k}\0"), false),
            6 => plain(MsgType::Directory, format!("{base}\0"), false),
            7 => plain(MsgType::GetPerms, format!("{base}/k{k}\0"), false),
            8 => plain(MsgType::SetPerms, format!("{base}/k{k}\0n0\0r5\0"), false),
            9 => {
                watching = !watching;
                let ty = if watching {
                    MsgType::Watch
                } else {
                    MsgType::Unwatch
                };
                plain(ty, format!("{base}\0own{i}\0"), false)
            }
            10 => {
                fan += 1;
                plain(MsgType::Write, format!("{FAN}/{i}-{fan}\0x"), false)
            }
            11 => plain(MsgType::DirectoryPart, format!("{base}\x000\0"), true),
            12 => plain(MsgType::GetDomainPath, format!("{k}\0"), false),
            _ => {
                ops.push(Op::TxStart);
                ops.push(Op::InTx {
                    ty: MsgType::Read,
                    payload: format!("{SHARED}\0").into_bytes(),
                });
                ops.push(Op::InTx {
                    ty: MsgType::Write,
                    payload: format!("{SHARED}\0{i}").into_bytes(),
                });
                Op::TxEnd
            }
        };
        ops.push(op);
    }
    ops
}

/// A guest's requests in its home, some with values big enough that a
/// few fill its 1 KiB ring.
fn guest_script(ch: &mut Choice) -> Vec<Op> {
    (0..ch.between(5, 60))
        .map(|_| {
            let k = ch.below(4);
            match ch.below(4) {
                0 => plain(
                    MsgType::Write,
                    format!("data/k{k}\0{}", "v".repeat(ch.below(300) as usize)),
                    false,
                ),
                1 => plain(MsgType::Read, format!("data/k{k}\0"), false),
                2 => plain(MsgType::Directory, "data\0".to_string(), false),
                _ => plain(MsgType::GetPerms, "data\0".to_string(), false),
            }
        })
        .collect()
}

/// The setup's requests are answered and every watcher watches.
fn setup_done(clients: &[Client]) -> bool {
    clients
        .iter()
        .filter(|c| matches!(c.role, Role::Setup | Role::Watcher))
        .all(Client::done)
}

#[cfg(test)]
mod tests;
