/*
 * xenstub: an LD_PRELOAD library that lets Debian's upstream xenstored (C)
 * and oxenstored run without a hypervisor, so the test suite can compare the
 * shim with them byte for byte.
 *
 * Faked: the libxenctrl / libxengnttab / libxenevtchn entry points the two
 * daemons call, the files /proc/xen/xsd_port and /proc/xen/xsd_kva, the
 * compiled-in /var/run/xenstored directory of oxenstored, and raising
 * RLIMIT_NOFILE (clamped to the hard limit instead of failing).
 *
 * Environment:
 *   XENSTUB_DIR      directory that replaces /var/run/xenstored (required for
 *                    oxenstored; C xenstored takes XENSTORED_RUNDIR instead)
 *   XENSTUB_DOMIDS   domids that exist and run, "0-99,200" style; default
 *                    every domid (a daemon without a hypervisor, like the
 *                    shim, cannot tell a domain is gone)
 *   XENSTUB_RING_DIR the shim's simulated-ring directory (ring/sim.rs):
 *                    a domain prepared there (ring/<domid>/page-<gfn>,
 *                    evtchn-<port>) gets that page as its grant map and
 *                    its doorbell sockets as its event channel, so a
 *                    simulated guest talks to the daemon over a real ring;
 *                    and its simulated hypervisor (xen/simulated.rs): the
 *                    domain table xen/domains says which domains run, are
 *                    shut down or dying (a domain it does not know falls
 *                    back to XENSTUB_DOMIDS), and counts the daemon's state
 *                    queries and VIRQ_DOM_EXC firings there; a byte sent to
 *                    the socket xen/virq-dom-exc raises that VIRQ
 *
 * Built by the test harness: cc -shared -fPIC -o libxenstub.so xenstub.c -ldl
 * The event channel handle is an epoll set, readable when a simulated
 * guest rings; other grant maps and foreign maps are zeroed anonymous
 * pages, so those domains' rings stay empty.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <xenctrl.h>
#include <xenevtchn.h>
#include <xengnttab.h>

#define PAGE 4096
#define RUN_DIR "/var/run/xenstored"

/* ---- which domains exist ------------------------------------------- */

static int domid_exists(uint32_t domid)
{
	const char *spec = getenv("XENSTUB_DOMIDS");
	if (!spec || !*spec)
		return domid < DOMID_FIRST_RESERVED;
	while (*spec) {
		char *end;
		unsigned long lo = strtoul(spec, &end, 10), hi = lo;
		if (end == spec)
			return 0;
		if (*end == '-')
			hi = strtoul(end + 1, &end, 10);
		if (domid >= lo && domid <= hi)
			return 1;
		spec = (*end == ',') ? end + 1 : end;
		if (*end && *end != ',')
			return 0;
	}
	return 0;
}

/*
 * The simulated hypervisor's table (xenstored-probes' xen/simulated.rs):
 * two little-endian u64 counters, state queries answered and VIRQ_DOM_EXC
 * firings handled, then one state byte a domid. Mapped when first found:
 * the toolstack makes it with its first domain, maybe after we started.
 */
#define TABLE_QUERIES 0
#define TABLE_FIRINGS 8
#define TABLE_HEADER 16
#define TABLE_LEN (TABLE_HEADER + DOMID_FIRST_RESERVED)
enum state { UNKNOWN, RUNNING, SHUT_DOWN, DYING };

static unsigned char *sim_table(void)
{
	static unsigned char *table;
	const char *root = getenv("XENSTUB_RING_DIR");
	char path[PATH_MAX];
	struct stat st;
	void *p;
	int fd;
	if (table || !root)
		return table;
	snprintf(path, sizeof(path), "%s/xen/domains", root);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	p = fstat(fd, &st) == 0 && st.st_size >= TABLE_LEN ?
		mmap(NULL, TABLE_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) :
		MAP_FAILED;
	close(fd);
	if (p != MAP_FAILED)
		table = p;
	return table;
}

static void count(size_t at)
{
	unsigned char *t = sim_table();
	uint64_t n;
	if (!t)
		return;
	memcpy(&n, t + at, sizeof(n));
	n++;
	memcpy(t + at, &n, sizeof(n));
}

