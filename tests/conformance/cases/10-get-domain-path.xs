# XS_GET_DOMAIN_PATH (10): "<domid>\0" -> "/local/domain/<domid>\0".
case dom0
  a: GET_DOMAIN_PATH "0\0"
    = GET_DOMAIN_PATH req=1 tx=0 "/local/domain/0\0"

case unknown-domain
  a: GET_DOMAIN_PATH "42\0"
    = GET_DOMAIN_PATH req=1 tx=0 "/local/domain/42\0"

case introduced-domain
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: GET_DOMAIN_PATH "5\0"
    = GET_DOMAIN_PATH req=2 tx=0 "/local/domain/5\0"

case large
  a: GET_DOMAIN_PATH "32767\0"
    = GET_DOMAIN_PATH req=1 tx=0 "/local/domain/32767\0"

case non-numeric
  a: GET_DOMAIN_PATH "abc\0"
    = GET_DOMAIN_PATH req=1 tx=0 "/local/domain/0\0"

case trailing-garbage
  a: GET_DOMAIN_PATH "5abc\0"
    = GET_DOMAIN_PATH req=1 tx=0 "/local/domain/5\0"

case empty
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: GET_DOMAIN_PATH ""
    = ERROR req=1 tx=0 "EINVAL\0"

case only-nul
  a: GET_DOMAIN_PATH "\0"
    = GET_DOMAIN_PATH req=1 tx=0 "/local/domain/0\0"

case no-nul
  a: GET_DOMAIN_PATH "7"
    = ERROR req=1 tx=0 "EINVAL\0"

case negative
  oxenstored: GET_DOMAIN_PATH "-1" gives /local/domain/1
  a: GET_DOMAIN_PATH "-1\0"
    = GET_DOMAIN_PATH req=1 tx=0 "/local/domain/4294967295\0"

case leading-space
  a: GET_DOMAIN_PATH " 3\0"
    = GET_DOMAIN_PATH req=1 tx=0 "/local/domain/3\0"

case hex
  a: GET_DOMAIN_PATH "0x10\0"
    = GET_DOMAIN_PATH req=1 tx=0 "/local/domain/0\0"
