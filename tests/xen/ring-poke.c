/*
 * ring-poke DOMID MFN: dom0 corrupts a live guest's xenstore ring indices
 * (the page at MFN, mapped with privcmd) as a broken or hostile guest
 * would: rsp_cons 64 KiB ahead of rsp_prod, so "unread" replies exceed
 * XENSTORE_RING_SIZE. The next watch event xenstored writes to the guest
 * meets them (the response side: the guest kernel repairs a corrupt request
 * side itself before xenstored can see it). The real-Xen harness then
 * checks that xenstored is alive and serving.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <xenforeignmemory.h>
#include <xen/io/xs_wire.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: ring-poke DOMID MFN\n");
        return 2;
    }
    int domid = atoi(argv[1]);
    xen_pfn_t mfn = strtoull(argv[2], NULL, 0);
    xenforeignmemory_handle *fmem = xenforeignmemory_open(NULL, 0);
    if (!fmem) {
        perror("xenforeignmemory_open");
        return 1;
    }
    int err = 0;
    struct xenstore_domain_interface *intf =
        xenforeignmemory_map(fmem, domid, PROT_READ | PROT_WRITE, 1, &mfn, &err);
    if (!intf || err) {
        fprintf(stderr, "mapping domain %d's mfn %#lx: %s\n", domid, (unsigned long)mfn,
                strerror(err ? err : 22));
        return 1;
    }
    printf("before: req %u..%u rsp %u..%u\n", intf->req_cons, intf->req_prod, intf->rsp_cons,
           intf->rsp_prod);
    intf->rsp_cons = intf->rsp_prod + 0x10000;
    __sync_synchronize();
    printf("after: req %u..%u rsp %u..%u\n", intf->req_cons, intf->req_prod, intf->rsp_cons,
           intf->rsp_prod);
    xenforeignmemory_unmap(fmem, intf, 1);
    xenforeignmemory_close(fmem);
    return 0;
}