static enum state domain_state(uint32_t domid)
{
	unsigned char *t = sim_table();
	if (t && domid < DOMID_FIRST_RESERVED && t[TABLE_HEADER + domid] != UNKNOWN &&
	    t[TABLE_HEADER + domid] <= DYING)
		return t[TABLE_HEADER + domid];
	return domid_exists(domid) ? RUNNING : UNKNOWN;
}

/* The first existing domid >= from, or -1. */
static long next_domid(uint32_t from)
{
	for (uint32_t d = from; d < DOMID_FIRST_RESERVED; d++)
		if (domain_state(d) != UNKNOWN)
			return d;
	return -1;
}

static uint32_t dominf_flags(enum state s)
{
	return s == RUNNING ? XEN_DOMINF_running :
	       s == SHUT_DOWN ? XEN_DOMINF_shutdown :
	       XEN_DOMINF_shutdown | XEN_DOMINF_dying;
}

/* ---- libxenctrl ---------------------------------------------------- */

static char fake_xc;

xc_interface *xc_interface_open(xentoollog_logger *logger,
				xentoollog_logger *dombuild_logger,
				unsigned open_flags)
{
	(void)logger; (void)dombuild_logger; (void)open_flags;
	return (xc_interface *)&fake_xc;
}

int xc_interface_close(xc_interface *xch)
{
	(void)xch;
	return 0;
}

int xc_domain_getinfo(xc_interface *xch, uint32_t first_domid,
		      unsigned int max_doms, xc_dominfo_t *info)
{
	unsigned int n = 0;
	long d = first_domid;
	(void)xch;
	while (n < max_doms && (d = next_domid(d)) >= 0) {
		enum state s = domain_state(d);
		memset(&info[n], 0, sizeof(info[n]));
		info[n].domid = d;
		info[n].running = s == RUNNING;
		info[n].shutdown = s != RUNNING;
		info[n].dying = s == DYING;
		info[n].nr_online_vcpus = 1;
		n++;
		d++;
	}
	count(TABLE_QUERIES);
	return n;
}

int xc_domain_getinfolist(xc_interface *xch, uint32_t first_domain,
			  unsigned int max_domains, xc_domaininfo_t *info)
{
	unsigned int n = 0;
	long d = first_domain;
	(void)xch;
	while (n < max_domains && (d = next_domid(d)) >= 0) {
		memset(&info[n], 0, sizeof(info[n]));
		info[n].domain = d;
		info[n].flags = dominf_flags(domain_state(d));
		info[n].max_vcpu_id = 0;
		n++;
		d++;
	}
	count(TABLE_QUERIES);
	return n;
}

/* Xen 4.18+ (xenstored 4.20 calls only this): exactly one domain, or
 * -1 with ESRCH as the hypervisor answers for a missing one. Not in 4.17's
 * xenctrl.h, hence the prototype; xc_domaininfo_t is the same in both. */
int xc_domain_getinfo_single(xc_interface *xch, uint32_t domid,
			     xc_domaininfo_t *info);
int xc_domain_getinfo_single(xc_interface *xch, uint32_t domid,
			     xc_domaininfo_t *info)
{
	enum state s = domain_state(domid);
	(void)xch;
	count(TABLE_QUERIES);
	if (s == UNKNOWN) {
		errno = ESRCH;
		return -1;
	}
	memset(info, 0, sizeof(*info));
	info->domain = domid;
	info->flags = dominf_flags(s);
	return 0;
}

