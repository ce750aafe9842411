//! Seeded random sessions: many requests over two connections, drawn from a
//! small pool of paths, values, tokens and domids so that they collide
//! (watches fire, transactions conflict, nodes come and go). Each session is
//! an ordinary `Case`, replayed on both daemons and compared step by step.

use super::case::{action_text, Action, Case, Step, Tx};

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

const PATHS: &[&str] = &[
    "/f",
    "/f/a",
    "/f/b",
    "/f/a/c",
    "/g",
    "rel",
    "rel/x",
    "/local/domain/1/d",
    "@introduceDomain",
    "@releaseDomain",
    "/f/",
    "/bad path",
];
const VALUES: &[&str] = &["", "1", "two", "a\0b"];
const TOKENS: &[&str] = &["t1", "t2"];
const PERMS: &[&str] = &["n0", "r1", "w2", "b3", "n1", "x9", "r"];
const DOMIDS: &[&str] = &["0", "1", "2", "3"];

/// Session `seed`: `len` requests on connections a and b, then a quiet
/// look at both.
pub fn session(seed: u64, len: usize) -> Case {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut steps = Vec::new();
    // Open transactions by connection: variable names.
    let mut open: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    let mut next_var = 0;
    let mut push = |conn: usize, action: Action| {
        steps.push(Step {
            line: steps.len(),
            conn: ["a", "b"][conn].to_string(),
            action,
            expect: Vec::new(),
            shim_expect: None,
            xen420_expect: None,
        })
    };
    for _ in 0..len {
        let c = rng.below(2);
        let path = rng.pick(PATHS);
        let nul = |s: &str| format!("{s}\0");
        let (ty, payload): (u32, String) = match rng.below(23) {
            0..=3 => (11, format!("{path}\0{}", rng.pick(VALUES))),
            4 | 5 => (2, nul(path)),
            6 => (1, nul(path)),
            7 => (12, nul(path)),
            8 | 9 => (13, nul(path)),
            10 => (3, nul(path)),
            11 => {
                let perms: Vec<String> = (0..1 + rng.below(3))
                    .map(|_| nul(rng.pick(PERMS)))
                    .collect();
                (14, format!("{path}\0{}", perms.concat()))
            }
            12 | 13 => (4, format!("{path}\0{}\0", rng.pick(TOKENS))),
            14 => (5, format!("{path}\0{}\0", rng.pick(TOKENS))),
            15 => {
                let var = format!("t{next_var}");
                next_var += 1;
                push(
                    c,
                    Action::Send {
                        ty: 6,
                        req: None,
                        tx: Tx::Num(0),
                        len: None,
                        payload: b"\0".to_vec(),
                        wait: true,
                        capture: Some(var.clone()),
                    },
                );
                open[c].push(var);
                continue;
            }
            16 => match open[c].pop() {
                Some(var) => {
                    let end = if rng.below(3) == 0 { "F\0" } else { "T\0" };
                    push(
                        c,
                        Action::Send {
                            ty: 7,
                            req: None,
                            tx: Tx::Var(var),
                            len: None,
                            payload: end.as_bytes().to_vec(),
                            wait: true,
                            capture: None,
                        },
                    );
                    continue;
                }
                None => (10, nul(rng.pick(DOMIDS))),
            },
            17 => {
                let d = rng.pick(DOMIDS);
                (
                    8,
                    format!("{d}\0{}\0{}\0", 100 + rng.below(3), 1 + rng.below(9)),
                )
            }
            18 => (9, nul(rng.pick(DOMIDS))),
            19 => (17, nul(rng.pick(DOMIDS))),
            20 => (22, format!("{path}\0{}\0", rng.below(4))),
            21 => (18, nul(rng.pick(DOMIDS))),
            _ => (21, String::new()),
        };
        // Requests that may run in a transaction do so a third of the time.
        let tx = match open[c].last() {
            Some(var) if matches!(ty, 1..=3 | 11..=14 | 22) && rng.below(3) != 0 => {
                Tx::Var(var.clone())
            }
            _ => Tx::Num(0),
        };
        push(
            c,
            Action::Send {
                ty,
                req: None,
                tx,
                len: None,
                payload: payload.into_bytes(),
                wait: true,
                capture: None,
            },
        );
    }
    push(0, Action::Quiet);
    push(1, Action::Quiet);
    // After every request a ping on each connection: its reply proves the
    // connection's queued events are out. C xenstored sometimes drops a watch
    // event identical to one still queued (a race: 1 in 200 for an initial
    // event), which would make sessions flaky.
    let steps = steps
        .into_iter()
        .flat_map(|step| {
            let quiet = matches!(step.action, Action::Quiet);
            let pings = (!quiet).then(|| [ping("a"), ping("b")]);
            std::iter::once(step).chain(pings.into_iter().flatten())
        })
        .enumerate()
        .map(|(i, mut step)| {
            step.line = i;
            step
        })
        .collect();
    Case {
        name: format!("random/{seed}"),
        differs: None,
        oxenstored: None,
        xen420: None,
        steps,
    }
}

fn ping(conn: &str) -> Step {
    Step {
        line: 0,
        conn: conn.to_string(),
        action: Action::Send {
            ty: 10,
            req: None,
            tx: Tx::Num(0),
            len: None,
            payload: b"0\0".to_vec(),
            wait: true,
            capture: None,
        },
        expect: Vec::new(),
        shim_expect: None,
        xen420_expect: None,
    }
}

/// The session in the case-file syntax, to paste into cases/*.xs.
pub fn to_dsl(case: &Case) -> String {
    let mut out = format!("case {}\n", case.name.replace('/', "-"));
    for step in &case.steps {
        let line = action_text(&step.action);
        out.push_str(&format!("  {}: {line}\n", step.conn));
    }
    out
}
