// SPDX-License-Identifier: GPL-2.0-only
/*
 * xenstore-snoop --metrics: counts the daemon's events in maps instead of
 * sending each to user space, which reads the totals once an interval
 * (src/metrics/counters.rs). Attached as xssnoop.bpf.c is (a uprobe-multi
 * link for the daemon's process, else a uprobe per site); the probe kind
 * is the attach cookie. It attaches to `stats_batch` alone where the
 * daemon has it: up to 256 events' records per firing, one trap per batch
 * instead of one per request. On an older daemon it attaches to
 * `reply_stats` (`reply` on one without that: the same numbers, but the
 * daemon renders strings for it), `watch_event` and `tx_end`.
 *
 * Same discipline as xssnoop.bpf.c, so it loads on 6.1 and on 6.12 (a
 * uprobe link each on 6.1, one uprobe-multi link on 6.12: checked in QEMU
 * by tests/vm/bpf_kernels.rs): no loops in the program itself (a batch's
 * records are counted by bpf_loop, 5.17+), every index masked or compared
 * before use, nothing newer than 5.17 but the optional uprobe-multi link.
 *
 * The probe kinds, argument registers, packed fields and `struct
 * stats_record` come from xenstore_contract.h, generated from xenstore-proto
 * by build.rs.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "xenstore_contract.h"

char LICENSE[] SEC("license") = "GPL";

/* Message types 0..31 have a slot each; OP_OTHER takes the rest. */
#define OPS 33
#define OP_OTHER 32
/* Linux errnos 0..126 a slot each (0: success); ERR_OTHER the rest. */
#define ERRS 128
#define ERR_OTHER 127
/* Latency: bucket b holds [2^b, 2^(b+1)) ns, the last everything above;
 * slot BUCKETS holds the sum in ns. */
#define BUCKETS 32
#define LAT_SLOTS (BUCKETS + 1)

/* Indices of `totals`. */
enum total {
	T_WATCH_EVENTS,
	T_TX_COMMIT, /* + the tx_outcome */
	T_TX_OTHER = T_TX_COMMIT + TX_OUTCOMES,
	/* Firings counted only in the totals: the domain table was full. */
	T_DOMAIN_OVERFLOW,
	/* Batched records not counted at all: unreadable or past the cap. */
	T_RECORDS_LOST,
	T_SLOTS,
};

const volatile __u32 daemon_tgid = 0;
/* The exporter's own questions to the daemon (its pid, as the daemon's
 * SO_PEERCRED sees it) are not the host's traffic. */
const volatile __u32 exporter_pid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OPS * ERRS);
	__type(key, __u32);
	__type(value, __u64);
} requests SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OPS * LAT_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} latency SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, T_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} totals SEC(".maps");

/* What a batch's run of records adds up to: consecutive records of one
 * domain, and consecutive replies of one op and error, are counted in a
 * map once a run rather than once a record (a domain's hash lookup and
 * atomic adds, the op's counters), which is most of a record's cost when
 * one connection is busy. Kept in the scratch map, not on the stack: the
 * verifier tracks a stack's counters value by value across bpf_loop's
 * calls and never converges, a map value's it does not. */
struct runs {
	__u32 dom;
	__u32 dom_requests;
	__u32 dom_errors;
	__u32 dom_watch_events;
	__u32 op;
	__u32 err;
	__u32 replies;
	__u32 pad;
	__u64 ns_sum;
};

/* Where a batch is copied to be counted: one per CPU, as the program runs
 * with migration off and only the daemon's one event loop thread fires. */
struct batch {
	struct runs runs;
	struct stats_record records[BATCH_RECORDS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct batch);
} scratch SEC(".maps");

struct domain_counts {
	__u64 requests;
	__u64 errors;
	__u64 watch_events;
};

