/*
 * The Xen backend's contact with Xen's C side (see src/host/xen/ctrl.rs):
 * libxenctrl's domain query through dlopen, on the ABI every supported
 * release shares (xenctrl_abi.h), and the ioctl numbers and struct sizes
 * of Linux's xen/sys headers for the Rust side's tests, which need
 * libxen-dev at build time (without it those are stubs).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "xenctrl_abi.h"

struct xss_dominfo {
	uint32_t domid;
	uint8_t dying;
	uint8_t shutdown; /* shut down or crashed */
};

/*
 * libxenctrl through dlopen, with only what xenctrl_abi.h pins down: no
 * xenctrl.h needed, so the same code talks to any release's library (the
 * Rust side picks which, src/host/xen/libxenctrl.rs).
 */
struct xss_xenctrl {
	void *lib;
	void *xch;
	xss_getinfolist_fn *getinfolist;
};

static struct xss_xenctrl ctrl;

/* Opens libxenctrl (a soname or path) once; 0 on success, else -1 with a
 * message in err. */
int xss_xenctrl_open(const char *soname, char *err, size_t len)
{
	void *(*open)(void *, void *, unsigned);

	if (ctrl.xch)
		return 0;
	ctrl.lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (!ctrl.lib) {
		snprintf(err, len, "%s", dlerror());
		return -1;
	}
	open = (void *(*)(void *, void *, unsigned))dlsym(ctrl.lib, "xc_interface_open");
	ctrl.getinfolist = (xss_getinfolist_fn *)dlsym(ctrl.lib, "xc_domain_getinfolist");
	if (!open || !ctrl.getinfolist) {
		snprintf(err, len, "%s lacks xc_interface_open/xc_domain_getinfolist", soname);
		dlclose(ctrl.lib);
		ctrl.lib = NULL;
		return -1;
	}
	ctrl.xch = open(NULL, NULL, 0);
	if (!ctrl.xch) {
		snprintf(err, len, "%s: xc_interface_open: %s", soname, strerror(errno));
		dlclose(ctrl.lib);
		ctrl.lib = NULL;
		return -1;
	}
	return 0;
}

/*
 * xc_domain_getinfolist once for up to max (at most XSS_DOMINFO_BATCH)
 * domains: the existing domains at or above first, in domid order, into
 * out. The count found, or -1 with errno set.
 */
int xss_domain_infolist(uint32_t first, unsigned int max, struct xss_dominfo *out)
{
	/* Static: 112 KiB is no stack buffer; the daemon has one thread. */
	static _Alignas(8) unsigned char infos[XSS_DOMINFO_BATCH * XSS_DOMINFO_SIZE];
	uint16_t domid;
	uint32_t flags;
	int n, i;

	if (!ctrl.xch) {
		errno = ENODEV;
		return -1;
	}
	if (max > XSS_DOMINFO_BATCH) {
		errno = EINVAL;
		return -1;
	}
	n = ctrl.getinfolist(ctrl.xch, first, max, infos);
	if (n < 0)
		return -1;
	for (i = 0; i < n && (unsigned int)i < max; i++) {
		const unsigned char *info = infos + (size_t)i * XSS_DOMINFO_SIZE;

		memcpy(&domid, info + XSS_DOMINFO_DOMAIN_OFFSET, sizeof(domid));
		memcpy(&flags, info + XSS_DOMINFO_FLAGS_OFFSET, sizeof(flags));
		out[i].domid = domid;
		out[i].dying = !!(flags & XSS_DOMINF_DYING);
		out[i].shutdown = !!(flags & XSS_DOMINF_SHUTDOWN);
	}
	return i;
}

/* For the Rust side's copy (ctrl.rs BATCH). */
unsigned int xss_dominfo_batch(void) { return XSS_DOMINFO_BATCH; }

#ifdef XSS_HAVE_XEN
/* The build's own xenctrl.h must agree with xenctrl_abi.h too. */
#include "xenctrl_abi_check.c"
#include <sys/ioctl.h>
#include <xen/sys/evtchn.h>
#include <xen/sys/gntdev.h>
#include <xen/sys/privcmd.h>

int xss_have_xen_headers(void) { return 1; }

/* What the Rust side hand-codes, as the headers have it (unit tests). */
unsigned long xss_ioctl_evtchn_bind_virq(void) { return IOCTL_EVTCHN_BIND_VIRQ; }
unsigned long xss_ioctl_evtchn_bind_interdomain(void) { return IOCTL_EVTCHN_BIND_INTERDOMAIN; }
unsigned long xss_ioctl_evtchn_unbind(void) { return IOCTL_EVTCHN_UNBIND; }
unsigned long xss_ioctl_evtchn_notify(void) { return IOCTL_EVTCHN_NOTIFY; }
unsigned long xss_ioctl_gntdev_map_grant_ref(void) { return IOCTL_GNTDEV_MAP_GRANT_REF; }
unsigned long xss_ioctl_gntdev_unmap_grant_ref(void) { return IOCTL_GNTDEV_UNMAP_GRANT_REF; }
unsigned long xss_ioctl_privcmd_mmapbatch_v2(void) { return IOCTL_PRIVCMD_MMAPBATCH_V2; }
size_t xss_sizeof_mmapbatch_v2(void) { return sizeof(struct privcmd_mmapbatch_v2); }
size_t xss_offsetof_mmapbatch_v2_addr(void) { return offsetof(struct privcmd_mmapbatch_v2, addr); }
size_t xss_offsetof_mmapbatch_v2_err(void) { return offsetof(struct privcmd_mmapbatch_v2, err); }
unsigned int xss_virq_dom_exc(void) { return VIRQ_DOM_EXC; }

#else /* no libxen-dev at build time */

int xss_have_xen_headers(void) { return 0; }

/* No header to take these from: the tests skip on xss_have_xen_headers(). */
unsigned long xss_ioctl_evtchn_bind_virq(void) { return 0; }
unsigned long xss_ioctl_evtchn_bind_interdomain(void) { return 0; }
unsigned long xss_ioctl_evtchn_unbind(void) { return 0; }
unsigned long xss_ioctl_evtchn_notify(void) { return 0; }
unsigned long xss_ioctl_gntdev_map_grant_ref(void) { return 0; }
unsigned long xss_ioctl_gntdev_unmap_grant_ref(void) { return 0; }
unsigned long xss_ioctl_privcmd_mmapbatch_v2(void) { return 0; }
size_t xss_sizeof_mmapbatch_v2(void) { return 0; }
size_t xss_offsetof_mmapbatch_v2_addr(void) { return 0; }
size_t xss_offsetof_mmapbatch_v2_err(void) { return 0; }
unsigned int xss_virq_dom_exc(void) { return 0; }
#endif
