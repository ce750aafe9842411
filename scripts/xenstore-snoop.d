#!/usr/sbin/dtrace -Cqs
/*
 * xenstore-snoop.d - the classic xenstore-snoop output from DTrace (illumos,
 * FreeBSD), over the `xenstore` USDT provider of xenstored-shim. The probe
 * list and argument packing are the crate xenstore-proto's;
 * tests/contract/scripts_contract.rs checks this file against it (probe names, argument order,
 * packing, op and error tables). ONLY CHECKED, NOT RUN: this project is
 * tested on Linux, where there is no DTrace (see man/xenstore-scripts.7).
 *
 * USAGE
 *   dtrace -Cqs scripts/xenstore-snoop.d                # every xenstored-shim
 *   dtrace -Cqs scripts/xenstore-snoop.d -p PID         # ... or one daemon
 * (the probes would be xenstore<PID>:::request etc. Nothing registers the
 * provider with DTrace today: the daemon is Linux-only and its probes are
 * SystemTap-style .note.stapsdt notes (xenstored-probes/src/probes/sdt.rs), which DTrace does not
 * read; a port would have to register them, as DOF, at start.)
 *
 * OUTPUT: as xenstore-snoop and scripts/xenstore-snoop.bt:
 *   DOM PID    TX  OP
 *   0   100313 0   XS_GET_DOMAIN_PATH: 6 -> /local/domain/6
 *   6   0      0   [ERROR] XS_READ: device/vif/0/type -> ENOENT
 *   0   0      -   XS_WATCH_EVENT: /local/domain/6/device/vbd/0/state FFFFFF0177B8F048
 * Strings are cut at strsize (4096 here, so never: the daemon keeps them
 * under 3900 bytes) and printed unescaped.
 */
#pragma D option strsize=4096
#pragma D option bufsize=16m
#pragma D option switchrate=10hz

/* xs_wire.h message types; 20 was XS_RESTRICT, 23..26 newest xenstore.txt */
BEGIN
{
	op_name[0] = "XS_CONTROL";
	op_name[1] = "XS_DIRECTORY";
	op_name[2] = "XS_READ";
	op_name[3] = "XS_GET_PERMS";
	op_name[4] = "XS_WATCH";
	op_name[5] = "XS_UNWATCH";
	op_name[6] = "XS_TRANSACTION_START";
	op_name[7] = "XS_TRANSACTION_END";
	op_name[8] = "XS_INTRODUCE";
	op_name[9] = "XS_RELEASE";
	op_name[10] = "XS_GET_DOMAIN_PATH";
	op_name[11] = "XS_WRITE";
	op_name[12] = "XS_MKDIR";
	op_name[13] = "XS_RM";
	op_name[14] = "XS_SET_PERMS";
	op_name[15] = "XS_WATCH_EVENT";
	op_name[16] = "XS_ERROR";
	op_name[17] = "XS_IS_DOMAIN_INTRODUCED";
	op_name[18] = "XS_RESUME";
	op_name[19] = "XS_SET_TARGET";
	op_name[20] = "XS_RESTRICT";
	op_name[21] = "XS_RESET_WATCHES";
	op_name[22] = "XS_DIRECTORY_PART";
	op_name[23] = "XS_GET_FEATURE";
	op_name[24] = "XS_SET_FEATURE";
	op_name[25] = "XS_GET_QUOTA";
	op_name[26] = "XS_SET_QUOTA";
	printf("%-3s %-6s %-3s %s\n", "DOM", "PID", "TX", "OP");
}

/* arg0 serial, arg4 path (first argument), arg5 the remaining arguments */
xenstore*:::request
{
	this->serial = (uint64_t)arg0;
	pending[this->serial] = 1;
	path[this->serial] = copyinstr(arg4);
	value[this->serial] = copyinstr(arg5);
}

/*
 * arg1 conn<<32 | op<<16 | dom, arg2 tx<<32 | pid,
 * arg3 flags<<48 | errno<<32 | req_id, arg4 result or error name
 */
xenstore*:::response
/pending[(uint64_t)arg0]/
{
	this->serial = (uint64_t)arg0;
	this->conn = ((uint64_t)arg1 >> 32) & 0xffffffff;
	this->op = ((uint64_t)arg1 >> 16) & 0xffff;
	this->dom = ((uint64_t)arg1 >> 0) & 0xffff;
	this->tx = ((uint64_t)arg2 >> 32) & 0xffffffff;
	this->pid = ((uint64_t)arg2 >> 0) & 0xffffffff;
	this->flags = ((uint64_t)arg3 >> 48) & 0xffff;
	this->errno = ((uint64_t)arg3 >> 32) & 0xffff;
	this->req_id = ((uint64_t)arg3 >> 0) & 0xffffffff;
	this->result = copyinstr(arg4);
	this->name = op_name[this->op] != "" ? op_name[this->op] : "XS_UNKNOWN";
	/* each non-empty argument after a space, as xenstore-snoop prints */
	this->args = path[this->serial] == "" ? "" :
	    strjoin(" ", path[this->serial]);
	this->args = value[this->serial] == "" ? this->args :
	    strjoin(this->args, strjoin(" ", value[this->serial]));
	printf("%-3d %-6d %-3d %s%s:%s -> %s\n", this->dom, this->pid, this->tx,
	    this->errno ? "[ERROR] " : "", this->name, this->args, this->result);
	pending[this->serial] = 0;
	path[this->serial] = 0;
	value[this->serial] = 0;
}

/* arg1/arg2: the watching connection; arg4 event path, arg5 token */
xenstore*:::watch_event
{
	this->conn = ((uint64_t)arg1 >> 32) & 0xffffffff;
	this->dom = ((uint64_t)arg1 >> 0) & 0xffff;
	this->pid = ((uint64_t)arg2 >> 0) & 0xffffffff;
	this->firer_conn = (uint64_t)arg3;
	this->path = copyinstr(arg4);
	this->token = copyinstr(arg5);
	printf("%-3d %-6d %-3s XS_WATCH_EVENT: %s %s\n", this->dom, this->pid, "-",
	    this->path, this->token);
}
