//! `xenstore-snoop --top` in a real terminal (tmux: keys sent, the pane
//! captured) against a real shim under a known workload: a guest writing
//! 20 times a second over its ring, a dom0 client writing 10 times and
//! failing 5 reads a second (and listing 5 times a second, which `--op`
//! leaves out). The rows show those rates, keys sort, filter, pause and
//! quit, and the terminal is as it was afterwards; then the recording
//! replays in the same view and as plain text.

use crate::common::process::{output_within, BoundedOutput, Watched, CLIENT_TIMEOUT};
use crate::common::shim::{private_dir, Shim};
use crate::common::{wait_for, TIMEOUT};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The workload's rates (requests per second) through `--op WRITE,READ`.
const GUEST_RATE: f64 = 20.0;
const DOM0_RATE: f64 = 15.0;
const DOM0_ERRORS: f64 = 5.0;

/// A private tmux server; killed on drop.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> std::process::Output {
        let out = output_within(
            Command::new("tmux").arg("-S").arg(&self.socket).args(args),
            CLIENT_TIMEOUT,
        );
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// A session of its own running `script` (sh) in a 150x45 terminal.
    fn window(&self, name: &str, script: &str) {
        self.cmd(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "150",
            "-y",
            "45",
            script,
        ]);
    }

    fn screen(&self, target: &str) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", target]).stdout)
            .into_owned()
    }

    fn keys(&self, target: &str, keys: &[&str]) {
        self.cmd(&[&["send-keys", "-t", target][..], keys].concat());
    }

    /// Whether the pane shows the alternate screen (a full-screen program).
    fn alternate_on(&self, target: &str) -> bool {
        let out = self.cmd(&["display", "-p", "-t", target, "#{alternate_on}"]);
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }

    /// Waits until the screen satisfies `pred`; returns it.
    fn wait_screen(&self, target: &str, what: &str, pred: impl Fn(&Screen) -> bool) -> Screen {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let last = self.screen(target);
            let screen = Screen::parse(&last);
            if pred(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the screen:\n{last}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .stderr(Stdio::null())
            .bounded_output();
    }
}

/// What a `--top` frame shows.
#[derive(Debug, Default)]
struct Screen {
    /// The heading (with the refresh's time).
    heading: String,
    /// NAME -> (DOM, REQ/s, ERR/s), in the order shown.
    rows: Vec<(String, u16, f64, f64)>,
    text: String,
}

impl Screen {
    fn parse(text: &str) -> Screen {
        let mut s = Screen {
            text: text.to_string(),
            ..Screen::default()
        };
        for line in text.lines() {
            if line.contains("xenstore-snoop --top ") {
                s.heading = line.trim().to_string();
            }
            let w: Vec<&str> = line.split_whitespace().collect();
            if w.len() >= 10 && w[0].parse::<u16>().is_ok() && w[1].parse::<u32>().is_ok() {
                if let (Ok(rate), Ok(errors)) = (w[3].parse(), w[4].parse()) {
                    s.rows
                        .push((w[2].to_string(), w[0].parse().unwrap(), rate, errors));
                }
            }
        }
        s
    }

    fn row(&self, name: &str) -> Option<(f64, f64)> {
        self.rows.iter().find(|r| r.0 == name).map(|r| (r.2, r.3))
    }

    fn names(&self) -> Vec<&str> {
        self.rows.iter().map(|r| r.0.as_str()).collect()
    }

    /// The refresh's time: what changes from one frame to the next.
    fn stamp(&self) -> &str {
        self.heading
            .split_whitespace()
            .find(|w| w.len() == 8 && w.as_bytes()[2] == b':')
            .unwrap_or("")
    }
}

