# XS_READ (2): "<path>\0" -> the value, no NUL added.
case missing
  a: READ "/nonexistent\0"
    = ERROR req=1 tx=0 "ENOENT\0"

case root
  a: READ "/\0"
    = READ req=1 tx=0 ""

case written-value
  a: WRITE "/a\0hello"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/a\0"
    = READ req=2 tx=0 "hello"

case empty-value
  a: WRITE "/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/a\0"
    = READ req=2 tx=0 ""

case binary-value
  a: WRITE "/b\0\x01\x02\x00\xff\n"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/b\0"
    = READ req=2 tx=0 "\x01\x02\0\xff\n"

case value-with-nul
  a: WRITE "/n\0x\0y\0"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/n\0"
    = READ req=2 tx=0 "x\0y\0"

case relative-path
  a: WRITE "/local/domain/0/x\0rel"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "x\0"
    = READ req=2 tx=0 "rel"

case relative-missing
  a: READ "nothing-here\0"
    = ERROR req=1 tx=0 "ENOENT\0"

case no-nul
  differs: follows 4.20: EINVAL for a malformed path argument (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  oxenstored: EINVAL for a path argument without its NUL or with extra arguments (C: ENOENT, or ENOMEM for MKDIR/RM)
  xen-4.20: EINVAL for a path argument without its NUL, empty, or with extra arguments (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  a: WRITE "/tool\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/tool"
    = ERROR req=2 tx=0 "ENOENT\0"
    4.20 = ERROR req=2 tx=0 "EINVAL\0"
    ~ ERROR req=2 tx=0 "EINVAL\0"

case empty-payload
  differs: follows 4.20: EINVAL for a malformed path argument (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  xen-4.20: EINVAL for a path argument without its NUL, empty, or with extra arguments (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  a: READ ""
    = ERROR req=1 tx=0 "ENOENT\0"
    4.20 = ERROR req=1 tx=0 "EINVAL\0"
    ~ ERROR req=1 tx=0 "EINVAL\0"

case only-nul
  a: READ "\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case double-slash
  a: READ "//\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case trailing-slash
  a: WRITE "/ts\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/ts/\0"
    = ERROR req=2 tx=0 "EINVAL\0"

case bad-char
  a: READ "/a b\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case tool-xenstored
  oxenstored: /tool/xenstored holds oxenstored's binary path (C: empty)
  a: READ "/tool/xenstored\0"
    = READ req=1 tx=0 ""

case parent-of-written
  a: WRITE "/p/c\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/p\0"
    = READ req=2 tx=0 ""

case long-value
  oxenstored: limits a node's value to 2048 bytes even for dom0 (quota-maxsize): E2BIG
  a: WRITE "/l\0" "v"*3000
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/l\0"
    = READ req=2 tx=0 "v"*3000

case in-unknown-transaction
  oxenstored: EIO for an unknown transaction id (C: ENOENT)
  a: READ tx=4242 "/\0"
    = ERROR req=1 tx=4242 "ENOENT\0"

case two-args
  differs: follows 4.20: EINVAL for a malformed path argument (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  oxenstored: EINVAL for a path argument without its NUL or with extra arguments (C: ENOENT, or ENOMEM for MKDIR/RM)
  xen-4.20: EINVAL for a path argument without its NUL, empty, or with extra arguments (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  a: WRITE "/t\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/t\0extra\0"
    = ERROR req=2 tx=0 "ENOENT\0"
    4.20 = ERROR req=2 tx=0 "EINVAL\0"
    ~ ERROR req=2 tx=0 "EINVAL\0"

case at-path
  oxenstored: special @paths are ordinary nodes, RM / allowed (C: EINVAL)
  a: READ "@introduceDomain\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case dot-path
  a: READ "/.\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case at-in-middle
  a: READ "/a@b\0"
    = ERROR req=1 tx=0 "ENOENT\0"
