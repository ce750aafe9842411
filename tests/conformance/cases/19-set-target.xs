# XS_SET_TARGET (19): "<domid>\0<target domid>\0" makes a device model
# domain privileged over its target.
case both-introduced
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: INTRODUCE "6\0124\05\0"
    = INTRODUCE req=2 tx=0 "OK\0"
  a: SET_TARGET "5\06\0"
    = SET_TARGET req=3 tx=0 "OK\0"

case domain-unknown
  a: SET_TARGET "5\06\0"
    = ERROR req=1 tx=0 "ENOENT\0"

case target-unknown
  oxenstored: does not check that a permission's or target's domain exists
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: SET_TARGET "5\06\0"
    = ERROR req=2 tx=0 "ENOENT\0"

case one-arg
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: SET_TARGET "5\0"
    = ERROR req=2 tx=0 "EINVAL\0"

case empty
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: SET_TARGET ""
    = ERROR req=1 tx=0 "EINVAL\0"

case non-numeric
  a: SET_TARGET "a\0b\0"
    = SET_TARGET req=1 tx=0 "OK\0"

case self
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: SET_TARGET "5\05\0"
    = SET_TARGET req=2 tx=0 "OK\0"

case target-then-release-target
  differs: RELEASE of a SET_TARGET target releases it (C only drops a talloc reference, answers OK and keeps the domain)
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: INTRODUCE "6\0124\05\0"
    = INTRODUCE req=2 tx=0 "OK\0"
  a: SET_TARGET "5\06\0"
    = SET_TARGET req=3 tx=0 "OK\0"
  a: RELEASE "6\0"
    = RELEASE req=4 tx=0 "OK\0"
  a: IS_DOMAIN_INTRODUCED "5\0"
    = IS_DOMAIN_INTRODUCED req=5 tx=0 "T\0"
  a: SET_TARGET "5\06\0"
    = SET_TARGET req=6 tx=0 "OK\0"
  ~ ERROR req=6 tx=0 "ENOENT\0"

case target-dom0
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: SET_TARGET "5\00\0"
    = SET_TARGET req=2 tx=0 "OK\0"
