# XS_WRITE (11): "<path>\0<value>" -> "OK\0".
case simple
  a: WRITE "/w\0value"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/w\0"
    = READ req=2 tx=0 "value"

case overwrite
  a: WRITE "/w\0one"
    = WRITE req=1 tx=0 "OK\0"
  a: WRITE "/w\0two"
    = WRITE req=2 tx=0 "OK\0"
  a: READ "/w\0"
    = READ req=3 tx=0 "two"

case creates-parents
  a: WRITE "/a/b/c\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/a/b\0"
    = READ req=2 tx=0 ""
  a: DIRECTORY "/a\0"
    = DIRECTORY req=3 tx=0 "b\0"

case no-value
  a: WRITE "/w\0"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/w\0"
    = READ req=2 tx=0 ""

case no-nul
  a: WRITE "/w"
    = ERROR req=1 tx=0 "EINVAL\0"

case empty
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: WRITE ""
    = ERROR req=1 tx=0 "EINVAL\0"

case empty-path
  a: WRITE "\0v"
    = ERROR req=1 tx=0 "EINVAL\0"

case root
  a: WRITE "/\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/\0"
    = READ req=2 tx=0 "v"

case relative
  a: WRITE "rel\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/local/domain/0/rel\0"
    = READ req=2 tx=0 "v"

case trailing-slash
  a: WRITE "/w/\0v"
    = ERROR req=1 tx=0 "EINVAL\0"

case double-slash
  a: WRITE "/a//b\0v"
    = ERROR req=1 tx=0 "EINVAL\0"

case bad-chars
  a: WRITE "/a*b\0v"
    = ERROR req=1 tx=0 "EINVAL\0"

case space
  a: WRITE "/a b\0v"
    = ERROR req=1 tx=0 "EINVAL\0"

case allowed-chars
  a: WRITE "/AZaz09-_@\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/AZaz09-_@\0"
    = READ req=2 tx=0 "v"

case dot
  a: WRITE "/a.b\0v"
    = ERROR req=1 tx=0 "EINVAL\0"

case value-4000
  oxenstored: limits a node's value to 2048 bytes even for dom0 (quota-maxsize): E2BIG
  a: WRITE "/big\0" "x"*4000
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/big\0"
    = READ req=2 tx=0 "x"*4000

case value-fills-payload
  oxenstored: limits a node's value to 2048 bytes even for dom0 (quota-maxsize): E2BIG
  a: WRITE "/big\0" "x"*4091
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/big\0"
    = READ req=2 tx=0 "x"*4091

case path-abs-3072
  xen-4.20: path-max applies to unprivileged domains only: dom0 may write and watch longer paths (4.17: EINVAL past 2048 bytes)
  a: WRITE "/" "p"*3071 "\0v"
    = ERROR req=1 tx=0 "EINVAL\0"
    4.20 = WRITE req=1 tx=0 "OK\0"

case path-abs-3073
  xen-4.20: path-max applies to unprivileged domains only: dom0 may write and watch longer paths (4.17: EINVAL past 2048 bytes)
  a: WRITE "/" "p"*3072 "\0v"
    = ERROR req=1 tx=0 "EINVAL\0"
    4.20 = WRITE req=1 tx=0 "OK\0"

case path-rel-2048
  a: WRITE "p"*2048 "\0v"
    = WRITE req=1 tx=0 "OK\0"

case path-rel-2049
  xen-4.20: path-max applies to unprivileged domains only: dom0 may write and watch longer paths (4.17: EINVAL past 2048 bytes)
  a: WRITE "p"*2049 "\0v"
    = ERROR req=1 tx=0 "EINVAL\0"
    4.20 = WRITE req=1 tx=0 "OK\0"

case deep-path
  a: WRITE "/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z\0"
    = READ req=2 tx=0 "v"

case value-with-nuls
  a: WRITE "/w\0\0\0\0"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/w\0"
    = READ req=2 tx=0 "\0\0\0"

case utf8-value
  a: WRITE "/w\0\xc3\xa9t\xc3\xa9"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/w\0"
    = READ req=2 tx=0 "\xc3\xa9t\xc3\xa9"

case utf8-path
  a: WRITE "/\xc3\xa9\0v"
    = ERROR req=1 tx=0 "EINVAL\0"

case local-domain-other
  a: WRITE "/local/domain/7/x\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: GET_PERMS "/local/domain/7/x\0"
    = GET_PERMS req=2 tx=0 "n0\0"

case special-path
  oxenstored: special @paths are ordinary nodes, RM / allowed (C: EINVAL)
  a: WRITE "@introduceDomain\0v"
    = ERROR req=1 tx=0 "EINVAL\0"

case at-first-char-relative
  oxenstored: special @paths are ordinary nodes, RM / allowed (C: EINVAL)
  a: WRITE "@x\0v"
    = ERROR req=1 tx=0 "EINVAL\0"

case path-abs-2048
  a: WRITE "/" "p"*2047 "\0v"
    = WRITE req=1 tx=0 "OK\0"

case path-abs-2049
  xen-4.20: path-max applies to unprivileged domains only: dom0 may write and watch longer paths (4.17: EINVAL past 2048 bytes)
  a: WRITE "/" "p"*2048 "\0v"
    = ERROR req=1 tx=0 "EINVAL\0"
    4.20 = WRITE req=1 tx=0 "OK\0"

case path-under-own-home-long
  a: WRITE "/local/domain/0/" "p"*2040 "\0v"
    = WRITE req=1 tx=0 "OK\0"

case path-under-other-home-long
  a: WRITE "/local/domain/7/" "p"*2040 "\0v"
    = WRITE req=1 tx=0 "OK\0"
