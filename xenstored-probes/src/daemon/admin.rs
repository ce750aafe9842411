//! Handlers of the administrative operations: CONTROL, GET/SET_FEATURE
//! and GET/SET_QUOTA. CONTROL's commands are answered as upstream C
//! xenstored 4.17 answers them (`help` lists them); live update is
//! live_update.rs's.

use super::{Call, Daemon};
use crate::daemon::quota::Quotas;
use crate::store::tree::Tree;
use crate::wire::c_number::atoi;
use crate::wire::error::{Fail, Reason};
use crate::wire::request;
use crate::wire::{XsError, PAYLOAD_MAX};
use std::io::Write;

/// Features the daemon supports (GET_FEATURE without a domid): none of
/// the ring-level ones over sockets.
const FEATURES: u32 = 0;

/// (command, parameters) in upstream's order.
const COMMANDS: [(&str, &str); 9] = [
    ("check", ""),
    ("log", "on|off"),
    (
        "live-update",
        "[-c <cmdline>] [-F] [-t <timeout>] <file>\n    Default timeout is 60 seconds.",
    ),
    ("logfile", "<file>"),
    ("memreport", "[<file>]"),
    ("print", "<string>"),
    ("quota", "[set <name> <val>|<domid>]"),
    ("quota-soft", "[set <name> <val>]"),
    ("help", ""),
];

const EINVAL: Fail = Fail::new(XsError::Einval, Reason::ControlArgs);

fn text(reply: &mut Vec<u8>, s: &str) {
    reply.extend_from_slice(s.as_bytes());
    reply.push(0);
}

fn arg(a: &[u8]) -> String {
    String::from_utf8_lossy(a).into_owned()
}

/// Answers itself: live-update -s leaves its request unanswered until the
/// update (the new image sends the "OK").
pub(super) fn control(d: &mut Daemon, call: &Call, p: &[u8]) -> Result<(), Fail> {
    // An exporter asks a CONTROL (xenstore-snoop --metrics: quota) before
    // it reads its counts: they then hold every event before its question.
    crate::probes::stats_batch::flush();
    let mut reply = Vec::new();
    let args = request::control(p)?;
    if let [b"live-update", rest @ ..] = args.as_slice() {
        if rest.is_empty() {
            return Err(EINVAL);
        }
        match d.live_update(call, rest) {
            Some(answer) => text(&mut reply, &answer),
            None => return Ok(()),
        }
    } else {
        run_control(d, &args, &mut reply)?;
    }
    if reply.len() > PAYLOAD_MAX {
        // upstream's send_reply refuses to send more
        return Err(Fail::new(XsError::E2big, Reason::ReplyTooLong));
    }
    d.respond(call.conn, call.serial, &call.header, Ok(&reply));
    Ok(())
}

fn run_control(d: &mut Daemon, args: &[&[u8]], reply: &mut Vec<u8>) -> Result<(), Fail> {
    let (cmd, rest) = args.split_first().ok_or(EINVAL)?;
    match *cmd {
        b"check" => {
            if !rest.is_empty() {
                return Err(EINVAL);
            }
            let problems = d.store.check();
            for problem in &problems {
                crate::log::error(format_args!("check_store: {problem}"));
            }
            if !problems.is_empty() {
                return Err(Fail::new(XsError::Eio, Reason::ControlCheck));
            }
            text(reply, "OK");
        }
        b"log" => {
            d.logging = match rest {
                [b"on"] => true,
                [b"off"] => false,
                _ => return Err(EINVAL),
            };
            text(reply, "OK");
        }
        b"logfile" => {
            let [file] = rest else { return Err(EINVAL) };
            d.logfile = Some(arg(file));
            text(reply, "OK");
        }
        b"memreport" => {
            let file = match rest {
                [] => d.logfile.clone(),
                [f] => Some(arg(f)),
                _ => return Err(EINVAL),
            };
            // Upstream has nowhere to write without a file or a log (EBADF,
            // sent as EINVAL).
            if file.is_none() && !d.logging {
                return Err(Fail::new(XsError::Einval, Reason::ControlNoFile));
            }
            let report = memreport(d);
            match file {
                Some(file) => std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(&file)
                    .and_then(|mut f| f.write_all(report.as_bytes()))
                    .map_err(|_| Fail::new(XsError::Einval, Reason::ControlFile))?,
                None => eprint!("{report}"),
            }
            text(reply, "OK");
        }
        b"print" => {
            let [s] = rest else { return Err(EINVAL) };
            crate::log::info(format_args!("control: {}", arg(s)));
            text(reply, "OK");
        }
        b"quota" => match rest {
            [] => text(reply, &d.quotas.show_hard()),
            [b"set", name, val] => {
                let v = atoi(val) as i32;
                if v < 1 || !d.quotas.set_global(name, v as u32) {
                    return Err(EINVAL);
                }
                text(reply, "OK");
            }
            [domid] => {
                let domid = atoi(domid);
                let s = domain_quota(d, domid).ok_or(Fail::new(XsError::Enoent, Reason::Domain))?;
                text(reply, &s);
            }
            _ => return Err(EINVAL),
        },
        b"quota-soft" => match rest {
            [] => text(reply, &d.quotas.show_soft()),
            [b"set", name, val] => {
                let v = atoi(val) as i32;
                if v < 1 || !d.quotas.set_soft(name, v as u32) {
                    return Err(EINVAL);
                }
                text(reply, "OK");
            }
            _ => return Err(EINVAL),
        },
        b"help" => {
            if !rest.is_empty() {
                return Err(EINVAL);
            }
            let mut s = String::new();
            for (c, p) in COMMANDS {
                s += &format!("{c}\t{p}\n");
            }
            text(reply, &s);
        }
        _ => return Err(Fail::new(XsError::Einval, Reason::ControlUnknownCommand)),
    }
    Ok(())
}

