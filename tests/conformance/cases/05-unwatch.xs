# XS_UNWATCH (5): "<path>\0<token>\0" -> OK.
case unwatch-stops-events
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  a: UNWATCH "/w\0tok\0"
    = UNWATCH req=2 tx=0 "OK\0"
  b: WRITE "/w\0v"
    = WRITE req=3 tx=0 "OK\0"
  a: quiet

case unknown
  a: UNWATCH "/w\0tok\0"
    = ERROR req=1 tx=0 "ENOENT\0"

case wrong-token
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  a: UNWATCH "/w\0other\0"
    = ERROR req=2 tx=0 "ENOENT\0"

case other-connection
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  b: UNWATCH "/w\0tok\0"
    = ERROR req=2 tx=0 "ENOENT\0"

case twice
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  a: UNWATCH "/w\0tok\0"
    = UNWATCH req=2 tx=0 "OK\0"
  a: UNWATCH "/w\0tok\0"
    = ERROR req=3 tx=0 "ENOENT\0"

case relative
  a: WATCH "rel\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "rel\0tok\0"
  a: UNWATCH "rel\0tok\0"
    = UNWATCH req=2 tx=0 "OK\0"

case relative-vs-absolute
  a: WATCH "rel\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "rel\0tok\0"
  a: UNWATCH "/local/domain/0/rel\0tok\0"
    = UNWATCH req=2 tx=0 "OK\0"

case missing-token
  a: UNWATCH "/w\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case special
  a: WATCH "@releaseDomain\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0tok\0"
  a: UNWATCH "@releaseDomain\0tok\0"
    = UNWATCH req=2 tx=0 "OK\0"

case bad-path
  differs: follows 4.20: EINVAL for UNWATCH of an invalid path (4.17: ENOENT)
  xen-4.20: EINVAL for UNWATCH of an invalid path (4.17: ENOENT)
  a: UNWATCH "/w w\0tok\0"
    = ERROR req=1 tx=0 "ENOENT\0"
    4.20 = ERROR req=1 tx=0 "EINVAL\0"
    ~ ERROR req=1 tx=0 "EINVAL\0"

case rewatch-after-unwatch
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  a: UNWATCH "/w\0tok\0"
    = UNWATCH req=2 tx=0 "OK\0"
  a: WATCH "/w\0tok\0"
    = WATCH req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
