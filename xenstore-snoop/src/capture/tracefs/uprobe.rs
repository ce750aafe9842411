//! Uprobe events in tracefs: one group per snooper (`xssnoop_<pid>`), one
//! event per USDT probe, removed when the group is dropped.

use crate::sdt::SdtProbe;
use anyhow::{bail, Context, Result};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use xenstore_proto::probe::ARGS;
use xenstore_proto::Ident;

const GROUP_PREFIX: &str = "xssnoop_";

/// The tracefs to use: `chosen` (--tracefs or $TRACEFS) if given, else the
/// first mounted one of the usual places; a clear error says how to mount it.
pub fn tracefs(chosen: Option<&Path>) -> Result<PathBuf> {
    if let Some(dir) = chosen {
        if !dir.join("uprobe_events").exists() {
            bail!(
                "--tracefs {}: no uprobe_events there (not a tracefs mount, or not readable)",
                dir.display()
            );
        }
        return Ok(dir.to_path_buf());
    }
    for dir in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        let dir = Path::new(dir);
        if dir.join("uprobe_events").exists() {
            return Ok(dir.to_path_buf());
        }
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("tracefs is not accessible: run xenstore-snoop as root");
    }
    bail!(
        "tracefs is not mounted (or the kernel lacks CONFIG_UPROBE_EVENTS): \
         mount it with `mount -t tracefs nodev /sys/kernel/tracing`"
    )
}

/// The fetch arguments of one event, in the order of the probe contract:
/// serial, ident, client, extra, str1, str2, and `reply`'s str3 and
/// latency_ns when the note has them. The packed args are fetched
/// whole and split in user space: each extra fetch costs every firing
/// (~15 ns), so the kernel splits out only `dom`, and only when `dom_field`
/// asks for it (the in-kernel `-d` filter compares it).
pub fn fetch_args(args: &[String], dom_field: bool) -> Result<String> {
    if args.len() < ARGS.len() {
        bail!(
            "probe has {} arguments, the contract needs {}",
            args.len(),
            ARGS.len()
        );
    }
    let a: Vec<String> = args.iter().map(|s| location(s)).collect::<Result<_>>()?;
    let dom = if dom_field {
        // A bitfield fetch: WIDTH bits at SHIFT of the 64-bit ident.
        let f = Ident::DOM;
        format!("{}={}:b{}@{}/64 ", f.name, a[1], f.width, f.shift)
    } else {
        String::new()
    };
    let appended = match a.get(6..8) {
        Some([s3, latency]) => format!(" s3=+0({s3}):string latency_ns={latency}:u64"),
        _ => String::new(),
    };
    Ok(format!(
        "serial={0}:u64 {dom}ident={1}:u64 client={2}:u64 extra={3}:u64 \
         s1=+0({4}):string s2=+0({5}):string{appended}",
        a[0], a[1], a[2], a[3], a[4], a[5]
    ))
}

/// An stapsdt argument (`8@%rdi`, `-8@-16(%rbp)`) as a tracefs fetch location.
fn location(spec: &str) -> Result<String> {
    let loc = spec.split_once('@').map_or(spec, |(_, loc)| loc);
    let reg = |r: &str| -> Result<String> {
        let r = r
            .strip_prefix('%')
            .with_context(|| format!("unsupported USDT argument {spec:?}"))?;
        // The kernel names x86-64 registers without the r/e prefix (di, not rdi).
        let short = match r {
            "rax" | "rbx" | "rcx" | "rdx" | "rsi" | "rdi" | "rbp" | "rsp" | "rip" => &r[1..],
            _ => r,
        };
        Ok(format!("%{short}"))
    };
    match loc.split_once('(') {
        None => reg(loc),
        Some((disp, rest)) => {
            let base = reg(rest.trim_end_matches(')'))?;
            let disp: i64 = if disp.is_empty() {
                0
            } else {
                disp.parse()
                    .with_context(|| format!("unsupported USDT argument {spec:?}"))?
            };
            Ok(format!("+{disp}({base})").replace("+-", "-"))
        }
    }
}

