# XS_WATCH (4): "<path>\0<token>\0" -> OK, then an initial event; events
# are "<path>\0<token>\0" with req_id 0.
case initial-event
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"

case fires-on-write
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  b: WRITE "/w\0v"
    = WRITE req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"

case fires-on-child-write
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  b: WRITE "/w/x/y\0v"
    = WRITE req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w/x/y\0tok\0"
  a: quiet

case not-on-sibling
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  b: WRITE "/wx\0v"
    = WRITE req=2 tx=0 "OK\0"
  a: quiet

case not-on-parent
  a: WATCH "/w/deep\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w/deep\0tok\0"
  b: WRITE "/w\0v"
    = WRITE req=2 tx=0 "OK\0"
  a: quiet

case own-write-event-and-reply-order
  oxenstored: sends the watch event after the reply that fired it (C: before)
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  a: WRITE "/w\0v"
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
    = WRITE req=2 tx=0 "OK\0"
  a: quiet

case relative-path-event-relative
  a: WATCH "rw\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "rw\0tok\0"
  b: WRITE "/local/domain/0/rw\0v"
    = WRITE req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "rw\0tok\0"

case duplicate
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  a: WATCH "/w\0tok\0"
    = ERROR req=2 tx=0 "EEXIST\0"

case same-path-two-tokens
  oxenstored: fires one path's watches in reverse registration order
  a: WATCH "/w\0one\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0one\0"
  a: WATCH "/w\0two\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0two\0"
  b: WRITE "/w\0v"
    = WRITE req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0one\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0two\0"

case two-connections
  a: WATCH "/w\0a\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0a\0"
  b: WATCH "/w\0b\0"
    = WATCH req=2 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "/w\0b\0"
  c: WRITE "/w\0v"
    = WRITE req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0a\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "/w\0b\0"

case fires-on-mkdir
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  b: MKDIR "/w\0"
    = MKDIR req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"

case mkdir-existing-no-event
  a: WRITE "/w\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "/w\0tok\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  b: MKDIR "/w\0"
    = MKDIR req=3 tx=0 "OK\0"
  a: quiet

case fires-on-rm
  a: WRITE "/w\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "/w\0tok\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  b: RM "/w\0"
    = RM req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"

case rm-parent-fires-child-watch
  a: WRITE "/w/c\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "/w/c\0tok\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w/c\0tok\0"
  b: RM "/w\0"
    = RM req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w/c\0tok\0"

case fires-on-set-perms
  a: WRITE "/w\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "/w\0tok\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  b: SET_PERMS "/w\0n0\0r1\0"
    = SET_PERMS req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"

case root-watch
  a: WATCH "/\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/\0tok\0"
  b: WRITE "/anything\0v"
    = WRITE req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/anything\0tok\0"

case empty-token
  a: WATCH "/w\0\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0\0"

case token-with-spaces
  a: WATCH "/w\0a token with spaces\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0a token with spaces\0"

case missing-token
  a: WATCH "/w\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case no-nul-at-all
  a: WATCH "/w"
    = ERROR req=1 tx=0 "EINVAL\0"

case token-no-nul
  a: WATCH "/w\0tok"
    = ERROR req=1 tx=0 "EINVAL\0"
  a: quiet

case bad-path
  a: WATCH "/w w\0tok\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case trailing-slash-path
  a: WATCH "/w/\0tok\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case introduce-domain-special
  a: WATCH "@introduceDomain\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@introduceDomain\0tok\0"
  b: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@introduceDomain\0tok\0"

case release-domain-special
  a: WATCH "@releaseDomain\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0tok\0"
  b: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=2 tx=0 "OK\0"
  b: RELEASE "5\0"
    = RELEASE req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0tok\0"

case unknown-special
  a: WATCH "@other\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@other\0tok\0"

case special-not-fired-by-write
  a: WATCH "@introduceDomain\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@introduceDomain\0tok\0"
  b: WRITE "/introduceDomain\0v"
    = WRITE req=2 tx=0 "OK\0"
  a: quiet

case in-transaction
  oxenstored: WATCH in a transaction replies with tx 0 (C echoes the tx id)
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: WATCH tx=$t "/w\0tok\0"
    = WATCH req=2 tx=$t "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"

