# XS_CONTROL (0): "<command>\0<args>..." from a privileged connection.
case check
  a: CONTROL "check\0"
    = CONTROL req=1 tx=0 "OK\0"

case print
  a: CONTROL "print\0hello from the tests\0"
    = CONTROL req=1 tx=0 "OK\0"

case print-no-arg
  oxenstored: answers CONTROL with OK whatever the command
  a: CONTROL "print\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case unknown-command
  oxenstored: answers CONTROL with OK whatever the command
  a: CONTROL "no-such-command\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case empty-payload
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: CONTROL ""
    = ERROR req=1 tx=0 "EINVAL\0"

case empty-command
  oxenstored: answers CONTROL with OK whatever the command
  a: CONTROL "\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case no-nul
  oxenstored: answers CONTROL with OK whatever the command
  a: CONTROL "check"
    = ERROR req=1 tx=0 "EINVAL\0"

case debug-alias-type
  # The old XS_DEBUG name for the same number.
  a: 0 "check\0"
    = CONTROL req=1 tx=0 "OK\0"

case check-then-read
  a: WRITE "/c\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: CONTROL "check\0"
    = CONTROL req=2 tx=0 "OK\0"
  a: READ "/c\0"
    = READ req=3 tx=0 "v"

case in-transaction
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: CONTROL tx=$t "check\0"
    = CONTROL req=2 tx=$t "OK\0"
