# XS_RESUME (18): "<domid>\0" clears a domain's shutdown state.
case introduced
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: RESUME "5\0"
    = RESUME req=2 tx=0 "OK\0"

case unknown
  oxenstored: RESUME: EINVAL for an unknown domain, OK for dom0
  a: RESUME "5\0"
    = ERROR req=1 tx=0 "ENOENT\0"

case dom0
  oxenstored: RESUME: EINVAL for an unknown domain, OK for dom0
  a: RESUME "0\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case empty
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: RESUME ""
    = ERROR req=1 tx=0 "EINVAL\0"

case non-numeric
  a: RESUME "q\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case resume-fires-nothing
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  b: WATCH "@introduceDomain\0i\0"
    = WATCH req=2 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "@introduceDomain\0i\0"
  b: WATCH "@releaseDomain\0r\0"
    = WATCH req=3 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0r\0"
  a: RESUME "5\0"
    = RESUME req=4 tx=0 "OK\0"
  b: quiet

case resume-twice
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: RESUME "5\0"
    = RESUME req=2 tx=0 "OK\0"
  a: RESUME "5\0"
    = RESUME req=3 tx=0 "OK\0"