/// The workload: one python3 process (pyxs as dom0; xs-guest's session
/// as domain 6, fed a line per tick), on a fixed schedule of 50 ms ticks.
fn workload(shim: &Shim) -> Watched {
    let script = format!(
        r#"
import subprocess, sys, time
from pyxs import Client, PyXSError
c = Client(unix_socket_path={socket:?}); c.connect()
g = subprocess.Popen([{guest:?}, "--run-dir", {run:?}, "--domid", "6", "session"],
                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
print("started", flush=True)
start, i = time.monotonic(), 0
while True:
    g.stdin.write("write data/load %d\n" % i); g.stdin.flush()
    if i % 2 == 0:
        c.write(b"/tool/load", b"%d" % i)
    if i % 4 == 1:
        try: c.read(b"/tool/missing")
        except PyXSError: pass
    if i % 4 == 3:
        c.list(b"/tool")
    i += 1
    time.sleep(max(0, start + i * 0.05 - time.monotonic()))
"#,
        socket = shim.socket.display().to_string(),
        guest = crate::common::bin("xs-guest").display().to_string(),
        run = shim.run_dir.display().to_string(),
    );
    let mut w = Watched::spawn(
        "the workload",
        Command::new("/usr/bin/python3")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
        false,
    );
    w.wait_ready("the workload to start", TIMEOUT, |out, _| {
        out.iter().any(|l| l == "started")
    });
    w
}

/// `rate` is the workload's `want` within one request per refresh (plus
/// 10% for a loaded machine's late ticks).
fn near(rate: f64, want: f64) -> bool {
    (rate - want).abs() <= 1.0 + want * 0.1
}

/// Reads `path` once it exists.
fn read_when_there(path: &Path, what: &str) -> String {
    wait_for(what, TIMEOUT, || path.exists());
    let mut text = String::new();
    wait_for(what, TIMEOUT, || {
        text = std::fs::read_to_string(path).unwrap_or_default();
        text.ends_with('\n')
    });
    text
}

#[test]
fn top_in_a_terminal_live_and_replayed() {
    if !crate::common::need_root("top_in_a_terminal_live_and_replayed") {
        return;
    }
    let shim = Shim::private_copy();
    let demo = Command::new(crate::common::bin("xs-demo"))
        .arg("--socket")
        .arg(&shim.socket)
        .arg("--run-dir")
        .arg(&shim.run_dir)
        .arg("--keep")
        .bounded_output();
    assert!(demo.status.success(), "{demo:?}");

    let dir = private_dir("top");
    let tmux = Tmux {
        socket: dir.join("tmux"),
    };
    let snoop = crate::common::bin("xenstore-snoop");
    let backend = std::env::var("XS_SNOOP_BACKEND")
        .map(|b| format!("--backend {b}"))
        .unwrap_or_default();
    let d = dir.display();
    let live = format!(
        "stty -a > {d}/stty.before; {} {backend} --daemon-pid {} --top --op WRITE,READ -w {d}/trace 2> {d}/err; \
         echo $? > {d}/exit; stty -a > {d}/stty.after; exec sleep 600",
        snoop.display(),
        shim.pid()
    );
    tmux.window("live", &live);
    wait_for("the snooper to attach", TIMEOUT, || {
        std::fs::read_to_string(dir.join("err")).is_ok_and(|e| e.contains("Ctrl-C to end."))
    });
    let err = std::fs::read_to_string(dir.join("err")).unwrap();
    eprintln!("{}", err.lines().next().unwrap_or_default());
    let load = workload(&shim);
    assert!(tmux.alternate_on("live"), "--top is not full-screen");

    // Three refreshes in a row after the first full one with both clients.
    let mut frames: Vec<Screen> = Vec::new();
    let mut seen = String::new();
    let deadline = Instant::now() + TIMEOUT;
    while frames.len() < 4 {
        let screen = tmux.wait_screen("live", "a new refresh with both clients", |s| {
            s.stamp() != seen && s.row("guest6").is_some() && s.row("python3").is_some()
        });
        seen = screen.stamp().to_string();
        frames.push(screen);
        assert!(Instant::now() < deadline, "no refreshes: {frames:?}");
    }
    let frames = &frames[1..];
    let mean = |name: &str, f: fn((f64, f64)) -> f64| {
        frames.iter().map(|s| f(s.row(name).unwrap())).sum::<f64>() / frames.len() as f64
    };
    let (guest, dom0, dom0_errors) = (
        mean("guest6", |r| r.0),
        mean("python3", |r| r.0),
        mean("python3", |r| r.1),
    );
    eprintln!(
        "--top showed guest6 {guest:.1}/s, python3 {dom0:.1}/s with {dom0_errors:.1} errors/s"
    );
    assert!(near(guest, GUEST_RATE), "guest6 {guest}: {:#?}", frames);
    assert!(near(dom0, DOM0_RATE), "python3 {dom0}: {:#?}", frames);
    assert!(near(dom0_errors, DOM0_ERRORS), "{:#?}", frames);
    assert!(frames.iter().all(|s| s.row("guest6").unwrap().1 == 0.0));
    // Requests first (the default), errors, names.
    assert_eq!(
        frames[2].names()[..2],
        ["guest6", "python3"],
        "{}",
        frames[2].text
    );
    tmux.keys("live", &["e"]);
    tmux.wait_screen("live", "sorted by errors", |s| {
        s.heading.contains("ERR/s") && s.names().first() == Some(&"python3")
    });
    tmux.keys("live", &["n"]);
    tmux.wait_screen("live", "sorted by name", |s| {
        s.heading.contains("NAME") && s.names().first() == Some(&"guest6")
    });
    // Only domain 6, then every domain again.
    tmux.keys("live", &["d", "6", "Enter"]);
    let only6 = tmux.wait_screen("live", "domain 6 only", |s| {
        s.heading.contains("domain 6 only") && !s.rows.is_empty()
    });
    assert!(only6.rows.iter().all(|r| r.1 == 6), "{}", only6.text);
    tmux.keys("live", &["d", "Enter"]);
    tmux.wait_screen("live", "every domain again", |s| {
        !s.heading.contains("only") && s.row("python3").is_some()
    });
    // Paused: the same refresh stays through two more.
    tmux.keys("live", &["p"]);
    let paused = tmux.wait_screen("live", "paused", |s| s.heading.contains("[PAUSED]"));
    let held = Instant::now();
    while held.elapsed() < Duration::from_millis(2500) {
        let now = Screen::parse(&tmux.screen("live"));
        assert_eq!(now.stamp(), paused.stamp(), "paused, yet refreshed");
        std::thread::sleep(Duration::from_millis(200));
    }
    tmux.keys("live", &["p"]);
    tmux.wait_screen("live", "running again", |s| {
        !s.heading.contains("PAUSED") && s.stamp() != paused.stamp()
    });
    tmux.keys("live", &["q"]);
    let exit = read_when_there(&dir.join("exit"), "the snooper to quit");
    drop(load);
    assert_eq!(
        exit.trim(),
        "0",
        "{}",
        std::fs::read_to_string(dir.join("err")).unwrap()
    );
    let after = read_when_there(&dir.join("stty.after"), "stty after");
    assert_eq!(
        std::fs::read_to_string(dir.join("stty.before")).unwrap(),
        after,
        "the terminal's modes changed"
    );
    assert!(!tmux.alternate_on("live"), "still on the alternate screen");
    let err = std::fs::read_to_string(dir.join("err")).unwrap();
    assert!(err.contains(" 0 lost"), "{err}");

    // The recording, replayed in the same view at the recorded speed: the
    // same filters, the same rates; Ctrl-C restores the terminal.
    let replay = format!(
        "{} -r {d}/trace --top -d 6 2> {d}/replay.err; echo $? > {d}/replay.exit; \
         stty -a > {d}/replay.stty; exec sleep 600",
        snoop.display()
    );
    tmux.window("replay", &replay);
    let shown = tmux.wait_screen("replay", "the guest's rate replayed", |s| {
        s.row("guest6").is_some_and(|r| near(r.0, GUEST_RATE))
    });
    assert_eq!(shown.names(), ["guest6"], "-d 6: {}", shown.text);
    tmux.keys("replay", &["C-c"]);
    let exit = read_when_there(&dir.join("replay.exit"), "the replay to end");
    assert_eq!(exit.trim(), "0");
    let stty = read_when_there(&dir.join("replay.stty"), "stty after the replay");
    assert_eq!(stty, after, "Ctrl-C left the terminal changed");
    assert!(!tmux.alternate_on("replay"));

    // Not a terminal: plain text frames, --count of them.
    let out = Command::new(&snoop)
        .args(["-r", &format!("{d}/trace"), "--top", "--count", "3"])
        .stdin(Stdio::null())
        .bounded_output();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(text.matches("xenstore-snoop --top ").count(), 3, "{text}");
    assert!(!text.contains('\x1b'), "escape codes in plain text: {text}");
    let out = Command::new(&snoop)
        .args(["-r", &format!("{d}/trace"), "--top", "--op", "WRITE"])
        .stdin(Stdio::null())
        .bounded_output();
    let text = String::from_utf8_lossy(&out.stdout);
    let busy: Vec<Screen> = text
        .split("\n\n")
        .map(Screen::parse)
        .filter(|s| s.row("guest6").is_some() && s.row("python3").is_some())
        .collect();
    assert!(busy.len() >= 3, "{text}");
    let mid = &busy[busy.len() / 2];
    let (rate, errors) = mid.row("python3").unwrap();
    assert!(
        near(rate, 10.0) && errors == 0.0,
        "--op WRITE: {}",
        mid.text
    );
    assert!(
        mid.text.contains("/local/domain/6/data/load"),
        "{}",
        mid.text
    );
}
