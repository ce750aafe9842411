//! The classic trace file (`xenstored -T FILE`), in C xenstored's format:
//! `IN|OUT <conn> YYYYMMDD HH:MM:SS TYPE (payload with NULs as spaces)`
//! per message, `CREATE connection <conn>` and `DESTROY connection
//! <conn>`, `\n***\n` each time the file is opened. `<conn>` is the
//! connection id in hex where C prints a pointer. OUT lines are written
//! when a reply or watch event is queued. Off unless `open` was called:
//! then one relaxed load per message.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static ON: AtomicBool = AtomicBool::new(false);
static SINK: Mutex<Option<Sink>> = Mutex::new(None);

struct Sink {
    path: PathBuf,
    file: File,
}

/// Starts tracing to `path` (appended to, mode 0600 when created).
pub fn open(path: &Path) -> io::Result<()> {
    let file = open_file(path)?;
    *SINK.lock().unwrap_or_else(|e| e.into_inner()) = Some(Sink {
        path: path.to_path_buf(),
        file,
    });
    ON.store(true, Ordering::Relaxed);
    Ok(())
}

/// Opens the file again by its name (SIGHUP, after log rotation).
pub fn reopen() -> io::Result<()> {
    let mut sink = SINK.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(sink) = sink.as_mut() {
        sink.file = open_file(&sink.path)?;
    }
    Ok(())
}

fn open_file(path: &Path) -> io::Result<File> {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("trace file {}: {e}", path.display())))?;
    file.write_all(b"\n***\n")?;
    Ok(file)
}

/// A message read from (`out` false) or queued for connection `conn`.
#[inline]
pub fn message(out: bool, conn: u32, ty: u32, parts: &[&[u8]]) {
    if ON.load(Ordering::Relaxed) {
        write_message(out, conn, ty, parts);
    }
}

/// A connection was created (`created`) or destroyed.
#[inline]
pub fn connection(created: bool, conn: u32) {
    if ON.load(Ordering::Relaxed) {
        let what = if created { "CREATE" } else { "DESTROY" };
        write(format!("{what} connection {conn:#x}\n").as_bytes());
    }
}

fn write_message(out: bool, conn: u32, ty: u32, parts: &[&[u8]]) {
    let name = crate::wire::msg_name(ty).map_or("**UNKNOWN**", |n| &n[3..]);
    let mut line = format!(
        "{} {conn:#x} {} {name} (",
        if out { "OUT" } else { "IN" },
        local_time()
    )
    .into_bytes();
    for part in parts {
        line.extend(part.iter().map(|&b| if b == 0 { b' ' } else { b }));
    }
    line.extend_from_slice(b")\n");
    write(&line);
}

fn write(bytes: &[u8]) {
    if let Some(sink) = SINK.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        // A full disk must not stop the daemon; C ignores these too.
        let _ = sink.file.write_all(bytes);
    }
}

/// Now as C's trace prints it: "YYYYMMDD HH:MM:SS", local time.
fn local_time() -> String {
    // SAFETY: time(NULL) and localtime_r into a zeroed tm we own.
    let tm = unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&now, &mut tm);
        tm
    };
    format!(
        "{:04}{:02}{:02} {:02}:{:02}:{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}
