// SPDX-License-Identifier: GPL-2.0-only
/*
 * xenstore-snoop's BPF back end: one program attached as a uprobe to every
 * site of the xenstore probes the snooper wants (with the site's SDT
 * semaphore as the uprobe's reference counter), the site's probe kind in
 * the attach cookie; all the sites in one uprobe-multi link where the
 * kernel has them, else a uprobe link each. It reads the arguments from
 * the registers the probe contract puts them in (src/capture/bpf/mod.rs checks
 * each site's note says so), applies the -d/-p/--op/-x filters, and copies
 * the record into a ring buffer without waking the reader; the reader is
 * woken when a quarter of the ring waits to be read, and otherwise polls
 * on a short timeout. Records that do not fit are counted in `lost`.
 *
 * The probe contract (kinds, argument registers, packed fields, limits)
 * and `struct record` come from xenstore_contract.h, which build.rs
 * generates from xenstore-proto (xenstore_proto::bpf) before compiling
 * this; src/capture/bpf/decode.rs decodes the record through the same
 * Rust struct.
 *
 * What older kernels refuse, and how this code avoids it (checked on
 * Debian's 6.1 and 6.12 by tests/kernels/run; the program needs 5.15+ for
 * attach cookies, 5.8+ for the ring buffer: Debian 11's 5.10 refuses it,
 * "invalid func unknown#174", which tests/vm/bpf_kernels.rs checks is said):
 * - 6.1's CFG check refuses a loop whose back-edge is a fall-through
 *   ("back-edge from insn N to N+1"), which clang emits for a loop that
 *   leaves by `break`/`continue`: the small fixed loops are `#pragma
 *   unroll`ed, with `if (i < n)` in their bodies instead of `break` (clang
 *   unrolls no loop with an early exit but a `return`). The one loop left
 *   (the NUL search) exits by `return` or its counter only.
 * - 6.12's verifier loses a bound the compiler proved and dropped ("math
 *   between map_value pointer and register with unbounded min value"):
 *   clang removes `x & (N - 1)` when it knows x < N, and the verifier
 *   cannot follow its reasoning. barrier_var(x) before the mask keeps it,
 *   so every variable index into a map value is masked where it is used.
 */
#include <stdbool.h>
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "xenstore_contract.h"

char LICENSE[] SEC("license") = "GPL";

#define MAX_FILTER 16

/* Set by the snooper before load (the verifier then drops what is off). */
const volatile __u32 daemon_tgid = 0;
const volatile __u32 n_doms = 0;
const volatile __u16 doms[MAX_FILTER] = {};
const volatile __u32 n_pids = 0;
const volatile __u32 pids[MAX_FILTER] = {};
const volatile __u32 n_ops = 0;
const volatile __u16 ops[MAX_FILTER] = {};
const volatile __u8 failed_only = 0;
/* A wake-up costs the firing CPU an interrupt and the reader's wake-up
 * (8 ns a firing at one every 4096 records, measured in a VM): the reader
 * is woken only when `wake_at` bytes wait in the ring. A CPU looks at
 * that every `check_every` bytes it writes, so that between looks all the
 * CPUs together add at most a quarter of the ring. */
const volatile __u64 wake_at = 4 << 20;
const volatile __u32 check_every = 1 << 20;
/* 0: the output shows no firing's time, so none is read (a clock read is
 * about 20 ns a firing, a quarter of what the program adds, measured). */
const volatile __u8 timestamps = 1;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20); /* set by the snooper (--ring-mb) */
} events SEC(".maps");

/* Records given up, per CPU: the ring had no room, or (never seen) the
 * firing could not be read. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

/* Bytes written since the CPU last looked at what waits in the ring. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} unchecked SEC(".maps");

/* Where a record is built before it is copied, at its size, to the ring. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct record);
} scratch SEC(".maps");

static __always_inline int listed16(const volatile __u16 *list, __u32 n, __u16 v)
{
#pragma unroll
	for (int i = 0; i < MAX_FILTER; i++)
		if (i < n && list[i] == v)
			return 1;
	return 0;
}

static __always_inline int listed32(const volatile __u32 *list, __u32 n, __u32 v)
{
#pragma unroll
	for (int i = 0; i < MAX_FILTER; i++)
		if (i < n && list[i] == v)
			return 1;
	return 0;
}

/* What the snooper's user-space filter would drop anyway. Connection and
 * transaction events only by domain and pid: conn_open names the process
 * behind a connection for lines that are shown. */
static __always_inline int wanted(__u32 kind, __u64 ident, __u64 client, __u64 extra)
{
	if (n_doms && !listed16(doms, n_doms, IDENT_DOM(ident)))
		return 0;
	if (n_pids && !listed32(pids, n_pids, CLIENT_PID(client)))
		return 0;
	if (kind > K_WATCH_EVENT && kind != K_REPLY)
		return 1;
	if (n_ops && !listed16(ops, n_ops, IDENT_OP(ident)))
		return 0;
	/* A response's request has passed already: it must find its pair. */
	if (failed_only && kind == K_REPLY && RESPONSE_EXTRA_ERRNO(extra) == 0)
		return 0;
	if (failed_only && kind == K_WATCH_EVENT)
		return 0;
	return 1;
}

/* Copies the string at user address `src` to `dst`; its length with the
 * NUL, 0 if it could not be read. */
