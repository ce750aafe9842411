//! xs-guest: be a guest domain talking to xenstored over its (simulated) ring.
//! The protocol lives in xenstored_probes::guest; this file is flags and output.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use xenstored_probes::guest::{Guest, XsClientError};
use xenstored_probes::ring::sim::SimGuest;

const USAGE: &str = "\
usage: xs-guest --run-dir DIR --domid N COMMAND [ARGS]

Domain lifecycle (the simulated page and event channel under DIR/ring/N/):
  prepare [--gfn G] [--port P]  create the page and port; prints \"G P\" for
                                dom0's XS_INTRODUCE (defaults: 1044476 1)
  destroy                       the domain dies: its page disappears

Requests over the ring (paths may be relative to /local/domain/N):
  read PATH            write PATH VALUE...     mkdir PATH       rm PATH
  ls PATH              get-perms PATH          set-perms PATH PERM...
  domain-path [DOMID]  watch PATH [COUNT]      reconnect
  session              the commands above from stdin, one a line, plus
                       start / commit / abort (a transaction for the
                       following commands), watch-add PATH TOKEN,
                       events [N] [MS] (print queued watch events), sleep MS;
                       an error is printed and the session goes on

Replies go to stdout; an error reply exits 1 (\"XS_READ x: ENOENT\").";

struct Cli {
    run_dir: PathBuf,
    domid: u16,
    command: Vec<String>,
}

fn parse_args() -> Result<Cli, String> {
    let mut args = std::env::args().skip(1);
    let mut run_dir = None;
    let mut domid = None;
    let mut command = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Err(String::new()),
            "--run-dir" => run_dir = args.next().map(PathBuf::from),
            "--domid" => {
                let v = args.next().ok_or("--domid needs a value")?;
                domid = Some(
                    v.parse()
                        .map_err(|_| format!("--domid {v}: not a domain id"))?,
                );
            }
            _ => {
                command.push(arg);
                command.extend(args.by_ref());
            }
        }
    }
    Ok(Cli {
        run_dir: run_dir.ok_or("--run-dir DIR is required")?,
        domid: domid.ok_or("--domid N is required")?,
        command,
    })
}

/// `--name value` from a command's arguments, parsed, or the default.
fn option(args: &[String], name: &str, default: u64) -> Result<u64, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => {
            let v = args.get(i + 1).ok_or(format!("{name} needs a value"))?;
            v.parse().map_err(|_| format!("{name} {v}: not a number"))
        }
    }
}

enum Failure {
    Usage(String),
    Xs(XsClientError),
}

impl From<XsClientError> for Failure {
    fn from(e: XsClientError) -> Self {
        Failure::Xs(e)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Xs(e.into())
    }
}

fn arg(args: &[String], i: usize, what: &str) -> Result<String, Failure> {
    args.get(i)
        .cloned()
        .ok_or_else(|| Failure::Usage(format!("{} needs {what}", args[0])))
}

