# XS_SET_PERMS (14): "<path>\0<perm>\0..." where a perm is [nrwb]<domid>;
# the first names the owner and everyone else's default.
case owner-only
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0n5\0"
    = SET_PERMS req=2 tx=0 "OK\0"
  a: GET_PERMS "/p\0"
    = GET_PERMS req=3 tx=0 "n5\0"

case several
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0r0\0w1\0b2\0n3\0"
    = SET_PERMS req=2 tx=0 "OK\0"
  a: GET_PERMS "/p\0"
    = GET_PERMS req=3 tx=0 "r0\0w1\0b2\0n3\0"

case missing-node
  a: SET_PERMS "/missing\0n0\0"
    = ERROR req=1 tx=0 "ENOENT\0"

case no-perms
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0"
    = ERROR req=2 tx=0 "EINVAL\0"

case path-only-no-nul
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p"
    = ERROR req=2 tx=0 "EINVAL\0"

case bad-letter
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0x5\0"
    = ERROR req=2 tx=0 "EINVAL\0"

case uppercase-letter
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0R5\0"
    = ERROR req=2 tx=0 "EINVAL\0"

case no-domid
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0r\0"
    = ERROR req=2 tx=0 "EINVAL\0"
  a: GET_PERMS "/p\0"
    = GET_PERMS req=3 tx=0 "n0\0"

case non-numeric-domid
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0rabc\0"
    = ERROR req=2 tx=0 "EINVAL\0"

case trailing-garbage-domid
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0r5x\0"
    = ERROR req=2 tx=0 "EINVAL\0"

case empty-perm
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0\0"
    = ERROR req=2 tx=0 "EINVAL\0"

case last-without-nul
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0n0\0r5"
    = SET_PERMS req=2 tx=0 "OK\0"
  a: GET_PERMS "/p\0"
    = GET_PERMS req=3 tx=0 "n0\0"

case huge-domid
  oxenstored: does not check that a permission's or target's domain exists
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0n99999\0"
    = ERROR req=2 tx=0 "ENOENT\0"

case negative-domid
  oxenstored: does not check that a permission's or target's domain exists
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0n-1\0"
    = ERROR req=2 tx=0 "ENOENT\0"

case duplicate-domid
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0n0\0r5\0w5\0"
    = SET_PERMS req=2 tx=0 "OK\0"
  a: GET_PERMS "/p\0"
    = GET_PERMS req=3 tx=0 "n0\0r5\0w5\0"

case owner-repeated
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0n0\0r0\0"
    = SET_PERMS req=2 tx=0 "OK\0"
  a: GET_PERMS "/p\0"
    = GET_PERMS req=3 tx=0 "n0\0r0\0"

case root
  a: SET_PERMS "/\0r0\0"
    = SET_PERMS req=1 tx=0 "OK\0"
  a: GET_PERMS "/\0"
    = GET_PERMS req=2 tx=0 "r0\0"

case relative
  a: WRITE "/local/domain/0/sp\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "sp\0b0\0"
    = SET_PERMS req=2 tx=0 "OK\0"
  a: GET_PERMS "/local/domain/0/sp\0"
    = GET_PERMS req=3 tx=0 "b0\0"

case children-keep-own-perms
  a: WRITE "/p/c\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0n5\0"
    = SET_PERMS req=2 tx=0 "OK\0"
  a: GET_PERMS "/p/c\0"
    = GET_PERMS req=3 tx=0 "n0\0"

case special-path
  differs: follows 4.20: GET_PERMS of a special node answers its permissions (4.17: EINVAL)
  oxenstored: special @paths are ordinary nodes, RM / allowed (C: EINVAL)
  xen-4.20: special @ nodes have permissions: GET_PERMS and SET_PERMS work on them (4.17: EINVAL)
  a: SET_PERMS "@releaseDomain\0n0\0r5\0"
    = SET_PERMS req=1 tx=0 "OK\0"
  a: GET_PERMS "@releaseDomain\0"
    = ERROR req=2 tx=0 "EINVAL\0"
    4.20 = GET_PERMS req=2 tx=0 "n0\0r5\0"
    ~ GET_PERMS req=2 tx=0 "n0\0r5\0"

case special-unknown
  a: SET_PERMS "@bogus\0n0\0"
    = ERROR req=1 tx=0 "ENOENT\0"

case many-perms
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0n0\0r1\0r2\0r3\0r4\0r5\0r6\0r7\0r8\0r9\0r10\0r11\0r12\0r13\0r14\0r15\0r16\0r17\0r18\0r19\0r20\0"
    = SET_PERMS req=2 tx=0 "OK\0"
  a: GET_PERMS "/p\0"
    = GET_PERMS req=3 tx=0 "n0\0r1\0r2\0r3\0r4\0r5\0r6\0r7\0r8\0r9\0r10\0r11\0r12\0r13\0r14\0r15\0r16\0r17\0r18\0r19\0r20\0"

case owner-domain-not-introduced
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0n77\0"
    = SET_PERMS req=2 tx=0 "OK\0"
  a: GET_PERMS "/p\0"
    = GET_PERMS req=3 tx=0 "n77\0"
  a: WRITE "/p\0w"
    = WRITE req=4 tx=0 "OK\0"

case perms-survive-write
  a: WRITE "/p\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/p\0r3\0"
    = SET_PERMS req=2 tx=0 "OK\0"
  a: WRITE "/p\0w"
    = WRITE req=3 tx=0 "OK\0"
  a: GET_PERMS "/p\0"
    = GET_PERMS req=4 tx=0 "r3\0"

case bad-path
  a: SET_PERMS "/p p\0n0\0"
    = ERROR req=1 tx=0 "EINVAL\0"
