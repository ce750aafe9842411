# The memory quota on a dom0 connection: C xenstored charges a node to its
# owner's domain, whoever writes it, and refuses (EIO) a write that would
# take an unprivileged owner to its hard quota. The quotas of a guest's own
# requests (outstanding, replies, watches, transactions) need a guest ring:
# tests/daemon/conformance_rings.rs. Not here: rewriting an existing node, or its
# permissions, past the quota, which C answers with a stale errno (ENOENT,
# EAGAIN, or none: an assertion kills it), see DIFFERENCES.md.
case memory-quota-charges-the-owner
  oxenstored: no memory quota, and its own CONTROL quota output
  xen-4.20: memory quota not checked when dom0 writes a guest's node, smaller per-node accounting, and quota reports with every quota and "(max N)"
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: MKDIR "/d\0"
    = MKDIR req=2 tx=0 "OK\0"
  a: SET_PERMS "/d\0n5\0"
    = SET_PERMS req=3 tx=0 "OK\0"
  a: CONTROL "quota\0set\0memory\0" "300\0"
    = CONTROL req=4 tx=0 "OK\0"
  a: WRITE "/d/a\0" "x"*200
    = WRITE req=5 tx=0 "OK\0"
  a: WRITE "/d/b\0" "x"*50
    = ERROR req=6 tx=0 "EIO\0"
    4.20 = WRITE req=6 tx=0 "OK\0"
  a: MKDIR "/d/c\0"
    = ERROR req=7 tx=0 "EIO\0"
    4.20 = MKDIR req=7 tx=0 "OK\0"
  a: CONTROL "quota\0" "5\0"
    = CONTROL req=8 tx=0 "Domain 5:\nnodes           :        2\nwatches         :        0\ntransactions    :        0\noutstanding     :        0\nmemory          :      272\n\0"
    4.20 = CONTROL req=8 tx=0 "Domain 5:\nnodes            :        4 (max        4)\nwatches          :        0 (max        0)\noutstanding      :        0 (max        0)\nmemory           :      366 (max      366)\ntransactions     :        0 (max        0)\ntransaction-nodes:        0 (max        0)\nnode-permissions :        0 (max        0)\npath-max         :        0 (max        0)\nnode-size        :        0 (max        0)\n\0"
  a: READ "/d/b\0"
    = ERROR req=9 tx=0 "ENOENT\0"
    4.20 = READ req=9 tx=0 "x"*50
  a: WRITE "/own\0" "x"*1000
    = WRITE req=10 tx=0 "OK\0"
  a: CONTROL "quota\0" "0\0"
    = CONTROL req=11 tx=0 "Domain 0:\nnodes           :        4\nwatches         :        0\ntransactions    :        0\noutstanding     :        0\nmemory          :     1174\n\0"
    4.20 = CONTROL req=11 tx=0 "Domain 0:\nnodes            :        6 (max        6)\nwatches          :        0 (max        0)\noutstanding      :        0 (max        1)\nmemory           :     1220 (max     1239)\ntransactions     :        0 (max        0)\ntransaction-nodes:        0 (max        0)\nnode-permissions :        0 (max        0)\npath-max         :        0 (max        0)\nnode-size        :        0 (max        0)\n\0"

case memory-quota-set-perms
  oxenstored: no memory quota, and its own CONTROL quota output
  xen-4.20: memory quota not checked when dom0 writes a guest's node, smaller per-node accounting, and quota reports with every quota and "(max N)"
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: WRITE "/d\0" "x"*200
    = WRITE req=2 tx=0 "OK\0"
  a: CONTROL "quota\0set\0memory\0" "250\0"
    = CONTROL req=3 tx=0 "OK\0"
  a: SET_PERMS "/d\0n5\0"
    = SET_PERMS req=4 tx=0 "OK\0"
  a: CONTROL "quota\0" "5\0"
    = CONTROL req=5 tx=0 "Domain 5:\nnodes           :        1\nwatches         :        0\ntransactions    :        0\noutstanding     :        0\nmemory          :      234\n\0"
    4.20 = CONTROL req=5 tx=0 "Domain 5:\nnodes            :        1 (max        1)\nwatches          :        0 (max        0)\noutstanding      :        0 (max        0)\nmemory           :      226 (max      226)\ntransactions     :        0 (max        0)\ntransaction-nodes:        0 (max        0)\nnode-permissions :        0 (max        0)\npath-max         :        0 (max        0)\nnode-size        :        0 (max        0)\n\0"
  a: SET_PERMS "/d\0n0\0"
    = SET_PERMS req=6 tx=0 "OK\0"
  a: CONTROL "quota\0" "5\0"
    = CONTROL req=7 tx=0 "Domain 5:\nnodes           :        0\nwatches         :        0\ntransactions    :        0\noutstanding     :        0\nmemory          :        0\n\0"
    4.20 = CONTROL req=7 tx=0 "Domain 5:\nnodes            :        0 (max        1)\nwatches          :        0 (max        0)\noutstanding      :        0 (max        0)\nmemory           :        0 (max      226)\ntransactions     :        0 (max        0)\ntransaction-nodes:        0 (max        0)\nnode-permissions :        0 (max        0)\npath-max         :        0 (max        0)\nnode-size        :        0 (max        0)\n\0"

