# XS_INTRODUCE (8): "<domid>\0<mfn>\0<event channel>\0" from dom0 (the
# stub maps a zeroed ring page and hands out fake event channels).
case introduce
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: IS_DOMAIN_INTRODUCED "5\0"
    = IS_DOMAIN_INTRODUCED req=2 tx=0 "T\0"

case introduce-twice-same
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=2 tx=0 "OK\0"

case introduce-twice-different-port
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: INTRODUCE "5\0123\05\0"
    = INTRODUCE req=2 tx=0 "OK\0"

case introduce-twice-different-mfn
  oxenstored: parses domids strictly (int_of_string) and accepts a missing final NUL; refuses dom0 or a new mfn in INTRODUCE
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: INTRODUCE "5\0999\04\0"
    = INTRODUCE req=2 tx=0 "OK\0"

case introduce-dom0
  oxenstored: parses domids strictly (int_of_string) and accepts a missing final NUL; refuses dom0 or a new mfn in INTRODUCE
  a: INTRODUCE "0\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"

case missing-args
  a: INTRODUCE "5\0123\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case one-arg
  a: INTRODUCE "5\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case no-args
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: INTRODUCE ""
    = ERROR req=1 tx=0 "EINVAL\0"

case non-numeric-domid
  oxenstored: parses domids strictly (int_of_string) and accepts a missing final NUL; refuses dom0 or a new mfn in INTRODUCE
  a: INTRODUCE "five\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"

case non-numeric-port
  a: INTRODUCE "5\0123\0four\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case domid-reserved
  a: INTRODUCE "32753\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"

case domid-huge
  a: INTRODUCE "99999999999\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"

case extra-arg
  a: INTRODUCE "5\0123\04\0extra\0"
    = INTRODUCE req=1 tx=0 "OK\0"

case no-final-nul
  oxenstored: parses domids strictly (int_of_string) and accepts a missing final NUL; refuses dom0 or a new mfn in INTRODUCE
  a: INTRODUCE "5\0123\04"
    = ERROR req=1 tx=0 "EINVAL\0"

case in-transaction
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: INTRODUCE tx=$t "5\0123\04\0"
    = INTRODUCE req=2 tx=$t "OK\0"

case fires-introduce-watch
  a: WATCH "@introduceDomain\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@introduceDomain\0tok\0"
  a: INTRODUCE "7\0123\04\0"
    = WATCH_EVENT req=0 tx=0 "@introduceDomain\0tok\0"
    = INTRODUCE req=2 tx=0 "OK\0"
  a: quiet

case introduce-then-domain-path
  a: INTRODUCE "9\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: GET_DOMAIN_PATH "9\0"
    = GET_DOMAIN_PATH req=2 tx=0 "/local/domain/9\0"
  a: DIRECTORY "/local/domain\0"
    = ERROR req=3 tx=0 "ENOENT\0"

case two-domains
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: INTRODUCE "6\0124\05\0"
    = INTRODUCE req=2 tx=0 "OK\0"
  a: IS_DOMAIN_INTRODUCED "5\0"
    = IS_DOMAIN_INTRODUCED req=3 tx=0 "T\0"
  a: IS_DOMAIN_INTRODUCED "6\0"
    = IS_DOMAIN_INTRODUCED req=4 tx=0 "T\0"
  a: IS_DOMAIN_INTRODUCED "7\0"
    = IS_DOMAIN_INTRODUCED req=5 tx=0 "F\0"

case negative-domid
  a: INTRODUCE "-1\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"

case reintroduce-fires-watch
  a: INTRODUCE "4\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  b: WATCH "@introduceDomain\0i\0"
    = WATCH req=2 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "@introduceDomain\0i\0"
  a: INTRODUCE "4\0123\04\0"
    = INTRODUCE req=3 tx=0 "OK\0"
  b: quiet

case reintroduce-new-port-fires-watch
  a: INTRODUCE "4\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  b: WATCH "@introduceDomain\0i\0"
    = WATCH req=2 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "@introduceDomain\0i\0"
  a: INTRODUCE "4\0123\05\0"
    = INTRODUCE req=3 tx=0 "OK\0"
  b: quiet

case introduce-dom0-fires-watch
  oxenstored: parses domids strictly (int_of_string) and accepts a missing final NUL; refuses dom0 or a new mfn in INTRODUCE
  b: WATCH "@introduceDomain\0i\0"
    = WATCH req=1 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "@introduceDomain\0i\0"
  a: INTRODUCE "0\0123\04\0"
    = INTRODUCE req=2 tx=0 "OK\0"
  b: quiet

case introduce-error-fires-nothing
  b: WATCH "@introduceDomain\0i\0"
    = WATCH req=1 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "@introduceDomain\0i\0"
  a: INTRODUCE "4\0123\0"
    = ERROR req=2 tx=0 "EINVAL\0"
  b: quiet