/// GET_FEATURE: the daemon's features, or a domain's.
pub(super) fn get_feature(
    d: &mut Daemon,
    _: &Call,
    p: &[u8],
    reply: &mut Vec<u8>,
) -> Result<(), Fail> {
    let v = match request::get_feature(p)? {
        None => FEATURES,
        Some(domid) => {
            d.domains
                .get(domid)
                .ok_or(Fail::new(XsError::Enoent, Reason::Domain))?
                .features
        }
    };
    write!(reply, "{v}\0").expect("writing to a Vec");
    Ok(())
}

/// SET_FEATURE: only features the daemon supports.
pub(super) fn set_feature(d: &mut Daemon, _: &Call, p: &[u8]) -> Result<(), Fail> {
    let req = request::set_feature(p)?;
    let dom = d
        .domains
        .get_mut(req.domid)
        .ok_or(Fail::new(XsError::Enoent, Reason::Domain))?;
    if req.value & !FEATURES != 0 {
        return Err(Fail::new(XsError::Einval, Reason::FeatureUnsupported));
    }
    dom.features = req.value;
    Ok(())
}

/// GET_QUOTA: the quota names, a global quota or a domain's.
pub(super) fn get_quota(
    d: &mut Daemon,
    _: &Call,
    p: &[u8],
    reply: &mut Vec<u8>,
) -> Result<(), Fail> {
    let req = request::get_quota(p)?;
    let Some(name) = req.name else {
        let names: Vec<&str> = Quotas::names().collect();
        text(reply, &names.join(" "));
        return Ok(());
    };
    let kind = Quotas::kind_by_name(name).ok_or(Fail::new(XsError::Einval, Reason::QuotaName))?;
    let v = match req.domid {
        None => d.quotas.global(kind),
        Some(domid) => {
            d.domains
                .get(domid)
                .ok_or(Fail::new(XsError::Enoent, Reason::Domain))?;
            d.quotas.get(kind, domid)
        }
    };
    write!(reply, "{v}\0").expect("writing to a Vec");
    Ok(())
}

/// SET_QUOTA: a global quota or a domain's.
pub(super) fn set_quota(d: &mut Daemon, _: &Call, p: &[u8]) -> Result<(), Fail> {
    let req = request::set_quota(p)?;
    let kind =
        Quotas::kind_by_name(req.name).ok_or(Fail::new(XsError::Einval, Reason::QuotaName))?;
    match req.domid {
        None => {
            d.quotas.set_global(req.name, req.value);
        }
        Some(domid) => {
            d.domains
                .get(domid)
                .ok_or(Fail::new(XsError::Enoent, Reason::Domain))?;
            d.quotas.set_domain(domid, kind, req.value);
        }
    }
    Ok(())
}

/// `quota <domid>`: the domain's usage, upstream's layout.
fn domain_quota(d: &Daemon, domid: u32) -> Option<String> {
    d.domains.get(domid)?;
    let ids = d.domain_conns(domid);
    let conns = || ids.iter().filter_map(|id| d.conns.get(id));
    let watches = conns().map(|c| c.watches.count).sum::<usize>();
    let transactions = conns().map(|c| c.transactions.len()).sum::<usize>();
    let mut s = format!("Domain {domid}:\n");
    for (name, v) in [
        ("nodes", d.store.owned(domid)),
        ("watches", watches),
        ("transactions", transactions),
        ("outstanding", d.outstanding(domid) as usize),
        ("memory", d.memory(domid)),
    ] {
        s += &format!("{name:<16}: {v:>8}\n");
    }
    Some(s)
}

fn memreport(d: &Daemon) -> String {
    let mut s = format!(
        "xenstored-shim memory report\nnodes: {}\nconnections: {}\n",
        d.store.len(),
        d.conns.len()
    );
    for domid in d.domains.ids() {
        s += &format!(
            "domain {domid}: {} nodes, {} bytes, {} outstanding\n",
            d.store.owned(domid),
            d.memory(domid),
            d.outstanding(domid)
        );
    }
    s += &format!(
        "watch events dropped on a memory quota: {}\n",
        d.dropped_events
    );
    s
}
