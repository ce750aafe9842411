# XS_READ: "<path>\0" -> value bytes (no NUL)
case missing
  a: READ "/nonexistent\0"
    = ERROR req=1 tx=0 "ENOENT\0"

case root
  a: READ "/\0"
    = READ req=1 tx=0 ""

case written-value
  a: WRITE "/a\0hello"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/a\0"
    = READ req=2 tx=0 "hello"

case relative-path
  a: WRITE "/local/domain/0/x\0rel"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "x\0"
    = READ req=2 tx=0 "rel"

case no-nul
  a: READ "/tool"
    = ERROR req=1 tx=0 "ENOENT\0"

case watch-test
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  b: WRITE "/w/x\01"
    = WRITE req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  a: quiet
    = WATCH_EVENT req=0 tx=0 "/w/x\0tok\0"

case tx
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: WRITE tx=$t "/t\0v"
    = WRITE req=2 tx=$t "OK\0"
  b: TRANSACTION_START "\0" -> $u
    = TRANSACTION_START req=3 tx=0 "$u\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=4 tx=$t "OK\0"
