// SPDX-License-Identifier: GPL-2.0-only
/*
 * xenstore-snoop's BPF back end: one program attached as a uprobe to every
 * site of the xenstore probes the snooper wants (with the site's SDT
 * semaphore as the uprobe's reference counter), the site's index in the
 * attach cookie; all the sites in one uprobe-multi link where the kernel
 * has them, else a uprobe link each. It fetches the arguments where the
 * site's note says they are (`sites`, filled by src/bpf/sites.rs), applies
 * the -d/-p/--op/-x filters, and copies the record into a ring buffer
 * without waking the reader; the reader is woken every `wakeup_every`
 * records of a CPU and otherwise polls on a short timeout. Records that do
 * not fit are counted in `lost`.
 *
 * The record layout is `struct record` below; src/bpf/record.rs decodes it.
 */
#include <stdbool.h>
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

/* Probe kinds, in xenstore_proto::Probe::ALL's order. */
enum kind {
	K_REQUEST,
	K_RESPONSE,
	K_WATCH_EVENT,
	K_CONN_OPEN,
	K_CONN_CLOSE,
	K_TX_END,
	K_REPLY,
	K_TRUNCATED,
};

/* Room for each string; the daemon keeps all of a probe's strings
 * together under 3900 bytes (xenstore.d). */
#define STR_MAX 4096
#define MAX_FILTER 16
#define MAX_ARGS 8
#define MAX_SITES 64

/* Set by the snooper before load (the verifier then drops what is off). */
const volatile __u32 daemon_tgid = 0;
const volatile __u32 n_doms = 0;
const volatile __u16 doms[MAX_FILTER] = {};
const volatile __u32 n_pids = 0;
const volatile __u32 pids[MAX_FILTER] = {};
const volatile __u32 n_ops = 0;
const volatile __u16 ops[MAX_FILTER] = {};
const volatile __u8 failed_only = 0;
const volatile __u32 wakeup_every = 256;

struct record {
	__u64 mono_ns;
	__u64 serial;
	__u64 ident;
	__u64 client;
	__u64 extra;
	__u64 latency_ns;
	__u32 kind;
	/* Bytes of each string, its NUL included (0: none), and where in
	 * `str` it starts. */
	__u16 len[3];
	__u16 at[3];
	char str[4 * STR_MAX];
};

/* Where one argument of a site is (an stapsdt note's `8@%rdi`, `8@-16(%rbp)`). */
struct arg_spec {
	/* Offset of the register in struct pt_regs. */
	__u16 reg_off;
	/* 1: the value is in user memory at the register + disp. */
	__u8 deref;
	/* 64 - 8 * the argument's size: its bits are the low ones. */
	__u8 shift;
	__s32 disp;
};

struct site {
	__u32 kind;
	__u32 n_args;
	struct arg_spec args[MAX_ARGS];
};

/* Indexed by the attach cookie. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SITES);
	__type(key, __u32);
	__type(value, struct site);
} sites SEC(".maps");

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

/* Records submitted since the reader was last woken, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} unwoken SEC(".maps");

/* Where a record is built before it is copied, at its size, to the ring. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct record);
} scratch SEC(".maps");

static __always_inline int listed16(const volatile __u16 *list, __u32 n, __u16 v)
{
	for (int i = 0; i < MAX_FILTER; i++) {
		if (i >= n)
			break;
		if (list[i] == v)
			return 1;
	}
	return 0;
}

static __always_inline int listed32(const volatile __u32 *list, __u32 n, __u32 v)
{
	for (int i = 0; i < MAX_FILTER; i++) {
		if (i >= n)
			break;
		if (list[i] == v)
			return 1;
	}
	return 0;
}

/* What the snooper's user-space filter would drop anyway. Connection and
 * transaction events only by domain and pid: conn_open names the process
 * behind a connection for lines that are shown. */
static __always_inline int wanted(__u32 kind, __u64 ident, __u64 client, __u64 extra)
{
	if (n_doms && !listed16(doms, n_doms, ident & 0xffff))
		return 0;
	if (n_pids && !listed32(pids, n_pids, client & 0xffffffff))
		return 0;
	if (kind > K_WATCH_EVENT && kind != K_REPLY)
		return 1;
	if (n_ops && !listed16(ops, n_ops, (ident >> 16) & 0xffff))
		return 0;
	/* A response's request has passed already: it must find its pair. */
	if (failed_only && kind == K_REPLY && ((extra >> 32) & 0xffff) == 0)
		return 0;
	if (failed_only && kind == K_WATCH_EVENT)
		return 0;
	return 1;
}

/* Copies the string at user address `src` to `dst`; its length with the
 * NUL, 0 if it could not be read. */
