# XS_IS_DOMAIN_INTRODUCED (17): "<domid>\0" -> "T\0" or "F\0".
case dom0
  a: IS_DOMAIN_INTRODUCED "0\0"
    = IS_DOMAIN_INTRODUCED req=1 tx=0 "T\0"

case unknown
  a: IS_DOMAIN_INTRODUCED "5\0"
    = IS_DOMAIN_INTRODUCED req=1 tx=0 "F\0"

case introduced
  a: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: IS_DOMAIN_INTRODUCED "5\0"
    = IS_DOMAIN_INTRODUCED req=2 tx=0 "T\0"

case non-numeric
  oxenstored: parses domids strictly (int_of_string) and accepts a missing final NUL; refuses dom0 or a new mfn in INTRODUCE
  a: IS_DOMAIN_INTRODUCED "x\0"
    = IS_DOMAIN_INTRODUCED req=1 tx=0 "T\0"

case empty
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: IS_DOMAIN_INTRODUCED ""
    = ERROR req=1 tx=0 "EINVAL\0"

case no-nul
  oxenstored: parses domids strictly (int_of_string) and accepts a missing final NUL; refuses dom0 or a new mfn in INTRODUCE
  a: IS_DOMAIN_INTRODUCED "0"
    = ERROR req=1 tx=0 "EINVAL\0"

case domid-reserved
  a: IS_DOMAIN_INTRODUCED "32753\0"
    = IS_DOMAIN_INTRODUCED req=1 tx=0 "F\0"

case trailing-garbage
  oxenstored: parses domids strictly (int_of_string) and accepts a missing final NUL; refuses dom0 or a new mfn in INTRODUCE
  a: IS_DOMAIN_INTRODUCED "0x\0"
    = IS_DOMAIN_INTRODUCED req=1 tx=0 "T\0"
