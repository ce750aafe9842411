complete -c xenstore-snoop -l daemon-pid -d 'Trace this daemon process (default: the one running xenstored-shim)' -r
complete -c xenstore-snoop -l binary -d 'The daemon\'s binary (default: the one the daemon process runs)' -r -F
complete -c xenstore-snoop -s d -l domain -d 'Only this domain (repeatable); filtered in the kernel' -r
complete -c xenstore-snoop -s p -l pid -d 'Only this dom0 client pid (repeatable)' -r
complete -c xenstore-snoop -s n -l name -d 'Only this client name (repeatable): a dom0 client\'s command name (comm, as when it connected) or a guest\'s domain name' -r
complete -c xenstore-snoop -l op -d 'Only these ops, comma-separated (READ,WRITE or XS_READ,...)' -r
complete -c xenstore-snoop -l path -d 'Only requests whose path matches this regex. A guest\'s relative paths are matched as the daemon resolves them (under /local/domain/<id>), though shown as sent' -r
complete -c xenstore-snoop -s c -l count -d 'Exit after N lines (or N requests with --summary, N refreshes with --top)' -r
complete -c xenstore-snoop -l duration -d 'Exit after SECS seconds' -r
complete -c xenstore-snoop -l timeline -d 'Also draw what is shown as a timeline in FILE, written at the end: one self-contained HTML page (swimlanes per guest and dom0 process, devices\' XenbusState, watch flows; zoom, pan, hover)' -r -F
complete -c xenstore-snoop -l timeline-json -d 'Also write the timeline to FILE in Chrome\'s trace event format (Perfetto, chrome://tracing), at the end' -r -F
complete -c xenstore-snoop -l interval -d 'With --summary: every SECS seconds also print the tables with each op\'s and domain\'s rate over the interval (requests/s) beside the running totals. With --metrics: how often the metrics are refreshed (default 15). With --top: how often it refreshes (default 1)' -r
complete -c xenstore-snoop -l metrics-textfile -d 'Export metrics (implies --metrics): write DIR/xenstore.prom every interval (node_exporter\'s textfile collector; written to a temporary name in DIR and renamed)' -r -F
complete -c xenstore-snoop -l metrics-listen -d 'Export metrics (implies --metrics): serve GET /metrics on ADDR (e.g. 127.0.0.1:9464); a loopback address unless --metrics-listen-any' -r
complete -c xenstore-snoop -l metrics-max-domains -d 'With --metrics: domains with series of their own; the rest are summed under domid="other" and counted in xenstore_domains_over_cap' -r
complete -c xenstore-snoop -l socket -d 'The daemon\'s dom0 socket, for --metrics\' domain names and quotas (default: the one the daemon listens on)' -r -F
complete -c xenstore-snoop -s w -l write -d 'Also write every record, before the filters, to FILE (a trace: JSON lines, see TRACE FILES in the man page); the output is unchanged' -r -F
complete -c xenstore-snoop -s r -l read -d 'Replay a trace written with -w (- for standard input) instead of tracing a daemon: the same filters and output; --duration and --interval count trace time' -r -F
complete -c xenstore-snoop -l tracefs -d 'The tracefs mount to define uprobes in (default: /sys/kernel/tracing, else /sys/kernel/debug/tracing)' -r -F
complete -c xenstore-snoop -l ring-mb -d 'Ring buffer size in MiB, rounded up to a power of two (bpf: the one ring; tracefs: each CPU\'s)' -r
complete -c xenstore-snoop -l backend -d 'Capture with BPF or tracefs uprobes (default: bpf if the kernel loads it, else tracefs); the last one given wins' -r -f -a "bpf\t'A BPF program writing a BPF ring buffer, filtering in the kernel'
tracefs\t'tracefs uprobe events read through per-CPU perf rings'"
complete -c xenstore-snoop -l bpf-links -d 'How the BPF back end attaches: auto (one uprobe-multi link for the daemon alone where the kernel has them, filtering by process: 6.9 and later, as the kernel answers; else per-site), multi, or per-site (a uprobe link each, which also traps in other processes running the same binary)' -r -f -a "auto\t'multi where the kernel has it, else per-site'
multi\t'one uprobe-multi link for all the sites, the daemon\'s process alone'
per-site\t'a uprobe link per site, for every process mapping the binary'"
complete -c xenstore-snoop -s x -l failed -d 'Only failed requests'
complete -c xenstore-snoop -l no-watch-events -d 'Do not show watch events'
complete -c xenstore-snoop -l follow -d 'Keep tracing when the daemon exits (wait for the next process running its binary) or execs a new binary (a live update): attach to it, and say how long the gap was'
complete -c xenstore-snoop -s T -l timestamp -d 'Add a wall-clock timestamp column (µs)'
complete -c xenstore-snoop -l relative -d 'Add a column of seconds since the snooper started'
complete -c xenstore-snoop -s L -l latency -d 'Add a request-to-reply latency column (µs)'
complete -c xenstore-snoop -s v -l verbose -d 'Show error reasons, connection and transaction-end events'
complete -c xenstore-snoop -l json -d 'One JSON object per line instead of text'
complete -c xenstore-snoop -l summary -d 'Print summary tables (per op, per domain, top paths, watch fan-out) instead of lines'
complete -c xenstore-snoop -l top -d 'A full-screen view refreshed in place every second (or --interval): per guest and per dom0 process requests/s, errors/s, watch events/s, transactions/s, EAGAINs, p99 latency, quota use, and the hottest paths; keys sort (r e w l n), filter by domain (d), pause (p) and quit (q). Plain text frames when standard output is not a terminal. With -r, the trace plays at the speed it was recorded'
complete -c xenstore-snoop -l metrics -d 'Run as a Prometheus exporter: count in the kernel (per op and result, per domain, latency, watch events, transaction outcomes) and read each domain\'s quotas, written to --metrics-textfile and/or served on --metrics-listen, until stopped (BPF only); either of those alone implies it'
complete -c xenstore-snoop -l metrics-listen-any -d 'Allow --metrics-listen on an address other hosts reach'
complete -c xenstore-snoop -l paired -d 'Attach the request and response probes and pair them, instead of the one reply probe: shows requests never answered (ending "?"), at twice the probe firings (the default on a daemon without reply)'
complete -c xenstore-snoop -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xenstore-snoop -s V -l version -d 'Print version'
