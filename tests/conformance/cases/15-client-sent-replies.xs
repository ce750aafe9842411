# Types a client should never send: XS_WATCH_EVENT (15) and XS_ERROR (16).
case watch-event
  a: WATCH_EVENT "/w\0tok\0"
    = ERROR req=1 tx=0 "ENOSYS\0"
  a: READ "/\0"
    = READ req=2 tx=0 ""

case error
  a: ERROR "EINVAL\0"
    = ERROR req=1 tx=0 "ENOSYS\0"
  a: READ "/\0"
    = READ req=2 tx=0 ""

case watch-event-empty
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: WATCH_EVENT ""
    = ERROR req=1 tx=0 "ENOSYS\0"
