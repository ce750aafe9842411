# What makes a transaction conflict, and what its commit fires.
case read-missing-then-created-outside
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: READ tx=$t "/n\0"
    = ERROR req=2 tx=$t "ENOENT\0"
  b: WRITE "/n\0v"
    = WRITE req=3 tx=0 "OK\0"
  a: WRITE tx=$t "/other\0x"
    = WRITE req=4 tx=$t "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = ERROR req=5 tx=$t "EAGAIN\0"

case directory-then-child-value-changed-outside
  a: WRITE "/d/c\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: DIRECTORY tx=$t "/d\0"
    = DIRECTORY req=3 tx=$t "c\0"
  b: WRITE "/d/c\0w"
    = WRITE req=4 tx=0 "OK\0"
  a: WRITE tx=$t "/x\0"
    = WRITE req=5 tx=$t "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=6 tx=$t "OK\0"

case get-perms-then-perms-changed-outside
  oxenstored: merges transactions: no conflict on reads or on nodes changed outside (C: EAGAIN)
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: GET_PERMS tx=$t "/p\0"
    = GET_PERMS req=3 tx=$t "n0\0"
  b: SET_PERMS "/p\0n0\0r2\0"
    = SET_PERMS req=4 tx=0 "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = ERROR req=5 tx=$t "EAGAIN\0"

case write-then-same-value-outside
  differs: transactions conflict only on what they read (C: EAGAIN whenever a touched node was rewritten)
  oxenstored: merges transactions: no conflict on reads or on nodes changed outside (C: EAGAIN)
  a: WRITE "/s\0same"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: WRITE tx=$t "/s\0mine"
    = WRITE req=3 tx=$t "OK\0"
  b: WRITE "/s\0same"
    = WRITE req=4 tx=0 "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = ERROR req=5 tx=$t "EAGAIN\0"
  ~ TRANSACTION_END req=5 tx=$t "OK\0"

case outside-change-then-reverted
  differs: transactions conflict only on what they read (C: EAGAIN whenever a touched node was rewritten)
  oxenstored: merges transactions: no conflict on reads or on nodes changed outside (C: EAGAIN)
  a: WRITE "/s\0orig"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: READ tx=$t "/s\0"
    = READ req=3 tx=$t "orig"
  b: WRITE "/s\0changed"
    = WRITE req=4 tx=0 "OK\0"
  b: WRITE "/s\0orig"
    = WRITE req=5 tx=0 "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = ERROR req=6 tx=$t "EAGAIN\0"
  ~ TRANSACTION_END req=6 tx=$t "OK\0"

case write-only-no-read-conflict
  differs: transactions conflict only on what they read (C: EAGAIN whenever a touched node was rewritten)
  oxenstored: merges transactions: no conflict on reads or on nodes changed outside (C: EAGAIN)
  a: WRITE "/s\0orig"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: WRITE tx=$t "/s\0mine"
    = WRITE req=3 tx=$t "OK\0"
  b: WRITE "/s\0theirs"
    = WRITE req=4 tx=0 "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = ERROR req=5 tx=$t "EAGAIN\0"
  ~ TRANSACTION_END req=5 tx=$t "OK\0"
  a: READ "/s\0"
    = READ req=6 tx=0 "theirs"
  ~ READ req=6 tx=0 "mine"

case rm-in-tx-then-child-added-outside
  oxenstored: merges transactions: no conflict on reads or on nodes changed outside (C: EAGAIN)
  a: WRITE "/r/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: RM tx=$t "/r\0"
    = RM req=3 tx=$t "OK\0"
  b: WRITE "/r/b\0"
    = WRITE req=4 tx=0 "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = ERROR req=5 tx=$t "EAGAIN\0"
  a: DIRECTORY "/r\0"
    = DIRECTORY req=6 tx=0 "a\0b\0"

case write-then-rm-in-tx
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: WRITE tx=$t "/wr\0v"
    = WRITE req=2 tx=$t "OK\0"
  a: RM tx=$t "/wr\0"
    = RM req=3 tx=$t "OK\0"
  a: READ tx=$t "/wr\0"
    = ERROR req=4 tx=$t "ENOENT\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=5 tx=$t "OK\0"
  a: READ "/wr\0"
    = ERROR req=6 tx=0 "ENOENT\0"

case rm-then-write-in-tx
  a: WRITE "/rw\0old"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: RM tx=$t "/rw\0"
    = RM req=3 tx=$t "OK\0"
  a: WRITE tx=$t "/rw\0new"
    = WRITE req=4 tx=$t "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=5 tx=$t "OK\0"
  a: READ "/rw\0"
    = READ req=6 tx=0 "new"

