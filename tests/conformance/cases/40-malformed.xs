# Hostile bytes: wrong lengths, split and pipelined messages, oversized
# payloads. The daemon must survive every one (checked after each case).
case len-4096-write
  oxenstored: limits a node's value to 2048 bytes even for dom0 (quota-maxsize): E2BIG
  a: WRITE "/x\0" "v"*4093
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/x\0"
    = READ req=2 tx=0 "v"*4093

case len-4097-write
  oxenstored: a payload over 4096 bytes gets E2BIG or is waited for; garbage headers do not close the connection (C closes)
  a: WRITE "/x\0" "v"*4094
    = closed
  b: READ "/x\0"
    = ERROR req=2 tx=0 "ENOENT\0"

case len-4097-header-only
  oxenstored: a payload over 4096 bytes gets E2BIG or is waited for; garbage headers do not close the connection (C closes)
  a: READ len=4097 "" nowait
  a: wait
    = closed
  b: READ "/\0"
    = READ req=2 tx=0 ""

case len-huge-header-only
  oxenstored: a payload over 4096 bytes gets E2BIG or is waited for; garbage headers do not close the connection (C closes)
  a: READ len=4294967295 "" nowait
  a: wait
    = closed
  b: READ "/\0"
    = READ req=2 tx=0 ""

case len-zero-read
  differs: follows 4.20: EINVAL for a malformed path argument (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  xen-4.20: EINVAL for a path argument without its NUL, empty, or with extra arguments (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  a: READ len=0 ""
    = ERROR req=1 tx=0 "ENOENT\0"
    4.20 = ERROR req=1 tx=0 "EINVAL\0"
    ~ ERROR req=1 tx=0 "EINVAL\0"

case len-zero-write
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: WRITE ""
    = ERROR req=1 tx=0 "EINVAL\0"

case header-split
  a: raw "\x02\x00\x00\x00\x07\x00\x00\x00" nowait
  a: raw "\x00\x00\x00\x00\x02\x00\x00\x00/\0"
    = READ req=7 tx=0 ""

case payload-split
  a: raw "\x02\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00\x06\x00\x00\x00/to" nowait
  a: raw "ol\0"
    = READ req=8 tx=0 ""

case byte-by-byte
  a: raw "\x02" nowait
  a: raw "\x00\x00\x00" nowait
  a: raw "\x09\x00\x00\x00" nowait
  a: raw "\x00\x00\x00\x00" nowait
  a: raw "\x02\x00\x00\x00" nowait
  a: raw "/" nowait
  a: raw "\0"
    = READ req=9 tx=0 ""

case two-in-one-write
  a: raw "\x0b\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00/a\0v\x02\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: wait
    = READ req=2 tx=0 "v"

case pipelined-many
  a: WRITE "/p\01" nowait
  a: WRITE "/p\02" nowait
  a: WRITE "/p\03" nowait
  a: READ "/p\0" nowait
  a: wait
    = WRITE req=1 tx=0 "OK\0"
  a: wait
    = WRITE req=2 tx=0 "OK\0"
  a: wait
    = WRITE req=3 tx=0 "OK\0"
  a: wait
    = READ req=4 tx=0 "3"

case partial-header-then-close
  a: raw "\x02\x00\x00" nowait
  a: close
  b: READ "/\0"
    = READ req=1 tx=0 ""

case partial-payload-then-close
  a: READ len=100 "/tool" nowait
  a: close
  b: READ "/tool\0"
    = READ req=2 tx=0 ""

case length-shorter-than-payload
  # The surplus bytes start the next message.
  a: raw "\x02\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00/\0\x02\x00\x00\x00\x06\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00/\0"
    = READ req=5 tx=0 ""
  a: wait
    = READ req=6 tx=0 ""

case req-id-max
  a: READ req=4294967295 "/\0"
    = READ req=4294967295 tx=0 ""

case req-id-zero
  a: READ req=0 "/\0"
    = READ req=0 tx=0 ""

case req-id-repeated
  a: READ req=7 "/\0"
    = READ req=7 tx=0 ""
  a: READ req=7 "/tool\0"
    = READ req=7 tx=0 ""

case nul-in-middle-of-path
  differs: follows 4.20: EINVAL for a malformed path argument (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  oxenstored: EINVAL for a path argument without its NUL or with extra arguments (C: ENOENT, or ENOMEM for MKDIR/RM)
  xen-4.20: EINVAL for a path argument without its NUL, empty, or with extra arguments (4.17: ENOENT, or ENOMEM for MKDIR/RM)
  a: WRITE "/a\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/a\0b\0"
    = ERROR req=2 tx=0 "ENOENT\0"
    4.20 = ERROR req=2 tx=0 "EINVAL\0"
    ~ ERROR req=2 tx=0 "EINVAL\0"

case high-bytes-path
  a: READ "/\xff\xfe\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case control-char-path
  a: WRITE "/a\x01b\0v"
    = ERROR req=1 tx=0 "EINVAL\0"

case newline-path
  a: WRITE "/a\nb\0v"
    = ERROR req=1 tx=0 "EINVAL\0"

case path-only-slashes
  a: WRITE "///\0v"
    = ERROR req=1 tx=0 "EINVAL\0"

case payload-all-nuls
  a: WRITE "\0\0\0\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case garbage-after-close-other-conn
  a: raw "garbage!garbage!" nowait
  b: READ "/\0"
    = READ req=1 tx=0 ""

case garbage-header
  oxenstored: a payload over 4096 bytes gets E2BIG or is waited for; garbage headers do not close the connection (C closes)
  a: raw "garbage!garbage!"
    = closed

case unknown-tx-then-ok
  oxenstored: EIO for an unknown transaction id (C: ENOENT)
  a: WRITE tx=77 "/x\0v"
    = ERROR req=1 tx=77 "ENOENT\0"
  a: WRITE "/x\0v"
    = WRITE req=2 tx=0 "OK\0"
