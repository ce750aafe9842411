/*
 * The Xen backend's contact with Xen's C headers (see src/xen/ctrl.rs):
 * libxenctrl's domain query through dlopen, with xc_dominfo_t's layout
 * taken from the xenctrl.h the library was built from, and the ioctl
 * numbers and struct sizes of Linux's xen/sys headers for the Rust side's
 * tests. Without the headers (no libxen-dev) it builds as a stub.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct xss_dominfo {
	uint32_t domid;
	uint8_t dying;
	uint8_t shutdown; /* shut down or crashed */
};

#ifdef XSS_HAVE_XEN
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <xenctrl.h>
#include <xen/sys/evtchn.h>
#include <xen/sys/gntdev.h>
#include <xen/sys/privcmd.h>

struct xss_xenctrl {
	void *lib;
	xc_interface *xch;
	int (*getinfo)(xc_interface *, uint32_t, unsigned int, xc_dominfo_t *);
	int (*close)(xc_interface *);
};

static struct xss_xenctrl ctrl;

/* Opens libxenctrl once; 0 on success, else -1 with a message in err. */
int xss_xenctrl_open(char *err, size_t len)
{
	xc_interface *(*open)(xentoollog_logger *, xentoollog_logger *, unsigned);

	if (ctrl.xch)
		return 0;
	ctrl.lib = dlopen(XSS_XENCTRL_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!ctrl.lib) {
		snprintf(err, len, "%s", dlerror());
		return -1;
	}
	open = dlsym(ctrl.lib, "xc_interface_open");
	ctrl.getinfo = dlsym(ctrl.lib, "xc_domain_getinfo");
	ctrl.close = dlsym(ctrl.lib, "xc_interface_close");
	if (!open || !ctrl.getinfo || !ctrl.close) {
		snprintf(err, len, "%s lacks xc_interface_open/xc_domain_getinfo",
			 XSS_XENCTRL_SONAME);
		dlclose(ctrl.lib);
		ctrl.lib = NULL;
		return -1;
	}
	ctrl.xch = open(NULL, NULL, 0);
	if (!ctrl.xch) {
		snprintf(err, len, "xc_interface_open: %s", strerror(errno));
		dlclose(ctrl.lib);
		ctrl.lib = NULL;
		return -1;
	}
	return 0;
}

/*
 * As xenstored 4.17's get_domain_info: xc_domain_getinfo reports the
 * first domain at or above domid, so a different domid means gone.
 * 1: found, 0: no such domain, -1: the query failed (errno set).
 */
int xss_domain_info(uint32_t domid, struct xss_dominfo *out)
{
	xc_dominfo_t info;
	int n;

	if (!ctrl.xch) {
		errno = ENODEV;
		return -1;
	}
	n = ctrl.getinfo(ctrl.xch, domid, 1, &info);
	if (n < 0)
		return -1;
	if (n != 1 || info.domid != domid)
		return 0;
	out->domid = info.domid;
	out->dying = info.dying;
	out->shutdown = info.shutdown || info.crashed;
	return 1;
}

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
#include <errno.h>

int xss_xenctrl_open(char *err, size_t len)
{
	snprintf(err, len, "built without xenctrl.h (libxen-dev): no libxenctrl");
	return -1;
}

int xss_domain_info(uint32_t domid, struct xss_dominfo *out)
{
	(void)domid;
	(void)out;
	errno = ENODEV;
	return -1;
}

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
