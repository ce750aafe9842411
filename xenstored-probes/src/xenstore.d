/*
 * The xenstore USDT provider: every probe of xenstored-shim, in one list.
 * The contract itself (probe list, packing, flags, limits) is the crate
 * xenstore-proto, which xenstored-shim and xenstore-snoop both use;
 * tests/contract/scripts_contract.rs checks this file, man/xenstored-probes.7 and
 * scripts/ against it. Change it only by appending probes or arguments.
 *
 * Every probe starts with the same six arguments (reply appends two):
 *   arg0 serial  daemon-wide request serial (1, 2, ...); 0 when no request
 *                caused the event (a connection opening, a domain vanishing)
 *   arg1 ident   conn << 32 | op << 16 | dom
 *                (conn: connection number; op: the xs_wire.h XS_* type of
 *                the request concerned; dom: the connection's domid)
 *   arg2 client  tx << 32 | pid   (pid: dom0 client pid, 0 for domains)
 *   arg3 extra   probe-specific, see below
 *   arg4 str1    probe-specific string, see below
 *   arg5 str2    probe-specific string, see below
 *   arg6 str3    (reply only) probe-specific string, see below
 *   arg7 latency_ns (reply only) CLOCK_MONOTONIC ns from the request's
 *                decode to its reply being queued
 * Strings are printable renderings: NUL separators become spaces, invalid
 * UTF-8 becomes U+FFFD, and a probe's strings together stay under 3900
 * bytes (longer ones are cut and flagged).
 *
 * request      extra = flags << 32 | req_id      str1 = path (first argument)
 *                                                str2 = remaining arguments
 * response     extra = flags << 48 | errno << 32 | req_id
 *                                                str1 = result, or error name
 *                                                str2 = error reason ("" if none)
 * watch_event  extra = conn of the firer         str1 = event path as sent
 *                                                str2 = token
 * conn_open    extra = 0                         str1 = transport ("socket", "ring")
 *                                                str2 = peer description
 *              peer: "pid PID uid UID comm COMM" for a dom0 socket client
 *              (COMM: /proc/PID/comm when the connection opened, the rest of
 *              the string; " comm COMM" absent if unreadable), "domain DOMID
 *              ..." for a domain's connection
 * conn_close   extra = 0                         str1 = reason
 *                                                str2 = ""
 * tx_end       extra = outcome (0 commit, 1 abort, 2 conflict, 3 dropped)
 *                                                str1 = outcome name
 *                                                str2 = reason
 * reply        extra = flags << 48 | errno << 32 | req_id
 *                                                str1 = path (first argument)
 *                                                str2 = remaining arguments
 *                                                str3 = result, or error
 *                                                reason ("" if none)
 *              One firing when a reply is queued, carrying the whole
 *              request and its outcome (the error name follows from
 *              errno), so a tracer needs it and watch_event only. A reply
 *              to a request decoded before any tracer attached to reply
 *              fires nothing (the daemon kept nothing of that request).
 *              Of the byte budget str1 takes what it needs first, then
 *              str3, then str2.
 * truncated    extra = str1_len << 42 | str2_len << 21 | str3_len
 *                                                str1 = name of the probe
 *                                                str2 = ""
 *              Fired just before a request, response or reply (same
 *              serial, ident and client) whose payload is long enough to be
 *              cut: the uncut byte lengths of that probe's strings (0 for a
 *              string it does not have), so a tracer can tell how many
 *              bytes were cut. Untraced, it costs a length compare.
 * reply_stats  extra = flags << 48 | errno << 32 | req_id
 *                                                str1 = error name ("" if none)
 *                                                str2 = ""
 *              arg6 elapsed_ns: reply's latency_ns. reply's numbers without
 *              its strings, for tracers that only count (xenstore-snoop
 *              --metrics): str1 is a static string and nothing is
 *              rendered or kept of the request but its decode time, so
 *              traced it costs the daemon two clock reads and the trap.
 * stats_batch  extra = record_count              str1 = layout ("stats_record/1")
 *                                                str2 = ""
 *              arg6 records: the address of record_count 24-byte records
 *              (xenstore_proto::stats::StatsRecord: u64 elapsed_ns, u32
 *              pid, u16 domid, u16 op, u16 errno, u8 kind (0 reply, 1
 *              watch_event, 2 tx_end), u8 outcome, u32 reserved), serial,
 *              ident and client 0. What reply_stats, watch_event and
 *              tx_end count, one firing per 256 events instead of one
 *              each: only while it is traced, the daemon appends a record
 *              per event and fires when 256 are held, when the first held
 *              is 100 ms old (an idle daemon wakes for it), before it
 *              exits or execs a live update, and before it answers an
 *              XS_CONTROL. Counts arrive up to 100 ms late, but a tracer
 *              that asks a CONTROL first has every earlier event's. The
 *              records are valid only during the firing.
 * flags: bit 0 = str1 truncated, bit 1 = str2 truncated,
 *        bit 2 = str3 truncated.
 *
 * Each probe site is a 5-byte nop (0f 1f 44 00 00), which the kernel's
 * uprobes can optimise; xenstored-probes/src/probes/sdt.rs emits it and checks
 * it against this list, arguments in rdi rsi rdx rcx r8 r9 r10 r11.
 * Fixed registers, so tools that stop at six arguments (bpftrace 0.17
 * refuses arg6 and arg7) can still read reply's as reg("r10"), reg("r11").
 */
provider xenstore {
	probe request(uint64_t, uint64_t, uint64_t, uint64_t, char*, char*);
	probe response(uint64_t, uint64_t, uint64_t, uint64_t, char*, char*);
	probe watch_event(uint64_t, uint64_t, uint64_t, uint64_t, char*, char*);
	probe conn_open(uint64_t, uint64_t, uint64_t, uint64_t, char*, char*);
	probe conn_close(uint64_t, uint64_t, uint64_t, uint64_t, char*, char*);
	probe tx_end(uint64_t, uint64_t, uint64_t, uint64_t, char*, char*);
	probe reply(uint64_t, uint64_t, uint64_t, uint64_t, char*, char*, char*, uint64_t);
	probe truncated(uint64_t, uint64_t, uint64_t, uint64_t, char*, char*);
	probe reply_stats(uint64_t, uint64_t, uint64_t, uint64_t, char*, char*, uint64_t);
	probe stats_batch(uint64_t, uint64_t, uint64_t, uint64_t, char*, char*, uint64_t);
};