case mkdir-existing-in-tx
  a: WRITE "/m\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: MKDIR tx=$t "/m\0"
    = MKDIR req=3 tx=$t "OK\0"
  a: READ tx=$t "/m\0"
    = READ req=4 tx=$t "v"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=5 tx=$t "OK\0"

case rm-missing-in-tx
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: RM tx=$t "/nothing\0"
    = RM req=2 tx=$t "OK\0"
  a: RM tx=$t "/nothing/deeper\0"
    = ERROR req=3 tx=$t "ENOENT\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=4 tx=$t "OK\0"

case commit-rm-subtree-fires-watches
  a: WRITE "/t/a/b\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "/t/a/b\0deep\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t/a/b\0deep\0"
  a: WATCH "/t\0top\0"
    = WATCH req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t\0top\0"
  b: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=4 tx=0 "$t\0"
  b: RM tx=$t "/t/a\0"
    = RM req=5 tx=$t "OK\0"
  b: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=6 tx=$t "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t/a\0top\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t/a/b\0deep\0"
  a: quiet

case commit-fires-in-write-order
  a: WATCH "/o\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/o\0tok\0"
  b: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  b: WRITE tx=$t "/o/z\0"
    = WRITE req=3 tx=$t "OK\0"
  b: WRITE tx=$t "/o/a\0"
    = WRITE req=4 tx=$t "OK\0"
  b: WRITE tx=$t "/o/m\0"
    = WRITE req=5 tx=$t "OK\0"
  b: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=6 tx=$t "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/o/z\0tok\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/o/a\0tok\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/o/m\0tok\0"
  a: quiet

case commit-same-node-twice-fires-once
  oxenstored: fires a watch event per request at commit, not once per path
  a: WATCH "/o\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/o\0tok\0"
  b: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  b: WRITE tx=$t "/o\01"
    = WRITE req=3 tx=$t "OK\0"
  b: WRITE tx=$t "/o\02"
    = WRITE req=4 tx=$t "OK\0"
  b: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=5 tx=$t "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/o\0tok\0"
  a: quiet

case conflict-fires-nothing
  a: WRITE "/c\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "/c\0tok\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/c\0tok\0"
  b: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=3 tx=0 "$t\0"
  b: READ tx=$t "/c\0"
    = READ req=4 tx=$t "v"
  c: WRITE "/c\0w"
    = WRITE req=5 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/c\0tok\0"
  b: WRITE tx=$t "/c\0x"
    = WRITE req=6 tx=$t "OK\0"
  b: TRANSACTION_END tx=$t "T\0"
    = ERROR req=7 tx=$t "EAGAIN\0"
  a: quiet

case perms-inherited-in-tx
  a: WRITE "/ip\0"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/ip\0n4\0r6\0"
    = SET_PERMS req=2 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=3 tx=0 "$t\0"
  a: WRITE tx=$t "/ip/child\0"
    = WRITE req=4 tx=$t "OK\0"
  a: GET_PERMS tx=$t "/ip/child\0"
    = GET_PERMS req=5 tx=$t "n4\0r6\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=6 tx=$t "OK\0"
  a: GET_PERMS "/ip/child\0"
    = GET_PERMS req=7 tx=0 "n4\0r6\0"

case directory-part-in-tx
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  xen-4.20: every DIRECTORY_PART generation is 2 higher (more changes at start-up); which replies share one is the same
  a: WRITE "/dp/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: WRITE tx=$t "/dp/b\0"
    = WRITE req=3 tx=$t "OK\0"
  a: DIRECTORY_PART tx=$t "/dp\00\0"
    = DIRECTORY_PART req=4 tx=$t "9\0a\0b\0\0"
    4.20 = DIRECTORY_PART req=4 tx=$t "11\0a\0b\0\0"
  b: DIRECTORY_PART "/dp\00\0"
    = DIRECTORY_PART req=5 tx=0 "5\0a\0\0"
    4.20 = DIRECTORY_PART req=5 tx=0 "7\0a\0\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=6 tx=$t "OK\0"
  b: DIRECTORY_PART "/dp\00\0"
    = DIRECTORY_PART req=7 tx=0 "11\0a\0b\0\0"
    4.20 = DIRECTORY_PART req=7 tx=0 "13\0a\0b\0\0"

