# XS_RELEASE (9): "<domid>\0".
case release-introduced
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: RELEASE "5\0"
    = RELEASE req=2 tx=0 "OK\0"
  a: IS_DOMAIN_INTRODUCED "5\0"
    = IS_DOMAIN_INTRODUCED req=3 tx=0 "F\0"

case release-unknown
  oxenstored: RELEASE: EINVAL for an unknown domain, ENOENT for dom0 (C: the other way round)
  a: RELEASE "5\0"
    = ERROR req=1 tx=0 "ENOENT\0"

case release-dom0
  oxenstored: RELEASE: EINVAL for an unknown domain, ENOENT for dom0 (C: the other way round)
  a: RELEASE "0\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case release-twice
  oxenstored: RELEASE: EINVAL for an unknown domain, ENOENT for dom0 (C: the other way round)
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: RELEASE "5\0"
    = RELEASE req=2 tx=0 "OK\0"
  a: RELEASE "5\0"
    = ERROR req=3 tx=0 "ENOENT\0"

case no-arg
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: RELEASE ""
    = ERROR req=1 tx=0 "EINVAL\0"

case non-numeric
  a: RELEASE "x\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case no-nul
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: RELEASE "5"
    = ERROR req=2 tx=0 "EINVAL\0"

case fires-release-watch
  a: WATCH "@releaseDomain\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0tok\0"
  b: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=2 tx=0 "OK\0"
  b: RELEASE "5\0"
    = RELEASE req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0tok\0"
  a: quiet

case release-removes-nothing-in-store
  a: WRITE "/local/domain/5/name\0guest"
    = WRITE req=1 tx=0 "OK\0"
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=2 tx=0 "OK\0"
  a: RELEASE "5\0"
    = RELEASE req=3 tx=0 "OK\0"
  a: READ "/local/domain/5/name\0"
    = READ req=4 tx=0 "guest"

case reintroduce-after-release
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: RELEASE "5\0"
    = RELEASE req=2 tx=0 "OK\0"
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=3 tx=0 "OK\0"
  a: IS_DOMAIN_INTRODUCED "5\0"
    = IS_DOMAIN_INTRODUCED req=4 tx=0 "T\0"

case in-transaction
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: RELEASE tx=$t "5\0"
    = RELEASE req=3 tx=$t "OK\0"

case release-owner-of-special-node
  xen-4.20: segfaults releasing the owner of a special node (4.17 answers on)
  a: SET_PERMS "@introduceDomain\0r5\0n5\0"
    = SET_PERMS req=1 tx=0 "OK\0"
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=2 tx=0 "OK\0"
  a: RELEASE "5\0"
    = RELEASE req=3 tx=0 "OK\0"
    4.20 = closed
  a: IS_DOMAIN_INTRODUCED "5\0"
    = IS_DOMAIN_INTRODUCED req=4 tx=0 "F\0"
    4.20 = closed
    4.20 = C xenstored 4.20 died
