//! Transactions that commit are serializable. Five connections (three dom0
//! sockets, two guests over simulated rings, so permission checks answer
//! differently per connection) interleave transactions of random reads,
//! writes, mkdirs, rms, listings and permission reads and changes on a
//! small tree, on a real shim. Then every committed transaction (and each
//! request made outside one) is replayed alone, in commit order, on a
//! fresh shim: each answer must be the one the concurrent run gave, and
//! the two trees must end the same. A schedule is a seed (XS_TX_SEED
//! replays one; XS_TX_DEBUG=1 prints every step); a failure prints it.

use crate::common::shim::Shim;
use std::time::Duration;
use xenstore_guest::client::{Guest, Link, SocketLink, Xs};
use xenstore_proto::wire::MsgType;

const GUESTS: [u16; 2] = [6, 7];
const PATHS: [&str; 7] = ["/s", "/s/a", "/s/b", "/s/a/x", "/s/a/y", "/s/b/x", "/s/c"];
const PERMS: [&[&str]; 4] = [
    &["n0", "b6", "b7"],
    &["n0", "r6"],
    &["n0", "r7", "w6"],
    &["n7", "r6"],
];
const TRANSACTIONS: usize = 600;
const OPS_PER_TX: usize = 4;

/// One request: its type and payload; the answer is its reply's payload
/// or its error's name.
#[derive(Clone, Debug)]
struct Op {
    ty: MsgType,
    payload: Vec<u8>,
}

type Answer = Result<Vec<u8>, String>;

/// A connection's open transaction: its id and what it did so far.
type Open = Option<(u32, Vec<(Op, Answer)>)>;

/// What one connection did and saw, in a transaction or alone.
#[derive(Debug)]
struct Committed {
    conn: usize,
    in_tx: bool,
    steps: Vec<(Op, Answer)>,
}

enum Client {
    Dom0(Xs<SocketLink>),
    Guest(Guest),
}

impl Client {
    fn call(&mut self, tx: u32, op: &Op) -> Answer {
        fn go<L: Link>(xs: &mut Xs<L>, tx: u32, op: &Op) -> Answer {
            xs.request(op.ty, tx, &op.payload)
                .map_err(|e| match e.xs_error() {
                    Some(name) => name.to_string(),
                    None => panic!("{:?}: not an XS_ERROR: {e}", op.ty),
                })
        }
        match self {
            Client::Dom0(xs) => go(xs, tx, op),
            Client::Guest(g) => go(g, tx, op),
        }
    }

    fn start(&mut self) -> u32 {
        let op = Op {
            ty: MsgType::TransactionStart,
            payload: b"\0".to_vec(),
        };
        let id = self.call(0, &op).expect("TRANSACTION_START");
        let id = String::from_utf8_lossy(&id);
        id.trim_end_matches('\0').parse().expect("a transaction id")
    }

    /// Commits; false on EAGAIN.
    fn commit(&mut self, tx: u32) -> bool {
        let op = Op {
            ty: MsgType::TransactionEnd,
            payload: b"T\0".to_vec(),
        };
        match self.call(tx, &op) {
            Ok(_) => true,
            Err(e) if e == "EAGAIN" => false,
            Err(e) => panic!("commit: {e}"),
        }
    }
}

/// Five connections to `shim`: three dom0 sockets, then guests 6 and 7 on
/// rings; the tree /s that every one of them may write.
fn clients(shim: &Shim) -> Vec<Client> {
    let mut dom0 = Xs::connect(&shim.socket).expect("dom0 connects");
    dom0.mkdir(0, "/s").unwrap();
    dom0.set_perms(0, "/s", PERMS[0]).unwrap();
    let mut out = Vec::new();
    for &domid in &GUESTS {
        xenstore_guest::boot::introduce(&mut dom0, &shim.run_dir, domid).unwrap();
        let mut g = Guest::open(&shim.run_dir, domid).unwrap();
        g.timeout = Duration::from_secs(10);
        out.push(Client::Guest(g));
    }
    out.insert(0, Client::Dom0(dom0));
    for _ in 0..2 {
        let xs = Xs::connect(&shim.socket).expect("dom0 connects");
        out.insert(0, Client::Dom0(xs));
    }
    out
}

/// xorshift64: the same seed, the same schedule.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn random_op(rng: &mut Rng, serial: &mut u64) -> Op {
    let path = PATHS[rng.below(PATHS.len())];
    let with_nul = |extra: &[u8]| [path.as_bytes(), b"\0", extra].concat();
    let (ty, payload) = match rng.below(8) {
        0 | 1 => (MsgType::Read, with_nul(b"")),
        2 | 3 => {
            *serial += 1;
            (MsgType::Write, with_nul(format!("v{serial}").as_bytes()))
        }
        4 => (MsgType::Mkdir, with_nul(b"")),
        5 if path != "/s" => (MsgType::Rm, with_nul(b"")),
        5 | 6 => (MsgType::Directory, with_nul(b"")),
        _ if rng.below(2) == 0 => (MsgType::GetPerms, with_nul(b"")),
        _ => {
            let perms: Vec<u8> = PERMS[rng.below(PERMS.len())]
                .iter()
                .flat_map(|p| [p.as_bytes(), b"\0"].concat())
                .collect();
            (MsgType::SetPerms, with_nul(&perms))
        }
    };
    Op { ty, payload }
}