/// One uprobe event as written to `uprobe_events`.
pub fn definition(group: &str, target: &Path, probe: &SdtProbe, dom_field: bool) -> Result<String> {
    let sema = if probe.semaphore != 0 {
        format!("({:#x})", probe.semaphore)
    } else {
        String::new()
    };
    Ok(format!(
        "p:{group}/{} {}:{:#x}{sema} {}",
        probe.name,
        target.display(),
        probe.offset,
        fetch_args(&probe.args, dom_field).with_context(|| format!("probe {}", probe.name))?
    ))
}

/// This snooper's uprobe group; its events are deleted on drop.
pub struct Group {
    pub tracefs: PathBuf,
    pub name: String,
    pub events: Vec<String>,
    /// Whether events carry a `dom` field for the kernel filter.
    pub dom_field: bool,
}

impl Group {
    pub fn new(tracefs: PathBuf, dom_field: bool) -> Group {
        Group {
            tracefs,
            name: format!("{GROUP_PREFIX}{}", std::process::id()),
            events: Vec::new(),
            dom_field,
        }
    }

    /// Defines one event for `probe` on the binary `target`.
    pub fn add(&mut self, target: &Path, probe: &SdtProbe) -> Result<()> {
        let def = definition(&self.name, target, probe, self.dom_field)?;
        append(&self.tracefs.join("uprobe_events"), &def)
            .with_context(|| format!("defining uprobe `{def}`"))?;
        self.events.push(probe.name.clone());
        Ok(())
    }

    pub fn event_dir(&self, event: &str) -> PathBuf {
        self.tracefs.join("events").join(&self.name).join(event)
    }

    pub fn remove(&mut self) -> Result<()> {
        let file = self.tracefs.join("uprobe_events");
        for event in std::mem::take(&mut self.events) {
            append(&file, &format!("-:{}/{event}", self.name))
                .with_context(|| format!("removing uprobe {}/{event}", self.name))?;
        }
        Ok(())
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            eprintln!("xenstore-snoop: {e:#}");
        }
    }
}

fn append(file: &Path, line: &str) -> std::io::Result<()> {
    let mut f = OpenOptions::new().append(true).open(file)?;
    f.write_all(format!("{line}\n").as_bytes())
}

/// How long a dead snooper's events may stay busy: the kernel releases a
/// SIGKILLed process's perf events after its exit (deferred frees), not at it.
const STALE_BUSY_WAIT: Duration = Duration::from_secs(10);

/// Deletes the events of snoopers that died without cleaning up (SIGKILL).
/// Returns the groups removed; warns about any still busy after
/// [`STALE_BUSY_WAIT`].
///
/// Passes over uprobe_events until two in a row find no stale event: the
/// file is a seq_file read a page at a time, so while other snoopers add or remove
/// events a read can skip lines, and an event still busy on one pass is
/// looked at again on the next.
pub fn remove_stale_groups(tracefs: &Path) -> Result<Vec<String>> {
    let file = tracefs.join("uprobe_events");
    let deadline = Instant::now() + STALE_BUSY_WAIT;
    let mut pause = Duration::from_millis(1);
    let mut removed = Vec::new();
    let mut clean_reads = 0;
    loop {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let stale = stale_events(&text, snooper_alive);
        if stale.is_empty() {
            // Twice in a row: one read torn by a concurrent change could
            // have missed the very lines left.
            clean_reads += 1;
            if clean_reads == 2 {
                return Ok(removed);
            }
            continue;
        }
        clean_reads = 0;
        let mut busy = Vec::new();
        for (group, event) in stale {
            match append(&file, &format!("-:{group}/{event}")) {
                Ok(()) => {
                    if !removed.contains(&group) {
                        removed.push(group);
                    }
                }
                // Another snooper starting at the same time removed it first.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                // The dead owner's perf events are still being released.
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    busy.push(format!("{group}/{event}"))
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("removing stale uprobe {group}/{event}"))
                }
            }
        }
        if Instant::now() >= deadline {
            if !busy.is_empty() {
                eprintln!(
                    "xenstore-snoop: stale uprobes still busy after {STALE_BUSY_WAIT:?}, left in place: {}",
                    busy.join(" ")
                );
            }
            return Ok(removed);
        }
        // Busy: give the kernel time. Otherwise read again at once: this
        // pass may not have seen every line.
        if !busy.is_empty() {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }
}

