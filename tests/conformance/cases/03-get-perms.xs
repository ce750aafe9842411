# XS_GET_PERMS (3): "<path>\0" -> "<perm>\0" per entry, owner first.
case root
  a: GET_PERMS "/\0"
    = GET_PERMS req=1 tx=0 "n0\0"

case new-node
  a: WRITE "/g\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: GET_PERMS "/g\0"
    = GET_PERMS req=2 tx=0 "n0\0"

case missing
  a: GET_PERMS "/missing\0"
    = ERROR req=1 tx=0 "ENOENT\0"

case after-set
  a: WRITE "/g\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/g\0n5\0r7\0w8\0b9\0"
    = SET_PERMS req=2 tx=0 "OK\0"
  a: GET_PERMS "/g\0"
    = GET_PERMS req=3 tx=0 "n5\0r7\0w8\0b9\0"

case inherited-by-child
  a: WRITE "/g\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/g\0b3\0r4\0"
    = SET_PERMS req=2 tx=0 "OK\0"
  a: WRITE "/g/child\0v"
    = WRITE req=3 tx=0 "OK\0"
  a: GET_PERMS "/g/child\0"
    = GET_PERMS req=4 tx=0 "b3\0r4\0"

case implicit-parent
  a: WRITE "/i/j/k\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: GET_PERMS "/i/j\0"
    = GET_PERMS req=2 tx=0 "n0\0"

case relative
  a: WRITE "/local/domain/0/gp\0"
    = WRITE req=1 tx=0 "OK\0"
  a: GET_PERMS "gp\0"
    = GET_PERMS req=2 tx=0 "n0\0"

case no-nul
  differs: follows 4.20: EINVAL for a malformed path argument (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  oxenstored: EINVAL for a path argument without its NUL or with extra arguments (C: ENOENT, or ENOMEM for MKDIR/RM)
  xen-4.20: EINVAL for a path argument without its NUL, empty, or with extra arguments (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  a: GET_PERMS "/"
    = ERROR req=1 tx=0 "ENOENT\0"
    4.20 = ERROR req=1 tx=0 "EINVAL\0"
    ~ ERROR req=1 tx=0 "EINVAL\0"

case bad-path
  a: GET_PERMS "/x y\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case local-domain
  a: GET_PERMS "/local/domain\0"
    = ERROR req=1 tx=0 "ENOENT\0"

case special-introduce
  differs: follows 4.20: GET_PERMS of a special node answers its permissions (4.17: EINVAL)
  oxenstored: special @paths are ordinary nodes, RM / allowed (C: EINVAL)
  xen-4.20: special @ nodes have permissions: GET_PERMS and SET_PERMS work on them (4.17: EINVAL)
  a: GET_PERMS "@introduceDomain\0"
    = ERROR req=1 tx=0 "EINVAL\0"
    4.20 = GET_PERMS req=1 tx=0 "n0\0"
    ~ GET_PERMS req=1 tx=0 "n0\0"

case special-release
  differs: follows 4.20: GET_PERMS of a special node answers its permissions (4.17: EINVAL)
  oxenstored: special @paths are ordinary nodes, RM / allowed (C: EINVAL)
  xen-4.20: special @ nodes have permissions: GET_PERMS and SET_PERMS work on them (4.17: EINVAL)
  a: GET_PERMS "@releaseDomain\0"
    = ERROR req=1 tx=0 "EINVAL\0"
    4.20 = GET_PERMS req=1 tx=0 "n0\0"
    ~ GET_PERMS req=1 tx=0 "n0\0"

case in-transaction
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: WRITE tx=$t "/gt\0v"
    = WRITE req=2 tx=$t "OK\0"
  a: SET_PERMS tx=$t "/gt\0n2\0"
    = SET_PERMS req=3 tx=$t "OK\0"
  a: GET_PERMS tx=$t "/gt\0"
    = GET_PERMS req=4 tx=$t "n2\0"
  b: GET_PERMS "/gt\0"
    = ERROR req=5 tx=0 "ENOENT\0"
