# XS_MKDIR (12): "<path>\0" -> "OK\0"; an existing node is left alone.
case new
  a: MKDIR "/m\0"
    = MKDIR req=1 tx=0 "OK\0"
  a: READ "/m\0"
    = READ req=2 tx=0 ""

case existing-keeps-value
  a: WRITE "/m\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: MKDIR "/m\0"
    = MKDIR req=2 tx=0 "OK\0"
  a: READ "/m\0"
    = READ req=3 tx=0 "v"

case parents
  a: MKDIR "/m/n/o\0"
    = MKDIR req=1 tx=0 "OK\0"
  a: DIRECTORY "/m/n\0"
    = DIRECTORY req=2 tx=0 "o\0"

case root
  a: MKDIR "/\0"
    = MKDIR req=1 tx=0 "OK\0"

case relative
  a: MKDIR "rel\0"
    = MKDIR req=1 tx=0 "OK\0"
  a: DIRECTORY "/local/domain/0\0"
    = DIRECTORY req=2 tx=0 "rel\0"

case no-nul
  differs: follows 4.20: EINVAL for a malformed path argument (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  oxenstored: EINVAL for a path argument without its NUL or with extra arguments (C: ENOENT, or ENOMEM for MKDIR/RM)
  xen-4.20: EINVAL for a path argument without its NUL, empty, or with extra arguments (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  a: MKDIR "/m"
    = ERROR req=1 tx=0 "ENOMEM\0"
    4.20 = ERROR req=1 tx=0 "EINVAL\0"
    ~ ERROR req=1 tx=0 "EINVAL\0"

case empty
  differs: follows 4.20: EINVAL for a malformed path argument (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  xen-4.20: EINVAL for a path argument without its NUL, empty, or with extra arguments (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  a: MKDIR ""
    = ERROR req=1 tx=0 "ENOMEM\0"
    4.20 = ERROR req=1 tx=0 "EINVAL\0"
    ~ ERROR req=1 tx=0 "EINVAL\0"

case bad-path
  a: MKDIR "/m m\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case trailing-slash
  a: MKDIR "/m/\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case extra-arg
  differs: follows 4.20: EINVAL for a malformed path argument (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  oxenstored: EINVAL for a path argument without its NUL or with extra arguments (C: ENOENT, or ENOMEM for MKDIR/RM)
  xen-4.20: EINVAL for a path argument without its NUL, empty, or with extra arguments (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  a: MKDIR "/m\0extra\0"
    = ERROR req=1 tx=0 "ENOMEM\0"
    4.20 = ERROR req=1 tx=0 "EINVAL\0"
    ~ ERROR req=1 tx=0 "EINVAL\0"
  a: READ "/m\0"
    = ERROR req=2 tx=0 "ENOENT\0"

case perms-of-new
  a: MKDIR "/m\0"
    = MKDIR req=1 tx=0 "OK\0"
  a: GET_PERMS "/m\0"
    = GET_PERMS req=2 tx=0 "n0\0"

case in-transaction
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: MKDIR tx=$t "/m\0"
    = MKDIR req=2 tx=$t "OK\0"
  b: READ "/m\0"
    = ERROR req=3 tx=0 "ENOENT\0"
  a: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=4 tx=$t "OK\0"
  b: READ "/m\0"
    = READ req=5 tx=0 ""
