# Type 20 (XS_RESTRICT, removed) and numbers beyond the known range.
case restrict
  a: 20 "5\0"
    = ERROR req=1 tx=0 "ENOSYS\0"
  a: READ "/\0"
    = READ req=2 tx=0 ""

case type-27
  a: 27 "\0"
    = ERROR req=1 tx=0 "ENOSYS\0"
  a: READ "/\0"
    = READ req=2 tx=0 ""

case type-100
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: 100 ""
    = ERROR req=1 tx=0 "ENOSYS\0"
  a: READ "/\0"
    = READ req=2 tx=0 ""

case type-max
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: 4294967295 ""
    = ERROR req=1 tx=0 "ENOSYS\0"
  a: READ "/\0"
    = READ req=2 tx=0 ""

case type-0x10000
  a: 65536 "/\0"
    = ERROR req=1 tx=0 "ENOSYS\0"
  a: READ "/\0"
    = READ req=2 tx=0 ""
