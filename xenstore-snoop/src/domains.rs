//! Asking the traced daemon itself, through its own dom0 socket: whether it
//! knows a domain (`-d N` for a domain that does not exist would otherwise
//! wait silently), and a domain's name. The socket is the daemon's listening Unix socket (found from
//! its fds and /proc/PID/net/unix) that is not a per-domain one
//! (`<run-dir>/domain/<id>`).

use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;
use xenstore_proto::wire::{MsgType, XsError};

/// How long the daemon may take to answer; the check is skipped past it.
const TIMEOUT: Duration = Duration::from_secs(2);
/// The same for a name looked up while tracing: the trace waits for it.
const LOOKUP_TIMEOUT: Duration = Duration::from_millis(200);

/// The dom0 socket daemon `pid` listens on, if it can be found.
pub fn daemon_socket(pid: u32) -> Option<PathBuf> {
    let mut inodes = std::collections::HashSet::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.flatten() {
        let Ok(link) = std::fs::read_link(fd.path()) else {
            continue;
        };
        let link = link.to_string_lossy();
        if let Some(inode) = link
            .strip_prefix("socket:[")
            .and_then(|s| s.strip_suffix(']'))
        {
            inodes.insert(inode.to_string());
        }
    }
    // Num RefCount Protocol Flags Type St Inode Path; Flags 00010000 is
    // __SO_ACCEPTCON (listening).
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/unix")).ok()?;
    let mut listening: Vec<PathBuf> = table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let listens = u32::from_str_radix(f.get(3)?, 16).ok()? & 0x10000 != 0;
            let path = f.get(7)?;
            (listens && inodes.contains(*f.get(6)?)).then(|| PathBuf::from(path))
        })
        .collect();
    listening.retain(|p| !p.parent().is_some_and(|d| d.ends_with("domain")));
    listening.sort();
    listening.into_iter().next()
}

/// One request and its reply: Ok(payload) or Err(error name). The
/// request id spells "snoo", for whoever reads the daemon's trace.
pub(crate) fn ask(
    s: &mut UnixStream,
    ty: MsgType,
    payload: &[u8],
) -> std::io::Result<Result<Vec<u8>, String>> {
    xenstore_proto::exchange::ask(s, ty, 0x736e_6f6f, payload)
}

/// Whether the daemon behind `socket` knows domain `domid`: it was
/// introduced, or /local/domain/<domid> exists. None: could not ask.
pub fn knows(socket: &std::path::Path, domid: u16) -> Option<bool> {
    if domid == 0 {
        return Some(true);
    }
    let mut s = UnixStream::connect(socket).ok()?;
    s.set_read_timeout(Some(TIMEOUT)).ok()?;
    s.set_write_timeout(Some(TIMEOUT)).ok()?;
    let id = format!("{domid}\0");
    if let Ok(answer) = ask(&mut s, MsgType::IsDomainIntroduced, id.as_bytes()).ok()? {
        if answer.starts_with(b"T") {
            return Some(true);
        }
    }
    let home = format!("/local/domain/{domid}\0");
    match ask(&mut s, MsgType::Read, home.as_bytes()).ok()? {
        Ok(_) => Some(true),
        Err(e) if e == XsError::Enoent.name() => Some(false),
        // EACCES: it exists.
        Err(_) => Some(true),
    }
}

/// The store's /local/domain/<domid>/name, read through `socket`.
pub fn domain_name(socket: &std::path::Path, domid: u16) -> Option<String> {
    let mut s = UnixStream::connect(socket).ok()?;
    s.set_read_timeout(Some(LOOKUP_TIMEOUT)).ok()?;
    s.set_write_timeout(Some(LOOKUP_TIMEOUT)).ok()?;
    let path = format!("/local/domain/{domid}/name\0");
    let name = ask(&mut s, MsgType::Read, path.as_bytes()).ok()?.ok()?;
    let name = String::from_utf8_lossy(&name).into_owned();
    (!name.is_empty()).then_some(name)
}

/// Warns on stderr about each of `domains` the daemon `pid` does not know.
pub fn warn_unknown(pid: u32, domains: &[u16]) {
    if domains.iter().all(|&d| d == 0) {
        return;
    }
    let Some(socket) = daemon_socket(pid) else {
        return;
    };
    for &domid in domains {
        if knows(&socket, domid) == Some(false) {
            eprintln!(
                "xenstore-snoop: warning: the daemon does not know domain {domid} \
                 (not introduced, no /local/domain/{domid}): nothing will show until it appears"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_socket_for_a_process_without_one() {
        assert_eq!(daemon_socket(u32::MAX - 1), None);
    }
}
