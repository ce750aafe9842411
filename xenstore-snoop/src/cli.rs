//! The command line: every flag, in one place.

use clap::builder::ArgPredicate;
use clap::Parser;
use std::path::PathBuf;

/// What --metrics (or an output of it) cannot be combined with.
const METRICS_CONFLICTS: [&str; 11] = [
    "summary",
    "json",
    "write",
    "read",
    "count",
    "paired",
    "follow",
    "backend",
    "top",
    "timeline",
    "timeline_json",
];

const EXAMPLES: &str = "\
Examples:
  xenstore-snoop                      # every request of the running xenstored-shim
  xenstore-snoop -d 6                 # only domain 6 (filtered in the kernel)
  xenstore-snoop -x                   # only failed requests ([ERROR] lines)
  xenstore-snoop --op READ,WRITE --path '^/local/domain/6/device'
  xenstore-snoop -p 4242              # only the dom0 client with pid 4242
  xenstore-snoop -n xl -n xenstore-write  # only these dom0 programs (COMM) or guests by name
  xenstore-snoop --follow             # keep tracing across daemon restarts and live updates
  xenstore-snoop -T -L                # wall-clock timestamps and latency (µs)
  xenstore-snoop --json | jq .        # JSON lines
  xenstore-snoop --summary --interval 5 --duration 60
  xenstore-snoop --top                # who is busy: a view refreshed every second (q quits)
  xenstore-snoop -r boot.jsonl --timeline boot.html --timeline-json boot.trace.json
  xenstore-snoop --metrics-listen 127.0.0.1:9464   # a Prometheus exporter
  xenstore-snoop --daemon-pid 1234    # pick one of several daemons
  xenstore-snoop -w trace.jsonl       # show and record (all records, before the filters)
  xenstore-snoop -r trace.jsonl -x    # replay: the failures in the recorded trace
  xenstore-snoop -r trace.jsonl --summary --interval 10";

/// Trace the requests a running xenstored-shim serves, live
///
/// Attaches to the xenstore USDT probes of the running daemon without
/// restarting it (a BPF program, or tracefs uprobes) and prints
/// one line per request and reply, or JSON lines, or summary tables.
/// Needs root.
#[derive(Parser, Debug, Clone)]
#[command(name = "xenstore-snoop", version, after_help = EXAMPLES)]
#[command(group(clap::ArgGroup::new("interval_modes")
    .args(["summary", "metrics", "metrics_textfile", "metrics_listen", "top"]).multiple(true)))]
// An output implies --metrics (clap checks conflicts only for flags given,
// so the outputs carry --metrics' conflicts too).
#[command(group(clap::ArgGroup::new("metrics_outputs")
    .args(["metrics_textfile", "metrics_listen"]).multiple(true)
    .conflicts_with_all(METRICS_CONFLICTS)))]
pub struct Args {
    /// Trace this daemon process (default: the one running xenstored-shim)
    #[arg(long, value_name = "PID")]
    pub daemon_pid: Option<u32>,

    /// The daemon's binary (default: the one the daemon process runs)
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,

    /// Only this domain (repeatable); filtered in the kernel
    #[arg(short = 'd', long = "domain", value_name = "DOMID")]
    pub domains: Vec<u16>,

    /// Only this dom0 client pid (repeatable)
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,

    /// Only this client name (repeatable): a dom0 client's command name
    /// (comm, as when it connected) or a guest's domain name
    #[arg(short = 'n', long = "name", value_name = "NAME")]
    pub names: Vec<String>,

    /// Only failed requests
    #[arg(short = 'x', long)]
    pub failed: bool,

    /// Only these ops, comma-separated (READ,WRITE or XS_READ,...)
    #[arg(long = "op", value_name = "OPS", value_delimiter = ',')]
    pub ops: Vec<String>,

    /// Only requests whose path matches this regex. A guest's relative
    /// paths are matched as the daemon resolves them (under
    /// /local/domain/<id>), though shown as sent
    #[arg(long, value_name = "REGEX")]
    pub path: Option<String>,

    /// Do not show watch events
    #[arg(long)]
    pub no_watch_events: bool,

    /// Keep tracing when the daemon exits (wait for the next process running
    /// its binary) or execs a new binary (a live update): attach to it, and
    /// say how long the gap was
    #[arg(long)]
    pub follow: bool,

    /// Exit after N lines (or N requests with --summary, N refreshes with --top)
    #[arg(short = 'c', long, value_name = "N")]
    pub count: Option<u64>,

    /// Exit after SECS seconds
    #[arg(long, value_name = "SECS", value_parser = positive_secs)]
    pub duration: Option<f64>,

    /// Add a wall-clock timestamp column (µs)
    #[arg(short = 'T', long, conflicts_with = "relative")]
    pub timestamp: bool,

