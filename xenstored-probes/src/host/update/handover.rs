//! Live update, the source's process side: the state file written, the
//! fds it lists kept open across exec, the target exec'd in this process
//! with `-U` (oxenstored: its dump, `--live --restart`). Returns only when the exec failed, with everything as it was
//! (the state file removed, the fds close-on-exec again), so the daemon
//! goes on serving and answers the error.

use super::adopt::STATE_FILE;
use crate::migration::oxenstored::DUMP_FILE;
use crate::migration::stream::{self, ConnKind, State};
use std::ffi::{CString, OsString};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The new image's argv after argv[0]: `-c`'s words if given, else this
/// image's own arguments; `-U` added unless there.
pub fn arguments(cmdline: Option<&str>, own: impl Iterator<Item = OsString>) -> Vec<OsString> {
    let mut args: Vec<OsString> = match cmdline {
        Some(c) => c.split_whitespace().map(OsString::from).collect(),
        None => own.collect(),
    };
    if !args.iter().any(|a| a == "-U" || a == "--live-update") {
        args.push("-U".into());
    }
    args
}

fn set_cloexec(fd: i32, on: bool) -> io::Result<()> {
    let flags = if on { libc::FD_CLOEXEC } else { 0 };
    // SAFETY: fcntl on an fd number; a closed one fails with EBADF.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// oxenstored's argv after argv[0], as its own live update makes it:
/// `--live --restart`, then `-c`'s words if given, else `own` (this
/// image's options that oxenstored takes too: it exits on any other).
pub fn oxenstored_arguments(cmdline: Option<&str>, own: Vec<OsString>) -> Vec<OsString> {
    let rest: Vec<OsString> = match cmdline {
        Some(c) => c.split_whitespace().map(OsString::from).collect(),
        None => own,
    };
    let forced = ["--live", "--restart"];
    forced
        .into_iter()
        .map(OsString::from)
        .chain(rest.into_iter().filter(|a| !forced.iter().any(|f| a == f)))
        .collect()
}

/// Writes `state` to `<run_dir>/state_dump` and execs `target` with
/// `args`; returns the reason when that could not be done.
pub fn exec(state: &State, run_dir: &Path, target: &Path, args: &[OsString]) -> io::Error {
    let file = run_dir.join(STATE_FILE);
    exec_with(state, &file, target, args, || {
        let tmp = run_dir.join(format!("{STATE_FILE}.new"));
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&stream::write(state))?;
        f.sync_all()?;
        std::fs::rename(&tmp, &file)
    })
}

/// Writes oxenstored's `dump` of `state` where oxenstored reads it
/// ([`DUMP_FILE`], compiled into it) and execs `target` with `args`.
pub fn exec_oxenstored(state: &State, dump: &str, target: &Path, args: &[OsString]) -> io::Error {
    let file = Path::new(DUMP_FILE);
    exec_with(state, file, target, args, || {
        // Written in place as oxenstored does: only `--restart` reads it.
        if let Some(dir) = file.parent() {
            match std::fs::create_dir(dir) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(file)?
            .write_all(dump.as_bytes())
    })
}

/// Writes the state (`write`, to `file`), keeps the fds `state` lists open
/// across exec, and execs `target`; on failure undoes both.
fn exec_with(
    state: &State,
    file: &Path,
    target: &Path,
    args: &[OsString],
    write: impl FnOnce() -> io::Result<()>,
) -> io::Error {
    let fds: Vec<i32> = state
        .global
        .map(|g| g.socket_fd)
        .into_iter()
        .chain(state.connections.iter().filter_map(|c| match c.kind {
            ConnKind::Socket { fd } => Some(fd),
            ConnKind::Ring { .. } => None,
        }))
        .filter(|&fd| fd >= 0)
        .collect();
    let err = (|| {
        write()?;
        let c = |s: &[u8]| CString::new(s).map_err(|_| io::Error::other("a NUL in an argument"));
        let mut argv = vec![c(target.as_os_str().as_bytes())?];
        for a in args {
            argv.push(c(a.as_bytes())?);
        }
        let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        for &fd in &fds {
            set_cloexec(fd, false)?;
            // Upstream's sockets block: C's read of a request's body
            // takes EAGAIN (its header came alone) for the peer gone,
            // and drops the client (xenconsoled, whose @releaseDomain
            // then never comes); oxenstored drops it on any EAGAIN.
            set_nonblocking(fd, false)?;
        }
        // SAFETY: argv's strings live across the call and the pointer list
        // ends with NULL; execv only returns on failure.
        unsafe { libc::execv(argv[0].as_ptr(), ptrs.as_ptr()) };
        Err::<(), _>(io::Error::last_os_error())
    })()
    .unwrap_err();
    for &fd in &fds {
        let _ = set_cloexec(fd, true);
        let _ = set_nonblocking(fd, true);
    }
    let _ = std::fs::remove_file(file);
    err
}

fn set_nonblocking(fd: i32, on: bool) -> io::Result<()> {
    // SAFETY: fcntl on an fd number; a closed one fails with EBADF.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let flags = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_new_image_gets_the_old_arguments_and_minus_u_once() {
        let own = || {
            ["--pid-file", "/run/xenstore.pid"]
                .map(OsString::from)
                .into_iter()
        };
        assert_eq!(
            arguments(None, own()),
            ["--pid-file", "/run/xenstore.pid", "-U"].map(OsString::from)
        );
        assert_eq!(
            arguments(Some(" -N  -T /tmp/t -U"), own()),
            ["-N", "-T", "/tmp/t", "-U"].map(OsString::from)
        );
        let again = arguments(None, arguments(None, own()).into_iter());
        assert_eq!(again.iter().filter(|a| *a == "-U").count(), 1);
    }

    #[test]
    fn oxenstored_gets_live_restart_once_then_its_options() {
        let own = ["--no-fork", "--config-file", "/etc/x.conf"].map(OsString::from);
        assert_eq!(
            oxenstored_arguments(None, own.to_vec()),
            [
                "--live",
                "--restart",
                "--no-fork",
                "--config-file",
                "/etc/x.conf"
            ]
            .map(OsString::from)
        );
        assert_eq!(
            oxenstored_arguments(Some("--restart --no-fork --live"), own.to_vec()),
            ["--live", "--restart", "--no-fork"].map(OsString::from)
        );
    }
}