case long-transaction-many-ops
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: WRITE tx=$t "/l/1\0a"
    = WRITE req=2 tx=$t "OK\0"
  a: WRITE tx=$t "/l/2\0b"
    = WRITE req=3 tx=$t "OK\0"
  a: MKDIR tx=$t "/l/3\0"
    = MKDIR req=4 tx=$t "OK\0"
  a: SET_PERMS tx=$t "/l/1\0n0\0r1\0"
    = SET_PERMS req=5 tx=$t "OK\0"
  a: RM tx=$t "/l/2\0"
    = RM req=6 tx=$t "OK\0"
  a: DIRECTORY tx=$t "/l\0"
    = DIRECTORY req=7 tx=$t "1\03\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=8 tx=$t "OK\0"
  b: DIRECTORY "/l\0"
    = DIRECTORY req=9 tx=0 "1\03\0"
  b: GET_PERMS "/l/1\0"
    = GET_PERMS req=10 tx=0 "n0\0r1\0"

case abort-then-new-transaction
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: WRITE tx=$t "/ab\0v"
    = WRITE req=2 tx=$t "OK\0"
  a: TRANSACTION_END tx=$t "F\0"
    = TRANSACTION_END req=3 tx=$t "OK\0"
  a: TRANSACTION_START "\0" -> $u
    = TRANSACTION_START req=4 tx=0 "$u\0"
  a: READ tx=$u "/ab\0"
    = ERROR req=5 tx=$u "ENOENT\0"
  a: TRANSACTION_END tx=$u "T\0"
    = TRANSACTION_END req=6 tx=$u "OK\0"

case tx-id-reuse-after-end
  oxenstored: EIO for an unknown transaction id (C: ENOENT)
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=2 tx=$t "OK\0"
  a: TRANSACTION_START "\0" -> $u
    = TRANSACTION_START req=3 tx=0 "$u\0"
  a: WRITE tx=$t "/x\0v"
    = ERROR req=4 tx=$t "ENOENT\0"

case commit-rm-subtree-registration-reversed
  a: WRITE "/t/a/b\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "/t\0top\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t\0top\0"
  a: WATCH "/t/a/b\0deep\0"
    = WATCH req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t/a/b\0deep\0"
  b: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=4 tx=0 "$t\0"
  b: RM tx=$t "/t/a\0"
    = RM req=5 tx=$t "OK\0"
  b: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=6 tx=$t "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t/a\0top\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t/a/b\0deep\0"
  a: quiet

case commit-write-then-rm-fires
  oxenstored: fires a watch event per request at commit, not once per path
  a: WRITE "/wr\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "/wr\0tok\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/wr\0tok\0"
  b: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=3 tx=0 "$t\0"
  b: WRITE tx=$t "/wr\0w"
    = WRITE req=4 tx=$t "OK\0"
  b: RM tx=$t "/wr\0"
    = RM req=5 tx=$t "OK\0"
  b: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=6 tx=$t "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/wr\0tok\0"
  a: quiet

case commit-set-perms-and-write-same-node
  oxenstored: fires a watch event per request at commit, not once per path
  a: WRITE "/sw\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "/sw\0tok\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/sw\0tok\0"
  b: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=3 tx=0 "$t\0"
  b: WRITE tx=$t "/sw\0w"
    = WRITE req=4 tx=$t "OK\0"
  b: SET_PERMS tx=$t "/sw\0n0\0r1\0"
    = SET_PERMS req=5 tx=$t "OK\0"
  b: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=6 tx=$t "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/sw\0tok\0"
  a: quiet

case commit-child-then-parent-order
  a: WATCH "/cp\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/cp\0tok\0"
  b: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  b: WRITE tx=$t "/cp/a/b\0"
    = WRITE req=3 tx=$t "OK\0"
  b: WRITE tx=$t "/cp/a\0v"
    = WRITE req=4 tx=$t "OK\0"
  b: WRITE tx=$t "/cp\0w"
    = WRITE req=5 tx=$t "OK\0"
  b: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=6 tx=$t "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/cp/a/b\0tok\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/cp/a\0tok\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/cp\0tok\0"
  a: quiet

case rm-in-tx-of-node-created-outside-after-start
  oxenstored: transactions are snapshots: nodes created outside after the start are invisible (C reads through)
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  b: MKDIR "/f/a/c\0"
    = MKDIR req=2 tx=0 "OK\0"
  a: RM tx=$t "/f/a\0"
    = RM req=3 tx=$t "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=4 tx=$t "OK\0"