    /// Add a column of seconds since the snooper started
    #[arg(long)]
    pub relative: bool,

    /// Add a request-to-reply latency column (µs)
    #[arg(short = 'L', long)]
    pub latency: bool,

    /// Show error reasons, connection and transaction-end events
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// One JSON object per line instead of text
    #[arg(long, conflicts_with = "summary")]
    pub json: bool,

    /// Print summary tables (per op, per domain, top paths, watch fan-out) instead of lines
    #[arg(long)]
    pub summary: bool,

    /// A full-screen view refreshed in place every second (or --interval): per guest
    /// and per dom0 process requests/s, errors/s, watch events/s, transactions/s,
    /// EAGAINs, p99 latency, quota use, and the hottest paths; keys sort (r e w l n),
    /// filter by domain (d), pause (p) and quit (q). Plain text frames when standard
    /// output is not a terminal. With -r, the trace plays at the speed it was recorded
    #[arg(long, conflicts_with_all = ["json", "summary", "metrics"])]
    pub top: bool,

    /// Also draw what is shown as a timeline in FILE, written at the end: one
    /// self-contained HTML page (swimlanes per guest and dom0 process, devices'
    /// XenbusState, watch flows; zoom, pan, hover)
    #[arg(long, value_name = "FILE", conflicts_with = "metrics")]
    pub timeline: Option<PathBuf>,

    /// Also write the timeline to FILE in Chrome's trace event format (Perfetto,
    /// chrome://tracing), at the end
    #[arg(long, value_name = "FILE", conflicts_with = "metrics")]
    pub timeline_json: Option<PathBuf>,

    /// With --summary: every SECS seconds also print the tables with each op's and domain's
    /// rate over the interval (requests/s) beside the running totals. With --metrics: how
    /// often the metrics are refreshed (default 15). With --top: how often it refreshes
    /// (default 1)
    #[arg(long, value_name = "SECS", requires = "interval_modes", value_parser = positive_secs)]
    pub interval: Option<f64>,

    /// Run as a Prometheus exporter: count in the kernel (per op and result, per domain,
    /// latency, watch events, transaction outcomes) and read each domain's quotas, written
    /// to --metrics-textfile and/or served on --metrics-listen, until stopped (BPF only);
    /// either of those alone implies it
    #[arg(long, conflicts_with_all = METRICS_CONFLICTS, requires = "metrics_outputs",
          default_value_ifs = [("metrics_textfile", ArgPredicate::IsPresent, "true"),
                               ("metrics_listen", ArgPredicate::IsPresent, "true")])]
    pub metrics: bool,

    /// Export metrics (implies --metrics): write DIR/xenstore.prom every interval
    /// (node_exporter's textfile collector; written to a temporary name in DIR and renamed)
    #[arg(long, value_name = "DIR")]
    pub metrics_textfile: Option<PathBuf>,

    /// Export metrics (implies --metrics): serve GET /metrics on ADDR (e.g.
    /// 127.0.0.1:9464); a loopback address unless --metrics-listen-any
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,

    /// Allow --metrics-listen on an address other hosts reach
    #[arg(long, requires = "metrics_listen")]
    pub metrics_listen_any: bool,

    /// With --metrics: domains with series of their own; the rest are summed under
    /// domid="other" and counted in xenstore_domains_over_cap
    #[arg(long, value_name = "N", default_value_t = 1024, requires = "metrics_outputs",
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub metrics_max_domains: u32,

    /// The daemon's dom0 socket, for --metrics' domain names and quotas (default: the
    /// one the daemon listens on)
    #[arg(long, value_name = "PATH", requires = "metrics_outputs")]
    pub socket: Option<PathBuf>,

    /// Also write every record, before the filters, to FILE (a trace: JSON lines, see
    /// TRACE FILES in the man page); the output is unchanged
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub write: Option<PathBuf>,

    /// Replay a trace written with -w (- for standard input) instead of tracing a daemon:
    /// the same filters and output; --duration and --interval count trace time
    #[arg(short = 'r', long = "read", value_name = "FILE",
          conflicts_with_all = ["write", "daemon_pid", "binary", "ring_mb", "follow"])]
    pub read: Option<PathBuf>,

    /// The tracefs mount to define uprobes in (default: /sys/kernel/tracing,
    /// else /sys/kernel/debug/tracing)
    #[arg(long, value_name = "PATH", env = "TRACEFS")]
    pub tracefs: Option<PathBuf>,

    /// Ring buffer size in MiB, rounded up to a power of two (bpf: the one
    /// ring; tracefs: each CPU's)
    #[arg(long, value_name = "MIB", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub ring_mb: u32,

    /// Attach the request and response probes and pair them, instead of
    /// the one reply probe: shows requests never answered (ending "?"), at
    /// twice the probe firings (the default on a daemon without reply)
    #[arg(long)]
    pub paired: bool,

    /// Capture with BPF or tracefs uprobes (default: bpf if the kernel loads it, else tracefs);
    /// the last one given wins
    #[arg(long, value_name = "BACKEND", value_enum, overrides_with = "backend")]
    pub backend: Option<Backend>,

    /// How the BPF back end attaches: auto (one uprobe-multi link for the
    /// daemon alone where the kernel has them, filtering by process: 6.9
    /// and later, as the kernel answers; else per-site), multi, or
    /// per-site (a uprobe link each, which also traps
    /// in other processes running the same binary)
    #[arg(long, value_name = "LINKS", value_enum, default_value_t = BpfLinks::Auto)]
    pub bpf_links: BpfLinks,
}

