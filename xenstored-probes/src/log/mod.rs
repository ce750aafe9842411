//! Start-up and error messages: to stderr while the daemon runs in the
//! foreground, to syslog (facility daemon) once it has detached, as C
//! xenstored does. Notable events (`notable.rs`) go to the journal with
//! their fields whenever journald listens, and where the others go too
//! unless that is the journal already.

pub mod journal;
pub mod notable;

use std::ffi::CString;
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use self::journal::Journal;
use self::notable::Notable;

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

/// Logs a notable event. In the foreground: to the journal with its
/// fields when journald listens, and to stderr unless stderr is the
/// journal. Detached: to the journal natively when syslog's /dev/log is
/// journald's, else to syslog as any message.
pub fn notable(event: Notable) {
    let detached = SYSLOG.load(Ordering::Relaxed);
    let fields = fields(&event);
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let try_journal = !detached || syslog_is_journal();
    let sent = try_journal && journal().is_some_and(|j| j.send(&fields).is_ok());
    if !sent || (!detached && !stderr_is_journal()) {
        emit(event.kind.priority(), format_args!("{}", event.message));
    }
}

fn journal() -> Option<&'static Journal> {
    static JOURNAL: OnceLock<Option<Journal>> = OnceLock::new();
    JOURNAL.get_or_init(|| Journal::new().ok()).as_ref()
}

fn fields(e: &Notable) -> Vec<(&'static str, String)> {
    let mut f = vec![
        ("MESSAGE", e.message.clone()),
        ("PRIORITY", e.kind.priority().to_string()),
        ("MESSAGE_ID", e.kind.message_id().to_string()),
        ("SYSLOG_IDENTIFIER", "xenstored-shim".to_string()),
    ];
    let optional = [
        ("XS_DOMID", e.domid.map(|d| d.to_string())),
        ("XS_OP", e.op.map(str::to_string)),
        ("XS_QUOTA", e.quota.map(str::to_string)),
        ("XS_REASON", e.reason.map(str::to_string)),
    ];
    f.extend(optional.into_iter().filter_map(|(k, v)| Some((k, v?))));
    f
}

/// Debian's systemd links /dev/log to journald's syslog socket.
fn syslog_is_journal() -> bool {
    let id = |p: &str| std::fs::metadata(p).map(|m| (m.dev(), m.ino())).ok();
    let dev_log = id("/dev/log");
    dev_log.is_some() && dev_log == id("/run/systemd/journal/dev-log")
}

/// systemd sets $JOURNAL_STREAM to stderr's device:inode when it connects
/// stderr to the journal (systemd.exec(5)).
fn stderr_is_journal() -> bool {
    let Some(want) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    // SAFETY: libc::stat is plain data, valid all zeroes.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat on fd 2 into a stat of the right size.
    if unsafe { libc::fstat(2, &mut st) } != 0 {
        return false;
    }
    want.to_str() == Some(&format!("{}:{}", st.st_dev, st.st_ino))
}
