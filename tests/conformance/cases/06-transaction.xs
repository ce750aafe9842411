# XS_TRANSACTION_START (6) "\0" -> "<id>\0"; XS_TRANSACTION_END (7) "T\0"
# commits, "F\0" aborts. Transaction ids are shown as $variables.
case start-end-commit
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=2 tx=$t "OK\0"

case start-end-abort
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: TRANSACTION_END tx=$t "F\0"
    = TRANSACTION_END req=2 tx=$t "OK\0"

case commit-visible
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: WRITE tx=$t "/t\0v"
    = WRITE req=2 tx=$t "OK\0"
  b: READ "/t\0"
    = ERROR req=3 tx=0 "ENOENT\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=4 tx=$t "OK\0"
  b: READ "/t\0"
    = READ req=5 tx=0 "v"

case abort-invisible
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: WRITE tx=$t "/t\0v"
    = WRITE req=2 tx=$t "OK\0"
  a: TRANSACTION_END tx=$t "F\0"
    = TRANSACTION_END req=3 tx=$t "OK\0"
  b: READ "/t\0"
    = ERROR req=4 tx=0 "ENOENT\0"

case read-own-write
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: WRITE tx=$t "/t\0v"
    = WRITE req=2 tx=$t "OK\0"
  a: READ tx=$t "/t\0"
    = READ req=3 tx=$t "v"

case conflict-write-write
  a: WRITE "/t\0old"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: READ tx=$t "/t\0"
    = READ req=3 tx=$t "old"
  b: WRITE "/t\0other"
    = WRITE req=4 tx=0 "OK\0"
  a: WRITE tx=$t "/t\0mine"
    = WRITE req=5 tx=$t "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = ERROR req=6 tx=$t "EAGAIN\0"
  b: READ "/t\0"
    = READ req=7 tx=0 "other"

case conflict-read-only
  oxenstored: merges transactions: no conflict on reads or on nodes changed outside (C: EAGAIN)
  a: WRITE "/t\0old"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: READ tx=$t "/t\0"
    = READ req=3 tx=$t "old"
  b: WRITE "/t\0other"
    = WRITE req=4 tx=0 "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = ERROR req=5 tx=$t "EAGAIN\0"

case no-conflict-unrelated
  a: WRITE "/t\0old"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: READ tx=$t "/t\0"
    = READ req=3 tx=$t "old"
  b: WRITE "/unrelated\0x"
    = WRITE req=4 tx=0 "OK\0"
  a: WRITE tx=$t "/t\0mine"
    = WRITE req=5 tx=$t "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=6 tx=$t "OK\0"
  b: READ "/t\0"
    = READ req=7 tx=0 "mine"

case conflict-on-new-child
  a: WRITE "/t\0"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: DIRECTORY tx=$t "/t\0"
    = DIRECTORY req=3 tx=$t ""
  b: WRITE "/t/new\0x"
    = WRITE req=4 tx=0 "OK\0"
  a: WRITE tx=$t "/t/mine\0y"
    = WRITE req=5 tx=$t "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = ERROR req=6 tx=$t "EAGAIN\0"

case conflict-abort-is-ok
  a: WRITE "/t\0old"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: READ tx=$t "/t\0"
    = READ req=3 tx=$t "old"
  b: WRITE "/t\0other"
    = WRITE req=4 tx=0 "OK\0"
  a: TRANSACTION_END tx=$t "F\0"
    = TRANSACTION_END req=5 tx=$t "OK\0"

