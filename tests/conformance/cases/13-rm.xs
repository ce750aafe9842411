# XS_RM (13): "<path>\0" -> "OK\0"; removes the subtree.
case existing
  a: WRITE "/r\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: RM "/r\0"
    = RM req=2 tx=0 "OK\0"
  a: READ "/r\0"
    = ERROR req=3 tx=0 "ENOENT\0"

case subtree
  a: WRITE "/r/a/b\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WRITE "/r/c\0v"
    = WRITE req=2 tx=0 "OK\0"
  a: RM "/r\0"
    = RM req=3 tx=0 "OK\0"
  a: DIRECTORY "/r\0"
    = ERROR req=4 tx=0 "ENOENT\0"
  a: READ "/r/a/b\0"
    = ERROR req=5 tx=0 "ENOENT\0"

case missing
  a: RM "/missing\0"
    = RM req=1 tx=0 "OK\0"

case missing-parent
  a: RM "/missing/child\0"
    = ERROR req=1 tx=0 "ENOENT\0"

case root
  oxenstored: special @paths are ordinary nodes, RM / allowed (C: EINVAL)
  a: RM "/\0"
    = ERROR req=1 tx=0 "EINVAL\0"
  a: DIRECTORY "/\0"
    = DIRECTORY req=2 tx=0 "tool\0"

case relative
  a: WRITE "/local/domain/0/rr\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: RM "rr\0"
    = RM req=2 tx=0 "OK\0"
  a: READ "/local/domain/0/rr\0"
    = ERROR req=3 tx=0 "ENOENT\0"

case no-nul
  differs: follows 4.20: EINVAL for a malformed path argument (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  oxenstored: EINVAL for a path argument without its NUL or with extra arguments (C: ENOENT, or ENOMEM for MKDIR/RM)
  xen-4.20: EINVAL for a path argument without its NUL, empty, or with extra arguments (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  a: WRITE "/r\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: RM "/r"
    = ERROR req=2 tx=0 "ENOMEM\0"
    4.20 = ERROR req=2 tx=0 "EINVAL\0"
    ~ ERROR req=2 tx=0 "EINVAL\0"

case empty
  differs: follows 4.20: EINVAL for a malformed path argument (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  xen-4.20: EINVAL for a path argument without its NUL, empty, or with extra arguments (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  a: RM ""
    = ERROR req=1 tx=0 "ENOMEM\0"
    4.20 = ERROR req=1 tx=0 "EINVAL\0"
    ~ ERROR req=1 tx=0 "EINVAL\0"

case bad-path
  a: RM "/r r\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case tool
  oxenstored: its store starts with @introduceDomain, @releaseDomain and /local as nodes
  a: RM "/tool\0"
    = RM req=1 tx=0 "OK\0"
  a: DIRECTORY "/\0"
    = DIRECTORY req=2 tx=0 ""

case child-keeps-parent
  a: WRITE "/r/a\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: RM "/r/a\0"
    = RM req=2 tx=0 "OK\0"
  a: DIRECTORY "/r\0"
    = DIRECTORY req=3 tx=0 ""

case twice
  a: WRITE "/r\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: RM "/r\0"
    = RM req=2 tx=0 "OK\0"
  a: RM "/r\0"
    = RM req=3 tx=0 "OK\0"

case watch-on-subtree-child
  a: WRITE "/r/a/b\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "/r/a\0tok\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/r/a\0tok\0"
  b: RM "/r\0"
    = RM req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/r/a\0tok\0"
  a: quiet

case watch-on-parent
  a: WRITE "/r/a/b\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "/r\0tok\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/r\0tok\0"
  b: RM "/r/a\0"
    = RM req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/r/a\0tok\0"
  a: quiet

case rm-missing-fires-nothing
  a: WATCH "/r\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/r\0tok\0"
  b: RM "/r\0"
    = RM req=2 tx=0 "OK\0"
  a: quiet

case local-domain-special
  oxenstored: its store starts with @introduceDomain, @releaseDomain and /local as nodes
  a: RM "/local\0"
    = RM req=1 tx=0 "OK\0"
  a: GET_DOMAIN_PATH "0\0"
    = GET_DOMAIN_PATH req=2 tx=0 "/local/domain/0\0"
  a: DIRECTORY "/\0"
    = DIRECTORY req=3 tx=0 "tool\0"

case special-path
  oxenstored: special @paths are ordinary nodes, RM / allowed (C: EINVAL)
  a: RM "@introduceDomain\0"
    = ERROR req=1 tx=0 "EINVAL\0"
