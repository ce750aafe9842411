# XS_GET_FEATURE (23), XS_SET_FEATURE (24), XS_GET_QUOTA (25),
# XS_SET_QUOTA (26): in the newest xenstore.txt, unknown to Xen 4.17.
case get-feature-dom0
  differs: GET_FEATURE/SET_FEATURE/GET_QUOTA/SET_QUOTA follow the newest xenstore.txt; Xen 4.17's C xenstored answers ENOSYS
  a: GET_FEATURE "0\0"
    = ERROR req=1 tx=0 "ENOSYS\0"

case get-feature-global
  differs: GET_FEATURE/SET_FEATURE/GET_QUOTA/SET_QUOTA follow the newest xenstore.txt; Xen 4.17's C xenstored answers ENOSYS
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: GET_FEATURE ""
    = ERROR req=1 tx=0 "ENOSYS\0"

case set-feature
  differs: GET_FEATURE/SET_FEATURE/GET_QUOTA/SET_QUOTA follow the newest xenstore.txt; Xen 4.17's C xenstored answers ENOSYS
  a: SET_FEATURE "0\01\0"
    = ERROR req=1 tx=0 "ENOSYS\0"

case get-quota-global
  differs: GET_FEATURE/SET_FEATURE/GET_QUOTA/SET_QUOTA follow the newest xenstore.txt; Xen 4.17's C xenstored answers ENOSYS
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: GET_QUOTA ""
    = ERROR req=1 tx=0 "ENOSYS\0"

case get-quota-dom0
  differs: GET_FEATURE/SET_FEATURE/GET_QUOTA/SET_QUOTA follow the newest xenstore.txt; Xen 4.17's C xenstored answers ENOSYS
  a: GET_QUOTA "0\0"
    = ERROR req=1 tx=0 "ENOSYS\0"

case set-quota
  differs: GET_FEATURE/SET_FEATURE/GET_QUOTA/SET_QUOTA follow the newest xenstore.txt; Xen 4.17's C xenstored answers ENOSYS
  a: SET_QUOTA "nodes\0100\0"
    = ERROR req=1 tx=0 "ENOSYS\0"

case then-connection-still-works
  differs: GET_FEATURE/SET_FEATURE/GET_QUOTA/SET_QUOTA follow the newest xenstore.txt; Xen 4.17's C xenstored answers ENOSYS
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: GET_FEATURE ""
    = ERROR req=1 tx=0 "ENOSYS\0"
  a: READ "/\0"
    = READ req=2 tx=0 ""
