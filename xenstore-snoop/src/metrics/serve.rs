//! Where the metrics go: node_exporter's textfile directory, rewritten
//! whole each interval, and an HTTP /metrics endpoint on loopback unless
//! asked otherwise.

use anyhow::{bail, Context, Result};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file node_exporter reads in the textfile directory.
pub const TEXTFILE: &str = "xenstore.prom";

/// Writes `text` to DIR/xenstore.prom through a temporary name in the same
/// directory and a rename, so node_exporter never reads half a file.
pub fn write_textfile(dir: &Path, text: &str) -> Result<PathBuf> {
    let path = dir.join(TEXTFILE);
    // Not ending in .prom: node_exporter skips it.
    let tmp = dir.join(format!(".{TEXTFILE}.{}", std::process::id()));
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(path)
}

/// The /metrics endpoint.
pub struct Endpoint {
    server: tiny_http::Server,
    pub addr: SocketAddr,
}

impl Endpoint {
    /// Listens on `addr`; one not on loopback only with `any` (the
    /// metrics name every domain on the host).
    pub fn listen(addr: SocketAddr, any: bool) -> Result<Endpoint> {
        if !addr.ip().is_loopback() && !any {
            bail!(
                "--metrics-listen {addr}: not a loopback address; add --metrics-listen-any \
                 to serve the metrics beyond this host"
            );
        }
        let server = tiny_http::Server::http(addr)
            .map_err(|e| anyhow::anyhow!("--metrics-listen {addr}: {e}"))?;
        let addr = server
            .server_addr()
            .to_ip()
            .context("the endpoint's address")?;
        Ok(Endpoint { server, addr })
    }

    /// Answers the requests that arrive within `wait`: GET /metrics with
    /// `body()`, anything else 404.
    pub fn serve(&self, wait: Duration, body: &mut dyn FnMut() -> String) -> Result<()> {
        let Some(request) = self.server.recv_timeout(wait)? else {
            return Ok(());
        };
        let path = request.url().split('?').next().unwrap_or("");
        let response = if *request.method() == tiny_http::Method::Get && path == "/metrics" {
            let header = tiny_http::Header::from_bytes(
                "Content-Type",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )
            .expect("a valid header");
            tiny_http::Response::from_string(body()).with_header(header)
        } else {
            tiny_http::Response::from_string("xenstore-snoop serves /metrics only\n")
                .with_status_code(404)
        };
        // A client gone before its answer is its business.
        let _ = request.respond(response);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_unless_asked() {
        let any: SocketAddr = "0.0.0.0:0".parse().unwrap();
        let e = Endpoint::listen(any, false).err().expect("refused");
        assert!(e.to_string().contains("--metrics-listen-any"), "{e}");
        assert!(Endpoint::listen("127.0.0.1:0".parse().unwrap(), false).is_ok());
        assert!(Endpoint::listen(any, true).is_ok());
    }

    #[test]
    fn the_textfile_is_replaced_whole() {
        let dir = std::env::temp_dir().join(format!("xs-textfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write_textfile(&dir, "a 1\n").unwrap();
        let path = write_textfile(&dir, "a 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(path).unwrap(), "a 2\n");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [TEXTFILE], "no temporary left behind");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