/// How probe firings are captured (see capture/mod.rs).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A BPF program writing a BPF ring buffer, filtering in the kernel
    Bpf,
    /// tracefs uprobe events read through per-CPU perf rings
    Tracefs,
}

/// How the BPF program is attached to the probe sites (see capture/bpf/mod.rs).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BpfLinks {
    /// multi where the kernel has it, else per-site
    Auto,
    /// one uprobe-multi link for all the sites, the daemon's process alone
    Multi,
    /// a uprobe link per site, for every process mapping the binary
    PerSite,
}

impl Args {
    /// How text lines look, from the flags (live and replayed alike).
    pub fn text_style(&self) -> crate::output::TextStyle {
        use crate::output::{TextStyle, TimeColumn};
        TextStyle {
            time: if self.timestamp {
                TimeColumn::Wall
            } else if self.relative {
                TimeColumn::Relative
            } else {
                TimeColumn::None
            },
            latency: self.latency,
            verbose: self.verbose,
        }
    }

    /// Whether anything shown or written needs the time each probe fired:
    /// a time column, JSON, a trace file, or latencies the snooper takes
    /// from a request's and its response's firings (`paired`; `reply`
    /// carries its own). Without, the BPF back end reads no clock.
    pub fn needs_firing_times(&self, paired: bool) -> bool {
        self.timestamp
            || self.relative
            || self.json
            || self.write.is_some()
            || self.timeline.is_some()
            || self.timeline_json.is_some()
            || (paired && (self.latency || self.summary))
    }
}

/// A duration in seconds: finite and above zero.
fn positive_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v < 1e9 => Ok(v),
        _ => Err(format!("{s:?} is not a positive number of seconds")),
    }
}

pub fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn flags_parse() {
        let a = Args::try_parse_from([
            "xenstore-snoop",
            "-d",
            "6",
            "-d",
            "7",
            "--op",
            "READ,write",
            "-xTL",
            "-c",
            "5",
        ])
        .unwrap();
        assert_eq!(a.domains, [6, 7]);
        assert_eq!(a.ops, ["READ", "write"]);
        assert!(a.failed && a.timestamp && a.latency);
        assert_eq!(a.count, Some(5));
        assert!(Args::try_parse_from(["xenstore-snoop", "-T", "--relative"]).is_err());
        assert!(Args::try_parse_from(["xenstore-snoop", "--interval", "1"]).is_err());
        // --metrics needs somewhere to put them, and no line output.
        assert!(Args::try_parse_from(["xenstore-snoop", "--metrics"]).is_err());
        let m = [
            "xenstore-snoop",
            "--metrics",
            "--metrics-listen",
            "127.0.0.1:9464",
        ];
        assert!(Args::try_parse_from(m).unwrap().metrics);
        assert!(Args::try_parse_from([&m[..], &["--json"]].concat()).is_err());
        assert!(Args::try_parse_from([&m[..], &["--backend", "tracefs"]].concat()).is_err());
        assert!(Args::try_parse_from([&m[..], &["--interval", "5"]].concat()).is_ok());
        // An output alone implies --metrics, and brings its conflicts.
        let t = Args::try_parse_from(["xenstore-snoop", "--metrics-textfile", "d"]).unwrap();
        assert!(t.metrics);
        let l = ["xenstore-snoop", "--metrics-listen", "127.0.0.1:9464"];
        assert!(Args::try_parse_from(l).unwrap().metrics);
        assert!(Args::try_parse_from([&l[..], &["--interval", "5"]].concat()).is_ok());
        assert!(Args::try_parse_from([&l[..], &["--socket", "s"]].concat()).is_ok());
        for clash in ["--json", "--follow", "--summary", "--paired"] {
            let args = [&l[..], &[clash]].concat();
            assert!(Args::try_parse_from(args).is_err(), "{clash}");
        }
        assert!(!Args::try_parse_from(["xenstore-snoop"]).unwrap().metrics);
        assert!(Args::try_parse_from(["xenstore-snoop", "--socket", "s"]).is_err());
        for bad in ["-1", "0", "NaN", "inf", "x"] {
            assert!(Args::try_parse_from(["xenstore-snoop", "--duration", bad]).is_err());
        }
        let a = Args::try_parse_from(["xenstore-snoop", "--duration", "0.5"]).unwrap();
        assert_eq!(a.duration, Some(0.5));
        let a = Args::try_parse_from(["xenstore-snoop", "-r", "t", "-x", "--summary"]).unwrap();
        assert_eq!(a.read.as_deref(), Some(std::path::Path::new("t")));
        for clash in [["-w", "u"], ["--daemon-pid", "1"], ["--ring-mb", "2"]] {
            let args = [&["xenstore-snoop", "-r", "t"][..], &clash[..]].concat();
            assert!(Args::try_parse_from(args).is_err(), "{clash:?}");
        }
    }
}

