/*
 * Compiled (never run) against a Xen release's xenctrl.h by
 * tests/daemon/xenctrl_abi.rs and by glue.c's build: fails to compile when that
 * release's libxenctrl differs from what xenctrl_abi.h assumes.
 */
#include <stddef.h>
#include <xenctrl.h>

#include "xenctrl_abi.h"

_Static_assert(__builtin_types_compatible_p(__typeof__(&xc_domain_getinfolist),
					    int (*)(xc_interface *, uint32_t, unsigned int,
						    xc_domaininfo_t *)),
	       "xc_domain_getinfolist's prototype changed");
_Static_assert(sizeof(xc_domaininfo_t) == XSS_DOMINFO_SIZE,
	       "xc_domaininfo_t changed size (the stride of getinfolist's array)");
_Static_assert(offsetof(xc_domaininfo_t, domain) == XSS_DOMINFO_DOMAIN_OFFSET,
	       "xc_domaininfo_t.domain moved");
_Static_assert(sizeof(((xc_domaininfo_t *)0)->domain) == sizeof(uint16_t),
	       "xc_domaininfo_t.domain changed size");
_Static_assert(offsetof(xc_domaininfo_t, flags) == XSS_DOMINFO_FLAGS_OFFSET,
	       "xc_domaininfo_t.flags moved");
_Static_assert(sizeof(((xc_domaininfo_t *)0)->flags) == sizeof(uint32_t),
	       "xc_domaininfo_t.flags changed size");
_Static_assert(XEN_DOMINF_dying == XSS_DOMINF_DYING, "XEN_DOMINF_dying changed");
_Static_assert(XEN_DOMINF_shutdown == XSS_DOMINF_SHUTDOWN, "XEN_DOMINF_shutdown changed");
_Static_assert(__builtin_types_compatible_p(__typeof__(&xc_interface_open),
					    xc_interface *(*)(xentoollog_logger *,
							      xentoollog_logger *, unsigned)),
	       "xc_interface_open's prototype changed");