static __always_inline __u16 copy_str(void *dst, __u64 src)
{
	long n = bpf_probe_read_user_str(dst, STR_MAX, (const void *)src);
	return n > 0 ? n : 0;
}

/* The daemon renders a firing's strings one after another into one buffer
 * (reply's in the order str1, str3, str2), so they nearly always lie back
 * to back in a short window from the first: one copy of the window costs
 * less than a string copy each (no hardened-usercopy check, no NUL search
 * in the kernel; 110 ns a firing measured). Copies the window to `r->str`,
 * sets each string's length and place in it, and returns the bytes up to
 * the last NUL; 0 (the caller copies string by string) if the window
 * cannot be read or the strings are not all in it, back to back, each
 * ending with its NUL. */
#define WINDOW 256

static __always_inline __u32 copy_window(struct record *r, const __u64 *strs, __u32 n)
{
	__u64 at[4] = {};
	__u32 last = 0;

	if (bpf_probe_read_user(r->str, WINDOW, (const void *)strs[0]))
		return 0;
#pragma unroll
	for (__u32 i = 1; i < 3; i++) {
		if (i < n) {
			/* Wraps to far beyond the window when the string lies before. */
			at[i] = strs[i] - strs[0];
			if (at[i] == 0 || at[i] >= WINDOW)
				return 0;
			if (at[i] > at[last])
				last = i;
		}
	}
#pragma unroll
	for (__u32 i = 0; i < 3; i++) {
		if (i < n)
			r->at[i] = at[i];
		if (i < n && i != last) {
			/* It ends where the next string up starts. */
			__u64 next = WINDOW;
#pragma unroll
			for (__u32 j = 0; j < 3; j++)
				if (j < n && at[j] > at[i] && at[j] < next)
					next = at[j];
			if (next == WINDOW)
				return 0;
			__u64 nul = next - 1;
			barrier_var(nul);
			if (r->str[nul & (WINDOW - 1)])
				return 0;
			r->len[i] = next - at[i];
		}
	}
	/* The last one ends at the window's next NUL. */
	__u64 start = at[last & 3];
	for (__u32 k = 0; k < WINDOW; k++) {
		__u64 end = start + k;
		if (end >= WINDOW)
			return 0;
		barrier_var(end);
		if (!r->str[end & (WINDOW - 1)]) {
			r->len[last & 3] = end + 1 - start;
			return end + 1;
		}
	}
	return 0;
}

static __always_inline int count_lost(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&lost, &zero);

	if (n)
		*n += 1;
	return 0;
}

static __always_inline int capture(struct pt_regs *ctx)
{
	__u32 kind = bpf_get_attach_cookie(ctx);
	__u64 ident = ARG_IDENT(ctx);
	__u64 client = ARG_CLIENT(ctx);
	__u64 extra = ARG_EXTRA(ctx);
	if (!wanted(kind, ident, client, extra))
		return 0;

	__u32 zero = 0;
	struct record *r = bpf_map_lookup_elem(&scratch, &zero);
	if (!r)
		return count_lost();
	r->serial = ARG_SERIAL(ctx);
	r->mono_ns = timestamps ? bpf_ktime_get_ns() : 0;
	r->ident = ident;
	r->client = client;
	r->extra = extra;
	r->kind = kind;

	__u64 strs[3] = { ARG_STR1(ctx), ARG_STR2(ctx), 0 };
	__u32 n_strs = 2;
	r->latency_ns = 0;
	if (kind == K_REPLY) {
		strs[2] = ARG_STR3(ctx);
		n_strs = 3;
		r->latency_ns = ARG_LATENCY_NS(ctx);
	}
	r->len[2] = 0;
	r->at[2] = 0;
	__u32 off = copy_window(r, strs, n_strs);
	if (!off) {
		/* String by string; the mask keeps every offset provably inside
		 * `str` for the verifier. */
#pragma unroll
		for (__u32 i = 0; i < 3; i++) {
			if (i < n_strs) {
				r->at[i] = off;
				barrier_var(off);
				r->len[i] = copy_str(&r->str[off & (2 * STR_MAX - 1)], strs[i]);
				off += r->len[i];
			}
		}
	}

	barrier_var(off);
	__u64 size = offsetof(struct record, str) + (off & (4 * STR_MAX - 1));
	__u32 *written = bpf_map_lookup_elem(&unchecked, &zero);
	__u64 flags = BPF_RB_NO_WAKEUP;
	if (written && (*written += size) >= check_every) {
		*written = 0;
		if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) + size >= wake_at)
			flags = BPF_RB_FORCE_WAKEUP;
	}
	if (size > sizeof(*r) || bpf_ringbuf_output(&events, r, size, flags))
		return count_lost();
	return 0;
}

/* All the sites in one link for the daemon's process alone (kernel 6.6 and
 * later): no other process mapping the binary traps, and the kernel's
 * entry to the program is shorter (40 ns a firing measured). */
SEC("uprobe.multi")
int xenstore_probe_multi(struct pt_regs *ctx)
{
	return capture(ctx);
}

/* Older kernels: a uprobe per site, for every process (a per-task uprobe
 * would put a perf event in the daemon's context switches), keeping the
 * daemon's firings. */
SEC("uprobe")
int xenstore_probe(struct pt_regs *ctx)
{
	if (bpf_get_current_pid_tgid() >> 32 != daemon_tgid)
		return 0;
	return capture(ctx);
}