case two-transactions-one-connection
  differs: transactions conflict only on what they read (C: EAGAIN whenever a touched node was rewritten)
  oxenstored: merges transactions: no conflict on reads or on nodes changed outside (C: EAGAIN)
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: TRANSACTION_START "\0" -> $u
    = TRANSACTION_START req=2 tx=0 "$u\0"
  a: WRITE tx=$t "/one\0"
    = WRITE req=3 tx=$t "OK\0"
  a: WRITE tx=$u "/two\0"
    = WRITE req=4 tx=$u "OK\0"
  a: TRANSACTION_END tx=$u "T\0"
    = TRANSACTION_END req=5 tx=$u "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = ERROR req=6 tx=$t "EAGAIN\0"
  ~ TRANSACTION_END req=6 tx=$t "OK\0"
  a: DIRECTORY "/\0"
    = DIRECTORY req=7 tx=0 "tool\0two\0"
  ~ DIRECTORY req=7 tx=0 "tool\0two\0one\0"

case end-twice
  oxenstored: EIO for an unknown transaction id (C: ENOENT)
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=2 tx=$t "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = ERROR req=3 tx=$t "ENOENT\0"

case end-without-transaction
  a: TRANSACTION_END "T\0"
    = ERROR req=1 tx=0 "ENOENT\0"

case end-unknown-id
  oxenstored: EIO for an unknown transaction id (C: ENOENT)
  a: TRANSACTION_END tx=99999 "T\0"
    = ERROR req=1 tx=99999 "ENOENT\0"

case end-bad-arg
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: TRANSACTION_END tx=$t "X\0"
    = ERROR req=2 tx=$t "EINVAL\0"

case end-lowercase
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: TRANSACTION_END tx=$t "t\0"
    = ERROR req=2 tx=$t "EINVAL\0"

case end-empty
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: TRANSACTION_END tx=$t ""
    = ERROR req=2 tx=$t "EINVAL\0"

case end-no-nul
  oxenstored: accepts TRANSACTION_END "T" without its NUL
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: TRANSACTION_END tx=$t "T"
    = ERROR req=2 tx=$t "EINVAL\0"

case start-no-nul
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: TRANSACTION_START "" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"

case start-with-junk
  a: TRANSACTION_START "junk\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"

case start-inside-transaction
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: TRANSACTION_START tx=$t "\0"
    = ERROR req=2 tx=$t "EBUSY\0"

case other-connections-id
  oxenstored: EIO for an unknown transaction id (C: ENOENT)
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  b: READ tx=1 "/\0"
    = ERROR req=2 tx=1 "ENOENT\0"
  b: WRITE tx=1 "/x\0y"
    = ERROR req=3 tx=1 "ENOENT\0"

case unknown-id-write
  oxenstored: EIO for an unknown transaction id (C: ENOENT)
  a: WRITE tx=31337 "/x\0y"
    = ERROR req=1 tx=31337 "ENOENT\0"

case unknown-id-read
  oxenstored: EIO for an unknown transaction id (C: ENOENT)
  a: READ tx=31337 "/\0"
    = ERROR req=1 tx=31337 "ENOENT\0"

case rm-in-transaction
  a: WRITE "/r/c\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: RM tx=$t "/r\0"
    = RM req=3 tx=$t "OK\0"
  b: READ "/r/c\0"
    = READ req=4 tx=0 "v"
  a: READ tx=$t "/r/c\0"
    = ERROR req=5 tx=$t "ENOENT\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=6 tx=$t "OK\0"
  b: READ "/r/c\0"
    = ERROR req=7 tx=0 "ENOENT\0"

case mkdir-in-transaction
  oxenstored: its store starts with @introduceDomain, @releaseDomain and /local as nodes
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: MKDIR tx=$t "/m\0"
    = MKDIR req=2 tx=$t "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=3 tx=$t "OK\0"
  a: DIRECTORY "/\0"
    = DIRECTORY req=4 tx=0 "tool\0m\0"

case set-perms-in-transaction
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: SET_PERMS tx=$t "/p\0n1\0"
    = SET_PERMS req=3 tx=$t "OK\0"
  b: GET_PERMS "/p\0"
    = GET_PERMS req=4 tx=0 "n0\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=5 tx=$t "OK\0"
  b: GET_PERMS "/p\0"
    = GET_PERMS req=6 tx=0 "n1\0"

