//! Driving the xsbench-probe-loop binary over its stdin/stdout protocol.

use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

pub struct ProbeLoop {
    pub binary: PathBuf,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl ProbeLoop {
    pub fn start(binary: &Path) -> Result<ProbeLoop> {
        let mut child = Command::new(binary)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("start {}", binary.display()))?;
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Ok(ProbeLoop {
            binary: binary.to_path_buf(),
            child,
            stdin,
            stdout,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn ask(&mut self, command: &str) -> Result<String> {
        writeln!(self.stdin, "{command}")?;
        self.stdin.flush()?;
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            bail!("probe loop exited");
        }
        Ok(line)
    }

    /// Fires one marker request/response pair.
    pub fn mark(&mut self) -> Result<()> {
        self.ask("mark")?;
        Ok(())
    }

    /// Fires events for `secs` at `rate` events/s in all (0: flat out)
    /// from `threads` threads: (events, ns).
    pub fn run(&mut self, secs: f64, rate: f64, threads: usize) -> Result<(u64, u128)> {
        let line = self.ask(&format!("run {secs} {rate} {threads}"))?;
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["done", events, ns] => Ok((events.parse()?, ns.parse()?)),
            _ => bail!("probe loop said {line:?}"),
        }
    }

    /// Fires flat out from one thread for `secs`: the firing rate as a
    /// sample (no latencies, no daemon).
    pub fn sample(&mut self, secs: f64) -> Result<crate::stats::Sample> {
        let (events, ns) = self.run(secs, 0.0, 1)?;
        Ok(crate::stats::Sample {
            ops: events,
            ops_per_s: events as f64 * 1e9 / ns as f64,
            p50_us: f64::NAN,
            p99_us: f64::NAN,
            daemon_cpu_us: f64::NAN,
        })
    }
}

impl Drop for ProbeLoop {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