/* Per domain (the probes' 16-bit dom). User space deletes a dead domain's
 * entry; a full table counts T_DOMAIN_OVERFLOW instead. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096); /* set by the exporter (--max-domains) */
	__type(key, __u32);
	__type(value, struct domain_counts);
} domains SEC(".maps");

static __always_inline void add(void *map, __u32 key, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(map, &key);

	if (v)
		*v += n;
}

/* Highest set bit of v (0 for 0 and 1), without a loop. */
static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

static __always_inline struct domain_counts *domain(__u32 dom)
{
	struct domain_counts *c = bpf_map_lookup_elem(&domains, &dom);
	struct domain_counts zero = {};

	if (c)
		return c;
	/* Fails when another firing added it first (fine) or the table is
	 * full (counted). */
	bpf_map_update_elem(&domains, &dom, &zero, BPF_NOEXIST);
	c = bpf_map_lookup_elem(&domains, &dom);
	if (!c)
		add(&totals, T_DOMAIN_OVERFLOW, 1);
	return c;
}

static __always_inline void count_watch_event(__u32 dom)
{
	struct domain_counts *d;

	add(&totals, T_WATCH_EVENTS, 1);
	d = domain(dom);
	if (d)
		__sync_fetch_and_add(&d->watch_events, 1);
}

static __always_inline void count_tx_end(__u64 outcome)
{
	add(&totals, outcome < TX_OUTCOMES ? T_TX_COMMIT + (__u32)outcome : T_TX_OTHER, 1);
}

static __always_inline void count_reply(__u32 dom, __u32 op, __u32 err, __u64 ns)
{
	__u32 bucket = log2_u64(ns);
	struct domain_counts *d;

	if (op > OP_OTHER)
		op = OP_OTHER;
	if (err > ERR_OTHER)
		err = ERR_OTHER;
	if (bucket >= BUCKETS)
		bucket = BUCKETS - 1;
	add(&requests, op * ERRS + err, 1);
	add(&latency, op * LAT_SLOTS + bucket, 1);
	add(&latency, op * LAT_SLOTS + BUCKETS, ns);
	d = domain(dom);
	if (d) {
		__sync_fetch_and_add(&d->requests, 1);
		if (err)
			__sync_fetch_and_add(&d->errors, 1);
	}
}

static __always_inline void flush_domain(struct runs *r)
{
	struct domain_counts *d;

	if (!r->dom_requests && !r->dom_watch_events)
		return;
	d = domain(r->dom);
	if (d) {
		if (r->dom_requests)
			__sync_fetch_and_add(&d->requests, r->dom_requests);
		if (r->dom_errors)
			__sync_fetch_and_add(&d->errors, r->dom_errors);
		if (r->dom_watch_events)
			__sync_fetch_and_add(&d->watch_events, r->dom_watch_events);
	}
	r->dom_requests = 0;
	r->dom_errors = 0;
	r->dom_watch_events = 0;
}

static __always_inline void flush_replies(struct runs *r)
{
	if (!r->replies)
		return;
	add(&requests, r->op * ERRS + r->err, r->replies);
	add(&latency, r->op * LAT_SLOTS + BUCKETS, r->ns_sum);
	r->replies = 0;
	r->ns_sum = 0;
}

/* Record `rec` into the runs, flushing the ones it ends. */
static __always_inline void run_record(struct runs *r, struct stats_record *rec)
{
	__u32 dom = rec->domid;

	if (dom != r->dom) {
		flush_domain(r);
		r->dom = dom;
	}
	if (rec->kind == S_REPLY) {
		__u32 op = rec->op, err = rec->errno;
		__u64 ns = rec->elapsed_ns;
		__u32 bucket = log2_u64(ns);

		if (op > OP_OTHER)
			op = OP_OTHER;
		if (err > ERR_OTHER)
			err = ERR_OTHER;
		if (bucket >= BUCKETS)
			bucket = BUCKETS - 1;
		if (op != r->op || err != r->err) {
			flush_replies(r);
			r->op = op;
			r->err = err;
		}
		r->replies++;
		r->ns_sum += ns;
		add(&latency, op * LAT_SLOTS + bucket, 1);
		r->dom_requests++;
		if (err)
			r->dom_errors++;
	} else if (rec->kind == S_WATCH_EVENT) {
		add(&totals, T_WATCH_EVENTS, 1);
		r->dom_watch_events++;
	} else if (rec->kind == S_TX_END) {
		count_tx_end(rec->outcome);
	} else {
		add(&totals, T_RECORDS_LOST, 1);
	}
}