case event-after-commit-only
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  b: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  b: WRITE tx=$t "/w\0v"
    = WRITE req=3 tx=$t "OK\0"
  a: quiet
  b: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=4 tx=$t "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"

case no-event-after-abort
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  b: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  b: WRITE tx=$t "/w\0v"
    = WRITE req=3 tx=$t "OK\0"
  b: TRANSACTION_END tx=$t "F\0"
    = TRANSACTION_END req=4 tx=$t "OK\0"
  a: quiet

case long-token
  a: WATCH "/w\0" "t"*1000 "\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0" "t"*1000 "\0"

case watch-missing-node-then-create
  a: WATCH "/later\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/later\0tok\0"
  b: WRITE "/later/x\0"
    = WRITE req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/later/x\0tok\0"

case many-watches-dom0
  a: WATCH "/w1\0t\0"
    = WATCH req=1 tx=0 "OK\0"
  a: WATCH "/w2\0t\0"
    = WATCH_EVENT req=0 tx=0 "/w1\0t\0"
    = WATCH req=2 tx=0 "OK\0"
  a: WATCH "/w3\0t\0"
    = WATCH_EVENT req=0 tx=0 "/w2\0t\0"
    = WATCH req=3 tx=0 "OK\0"
  a: WATCH "/w4\0t\0"
    = WATCH_EVENT req=0 tx=0 "/w3\0t\0"
    = WATCH req=4 tx=0 "OK\0"
  a: WATCH "/w5\0t\0"
    = WATCH_EVENT req=0 tx=0 "/w4\0t\0"
    = WATCH req=5 tx=0 "OK\0"
  b: WRITE "/w3\0v"
    = WRITE req=6 tx=0 "OK\0"
  a: quiet
    = WATCH_EVENT req=0 tx=0 "/w5\0t\0"
    = WATCH_EVENT req=0 tx=0 "/w3\0t\0"

case commit-event-before-end-reply
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: WRITE tx=$t "/w\0v"
    = WRITE req=3 tx=$t "OK\0"
  a: TRANSACTION_END tx=$t "T\0"
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
    = TRANSACTION_END req=4 tx=$t "OK\0"
  a: quiet

case relative-watch-rm-parent
  a: WRITE "/local/domain/0/rp/c\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "rp/c\0tok\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "rp/c\0tok\0"
  b: RM "/local/domain/0/rp\0"
    = RM req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "rp/c\0tok\0"

case root-watch-not-fired-by-introduce
  a: WATCH "/\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/\0tok\0"
  b: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=2 tx=0 "OK\0"
  a: quiet

case deep-child-path
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  b: WRITE "/w/a/b/c/d\0v"
    = WRITE req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w/a/b/c/d\0tok\0"
  a: quiet

case nested-watches-same-connection
  a: WATCH "/w\0outer\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0outer\0"
  a: WATCH "/w/x\0inner\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w/x\0inner\0"
  b: WRITE "/w/x\0v"
    = WRITE req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w/x\0outer\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w/x\0inner\0"
  a: quiet

case set-perms-in-transaction-fires-on-commit
  a: WRITE "/w\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "/w\0tok\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  b: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=3 tx=0 "$t\0"
  b: SET_PERMS tx=$t "/w\0n0\0r3\0"
    = SET_PERMS req=4 tx=$t "OK\0"
  a: quiet
  b: TRANSACTION_END tx=$t "T\0"
    = TRANSACTION_END req=5 tx=$t "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"

case watch-token-same-as-path
  a: WATCH "/w\0/w\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0/w\0"

case watch-relative-special-like
  a: WATCH "introduceDomain\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "introduceDomain\0tok\0"
  b: INTRODUCE "5\0123\04\0"
    = INTRODUCE req=2 tx=0 "OK\0"
  a: quiet

case release-unknown-fires-nothing
  oxenstored: RELEASE: EINVAL for an unknown domain, ENOENT for dom0 (C: the other way round)
  a: WATCH "@releaseDomain\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0tok\0"
  b: RELEASE "5\0"
    = ERROR req=2 tx=0 "ENOENT\0"
  a: quiet

case three-args
  a: WATCH "/w\0tok\0extra\0"
    = ERROR req=1 tx=0 "EINVAL\0"
  a: quiet

case unwatch-three-args
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  a: UNWATCH "/w\0tok\0extra\0"
    = ERROR req=2 tx=0 "EINVAL\0"