static __always_inline __u16 copy_str(char *dst, __u64 src)
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
	for (__u32 i = 1; i < 3; i++) {
		if (i >= n)
			break;
		/* Wraps to far beyond the window when the string lies before. */
		at[i] = strs[i] - strs[0];
		if (at[i] == 0 || at[i] >= WINDOW)
			return 0;
		if (at[i] > at[last])
			last = i;
	}
	for (__u32 i = 0; i < 3; i++) {
		if (i >= n)
			break;
		r->at[i] = at[i];
		if (i == last)
			continue;
		/* It ends where the next string up starts. */
		__u64 next = WINDOW;
		for (__u32 j = 0; j < 3; j++)
			if (j < n && at[j] > at[i] && at[j] < next)
				next = at[j];
		if (next == WINDOW || r->str[(next - 1) & (WINDOW - 1)])
			return 0;
		r->len[i] = next - at[i];
	}
	/* The last one ends at the window's next NUL. */
	__u64 start = at[last & 3];
	for (__u32 k = 0; k < WINDOW; k++) {
		__u64 end = start + k;
		if (end >= WINDOW)
			break;
		if (!r->str[end & (WINDOW - 1)]) {
			r->len[last & 3] = end + 1 - start;
			return end + 1;
		}
	}
	return 0;
}

/* Register `off` (its byte offset in struct pt_regs) of the firing. The
 * context is read directly, which the verifier allows only at constant
 * offsets: one case a register (each load in asm, which clang cannot merge
 * into one at a variable offset), cheaper than copying the registers with
 * a helper (30 ns a firing measured). */
#define REG(name)                                                          \
	case offsetof(struct pt_regs, name):                               \
		asm volatile("%0 = *(u64 *)(%1 + %2)"                      \
			     : "=r"(v)                                     \
			     : "r"(ctx), "i"(offsetof(struct pt_regs, name))); \
		return v

static __always_inline __u64 reg(const struct pt_regs *ctx, __u16 off)
{
	__u64 v;

	switch (off) {
	REG(r15); REG(r14); REG(r13); REG(r12); REG(rbp); REG(rbx);
	REG(r11); REG(r10); REG(r9); REG(r8); REG(rax); REG(rcx);
	REG(rdx); REG(rsi); REG(rdi); REG(rip); REG(rsp);
	default:
		return 0;
	}
}

/* Argument `i` of the firing site `s`; 0 if it has none or it cannot be read. */
static __always_inline __u64 arg(const struct pt_regs *ctx, const struct site *s, __u32 i)
{
	const struct arg_spec *a = &s->args[i];
	__u64 v;

	if (i >= s->n_args)
		return 0;
	v = reg(ctx, a->reg_off);
	if (a->deref && bpf_probe_read_user(&v, sizeof(v), (void *)(v + a->disp)))
		return 0;
	return (v << (a->shift & 63)) >> (a->shift & 63);
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
	__u32 index = bpf_get_attach_cookie(ctx);
	const struct site *site = bpf_map_lookup_elem(&sites, &index);
	if (!site)
		return count_lost();
	__u32 kind = site->kind;
	__u64 ident = arg(ctx, site, 1);
	__u64 client = arg(ctx, site, 2);
	__u64 extra = arg(ctx, site, 3);
	if (!wanted(kind, ident, client, extra))
		return 0;

	__u32 zero = 0;
	struct record *r = bpf_map_lookup_elem(&scratch, &zero);
	if (!r)
		return count_lost();
	r->serial = arg(ctx, site, 0);
	r->mono_ns = bpf_ktime_get_ns();
	r->ident = ident;
	r->client = client;
	r->extra = extra;
	r->kind = kind;

	__u64 strs[3] = { arg(ctx, site, 4), arg(ctx, site, 5), 0 };
	__u32 n_strs = 2;
	r->latency_ns = 0;
	if (kind == K_REPLY) {
		strs[2] = arg(ctx, site, 6);
		n_strs = 3;
		r->latency_ns = arg(ctx, site, 7);
	}
	r->len[2] = 0;
	r->at[2] = 0;
	__u32 off = copy_window(r, strs, n_strs);
	if (!off) {
		/* String by string; the mask keeps every offset provably inside
		 * `str` for the verifier. */
		for (__u32 i = 0; i < 3; i++) {
			if (i >= n_strs)
				break;
			r->at[i] = off;
			r->len[i] = copy_str(&r->str[off & (2 * STR_MAX - 1)], strs[i]);
			off += r->len[i];
		}
	}

	__u64 size = offsetof(struct record, str) + (off & (4 * STR_MAX - 1));
	__u32 *pending = bpf_map_lookup_elem(&unwoken, &zero);
	__u64 flags = BPF_RB_NO_WAKEUP;
	if (pending && ++*pending >= wakeup_every) {
		*pending = 0;
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