/// The man page: clap's sections around the hand-written ones in man.roff.
#[cfg(test)]
fn man_page() -> String {
    let man = clap_mangen::Man::new(command()).date("");
    let mut out = Vec::new();
    man.render_title(&mut out).unwrap();
    man.render_name_section(&mut out).unwrap();
    out.extend_from_slice(synopsis().as_bytes());
    man.render_description_section(&mut out).unwrap();
    man.render_options_section(&mut out).unwrap();
    out.extend_from_slice(include_bytes!("../man.roff"));
    // The --help examples, verbatim.
    out.extend_from_slice(b".SH EXAMPLES\n.nf\n");
    for line in EXAMPLES.lines().skip(1) {
        let roff = line.trim_start().replace('\\', "\\\\").replace('-', "\\-");
        out.extend_from_slice(format!("{roff}\n").as_bytes());
    }
    out.extend_from_slice(b".fi\n");
    man.render_version_section(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// SYNOPSIS with every option's argument name (clap_mangen leaves them out).
#[cfg(test)]
fn synopsis() -> String {
    let roff = |s: &str| s.replace('-', "\\-");
    let mut cmd = command();
    cmd.build();
    let mut out = String::from(".SH SYNOPSIS\n\\fBxenstore\\-snoop\\fR");
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let mut flag = match (arg.get_short(), arg.get_long()) {
            (Some(s), Some(l)) => format!("\\fB\\-{s}\\fR|\\fB\\-\\-{}\\fR", roff(l)),
            (None, Some(l)) => format!("\\fB\\-\\-{}\\fR", roff(l)),
            (Some(s), None) => format!("\\fB\\-{s}\\fR"),
            (None, None) => continue,
        };
        if arg.get_action().takes_values() {
            if let Some(name) = arg.get_value_names().and_then(|n| n.first()) {
                flag.push_str(&format!(" \\fI{}\\fR", roff(name)));
            }
        }
        let repeat = matches!(arg.get_action(), clap::ArgAction::Append);
        out.push_str(&format!(" [{flag}]{}", if repeat { "..." } else { "" }));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod man_tests {
    /// man/xenstore-snoop.1 is generated from the CLI; regenerate with
    /// `XS_UPDATE_MAN=1 cargo test -p xenstore-snoop man_page`.
    #[test]
    fn man_page_is_in_step_with_the_cli() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../man/xenstore-snoop.1");
        let want = super::man_page();
        if std::env::var_os("XS_UPDATE_MAN").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &want).unwrap();
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{} is out of date: run XS_UPDATE_MAN=1 cargo test -p xenstore-snoop man_page",
            path.display()
        );
        for arg in super::command().get_arguments() {
            if let Some(long) = arg.get_long() {
                let roff = format!("\\-\\-{}", long.replace('-', "\\-"));
                assert!(have.contains(&roff), "--{long} missing from the man page");
            }
        }
    }

    /// completions/ holds clap's completion scripts for bash, zsh and fish;
    /// regenerate with `XS_UPDATE_MAN=1 cargo test -p xenstore-snoop completions`.
    #[test]
    fn completions_are_in_step_with_the_cli() {
        use clap_complete::Shell;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("completions");
        for (shell, file) in [
            (Shell::Bash, "xenstore-snoop.bash"),
            (Shell::Zsh, "_xenstore-snoop"),
            (Shell::Fish, "xenstore-snoop.fish"),
        ] {
            let mut want = Vec::new();
            clap_complete::generate(shell, &mut super::command(), "xenstore-snoop", &mut want);
            let path = dir.join(file);
            if std::env::var_os("XS_UPDATE_MAN").is_some() {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &want).unwrap();
            }
            let have = std::fs::read(&path).unwrap_or_default();
            assert!(
                have == want,
                "{} is out of date: run XS_UPDATE_MAN=1 cargo test -p xenstore-snoop completions",
                path.display()
            );
            let text = String::from_utf8(want).unwrap();
            assert!(text.contains("daemon-pid"), "{shell}: {text}");
        }
    }
}