/* bpf_loop's body: record i of this CPU's copied batch into the runs. */
static long count_record(__u64 i, void *unused)
{
	__u32 zero = 0;
	struct batch *b = bpf_map_lookup_elem(&scratch, &zero);
	struct stats_record *rec;

	if (!b)
		return 1;
	rec = &b->records[i & (BATCH_RECORDS - 1)];
	if (rec->pid != exporter_pid)
		run_record(&b->runs, rec);
	return 0;
}

/* stats_batch: extra records at the address in `records`, copied in one
 * read and counted one by one, in runs. */
static __always_inline int count_batch(struct pt_regs *ctx)
{
	__u64 n = ARG_EXTRA(ctx);
	const void *records = (const void *)ARG_RECORDS(ctx);
	__u32 zero = 0;
	struct batch *b = bpf_map_lookup_elem(&scratch, &zero);

	if (!b)
		return 0;
	__builtin_memset(&b->runs, 0, sizeof(b->runs));
	if (n > BATCH_RECORDS) {
		add(&totals, T_RECORDS_LOST, n - BATCH_RECORDS);
		n = BATCH_RECORDS;
	}
	/* Keeps the bound on n in the register the size is computed from. */
	asm volatile("" : "+r"(n));
	if (n > BATCH_RECORDS)
		return 0;
	if (bpf_probe_read_user(b->records, n * sizeof(struct stats_record), records)) {
		add(&totals, T_RECORDS_LOST, n);
		return 0;
	}
	bpf_loop(n, count_record, NULL, 0);
	flush_replies(&b->runs);
	flush_domain(&b->runs);
	return 0;
}

static __always_inline int count(struct pt_regs *ctx)
{
	__u32 kind = bpf_get_attach_cookie(ctx);
	__u64 ident = ARG_IDENT(ctx);
	__u64 extra = ARG_EXTRA(ctx);
	__u32 dom = IDENT_DOM(ident);

	if (kind == K_STATS_BATCH)
		return count_batch(ctx);
	if (CLIENT_PID(ARG_CLIENT(ctx)) == exporter_pid)
		return 0;

	if (kind == K_WATCH_EVENT) {
		count_watch_event(dom);
		return 0;
	}
	if (kind == K_TX_END) {
		count_tx_end(extra);
		return 0;
	}
	if (kind != K_REPLY && kind != K_REPLY_STATS)
		return 0;

	__u32 op = IDENT_OP(ident);
	__u32 err = RESPONSE_EXTRA_ERRNO(extra);
	/* reply's latency_ns, reply_stats' elapsed_ns. Both loaded first:
	 * clang otherwise selects between the two fields' addresses, a
	 * modified ctx pointer the verifier refuses. */
	__u64 elapsed_ns = ARG_ELAPSED_NS(ctx), latency_ns = ARG_LATENCY_NS(ctx);

	asm volatile("" : "+r"(elapsed_ns), "+r"(latency_ns));
	count_reply(dom, op, err, kind == K_REPLY ? latency_ns : elapsed_ns);
	return 0;
}

SEC("uprobe.multi")
int xenstore_metrics_multi(struct pt_regs *ctx)
{
	return count(ctx);
}

SEC("uprobe")
int xenstore_metrics(struct pt_regs *ctx)
{
	if (bpf_get_current_pid_tgid() >> 32 != daemon_tgid)
		return 0;
	return count(ctx);
}
