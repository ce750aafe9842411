# XS_RESET_WATCHES (21): drops all of the connection's watches.
case reset
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  a: RESET_WATCHES ""
    = RESET_WATCHES req=2 tx=0 "OK\0"
  b: WRITE "/w\0v"
    = WRITE req=3 tx=0 "OK\0"
  a: quiet

case with-nul
  a: RESET_WATCHES "\0"
    = RESET_WATCHES req=1 tx=0 "OK\0"

case no-watches
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: RESET_WATCHES ""
    = RESET_WATCHES req=1 tx=0 "OK\0"

case only-own-watches
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: WATCH "/w\0a\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0a\0"
  b: WATCH "/w\0b\0"
    = WATCH req=2 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "/w\0b\0"
  a: RESET_WATCHES ""
    = RESET_WATCHES req=3 tx=0 "OK\0"
  c: WRITE "/w\0v"
    = WRITE req=4 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "/w\0b\0"
  a: quiet

case watch-again-after-reset
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  a: RESET_WATCHES ""
    = RESET_WATCHES req=2 tx=0 "OK\0"
  a: WATCH "/w\0tok\0"
    = WATCH req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"

case in-transaction
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: RESET_WATCHES tx=$t ""
    = RESET_WATCHES req=2 tx=$t "OK\0"