/// One request command; `tx` is the session's open transaction (0: none).
fn run(guest: &mut Guest, domid: u16, tx: &mut u32, args: &[String]) -> Result<(), Failure> {
    match args[0].as_str() {
        "read" => println!("{}", guest.read(*tx, &arg(args, 1, "PATH")?)?),
        "write" => {
            let path = arg(args, 1, "PATH")?;
            guest.write(*tx, &path, &args[2.min(args.len())..].join(" "))?
        }
        "mkdir" => guest.mkdir(*tx, &arg(args, 1, "PATH")?)?,
        "rm" => guest.rm(*tx, &arg(args, 1, "PATH")?)?,
        "ls" => {
            for name in guest.directory(*tx, &arg(args, 1, "PATH")?)? {
                println!("{name}");
            }
        }
        "get-perms" => println!(
            "{}",
            guest.get_perms(*tx, &arg(args, 1, "PATH")?)?.join(" ")
        ),
        "set-perms" => {
            let perms: Vec<&str> = args[2.min(args.len())..]
                .iter()
                .map(|s| s.as_str())
                .collect();
            guest.set_perms(*tx, &arg(args, 1, "PATH")?, &perms)?
        }
        "domain-path" => {
            let of = match args.get(1) {
                Some(d) => d
                    .parse()
                    .map_err(|_| Failure::Usage(format!("{d}: not a domain id")))?,
                None => domid,
            };
            println!("{}", guest.get_domain_path(of)?)
        }
        "watch" => {
            let path = arg(args, 1, "PATH")?;
            let count: u64 = match args.get(2) {
                Some(n) => n
                    .parse()
                    .map_err(|_| Failure::Usage(format!("{n}: not a count")))?,
                None => u64::MAX,
            };
            guest.watch(&path, &path)?;
            let mut seen = 0;
            while seen < count {
                if let Some(ev) = guest.next_event(Duration::from_secs(3600))? {
                    println!("{} {}", ev.path, ev.token);
                    seen += 1;
                }
            }
        }
        "events" => {
            let n = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(1);
            let ms = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(5000);
            for _ in 0..n {
                match guest.next_event(Duration::from_millis(ms))? {
                    Some(ev) => println!("{} {}", ev.path, ev.token),
                    None => break,
                }
            }
        }
        "watch-add" => guest.watch(&arg(args, 1, "PATH")?, &arg(args, 2, "TOKEN")?)?,
        "reconnect" => {
            guest.reconnect()?;
            *tx = 0;
        }
        "start" => {
            *tx = guest.transaction_start()?;
            println!("{tx}");
        }
        "commit" | "abort" => {
            let id = std::mem::take(tx);
            guest.transaction_end(id, args[0] == "commit")?
        }
        "sleep" => {
            let ms = arg(args, 1, "MS")?;
            let ms = ms
                .parse()
                .map_err(|_| Failure::Usage(format!("{ms}: not milliseconds")))?;
            std::thread::sleep(Duration::from_millis(ms))
        }
        other => return Err(Failure::Usage(format!("unknown command {other:?}"))),
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = match parse_args() {
        Ok(cli) if !cli.command.is_empty() => cli,
        Ok(_) => {
            eprintln!("xs-guest: no command\n{USAGE}");
            return ExitCode::from(2);
        }
        Err(why) if why.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(why) => {
            eprintln!("xs-guest: {why}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let args = &cli.command;
    let result = match args[0].as_str() {
        "prepare" => (|| {
            let gfn = option(args, "--gfn", 0xfeffc).map_err(Failure::Usage)?;
            let port = option(args, "--port", 1).map_err(Failure::Usage)?;
            let port = u32::try_from(port).map_err(|_| Failure::Usage("--port: too big".into()))?;
            SimGuest::prepare(&cli.run_dir, cli.domid, gfn, port)?;
            println!("{gfn} {port}");
            Ok(())
        })(),
        "destroy" => SimGuest::destroy(&cli.run_dir, cli.domid).map_err(Failure::from),
        "session" => session(&cli),
        _ => Guest::open(&cli.run_dir, cli.domid)
            .map_err(Failure::from)
            .and_then(|mut guest| run(&mut guest, cli.domid, &mut 0, args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(why)) => {
            eprintln!("xs-guest: {why}\n{USAGE}");
            ExitCode::from(2)
        }
        Err(Failure::Xs(e)) => {
            eprintln!("xs-guest: {e}");
            ExitCode::FAILURE
        }
    }
}

fn session(cli: &Cli) -> Result<(), Failure> {
    let mut guest = Guest::open(&cli.run_dir, cli.domid)?;
    let mut tx = 0;
    let mut failed = false;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let words: Vec<String> = line.split_whitespace().map(String::from).collect();
        if words.is_empty() || words[0].starts_with('#') {
            continue;
        }
        match run(&mut guest, cli.domid, &mut tx, &words) {
            Ok(()) => {}
            Err(Failure::Usage(why)) => {
                println!("error: {why}");
                failed = true;
            }
            Err(Failure::Xs(e)) => {
                println!("error: {e}");
                failed = true;
            }
        }
    }
    if failed {
        return Err(Failure::Xs(XsClientError::Protocol(
            "some session commands failed".into(),
        )));
    }
    Ok(())
}
