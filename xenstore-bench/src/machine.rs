//! What the figures were measured on.

pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub kernel: String,
    pub date: String,
    pub load: String,
    /// Tracers running at the start that are not ours: they tax every
    /// figure (a bpftrace on syscalls slows every daemon's sendto).
    pub foreign_tracers: Vec<String>,
}

fn command(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

impl Machine {
    pub fn describe() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
            .unwrap_or_else(|| "?".into());
        Machine {
            cpus: crate::affinity::cpus(),
            cpu_model,
            kernel: command("uname", &["-r"]),
            date: command("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
            load: load(),
            foreign_tracers: foreign_tracers(),
        }
    }
}

/// The 1-minute load average now.
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// Running bpftrace, xenstore-snoop, perf or stap processes, and uprobe
/// events defined in tracefs.
pub fn foreign_tracers() -> Vec<String> {
    let mut found = Vec::new();
    let tracer_names = ["bpftrace", "xenstore-snoop", "perf", "stap"];
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let pid = entry.file_name().to_string_lossy().into_owned();
            if !pid.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
            if tracer_names.contains(&comm.trim()) {
                let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                found.push(format!("pid {pid}: {}", cmdline.trim()));
            }
        }
    }
    let uprobes = std::fs::read_to_string("/sys/kernel/tracing/uprobe_events").unwrap_or_default();
    let n = uprobes.lines().filter(|l| !l.trim().is_empty()).count();
    if n > 0 {
        found.push(format!("{n} uprobe events defined in tracefs"));
    }
    found
}
