# Longer multi-connection sessions mixing message types.
case toolstack-create-domain
  oxenstored: lists children sorted, not in creation order
  a: WATCH "@introduceDomain\0intro\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@introduceDomain\0intro\0"
  b: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  b: MKDIR tx=$t "/local/domain/3\0"
    = MKDIR req=3 tx=$t "OK\0"
  b: SET_PERMS tx=$t "/local/domain/3\0n3\0r0\0"
    = SET_PERMS req=4 tx=$t "OK\0"
  b: WRITE tx=$t "/local/domain/3/name\0guest3"
    = WRITE req=5 tx=$t "OK\0"
  b: WRITE tx=$t "/local/domain/3/domid\03"
    = WRITE req=6 tx=$t "OK\0"
  b: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=7 tx=$t "OK\0"
  b: INTRODUCE "3\0100\07\0"
    = INTRODUCE req=8 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@introduceDomain\0intro\0"
  b: GET_DOMAIN_PATH "3\0"
    = GET_DOMAIN_PATH req=9 tx=0 "/local/domain/3\0"
  b: DIRECTORY "/local/domain/3\0"
    = DIRECTORY req=10 tx=0 "name\0domid\0"
  b: GET_PERMS "/local/domain/3/name\0"
    = GET_PERMS req=11 tx=0 "n3\0r0\0"

case toolstack-destroy-domain
  a: WATCH "@releaseDomain\0rel\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0rel\0"
  b: WRITE "/local/domain/3/name\0guest3"
    = WRITE req=2 tx=0 "OK\0"
  b: INTRODUCE "3\0100\07\0"
    = INTRODUCE req=3 tx=0 "OK\0"
  b: RELEASE "3\0"
    = RELEASE req=4 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0rel\0"
  b: RM "/local/domain/3\0"
    = RM req=5 tx=0 "OK\0"
  b: DIRECTORY "/local/domain\0"
    = DIRECTORY req=6 tx=0 ""

case backend-frontend-handshake
  a: WATCH "/local/domain/0/backend/vbd/3/51712/state\0be\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/local/domain/0/backend/vbd/3/51712/state\0be\0"
  b: WATCH "/local/domain/3/device/vbd/51712/state\0fe\0"
    = WATCH req=2 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "/local/domain/3/device/vbd/51712/state\0fe\0"
  c: WRITE "/local/domain/3/device/vbd/51712/state\01"
    = WRITE req=3 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "/local/domain/3/device/vbd/51712/state\0fe\0"
  c: WRITE "/local/domain/0/backend/vbd/3/51712/state\02"
    = WRITE req=4 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/local/domain/0/backend/vbd/3/51712/state\0be\0"
  c: WRITE "/local/domain/3/device/vbd/51712/state\04"
    = WRITE req=5 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "/local/domain/3/device/vbd/51712/state\0fe\0"
  a: quiet

case interleaved-transactions
  a: WRITE "/c\00"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  b: TRANSACTION_START "\0" -> $u
    = TRANSACTION_START req=3 tx=0 "$u\0"
  a: READ tx=$t "/c\0"
    = READ req=4 tx=$t "0"
  b: READ tx=$u "/c\0"
    = READ req=5 tx=$u "0"
  a: WRITE tx=$t "/c\01"
    = WRITE req=6 tx=$t "OK\0"
  b: WRITE tx=$u "/c\01"
    = WRITE req=7 tx=$u "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=8 tx=$t "OK\0"
  b: TRANSACTION_END tx=$u "T\0"
    = ERROR req=9 tx=$u "EAGAIN\0"
  b: TRANSACTION_START "\0" -> $v
    = TRANSACTION_START req=10 tx=0 "$v\0"
  b: READ tx=$v "/c\0"
    = READ req=11 tx=$v "1"
  b: WRITE tx=$v "/c\02"
    = WRITE req=12 tx=$v "OK\0"
  b: TRANSACTION_END tx=$v "T\0"
    = TRANSACTION_END req=13 tx=$v "OK\0"
  c: READ "/c\0"
    = READ req=14 tx=0 "2"

case watch-many-events-order
  a: WATCH "/q\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/q\0tok\0"
  b: WRITE "/q/1\0"
    = WRITE req=2 tx=0 "OK\0"
  b: WRITE "/q/2\0"
    = WRITE req=3 tx=0 "OK\0"
  b: WRITE "/q/3\0"
    = WRITE req=4 tx=0 "OK\0"
  b: RM "/q/2\0"
    = RM req=5 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/q/1\0tok\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/q/2\0tok\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/q/3\0tok\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/q/2\0tok\0"
  a: quiet

case close-with-watches
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  a: close
  b: WRITE "/w\0v"
    = WRITE req=2 tx=0 "OK\0"
  c: WATCH "/w\0tok\0"
    = WATCH req=3 tx=0 "OK\0"
  c: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"

case same-token-two-connections-unwatch-one
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  b: WATCH "/w\0tok\0"
    = WATCH req=2 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  a: UNWATCH "/w\0tok\0"
    = UNWATCH req=3 tx=0 "OK\0"
  c: WRITE "/w\0v"
    = WRITE req=4 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  a: quiet

case ls-style-walk
  a: WRITE "/tree/a/x\01"
    = WRITE req=1 tx=0 "OK\0"
  a: WRITE "/tree/a/y\02"
    = WRITE req=2 tx=0 "OK\0"
  a: WRITE "/tree/b\03"
    = WRITE req=3 tx=0 "OK\0"
  a: DIRECTORY "/tree\0"
    = DIRECTORY req=4 tx=0 "a\0b\0"
  a: READ "/tree/a\0"
    = READ req=5 tx=0 ""
  a: GET_PERMS "/tree/a\0"
    = GET_PERMS req=6 tx=0 "n0\0"
  a: DIRECTORY "/tree/a\0"
    = DIRECTORY req=7 tx=0 "x\0y\0"
  a: READ "/tree/a/x\0"
    = READ req=8 tx=0 "1"
  a: READ "/tree/a/y\0"
    = READ req=9 tx=0 "2"
  a: READ "/tree/b\0"
    = READ req=10 tx=0 "3"
  a: DIRECTORY "/tree/b\0"
    = DIRECTORY req=11 tx=0 ""