case rm-in-tx-under-parent-created-in-tx
  oxenstored: merges transactions: no conflict on reads or on nodes changed outside (C: EAGAIN)
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: WRITE tx=$t "/p\0"
    = WRITE req=2 tx=$t "OK\0"
  b: WRITE "/p/x\0"
    = WRITE req=3 tx=0 "OK\0"
  a: RM tx=$t "/p/x\0"
    = ERROR req=4 tx=$t "EIO\0"
  a: TRANSACTION_END tx=$t "T\0"
    = ERROR req=5 tx=$t "EAGAIN\0"

case read-in-tx-of-node-created-outside-after-start
  oxenstored: transactions are snapshots: nodes created outside after the start are invisible (C reads through)
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  b: WRITE "/n\0v"
    = WRITE req=2 tx=0 "OK\0"
  a: READ tx=$t "/n\0"
    = READ req=3 tx=$t "v"
  a: WRITE tx=$t "/n/c\0"
    = WRITE req=4 tx=$t "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=5 tx=$t "OK\0"

case rm-in-tx-after-missing-sibling-read
  oxenstored: transactions are snapshots: nodes created outside after the start are invisible (C reads through)
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: GET_PERMS tx=$t "/f/b\0"
    = ERROR req=2 tx=$t "ENOENT\0"
  b: MKDIR "/f/a/c\0"
    = MKDIR req=3 tx=0 "OK\0"
  a: RM tx=$t "/f/a\0"
    = ERROR req=4 tx=$t "EINVAL\0"

case rm-in-tx-after-missing-parent-read
  oxenstored: transactions are snapshots: nodes created outside after the start are invisible (C reads through)
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: READ tx=$t "/f\0"
    = ERROR req=2 tx=$t "ENOENT\0"
  b: MKDIR "/f/a/c\0"
    = MKDIR req=3 tx=0 "OK\0"
  a: RM tx=$t "/f/a\0"
    = ERROR req=4 tx=$t "EINVAL\0"
  a: TRANSACTION_END tx=$t "T\0"
    = ERROR req=5 tx=$t "EAGAIN\0"

case missing-node-stays-missing-in-tx
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: READ tx=$t "/n\0"
    = ERROR req=2 tx=$t "ENOENT\0"
  b: WRITE "/n\0v"
    = WRITE req=3 tx=0 "OK\0"
  a: READ tx=$t "/n\0"
    = ERROR req=4 tx=$t "ENOENT\0"
  a: DIRECTORY tx=$t "/n\0"
    = ERROR req=5 tx=$t "ENOENT\0"

case missing-after-directory-stays-missing-in-tx
  oxenstored: transactions are snapshots: nodes created outside after the start are invisible (C reads through)
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: DIRECTORY tx=$t "/f/a\0"
    = ERROR req=2 tx=$t "ENOENT\0"
  b: WRITE "/f/a/c\0v"
    = WRITE req=3 tx=0 "OK\0"
  a: READ tx=$t "/f/a\0"
    = ERROR req=4 tx=$t "ENOENT\0"
  a: READ tx=$t "/f/a/c\0"
    = READ req=5 tx=$t "v"
  a: TRANSACTION_END tx=$t "T\0"
    = ERROR req=6 tx=$t "EAGAIN\0"

case existing-node-read-stays-in-tx
  a: WRITE "/n\0old"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: READ tx=$t "/n\0"
    = READ req=3 tx=$t "old"
  b: WRITE "/n\0new"
    = WRITE req=4 tx=0 "OK\0"
  a: READ tx=$t "/n\0"
    = READ req=5 tx=$t "old"
  b: RM "/n\0"
    = RM req=6 tx=0 "OK\0"
  a: READ tx=$t "/n\0"
    = READ req=7 tx=$t "old"

case missing-node-stays-missing-for-rm-and-set-perms
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: READ tx=$t "/n\0"
    = ERROR req=2 tx=$t "ENOENT\0"
  b: WRITE "/n\0v"
    = WRITE req=3 tx=0 "OK\0"
  a: SET_PERMS tx=$t "/n\0n0\0r1\0"
    = ERROR req=4 tx=$t "ENOENT\0"
  a: GET_PERMS tx=$t "/n\0"
    = ERROR req=5 tx=$t "ENOENT\0"
  a: RM tx=$t "/n\0"
    = RM req=6 tx=$t "OK\0"
  a: WRITE tx=$t "/n\0mine"
    = WRITE req=7 tx=$t "OK\0"
  a: READ tx=$t "/n\0"
    = READ req=8 tx=$t "mine"
  a: TRANSACTION_END tx=$t "T\0"
    = ERROR req=9 tx=$t "EAGAIN\0"
