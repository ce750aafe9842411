# XS_GET_FEATURE (23), XS_SET_FEATURE (24), XS_GET_QUOTA (25),
# XS_SET_QUOTA (26): in the newest xenstore.txt, unknown to Xen 4.17.
case get-feature-dom0
  a: GET_FEATURE "0\0"
    = ERROR req=1 tx=0 "ENOSYS\0"

case get-feature-global
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: GET_FEATURE ""
    = ERROR req=1 tx=0 "ENOSYS\0"

case set-feature
  a: SET_FEATURE "0\01\0"
    = ERROR req=1 tx=0 "ENOSYS\0"

case get-quota-global
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: GET_QUOTA ""
    = ERROR req=1 tx=0 "ENOSYS\0"

case get-quota-dom0
  a: GET_QUOTA "0\0"
    = ERROR req=1 tx=0 "ENOSYS\0"

case set-quota
  a: SET_QUOTA "nodes\0100\0"
    = ERROR req=1 tx=0 "ENOSYS\0"

case then-connection-still-works
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: GET_FEATURE ""
    = ERROR req=1 tx=0 "ENOSYS\0"
  a: READ "/\0"
    = READ req=2 tx=0 ""
