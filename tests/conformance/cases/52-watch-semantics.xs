# Watch subtleties: pending events, resets, relative forms, many watchers.
case unwatch-after-fire-before-read
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  b: WRITE "/w\0v"
    = WRITE req=2 tx=0 "OK\0"
  a: UNWATCH "/w\0tok\0"
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
    = UNWATCH req=3 tx=0 "OK\0"
  a: quiet

case reset-after-fire-before-read
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: WATCH "/w\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
  b: WRITE "/w\0v"
    = WRITE req=2 tx=0 "OK\0"
  a: RESET_WATCHES ""
    = WATCH_EVENT req=0 tx=0 "/w\0tok\0"
    = RESET_WATCHES req=3 tx=0 "OK\0"
  a: quiet

case relative-watch-fired-by-absolute-rm-above
  a: WRITE "/local/domain/0/x/y\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "x/y\0tok\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "x/y\0tok\0"
  b: RM "/local/domain/0\0"
    = RM req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "x/y\0tok\0"

case absolute-watch-fired-by-relative-write
  a: WATCH "/local/domain/0/aw\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/local/domain/0/aw\0tok\0"
  b: WRITE "aw\0v"
    = WRITE req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/local/domain/0/aw\0tok\0"

case three-connections-one-write
  a: WATCH "/m\0a\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/m\0a\0"
  b: WATCH "/m/x\0b\0"
    = WATCH req=2 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "/m/x\0b\0"
  c: WATCH "/\0c\0"
    = WATCH req=3 tx=0 "OK\0"
  c: wait
    = WATCH_EVENT req=0 tx=0 "/\0c\0"
  d: WRITE "/m/x\0v"
    = WRITE req=4 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/m/x\0a\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "/m/x\0b\0"
  c: wait
    = WATCH_EVENT req=0 tx=0 "/m/x\0c\0"

case watch-own-introduce
  oxenstored: sends the @releaseDomain event before the RELEASE reply (C: after)
  a: WATCH "@introduceDomain\0i\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@introduceDomain\0i\0"
  a: WATCH "@releaseDomain\0r\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0r\0"
  a: INTRODUCE "4\0123\04\0"
    = WATCH_EVENT req=0 tx=0 "@introduceDomain\0i\0"
    = INTRODUCE req=3 tx=0 "OK\0"
  a: RELEASE "4\0"
    = RELEASE req=4 tx=0 "OK\0"
  a: quiet
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0r\0"

case special-watch-unwatch-relative-form
  a: WATCH "@introduceDomain\0i\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@introduceDomain\0i\0"
  a: UNWATCH "@introduceDomain\0i\0"
    = UNWATCH req=2 tx=0 "OK\0"
  b: INTRODUCE "4\0123\04\0"
    = INTRODUCE req=3 tx=0 "OK\0"
  a: quiet

case events-queued-while-not-reading
  a: WATCH "/q\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/q\0tok\0"
  b: WRITE "/q/1\0"
    = WRITE req=2 tx=0 "OK\0"
  b: WRITE "/q/2\0"
    = WRITE req=3 tx=0 "OK\0"
  b: WRITE "/q/3\0"
    = WRITE req=4 tx=0 "OK\0"
  b: WRITE "/q/4\0"
    = WRITE req=5 tx=0 "OK\0"
  b: WRITE "/q/5\0"
    = WRITE req=6 tx=0 "OK\0"
  a: READ "/q/5\0"
    = WATCH_EVENT req=0 tx=0 "/q/1\0tok\0"
    = WATCH_EVENT req=0 tx=0 "/q/2\0tok\0"
    = WATCH_EVENT req=0 tx=0 "/q/3\0tok\0"
    = WATCH_EVENT req=0 tx=0 "/q/4\0tok\0"
    = WATCH_EVENT req=0 tx=0 "/q/5\0tok\0"
    = READ req=7 tx=0 ""
  a: quiet

case watch-then-rm-watched-then-recreate
  a: WRITE "/rr\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "/rr\0tok\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/rr\0tok\0"
  b: RM "/rr\0"
    = RM req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/rr\0tok\0"
  b: WRITE "/rr\0again"
    = WRITE req=4 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/rr\0tok\0"

case set-perms-on-parent-does-not-fire-child-watch
  a: WRITE "/sp/c\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "/sp/c\0tok\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/sp/c\0tok\0"
  b: SET_PERMS "/sp\0n0\0r1\0"
    = SET_PERMS req=3 tx=0 "OK\0"
  a: quiet

case mkdir-creating-parents-fires-parent-watch
  a: WATCH "/mk\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/mk\0tok\0"
  b: MKDIR "/mk/a/b\0"
    = MKDIR req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/mk/a/b\0tok\0"
  a: quiet

case write-unchanged-value-fires
  a: WRITE "/u\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "/u\0tok\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/u\0tok\0"
  b: WRITE "/u\0v"
    = WRITE req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/u\0tok\0"

case closing-watcher-then-write
  a: WATCH "/cw\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/cw\0tok\0"
  a: close
  b: WRITE "/cw\0v"
    = WRITE req=2 tx=0 "OK\0"
  b: READ "/cw\0"
    = READ req=3 tx=0 "v"

