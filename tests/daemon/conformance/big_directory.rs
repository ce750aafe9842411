//! A session on one directory past 8192 bytes of listing (where the shim
//! keeps the list beside the node, indexed): its children made, removed
//! from the front, middle and end, in and out of a transaction, each
//! change followed by DIRECTORY_PART pages at fixed offsets, so every page
//! and generation is compared with C xenstored's.

use super::case::{Action, Case, Step, Tx};

/// Children made first: 8890 bytes of names ("0\0" … "1999\0").
const CHILDREN: usize = 2000;
/// Where the pages are asked from: the start, inside a name, past the
/// first page, and the end.
const OFFSETS: [usize; 4] = [0, 2, 4000, 8890];

pub fn session() -> Case {
    let mut steps = Vec::new();
    let send = |conn: &str, ty: u32, tx: Tx, payload: String, capture: Option<&str>| Step {
        line: 0,
        conn: conn.to_string(),
        action: Action::Send {
            ty,
            req: None,
            tx,
            len: None,
            payload: payload.into_bytes(),
            wait: true,
            capture: capture.map(str::to_string),
        },
        expect: Vec::new(),
        shim_expect: None,
        xen420_expect: None,
    };
    let (write, rm, directory, directory_part) = (11, 13, 1, 22);
    let pages = |steps: &mut Vec<Step>, conn: &str, tx: fn() -> Tx| {
        for at in OFFSETS {
            steps.push(send(
                conn,
                directory_part,
                tx(),
                format!("/d\0{at}\0"),
                None,
            ));
        }
    };
    let outside = || Tx::Num(0);
    for i in 0..CHILDREN {
        steps.push(send("a", write, outside(), format!("/d/{i}\0"), None));
    }
    steps.push(send("a", directory, outside(), "/d\0".into(), None));
    pages(&mut steps, "a", outside);
    for gone in ["0", "1000", "1999"] {
        steps.push(send("a", rm, outside(), format!("/d/{gone}\0"), None));
        pages(&mut steps, "a", outside);
    }
    steps.push(send("a", write, outside(), "/d/new\0".into(), None));
    pages(&mut steps, "a", outside);
    // In a transaction: its own child and removals, listed in it, committed.
    let inside = || Tx::Var("t".into());
    steps.push(send("b", 6, outside(), "\0".into(), Some("t")));
    steps.push(send("b", write, inside(), "/d/tx\0".into(), None));
    for gone in ["5", "1500", "1998"] {
        steps.push(send("b", rm, inside(), format!("/d/{gone}\0"), None));
    }
    pages(&mut steps, "b", inside);
    steps.push(send("b", 7, inside(), "T\0".into(), None));
    pages(&mut steps, "a", outside);
    // A value and new permissions keep the list; then it goes whole.
    steps.push(send("a", write, outside(), "/d\0v".into(), None));
    steps.push(send("a", 14, outside(), "/d\0b0\0".into(), None));
    pages(&mut steps, "a", outside);
    steps.push(send("a", rm, outside(), "/d\0".into(), None));
    steps.push(send("a", write, outside(), "/d/again\0".into(), None));
    pages(&mut steps, "a", outside);
    for (i, s) in steps.iter_mut().enumerate() {
        s.line = i;
    }
    Case {
        name: "big-directory".into(),
        differs: None,
        oxenstored: None,
        xen420: None,
        steps,
    }
}
