/*
 * The xenstore USDT provider: every probe of xenstored-shim, in one list.
 * The contract itself (probe list, packing, flags, limits) is the crate
 * xenstore-proto, which xenstored-shim and xenstore-snoop both use;
 * tests/scripts_contract.rs checks this file, man/xenstored-probes.7 and
 * scripts/ against it. Change it only by appending probes or arguments.
 *
 * Every probe has the same six arguments:
 *   arg0 serial  daemon-wide request serial (1, 2, ...); 0 when no request
 *                caused the event (a connection opening, a domain vanishing)
 *   arg1 ident   conn << 32 | op << 16 | dom
 *                (conn: connection number; op: the xs_wire.h XS_* type of
 *                the request concerned; dom: the connection's domid)
 *   arg2 client  tx << 32 | pid   (pid: dom0 client pid, 0 for domains)
 *   arg3 extra   probe-specific, see below
 *   arg4 str1    probe-specific string, see below
 *   arg5 str2    probe-specific string, see below
 * Strings are printable renderings: NUL separators become spaces, invalid
 * UTF-8 becomes U+FFFD, and str1 + str2 together stay under 3900 bytes
 * (longer ones are cut and flagged).
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
 * conn_close   extra = 0                         str1 = reason
 *                                                str2 = ""
 * tx_end       extra = outcome (0 commit, 1 abort, 2 conflict, 3 dropped)
 *                                                str1 = outcome name
 *                                                str2 = reason
 * flags: bit 0 = str1 truncated, bit 1 = str2 truncated.
 */
provider xenstore {
	probe request(uint64_t, uint64_t, uint64_t, uint64_t, char*, char*);
	probe response(uint64_t, uint64_t, uint64_t, uint64_t, char*, char*);
	probe watch_event(uint64_t, uint64_t, uint64_t, uint64_t, char*, char*);
	probe conn_open(uint64_t, uint64_t, uint64_t, uint64_t, char*, char*);
	probe conn_close(uint64_t, uint64_t, uint64_t, uint64_t, char*, char*);
	probe tx_end(uint64_t, uint64_t, uint64_t, uint64_t, char*, char*);
};
