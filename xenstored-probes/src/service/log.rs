//! Start-up and error messages: to stderr while the daemon runs in the
//! foreground, to syslog (facility daemon) once it has detached, as C
//! xenstored does.

use std::ffi::CString;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

const IDENT: &std::ffi::CStr = c"xenstored-shim";

static SYSLOG: AtomicBool = AtomicBool::new(false);
static VERBOSE: AtomicBool = AtomicBool::new(false);

/// `-V`: also log the start-up steps.
pub fn set_verbose(on: bool) {
    VERBOSE.store(on, Ordering::Relaxed);
}

pub fn is_verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}

/// From now on messages go to syslog (stderr is about to be /dev/null).
pub fn to_syslog() {
    // SAFETY: IDENT is 'static, as openlog(3) requires.
    unsafe {
        libc::openlog(
            IDENT.as_ptr(),
            libc::LOG_PID | libc::LOG_NDELAY,
            libc::LOG_DAEMON,
        )
    };
    SYSLOG.store(true, Ordering::Relaxed);
}

pub fn error(msg: fmt::Arguments) {
    emit(libc::LOG_ERR, msg);
}

pub fn info(msg: fmt::Arguments) {
    emit(libc::LOG_INFO, msg);
}

/// Logged only under `-V`.
pub fn verbose(msg: fmt::Arguments) {
    if is_verbose() {
        emit(libc::LOG_INFO, msg);
    }
}

fn emit(priority: libc::c_int, msg: fmt::Arguments) {
    if !SYSLOG.load(Ordering::Relaxed) {
        eprintln!("xenstored-shim: {msg}");
        return;
    }
    let text = msg.to_string().replace('\0', " ");
    let text = CString::new(text).expect("NULs replaced");
    // SAFETY: a constant format taking one C string.
    unsafe { libc::syslog(priority, c"%s".as_ptr(), text.as_ptr()) };
}
