//! The pid file (`-F`): written by the daemon itself once it serves, so it
//! names the process that holds the socket; removed when it stops.

use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub struct PidFile {
    path: PathBuf,
}

impl PidFile {
    /// Writes this process's pid and a newline, replacing any old content
    /// (mode 0600 when created, as upstream).
    pub fn write(path: &Path) -> io::Result<PidFile> {
        let ctx =
            |e: io::Error| io::Error::new(e.kind(), format!("pid file {}: {e}", path.display()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .map_err(ctx)?;
        file.write_all(format!("{}\n", std::process::id()).as_bytes())
            .map_err(ctx)?;
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