case memory-quota-removal-frees
  oxenstored: no memory quota, and its own CONTROL quota output
  xen-4.20: memory quota not checked when dom0 writes a guest's node, smaller per-node accounting, and quota reports with every quota and "(max N)"
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: MKDIR "/d\0"
    = MKDIR req=2 tx=0 "OK\0"
  a: SET_PERMS "/d\0n5\0"
    = SET_PERMS req=3 tx=0 "OK\0"
  a: CONTROL "quota\0set\0memory\0" "300\0"
    = CONTROL req=4 tx=0 "OK\0"
  a: WRITE "/d/a\0" "x"*200
    = WRITE req=5 tx=0 "OK\0"
  a: WRITE "/d/b\0" "x"*100
    = ERROR req=6 tx=0 "EIO\0"
    4.20 = WRITE req=6 tx=0 "OK\0"
  a: RM "/d/a\0"
    = RM req=7 tx=0 "OK\0"
  a: WRITE "/d/b\0" "x"*100
    = WRITE req=8 tx=0 "OK\0"
  a: CONTROL "quota\0" "5\0"
    = CONTROL req=9 tx=0 "Domain 5:\nnodes           :        2\nwatches         :        0\ntransactions    :        0\noutstanding     :        0\nmemory          :      172\n\0"
    4.20 = CONTROL req=9 tx=0 "Domain 5:\nnodes            :        2 (max        3)\nwatches          :        0 (max        0)\noutstanding      :        0 (max        0)\nmemory           :      156 (max      386)\ntransactions     :        0 (max        0)\ntransaction-nodes:        0 (max        0)\nnode-permissions :        0 (max        0)\npath-max         :        0 (max        0)\nnode-size        :        0 (max        0)\n\0"

case memory-quota-soft
  oxenstored: no memory quota, and its own CONTROL quota output
  xen-4.20: memory quota not checked when dom0 writes a guest's node, smaller per-node accounting, and quota reports with every quota and "(max N)"
  a: CONTROL "quota-soft\0set\0memory\0" "100\0"
    = CONTROL req=1 tx=0 "OK\0"
  a: CONTROL "quota-soft\0"
    = CONTROL req=2 tx=0 "Quota settings:\nmemory           :      100 Total Xenstore memory per domain (warning level)\n\0"
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=3 tx=0 "OK\0"
  a: MKDIR "/d\0"
    = MKDIR req=4 tx=0 "OK\0"
  a: SET_PERMS "/d\0n5\0"
    = SET_PERMS req=5 tx=0 "OK\0"
  a: WRITE "/d/a\0" "x"*200
    = WRITE req=6 tx=0 "OK\0"
  a: CONTROL "quota\0" "5\0"
    = CONTROL req=7 tx=0 "Domain 5:\nnodes           :        2\nwatches         :        0\ntransactions    :        0\noutstanding     :        0\nmemory          :      272\n\0"
    4.20 = CONTROL req=7 tx=0 "Domain 5:\nnodes            :        2 (max        2)\nwatches          :        0 (max        0)\noutstanding      :        0 (max        0)\nmemory           :      256 (max      256)\ntransactions     :        0 (max        0)\ntransaction-nodes:        0 (max        0)\nnode-permissions :        0 (max        0)\npath-max         :        0 (max        0)\nnode-size        :        0 (max        0)\n\0"
