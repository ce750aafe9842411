# Sizes and counts at and just past their limits, from dom0.
case payload-4096-dom0-read-reply
  oxenstored: limits a node's value to 2048 bytes even for dom0 (quota-maxsize): E2BIG
  a: WRITE "/big\0" "y"*4091
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/big\0"
    = READ req=2 tx=0 "y"*4091
  a: DIRECTORY "/\0"
    = DIRECTORY req=3 tx=0 "tool\0big\0"

case directory-reply-over-4096
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  # Children whose names together exceed one payload.
  a: WRITE "/d/" "a"*1000 "\0"
    = WRITE req=1 tx=0 "OK\0"
  a: WRITE "/d/" "b"*1000 "\0"
    = WRITE req=2 tx=0 "OK\0"
  a: WRITE "/d/" "c"*1000 "\0"
    = WRITE req=3 tx=0 "OK\0"
  a: WRITE "/d/" "e"*1000 "\0"
    = WRITE req=4 tx=0 "OK\0"
  a: WRITE "/d/" "f"*1000 "\0"
    = WRITE req=5 tx=0 "OK\0"
  a: DIRECTORY "/d\0"
    = ERROR req=6 tx=0 "E2BIG\0"
  a: DIRECTORY_PART "/d\00\0"
    = DIRECTORY_PART req=7 tx=0 "14\0" "a"*1000 "\0" "b"*1000 "\0" "c"*1000 "\0" "e"*1000 "\0"

case node-name-long
  a: WRITE "/" "n"*2000 "\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/" "n"*2000 "\0"
    = READ req=2 tx=0 "v"

case watch-path-long
  oxenstored: accepts watch paths longer than 2048 bytes (C: EINVAL)
  a: WATCH "/" "w"*3000 "\0tok\0"
    = ERROR req=1 tx=0 "EINVAL\0"
  a: quiet

case watch-path-2048
  a: WATCH "/" "w"*2047 "\0tok\0"
    = WATCH req=1 tx=0 "OK\0"
  a: quiet
    = WATCH_EVENT req=0 tx=0 "/" "w"*2047 "\0tok\0"

case watch-path-2049
  oxenstored: accepts watch paths longer than 2048 bytes (C: EINVAL)
  a: WATCH "/" "w"*2048 "\0tok\0"
    = ERROR req=1 tx=0 "EINVAL\0"
  a: quiet

case watch-path-too-long
  oxenstored: accepts watch paths longer than 2048 bytes (C: EINVAL)
  a: WATCH "/" "w"*3072 "\0tok\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case many-nodes
  oxenstored: its store starts with @introduceDomain, @releaseDomain and /local as nodes
  a: WRITE "/n/1\0"
    = WRITE req=1 tx=0 "OK\0"
  a: WRITE "/n/2\0"
    = WRITE req=2 tx=0 "OK\0"
  a: WRITE "/n/3\0"
    = WRITE req=3 tx=0 "OK\0"
  a: WRITE "/n/4\0"
    = WRITE req=4 tx=0 "OK\0"
  a: WRITE "/n/5\0"
    = WRITE req=5 tx=0 "OK\0"
  a: WRITE "/n/6\0"
    = WRITE req=6 tx=0 "OK\0"
  a: WRITE "/n/7\0"
    = WRITE req=7 tx=0 "OK\0"
  a: WRITE "/n/8\0"
    = WRITE req=8 tx=0 "OK\0"
  a: WRITE "/n/9\0"
    = WRITE req=9 tx=0 "OK\0"
  a: WRITE "/n/10\0"
    = WRITE req=10 tx=0 "OK\0"
  a: RM "/n\0"
    = RM req=11 tx=0 "OK\0"
  a: DIRECTORY "/\0"
    = DIRECTORY req=12 tx=0 "tool\0"

case many-watches-one-path
  a: WATCH "/w\01\0"
    = WATCH req=1 tx=0 "OK\0"
  a: WATCH "/w\02\0"
    = WATCH_EVENT req=0 tx=0 "/w\01\0"
    = WATCH req=2 tx=0 "OK\0"
  a: WATCH "/w\03\0"
    = WATCH_EVENT req=0 tx=0 "/w\02\0"
    = WATCH req=3 tx=0 "OK\0"
  a: WATCH "/w\04\0"
    = WATCH_EVENT req=0 tx=0 "/w\03\0"
    = WATCH req=4 tx=0 "OK\0"
  a: WATCH "/w\05\0"
    = WATCH_EVENT req=0 tx=0 "/w\04\0"
    = WATCH req=5 tx=0 "OK\0"
  a: WATCH "/w\06\0"
    = WATCH_EVENT req=0 tx=0 "/w\05\0"
    = WATCH req=6 tx=0 "OK\0"
  a: WATCH "/w\07\0"
    = WATCH_EVENT req=0 tx=0 "/w\06\0"
    = WATCH req=7 tx=0 "OK\0"
  a: WATCH "/w\08\0"
    = WATCH_EVENT req=0 tx=0 "/w\07\0"
    = WATCH req=8 tx=0 "OK\0"

case relative-path-max
  a: WRITE "r"*2033 "\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: READ "/local/domain/0/" "r"*2033 "\0"
    = READ req=2 tx=0 "v"

case set-perms-payload-full
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0n0\0" "r1\0"*1360
    = SET_PERMS req=2 tx=0 "OK\0"