static void *zero_page(void)
{
	void *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void *sim_page(uint32_t domid);

/* oxenstored maps a domain's ring this way: a simulated guest's page. */
void *xc_map_foreign_range(xc_interface *xch, uint32_t dom, int size,
			   int prot, unsigned long mfn)
{
	(void)xch; (void)prot; (void)mfn;
	void *p = size == PAGE ? sim_page(dom) : NULL;
	if (p)
		return p;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* ---- libxengnttab -------------------------------------------------- */

static char fake_gnttab;

xengnttab_handle *xengnttab_open(xentoollog_logger *logger,
				 unsigned open_flags)
{
	(void)logger; (void)open_flags;
	return (xengnttab_handle *)&fake_gnttab;
}

int xengnttab_close(xengnttab_handle *xgt)
{
	(void)xgt;
	return 0;
}

int xengnttab_set_max_grants(xengnttab_handle *xgt, uint32_t nr_grants)
{
	(void)xgt; (void)nr_grants;
	return 0;
}

/* ---- simulated rings (XENSTUB_RING_DIR) ---------------------------- */

/* ring/<domid>/<prefix><n> in XENSTUB_RING_DIR, if such a file exists. */
static int sim_path(uint32_t domid, const char *prefix, char *buf,
		    size_t len, unsigned long *n)
{
	const char *root = getenv("XENSTUB_RING_DIR");
	char dir[PATH_MAX];
	struct dirent *e;
	DIR *d;
	int found = 0;
	if (!root)
		return 0;
	snprintf(dir, sizeof(dir), "%s/ring/%u", root, domid);
	d = opendir(dir);
	if (!d)
		return 0;
	while (!found && (e = readdir(d))) {
		size_t p = strlen(prefix);
		char *end;
		if (strncmp(e->d_name, prefix, p) != 0)
			continue;
		*n = strtoul(e->d_name + p, &end, 10);
		if (end == e->d_name + p || *end)
			continue;
		snprintf(buf, len, "%s/%s", dir, e->d_name);
		found = 1;
	}
	closedir(d);
	return found;
}

/* A simulated guest's page, shared; NULL when domid has none. */
static void *sim_page(uint32_t domid)
{
	char path[PATH_MAX];
	unsigned long gfn;
	int fd;
	void *p;
	if (!sim_path(domid, "page-", path, sizeof(path), &gfn))
		return NULL;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

void *xengnttab_map_grant_ref(xengnttab_handle *xgt, uint32_t domid,
			      uint32_t ref, int prot)
{
	void *p;
	(void)xgt; (void)ref; (void)prot;
	p = sim_page(domid);
	return p ? p : zero_page();
}

int xengnttab_unmap(xengnttab_handle *xgt, void *start_address,
		    uint32_t count)
{
	(void)xgt;
	return munmap(start_address, (size_t)count * PAGE);
}

/* ---- libxenevtchn -------------------------------------------------- */

struct xenevtchn_handle {
	int fd;
};

static evtchn_port_t next_port = 1;

/*
 * A local port bound to a simulated guest's doorbell, found by its port
 * (ports are handed out counting up): a thousand guests and their churn
 * cost the daemon no scan on each event.
 */
struct bound {
	int sock;
	/* socket addresses: longer would not bind anyway */
	char guest_end[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char daemon_end[sizeof(((struct sockaddr_un *)0)->sun_path)];
};
static struct bound **bound;
static evtchn_port_t bound_len;

static xenevtchn_handle *new_evtchn(int fd)
{
	xenevtchn_handle *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->fd = fd >= 0 ? fd : epoll_create1(EPOLL_CLOEXEC);
	return h;
}

xenevtchn_handle *xenevtchn_open(xentoollog_logger *logger,
				 unsigned open_flags)
{
	(void)logger; (void)open_flags;
	return new_evtchn(-1);
}

/*
 * An inherited handle (a live update: the GLOBAL record's evtchn fd): the
 * doorbell sockets in its epoll set, each under its local port, are bound
 * again in this image's table, read back from /proc/self/fdinfo.
 */
static struct bound *add_bound(evtchn_port_t port);

static void adopt_bound(int epfd)
{
	char path[64], line[256];
	FILE *f;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", epfd);
	f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		int sock;
		unsigned int events;
		unsigned long long data;
		struct sockaddr_un addr;
		socklen_t len = sizeof(addr);
		struct bound *b;
		char *suffix;
		if (sscanf(line, "tfd: %d events: %x data: %llx", &sock, &events, &data) != 3)
			continue;
		if (getsockname(sock, (void *)&addr, &len) != 0 || addr.sun_family != AF_UNIX)
			continue;
		b = add_bound((evtchn_port_t)data);
		if (!b)
			continue;
		b->sock = sock;
		strncpy(b->daemon_end, addr.sun_path, sizeof(b->daemon_end) - 1);
		strncpy(b->guest_end, addr.sun_path, sizeof(b->guest_end) - 1);
		suffix = strstr(b->guest_end, ".xenstored");
		if (suffix)
			*suffix = 0;
		if (data >= next_port)
			next_port = data + 1;
	}
	fclose(f);
}

xenevtchn_handle *xenevtchn_fdopen(struct xentoollog_logger *logger,
				   int fd, unsigned open_flags)
{
	(void)logger; (void)open_flags;
	adopt_bound(fd);
	return new_evtchn(fd);
}

int xenevtchn_close(xenevtchn_handle *xce)
{
	if (xce) {
		close(xce->fd);
		free(xce);
	}
	return 0;
}

int xenevtchn_fd(xenevtchn_handle *xce)
{
	return xce->fd;
}

static struct bound *find_bound(evtchn_port_t port)
{
	return port < bound_len ? bound[port] : NULL;
}

/* A new binding for port, or NULL when out of memory. */
static struct bound *add_bound(evtchn_port_t port)
{
	if (port >= bound_len) {
		evtchn_port_t len = bound_len ? bound_len : 64;
		struct bound **grown;
		while (len <= port)
			len *= 2;
		grown = realloc(bound, len * sizeof(*bound));
		if (!grown)
			return NULL;
		memset(grown + bound_len, 0,
		       (len - bound_len) * sizeof(*bound));
		bound = grown;
		bound_len = len;
	}
	bound[port] = calloc(1, sizeof(struct bound));
	return bound[port];
}

static void drop_bound(evtchn_port_t port)
{
	free(bound[port]);
	bound[port] = NULL;
}

int xenevtchn_notify(xenevtchn_handle *xce, evtchn_port_t port)
{
	struct bound *b = find_bound(port);
	struct sockaddr_un to = { .sun_family = AF_UNIX };
	(void)xce;
	if (!b)
		return 0;
	/* Nobody bound there, or a full buffer: a signal is pending already. */
	strncpy(to.sun_path, b->guest_end, sizeof(to.sun_path) - 1);
	(void)sendto(b->sock, "", 1, MSG_DONTWAIT, (void *)&to, sizeof(to));
	return 0;
}

xenevtchn_port_or_error_t xenevtchn_bind_unbound_port(xenevtchn_handle *xce,
						      uint32_t domid)
{
	(void)xce; (void)domid;
	return next_port++;
}

/*
 * Binds b's socket at b->daemon_end and adds it to the handle's epoll set
 * as port local; on failure the binding is dropped. 0, or -1.
 */
static int listen_bound(xenevtchn_handle *xce, struct bound *b, evtchn_port_t local)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = local };
	b->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (b->sock < 0) {
		drop_bound(local);
		return -1;
	}
	unlink(b->daemon_end);
	strncpy(addr.sun_path, b->daemon_end, sizeof(addr.sun_path) - 1);
	if (bind(b->sock, (void *)&addr, sizeof(addr)) != 0 ||
	    epoll_ctl(xce->fd, EPOLL_CTL_ADD, b->sock, &ev) != 0) {
		close(b->sock);
		drop_bound(local);
		return -1;
	}
	return 0;
}

/* The daemon's end of a prepared simulated domain's doorbell. */
static void bind_sim(xenevtchn_handle *xce, uint32_t domid,
		     evtchn_port_t remote, evtchn_port_t local)
{
	char page[PATH_MAX - 32];
	unsigned long gfn;
	struct bound *b;
	char *slash;
	if (!sim_path(domid, "page-", page, sizeof(page), &gfn))
		return;
	b = add_bound(local);
	if (!b)
		return;
	slash = strrchr(page, '/');
	*slash = 0;
	if ((size_t)snprintf(b->guest_end, sizeof(b->guest_end),
			     "%s/evtchn-%u", page, remote) >= sizeof(b->guest_end) ||
	    (size_t)snprintf(b->daemon_end, sizeof(b->daemon_end),
			     "%s/evtchn-%u.xenstored", page, remote) >= sizeof(b->daemon_end)) {
		drop_bound(local);
		return;
	}
	listen_bound(xce, b, local);
}

xenevtchn_port_or_error_t
xenevtchn_bind_interdomain(xenevtchn_handle *xce, uint32_t domid,
			   evtchn_port_t remote_port)
{
	evtchn_port_t local = next_port++;
	bind_sim(xce, domid, remote_port, local);
	return local;
}

/* VIRQ_DOM_EXC's port: the socket xen/virq-dom-exc, when there are rings. */
static evtchn_port_t dom_exc_port;

xenevtchn_port_or_error_t xenevtchn_bind_virq(xenevtchn_handle *xce,
					      unsigned int virq)
{
	const char *root = getenv("XENSTUB_RING_DIR");
	evtchn_port_t local = next_port++;
	char dir[PATH_MAX - 32];
	struct bound *b;
	if (virq != VIRQ_DOM_EXC || !root)
		return local;
	b = add_bound(local);
	if (!b)
		return local;
	snprintf(dir, sizeof(dir), "%s/xen", root);
	mkdir(dir, 0755);
	if ((size_t)snprintf(b->daemon_end, sizeof(b->daemon_end), "%s/virq-dom-exc", dir) >=
	    sizeof(b->daemon_end)) {
		drop_bound(local);
		return local;
	}
	if (listen_bound(xce, b, local) == 0)
		dom_exc_port = local;
	return local;
}

int xenevtchn_unbind(xenevtchn_handle *xce, evtchn_port_t port)
{
	struct bound *b = find_bound(port);
	if (b) {
		epoll_ctl(xce->fd, EPOLL_CTL_DEL, b->sock, NULL);
		close(b->sock);
		unlink(b->daemon_end);
		drop_bound(port);
	}
	return 0;
}

/*
 * The port of a guest that rang (its doorbell drained), or 0 when none did:
 * the daemon barfs on -1, and scans every ring after any event anyway.
 */
xenevtchn_port_or_error_t xenevtchn_pending(xenevtchn_handle *xce)
{
	struct epoll_event ev;
	char buf[64];
	struct bound *b;
	if (epoll_wait(xce->fd, &ev, 1, 0) != 1)
		return 0;
	b = find_bound(ev.data.u32);
	if (b)
		while (recv(b->sock, buf, sizeof(buf), MSG_DONTWAIT) > 0)
			;
	if (dom_exc_port && ev.data.u32 == dom_exc_port)
		count(TABLE_FIRINGS);
	return ev.data.u32;
}

int xenevtchn_unmask(xenevtchn_handle *xce, evtchn_port_t port)
{
	(void)xce; (void)port;
	return 0;
}

/* ---- files and paths ----------------------------------------------- */

/* A memfd standing in for a /proc/xen file, or -2 when path is not one. */
static int proc_xen_fd(const char *path)
{
	int fd;
	if (!path)
		return -2;
	if (strcmp(path, "/proc/xen/xsd_port") == 0) {
		fd = memfd_create("xsd_port", MFD_CLOEXEC);
		/* No newline: oxenstored parses it with int_of_string. */
		if (fd >= 0 && (write(fd, "1", 1) != 1 ||
				lseek(fd, 0, SEEK_SET) != 0))
			return -1;
		return fd;
	}
	if (strcmp(path, "/proc/xen/xsd_kva") == 0) {
		fd = memfd_create("xsd_kva", MFD_CLOEXEC);
		if (fd >= 0 && ftruncate(fd, PAGE) != 0)
			return -1;
		return fd;
	}
	return -2;
}

/*
 * /var/run/xenstored/... rewritten under XENSTUB_DIR. Returns path itself
 * when nothing needs rewriting, else buf.
 */
static const char *rewrite(const char *path, char *buf, size_t len)
{
	const char *dir = getenv("XENSTUB_DIR");
	size_t n = strlen(RUN_DIR);
	if (!path || !dir || strncmp(path, RUN_DIR, n) != 0 ||
	    (path[n] != '\0' && path[n] != '/'))
		return path;
	if ((size_t)snprintf(buf, len, "%s%s", dir, path + n) >= len)
		return path;
	return buf;
}

#define REAL(ret, name, ...)                                             \
	static ret (*real_##name)(__VA_ARGS__);                          \
	if (!real_##name)                                                \
		real_##name = (ret(*)(__VA_ARGS__))dlsym(RTLD_NEXT, #name)

static mode_t open_mode(int flags, va_list ap)
{
	return (flags & (O_CREAT | O_TMPFILE)) ? va_arg(ap, mode_t) : 0;
}

int open(const char *path, int flags, ...)
{
	char buf[PATH_MAX];
	va_list ap;
	va_start(ap, flags);
	mode_t mode = open_mode(flags, ap);
	va_end(ap);
	int fd = proc_xen_fd(path);
	if (fd != -2)
		return fd;
	REAL(int, open, const char *, int, ...);
	return real_open(rewrite(path, buf, sizeof(buf)), flags, mode);
}

int open64(const char *path, int flags, ...)
{
	char buf[PATH_MAX];
	va_list ap;
	va_start(ap, flags);
	mode_t mode = open_mode(flags, ap);
	va_end(ap);
	int fd = proc_xen_fd(path);
	if (fd != -2)
		return fd;
	REAL(int, open64, const char *, int, ...);
	return real_open64(rewrite(path, buf, sizeof(buf)), flags, mode);
}

FILE *fopen(const char *path, const char *mode)
{
	char buf[PATH_MAX];
	int fd = proc_xen_fd(path);
	if (fd >= 0)
		return fdopen(fd, strchr(mode, 'w') ? "r+" : "r");
	REAL(FILE *, fopen, const char *, const char *);
	return real_fopen(rewrite(path, buf, sizeof(buf)), mode);
}

int bind(int sock, const struct sockaddr *addr, socklen_t len)
{
	REAL(int, bind, int, const struct sockaddr *, socklen_t);
	if (addr && addr->sa_family == AF_UNIX) {
		const struct sockaddr_un *un = (const void *)addr;
		char buf[PATH_MAX];
		const char *p = rewrite(un->sun_path, buf, sizeof(buf));
		if (p != un->sun_path) {
			struct sockaddr_un moved = { .sun_family = AF_UNIX };
			if (strlen(p) >= sizeof(moved.sun_path)) {
				errno = ENAMETOOLONG;
				return -1;
			}
			strcpy(moved.sun_path, p);
			return real_bind(sock, (void *)&moved, sizeof(moved));
		}
	}
	return real_bind(sock, addr, len);
}

#define PATH_WRAPPER(ret, name, ...)                                     \
	ret name(const char *path, ##__VA_ARGS__)

PATH_WRAPPER(int, mkdir, mode_t mode)
{
	char buf[PATH_MAX];
	REAL(int, mkdir, const char *, mode_t);
	return real_mkdir(rewrite(path, buf, sizeof(buf)), mode);
}

PATH_WRAPPER(int, unlink)
{
	char buf[PATH_MAX];
	REAL(int, unlink, const char *);
	return real_unlink(rewrite(path, buf, sizeof(buf)));
}

PATH_WRAPPER(int, access, int mode)
{
	char buf[PATH_MAX];
	REAL(int, access, const char *, int);
	return real_access(rewrite(path, buf, sizeof(buf)), mode);
}

PATH_WRAPPER(int, stat, struct stat *st)
{
	char buf[PATH_MAX];
	REAL(int, stat, const char *, struct stat *);
	return real_stat(rewrite(path, buf, sizeof(buf)), st);
}

PATH_WRAPPER(int, stat64, struct stat64 *st)
{
	char buf[PATH_MAX];
	REAL(int, stat64, const char *, struct stat64 *);
	return real_stat64(rewrite(path, buf, sizeof(buf)), st);
}

PATH_WRAPPER(DIR *, opendir)
{
	char buf[PATH_MAX];
	REAL(DIR *, opendir, const char *);
	return real_opendir(rewrite(path, buf, sizeof(buf)));
}

PATH_WRAPPER(char *, realpath, char *resolved)
{
	char buf[PATH_MAX];
	REAL(char *, realpath, const char *, char *);
	return real_realpath(rewrite(path, buf, sizeof(buf)), resolved);
}

/* oxenstored dies when it cannot raise RLIMIT_NOFILE: clamp to the hard limit. */
int setrlimit(__rlimit_resource_t resource, const struct rlimit *rl)
{
	REAL(int, setrlimit, __rlimit_resource_t, const struct rlimit *);
	if (resource == RLIMIT_NOFILE) {
		struct rlimit now, want = *rl;
		if (getrlimit(RLIMIT_NOFILE, &now) == 0) {
			if (want.rlim_max > now.rlim_max)
				want.rlim_max = now.rlim_max;
			if (want.rlim_cur > want.rlim_max)
				want.rlim_cur = want.rlim_max;
		}
		return real_setrlimit(resource, &want);
	}
	return real_setrlimit(resource, rl);
}