case watch-in-aborted-tx-stays
  oxenstored: WATCH in a transaction replies with tx 0 (C echoes the tx id)
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: WATCH tx=$t "/wa\0tok\0"
    = WATCH req=2 tx=$t "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/wa\0tok\0"
  a: TRANSACTION_END tx=$t "F\0"
    = TRANSACTION_END req=3 tx=$t "OK\0"
  b: WRITE "/wa\0v"
    = WRITE req=4 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/wa\0tok\0"

case rm-subtree-two-watches-order
  oxenstored: a plain RM fires the node's and parents' watches before those below it (C: below first)
  a: WRITE "/t/a/b\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "/t/a/b\0deep\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t/a/b\0deep\0"
  a: WATCH "/t\0top\0"
    = WATCH req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t\0top\0"
  b: RM "/t/a\0"
    = RM req=4 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t/a/b\0deep\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t/a\0top\0"
  a: quiet

case rm-subtree-watch-registration-reversed
  oxenstored: a plain RM fires the node's and parents' watches before those below it (C: below first)
  a: WRITE "/t/a/b\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WATCH "/t\0top\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t\0top\0"
  a: WATCH "/t/a/b\0deep\0"
    = WATCH req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t/a/b\0deep\0"
  b: RM "/t/a\0"
    = RM req=4 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t/a/b\0deep\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t/a\0top\0"
  a: quiet

case rm-subtree-several-children-watched
  oxenstored: a plain RM fires the node's and parents' watches before those below it (C: below first)
  a: WRITE "/t/a/x\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: WRITE "/t/a/y\0v"
    = WRITE req=2 tx=0 "OK\0"
  a: WATCH "/t/a/y\0y\0"
    = WATCH req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t/a/y\0y\0"
  a: WATCH "/t/a/x\0x\0"
    = WATCH req=4 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t/a/x\0x\0"
  a: WATCH "/t/a\0a\0"
    = WATCH req=5 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t/a\0a\0"
  b: RM "/t/a\0"
    = RM req=6 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t/a/x\0x\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t/a/y\0y\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/t/a\0a\0"
  a: quiet

case release-event-after-reply-same-connection
  oxenstored: sends the @releaseDomain event before the RELEASE reply (C: after)
  a: INTRODUCE "4\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: WATCH "@releaseDomain\0r\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0r\0"
  a: RELEASE "4\0"
    = RELEASE req=3 tx=0 "OK\0"
  a: quiet
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0r\0"

case overlapping-watches-same-token-one-event
  oxenstored: sends one event per matching watch, even when two are identical (C: one)
  # Both watches fire with the same path and token: one event.
  a: WATCH "/x\0t\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/x\0t\0"
  a: WATCH "/x/y\0t\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/x/y\0t\0"
  b: WRITE "/x/y\0v"
    = WRITE req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/x/y\0t\0"
  a: quiet

case overlapping-watches-different-tokens-two-events
  a: WATCH "/x\0t1\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/x\0t1\0"
  a: WATCH "/x/y\0t2\0"
    = WATCH req=2 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/x/y\0t2\0"
  b: WRITE "/x/y\0v"
    = WRITE req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/x/y\0t1\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/x/y\0t2\0"
  a: quiet

case overlapping-watches-two-connections
  a: WATCH "/x\0t\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/x\0t\0"
  b: WATCH "/x/y\0t\0"
    = WATCH req=2 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "/x/y\0t\0"
  c: WRITE "/x/y\0v"
    = WRITE req=3 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/x/y\0t\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "/x/y\0t\0"
  a: quiet
  b: quiet

case overlapping-relative-and-absolute-same-token
  # The same watch spelled relative and absolute is a duplicate.
  a: WATCH "/local/domain/0/x\0t\0"
    = WATCH req=1 tx=0 "OK\0"
  a: wait
    = WATCH_EVENT req=0 tx=0 "/local/domain/0/x\0t\0"
  a: WATCH "x\0t\0"
    = ERROR req=2 tx=0 "EEXIST\0"
  a: quiet

case release-by-other-connection-event-before-reply
  # Introduced by a, released by b: the event precedes b's reply.
  a: INTRODUCE "4\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  b: WATCH "@releaseDomain\0r\0"
    = WATCH req=2 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0r\0"
  b: RELEASE "4\0"
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0r\0"
    = RELEASE req=3 tx=0 "OK\0"
  b: quiet

case release-by-introducer-watcher-elsewhere
  a: INTRODUCE "4\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  b: WATCH "@releaseDomain\0r\0"
    = WATCH req=2 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0r\0"
  a: RELEASE "4\0"
    = RELEASE req=3 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0r\0"

case release-introduced-by-closed-connection
  a: INTRODUCE "4\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  a: close
  b: WATCH "@releaseDomain\0r\0"
    = WATCH req=2 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0r\0"
  b: RELEASE "4\0"
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0r\0"
    = RELEASE req=3 tx=0 "OK\0"
  b: quiet

case release-after-reintroduce-by-other
  a: INTRODUCE "4\0123\04\0"
    = INTRODUCE req=1 tx=0 "OK\0"
  b: INTRODUCE "4\0123\04\0"
    = INTRODUCE req=2 tx=0 "OK\0"
  b: WATCH "@releaseDomain\0r\0"
    = WATCH req=3 tx=0 "OK\0"
  b: wait
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0r\0"
  b: RELEASE "4\0"
    = WATCH_EVENT req=0 tx=0 "@releaseDomain\0r\0"
    = RELEASE req=4 tx=0 "OK\0"
  b: quiet
