//! The pid file (`-F`): written by the daemon itself once it serves, so it
//! names the process that holds the socket; removed when it stops.

use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub struct PidFile {
    path: PathBuf,
}

impl PidFile {
    /// Writes this process's pid and a newline (mode 0600, as upstream),
    /// replacing any old file at once: it is written aside and renamed,
    /// so a reader never sees it empty or half written.
    pub fn write(path: &Path) -> io::Result<PidFile> {
        let ctx =
            |e: io::Error| io::Error::new(e.kind(), format!("pid file {}: {e}", path.display()));
        let mut aside = path.as_os_str().to_owned();
        aside.push(format!(".{}.tmp", std::process::id()));
        let aside = PathBuf::from(aside);
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&aside)
            .and_then(|mut f| f.write_all(format!("{}\n", std::process::id()).as_bytes()))
            .and_then(|()| std::fs::rename(&aside, path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&aside);
            return Err(ctx(e));
        }
        Ok(PidFile {
            path: path.to_path_buf(),
        })
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
