/*
 * The part of libxenctrl's ABI the shim relies on, the same in every Xen
 * release it supports (4.17, 4.20): xc_domain_getinfolist's prototype and
 * the two fields of xc_domaininfo_t it reads. glue.c needs no xenctrl.h for
 * it, so one binary talks to whichever release's library the host has;
 * xenctrl_abi_check.c proves these values against each release's headers.
 */
#ifndef XSS_XENCTRL_ABI_H
#define XSS_XENCTRL_ABI_H

#include <stdint.h>

/* xc_domain_getinfolist(xch, first_domain, max_domains, info) */
typedef int xss_getinfolist_fn(void *xch, uint32_t first_domain, unsigned int max_domains,
			       void *info);

/* xc_domaininfo_t (struct xen_domctl_getdomaininfo): 112 bytes in 4.17 and
 * 4.20, the stride of the array xc_domain_getinfolist fills. */
#define XSS_DOMINFO_SIZE 112
/* Most domain infos one query asks for (one firing of VIRQ_DOM_EXC asks
 * about every introduced domain, a batch at a time). */
#define XSS_DOMINFO_BATCH 1024
#define XSS_DOMINFO_DOMAIN_OFFSET 0 /* domid_t domain */
#define XSS_DOMINFO_FLAGS_OFFSET 4  /* uint32_t flags */
#define XSS_DOMINF_DYING (1U << 0)
#define XSS_DOMINF_SHUTDOWN (1U << 2) /* shut down, crashed included */

#endif
