# XS_DIRECTORY (1): "<path>\0" -> children, each NUL-terminated.
case root
  oxenstored: its store starts with @introduceDomain, @releaseDomain and /local as nodes
  a: DIRECTORY "/\0"
    = DIRECTORY req=1 tx=0 "tool\0"

case empty-node
  a: WRITE "/empty\0"
    = WRITE req=1 tx=0 "OK\0"
  a: DIRECTORY "/empty\0"
    = DIRECTORY req=2 tx=0 ""

case missing
  a: DIRECTORY "/missing\0"
    = ERROR req=1 tx=0 "ENOENT\0"

case children-in-creation-order
  oxenstored: lists children sorted, not in creation order
  a: WRITE "/d/zeta\0"
    = WRITE req=1 tx=0 "OK\0"
  a: WRITE "/d/alpha\0"
    = WRITE req=2 tx=0 "OK\0"
  a: WRITE "/d/mid\0"
    = WRITE req=3 tx=0 "OK\0"
  a: DIRECTORY "/d\0"
    = DIRECTORY req=4 tx=0 "zeta\0alpha\0mid\0"

case after-rm
  a: WRITE "/d/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: WRITE "/d/b\0"
    = WRITE req=2 tx=0 "OK\0"
  a: RM "/d/a\0"
    = RM req=3 tx=0 "OK\0"
  a: DIRECTORY "/d\0"
    = DIRECTORY req=4 tx=0 "b\0"

case implicit-parents
  a: WRITE "/p/q/r/s\0x"
    = WRITE req=1 tx=0 "OK\0"
  a: DIRECTORY "/p\0"
    = DIRECTORY req=2 tx=0 "q\0"
  a: DIRECTORY "/p/q\0"
    = DIRECTORY req=3 tx=0 "r\0"
  a: DIRECTORY "/p/q/r\0"
    = DIRECTORY req=4 tx=0 "s\0"

case relative
  a: WRITE "/local/domain/0/rel/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: DIRECTORY "rel\0"
    = DIRECTORY req=2 tx=0 "a\0"

case local-domain
  a: DIRECTORY "/local/domain\0"
    = ERROR req=1 tx=0 "ENOENT\0"

case tool
  a: DIRECTORY "/tool\0"
    = DIRECTORY req=1 tx=0 "xenstored\0"

case no-nul
  differs: follows 4.20: EINVAL for a malformed path argument (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  oxenstored: EINVAL for a path argument without its NUL or with extra arguments (C: ENOENT, or ENOMEM for MKDIR/RM)
  xen-4.20: EINVAL for a path argument without its NUL, empty, or with extra arguments (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  a: WRITE "/n/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: DIRECTORY "/n"
    = ERROR req=2 tx=0 "ENOENT\0"
    4.20 = ERROR req=2 tx=0 "EINVAL\0"
    ~ ERROR req=2 tx=0 "EINVAL\0"

case trailing-slash
  a: WRITE "/s/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: DIRECTORY "/s/\0"
    = ERROR req=2 tx=0 "EINVAL\0"

case empty-path
  a: DIRECTORY "\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case many-children
  a: WRITE "/m/c00\0"
    = WRITE req=1 tx=0 "OK\0"
  a: WRITE "/m/c01\0"
    = WRITE req=2 tx=0 "OK\0"
  a: WRITE "/m/c02\0"
    = WRITE req=3 tx=0 "OK\0"
  a: WRITE "/m/c03\0"
    = WRITE req=4 tx=0 "OK\0"
  a: WRITE "/m/c04\0"
    = WRITE req=5 tx=0 "OK\0"
  a: WRITE "/m/c05\0"
    = WRITE req=6 tx=0 "OK\0"
  a: WRITE "/m/c06\0"
    = WRITE req=7 tx=0 "OK\0"
  a: WRITE "/m/c07\0"
    = WRITE req=8 tx=0 "OK\0"
  a: DIRECTORY "/m\0"
    = DIRECTORY req=9 tx=0 "c00\0c01\0c02\0c03\0c04\0c05\0c06\0c07\0"

case in-transaction-sees-own-writes
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: WRITE tx=$t "/tx/new\0"
    = WRITE req=2 tx=$t "OK\0"
  a: DIRECTORY tx=$t "/tx\0"
    = DIRECTORY req=3 tx=$t "new\0"
  b: DIRECTORY "/tx\0"
    = ERROR req=4 tx=0 "ENOENT\0"

case extra-args-ignored
  differs: follows 4.20: EINVAL for a malformed path argument (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  oxenstored: EINVAL for a path argument without its NUL or with extra arguments (C: ENOENT, or ENOMEM for MKDIR/RM)
  xen-4.20: EINVAL for a path argument without its NUL, empty, or with extra arguments (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  a: WRITE "/e/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: DIRECTORY "/e\0junk\0"
    = ERROR req=2 tx=0 "ENOENT\0"
    4.20 = ERROR req=2 tx=0 "EINVAL\0"
    ~ ERROR req=2 tx=0 "EINVAL\0"