/// (group, event) of every uprobe of ours whose owner is not alive.
fn stale_events(uprobe_events: &str, alive: impl Fn(u32) -> bool) -> Vec<(String, String)> {
    uprobe_events
        .lines()
        .filter_map(|line| {
            let name = line.split_whitespace().next()?.split_once(':')?.1;
            let (group, event) = name.split_once('/')?;
            let pid: u32 = group.strip_prefix(GROUP_PREFIX)?.parse().ok()?;
            (!alive(pid)).then(|| (group.to_string(), event.to_string()))
        })
        .collect()
}

fn snooper_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    // A zombie holds no perf fds; a reused pid running something else does
    // not own the group.
    crate::target::alive(pid)
        && std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|comm| comm.trim() == "xenstore-snoop")
            .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_use_kernel_register_names() {
        assert_eq!(location("8@%rdi").unwrap(), "%di");
        assert_eq!(location("8@%r9").unwrap(), "%r9");
        assert_eq!(location("-8@-16(%rbp)").unwrap(), "-16(%bp)");
        assert_eq!(location("8@8(%rsp)").unwrap(), "+8(%sp)");
        assert!(location("8@$5").is_err());
    }

    #[test]
    fn definition_fetches_packed_args_whole() {
        let probe = SdtProbe {
            provider: "xenstore".into(),
            name: "request".into(),
            offset: 0x1753a,
            semaphore: 0x5b8a8,
            args: ["%rdi", "%rsi", "%rdx", "%rcx", "%r8", "%r9"]
                .map(|r| format!("8@{r}"))
                .to_vec(),
        };
        let def = definition("xssnoop_1", Path::new("/proc/7/exe"), &probe, false).unwrap();
        assert_eq!(
            def,
            "p:xssnoop_1/request /proc/7/exe:0x1753a(0x5b8a8) serial=%di:u64 \
             ident=%si:u64 client=%dx:u64 extra=%cx:u64 \
             s1=+0(%r8):string s2=+0(%r9):string"
        );
        let reply = SdtProbe {
            name: "reply".into(),
            args: ["%rdi", "%rsi", "%rdx", "%rcx", "%r8", "%r9", "%r10", "%r11"]
                .map(|r| format!("8@{r}"))
                .to_vec(),
            ..probe.clone()
        };
        let def = definition("xssnoop_1", Path::new("/proc/7/exe"), &reply, false).unwrap();
        assert!(
            def.ends_with(" s2=+0(%r9):string s3=+0(%r10):string latency_ns=%r11:u64"),
            "{def}"
        );
        // The in-kernel domain filter needs dom as a field of its own.
        let def = definition("xssnoop_1", Path::new("/proc/7/exe"), &probe, true).unwrap();
        assert!(
            def.contains("serial=%di:u64 dom=%si:b16@0/64 ident=%si:u64 "),
            "{def}"
        );
    }

    #[test]
    fn stale_groups_are_those_of_dead_snoopers() {
        let text = "p:xssnoop_10/request /proc/1/exe:0x1 serial=%di:u64\n\
                    p:xssnoop_10/response /proc/1/exe:0x2 serial=%di:u64\n\
                    p:xssnoop_11/request /proc/1/exe:0x1 serial=%di:u64\n\
                    p:other/request /bin/true:0x1\n";
        let stale = stale_events(text, |pid| pid == 11);
        assert_eq!(
            stale,
            [
                ("xssnoop_10".to_string(), "request".to_string()),
                ("xssnoop_10".to_string(), "response".to_string())
            ]
        );
    }
}