case closing-connection-aborts
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: WRITE tx=$t "/gone\0v"
    = WRITE req=2 tx=$t "OK\0"
  a: close
  b: READ "/gone\0"
    = ERROR req=3 tx=0 "ENOENT\0"

case many-transactions-dom0
  a: TRANSACTION_START "\0" -> $t1
    = TRANSACTION_START req=1 tx=0 "$t1\0"
  a: TRANSACTION_START "\0" -> $t2
    = TRANSACTION_START req=2 tx=0 "$t2\0"
  a: TRANSACTION_START "\0" -> $t3
    = TRANSACTION_START req=3 tx=0 "$t3\0"
  a: TRANSACTION_START "\0" -> $t4
    = TRANSACTION_START req=4 tx=0 "$t4\0"
  a: TRANSACTION_START "\0" -> $t5
    = TRANSACTION_START req=5 tx=0 "$t5\0"
  a: TRANSACTION_START "\0" -> $t6
    = TRANSACTION_START req=6 tx=0 "$t6\0"
  a: TRANSACTION_START "\0" -> $t7
    = TRANSACTION_START req=7 tx=0 "$t7\0"
  a: TRANSACTION_START "\0" -> $t8
    = TRANSACTION_START req=8 tx=0 "$t8\0"
  a: TRANSACTION_START "\0" -> $t9
    = TRANSACTION_START req=9 tx=0 "$t9\0"
  a: TRANSACTION_START "\0" -> $t10
    = TRANSACTION_START req=10 tx=0 "$t10\0"
  a: TRANSACTION_START "\0" -> $t11
    = TRANSACTION_START req=11 tx=0 "$t11\0"
  a: TRANSACTION_START "\0" -> $t12
    = TRANSACTION_START req=12 tx=0 "$t12\0"

case ids-on-two-connections
  differs: transactions conflict only on what they read (C: EAGAIN whenever a touched node was rewritten)
  oxenstored: merges transactions: no conflict on reads or on nodes changed outside (C: EAGAIN)
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  b: TRANSACTION_START "\0" -> $u
    = TRANSACTION_START req=2 tx=0 "$u\0"
  a: WRITE tx=$t "/a\0"
    = WRITE req=3 tx=$t "OK\0"
  b: WRITE tx=$u "/b\0"
    = WRITE req=4 tx=$u "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=5 tx=$t "OK\0"
  b: TRANSACTION_END tx=$u "T\0"
    = ERROR req=6 tx=$u "EAGAIN\0"
  ~ TRANSACTION_END req=6 tx=$u "OK\0"
  c: DIRECTORY "/\0"
    = DIRECTORY req=7 tx=0 "tool\0a\0"
  ~ DIRECTORY req=7 tx=0 "tool\0a\0b\0"

case get-domain-path-in-transaction
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: GET_DOMAIN_PATH tx=$t "3\0"
    = GET_DOMAIN_PATH req=2 tx=$t "/local/domain/3\0"

case watch-fires-once-per-commit
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  b: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  b: WRITE tx=$t "/w/a\0"
    = WRITE req=3 tx=$t "OK\0"
  b: WRITE tx=$t "/w/b\0"
    = WRITE req=4 tx=$t "OK\0"
  b: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=5 tx=$t "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w/a\0tok\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w/b\0tok\0"
  a: quiet

case end-commit-of-write-deleted-outside
  oxenstored: merges transactions: no conflict on reads or on nodes changed outside (C: EAGAIN)
  a: WRITE "/d\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: WRITE tx=$t "/d\0w"
    = WRITE req=3 tx=$t "OK\0"
  b: RM "/d\0"
    = RM req=4 tx=0 "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = ERROR req=5 tx=$t "EAGAIN\0"
  b: READ "/d\0"
    = ERROR req=6 tx=0 "ENOENT\0"