/// The concurrent run: what committed, in commit order, and how many
/// transactions failed with EAGAIN.
fn concurrent_run(clients: &mut [Client], seed: u64) -> (Vec<Committed>, usize) {
    let mut rng = Rng(seed);
    let debug = std::env::var("XS_TX_DEBUG").is_ok();
    let mut serial = 0;
    let mut open: Vec<Open> = clients.iter().map(|_| None).collect();
    let (mut history, mut started, mut conflicts) = (Vec::new(), 0, 0);
    while started < TRANSACTIONS || open.iter().any(Option::is_some) {
        let c = rng.below(clients.len());
        match open[c].take() {
            None if started >= TRANSACTIONS => {}
            None if rng.below(5) == 0 => {
                let op = random_op(&mut rng, &mut serial);
                let answer = clients[c].call(0, &op);
                if debug {
                    eprintln!("conn {c}: {}", step(&op, &answer));
                }
                history.push(Committed {
                    conn: c,
                    in_tx: false,
                    steps: vec![(op, answer)],
                });
            }
            None => {
                started += 1;
                open[c] = Some((clients[c].start(), Vec::new()));
            }
            Some((tx, steps)) if steps.len() >= OPS_PER_TX => {
                let ok = clients[c].commit(tx);
                if debug {
                    eprintln!("conn {c} tx {tx}: commit {ok}");
                }
                if ok {
                    history.push(Committed {
                        conn: c,
                        in_tx: true,
                        steps,
                    });
                } else {
                    conflicts += 1;
                }
            }
            Some((tx, mut steps)) => {
                let op = random_op(&mut rng, &mut serial);
                let answer = clients[c].call(tx, &op);
                if debug {
                    eprintln!("conn {c} tx {tx}: {}", step(&op, &answer));
                }
                steps.push((op, answer));
                open[c] = Some((tx, steps));
            }
        }
    }
    (history, conflicts)
}

fn step(op: &Op, answer: &Answer) -> String {
    let answer = answer.as_ref().map(|a| String::from_utf8_lossy(a));
    let payload = String::from_utf8_lossy(&op.payload);
    format!("{:?} {payload:?} -> {answer:?}", op.ty)
}

fn describe(history: &[Committed]) -> String {
    let mut s = String::new();
    for h in history {
        s += &format!("connection {} (in a transaction: {}):\n", h.conn, h.in_tx);
        for (op, answer) in &h.steps {
            s += &format!("  {}\n", step(op, answer));
        }
    }
    s
}

/// Everything below /s as `c` sees it: path, value, permissions, children.
fn dump(c: &mut Client) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec!["/s".to_string()];
    while let Some(p) = todo.pop() {
        let ask = |ty| Op {
            ty,
            payload: [p.as_bytes(), b"\0"].concat(),
        };
        let value = c.call(0, &ask(MsgType::Read));
        let perms = c.call(0, &ask(MsgType::GetPerms));
        let kids = c.call(0, &ask(MsgType::Directory)).unwrap_or_default();
        for k in kids.split(|&b| b == 0).filter(|k| !k.is_empty()) {
            todo.push(format!("{p}/{}", String::from_utf8_lossy(k)));
        }
        out.push(format!("{p} {value:?} {perms:?} {kids:?}"));
    }
    out
}

#[test]
fn committed_transactions_replay_serially_with_the_same_answers() {
    let seed = std::env::var("XS_TX_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_2026_u64);
    let concurrent = Shim::start();
    let mut clients_a = clients(&concurrent);
    let (history, conflicts) = concurrent_run(&mut clients_a, seed);
    let transactions = history.iter().filter(|h| h.in_tx).count();
    println!(
        "seed {seed:#x}: {transactions} transactions committed, {conflicts} EAGAIN, {} requests outside",
        history.len() - transactions
    );
    assert!(
        transactions >= TRANSACTIONS / 3,
        "seed {seed:#x}: only {transactions} of {TRANSACTIONS} committed"
    );

    let serial = Shim::start();
    let mut clients_b = clients(&serial);
    for (i, h) in history.iter().enumerate() {
        let c = &mut clients_b[h.conn];
        let tx = if h.in_tx { c.start() } else { 0 };
        for (op, answer) in &h.steps {
            let again = c.call(tx, op);
            assert_eq!(
                &again, answer,
                "seed {seed:#x}: commit {i} (connection {}): {:?} {:?} answered differently alone; \
                 the commits so far:\n{}",
                h.conn,
                op.ty,
                String::from_utf8_lossy(&op.payload),
                describe(&history[i.saturating_sub(8)..=i])
            );
        }
        if h.in_tx {
            assert!(c.commit(tx), "seed {seed:#x}: commit {i} conflicts alone");
        }
    }
    let (a, b) = (dump(&mut clients_a[0]), dump(&mut clients_b[0]));
    assert_eq!(a, b, "seed {seed:#x}: the trees differ");
}
