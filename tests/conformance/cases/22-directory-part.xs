# XS_DIRECTORY_PART (22): "<path>\0<offset>\0" -> "<generation>\0" then
# children from offset, each NUL-terminated, and a final extra NUL.
case from-zero
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  xen-4.20: every DIRECTORY_PART generation is 2 higher (more changes at start-up); which replies share one is the same
  a: WRITE "/d/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: WRITE "/d/b\0"
    = WRITE req=2 tx=0 "OK\0"
  a: DIRECTORY_PART "/d\00\0"
    = DIRECTORY_PART req=3 tx=0 "8\0a\0b\0\0"
    4.20 = DIRECTORY_PART req=3 tx=0 "10\0a\0b\0\0"

case offset-into-names
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  xen-4.20: every DIRECTORY_PART generation is 2 higher (more changes at start-up); which replies share one is the same
  a: WRITE "/d/alpha\0"
    = WRITE req=1 tx=0 "OK\0"
  a: WRITE "/d/beta\0"
    = WRITE req=2 tx=0 "OK\0"
  a: DIRECTORY_PART "/d\06\0"
    = DIRECTORY_PART req=3 tx=0 "8\0beta\0\0"
    4.20 = DIRECTORY_PART req=3 tx=0 "10\0beta\0\0"

case past-end
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  xen-4.20: every DIRECTORY_PART generation is 2 higher (more changes at start-up); which replies share one is the same
  a: WRITE "/d/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: DIRECTORY_PART "/d\099\0"
    = DIRECTORY_PART req=2 tx=0 "5\0\0"
    4.20 = DIRECTORY_PART req=2 tx=0 "7\0\0"

case empty-dir
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  xen-4.20: every DIRECTORY_PART generation is 2 higher (more changes at start-up); which replies share one is the same
  a: WRITE "/d\0"
    = WRITE req=1 tx=0 "OK\0"
  a: DIRECTORY_PART "/d\00\0"
    = DIRECTORY_PART req=2 tx=0 "4\0\0"
    4.20 = DIRECTORY_PART req=2 tx=0 "6\0\0"

case missing
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  a: DIRECTORY_PART "/missing\00\0"
    = ERROR req=1 tx=0 "ENOENT\0"

case no-offset
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  a: WRITE "/d/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: DIRECTORY_PART "/d\0"
    = ERROR req=2 tx=0 "EINVAL\0"

case bad-offset
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  xen-4.20: every DIRECTORY_PART generation is 2 higher (more changes at start-up); which replies share one is the same
  a: WRITE "/d/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: DIRECTORY_PART "/d\0x\0"
    = DIRECTORY_PART req=2 tx=0 "5\0a\0\0"
    4.20 = DIRECTORY_PART req=2 tx=0 "7\0a\0\0"

case generation-changes
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  xen-4.20: every DIRECTORY_PART generation is 2 higher (more changes at start-up); which replies share one is the same
  a: WRITE "/d/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: DIRECTORY_PART "/d\00\0"
    = DIRECTORY_PART req=2 tx=0 "5\0a\0\0"
    4.20 = DIRECTORY_PART req=2 tx=0 "7\0a\0\0"
  a: WRITE "/d/b\0"
    = WRITE req=3 tx=0 "OK\0"
  a: DIRECTORY_PART "/d\00\0"
    = DIRECTORY_PART req=4 tx=0 "8\0a\0b\0\0"
    4.20 = DIRECTORY_PART req=4 tx=0 "10\0a\0b\0\0"

case generation-after-set-perms
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  xen-4.20: every DIRECTORY_PART generation is 2 higher (more changes at start-up); which replies share one is the same
  a: WRITE "/g/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: SET_PERMS "/g\0n0\0r1\0"
    = SET_PERMS req=2 tx=0 "OK\0"
  a: DIRECTORY_PART "/g\00\0"
    = DIRECTORY_PART req=3 tx=0 "7\0a\0\0"
    4.20 = DIRECTORY_PART req=3 tx=0 "9\0a\0\0"

case generation-after-child-rm
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  xen-4.20: every DIRECTORY_PART generation is 2 higher (more changes at start-up); which replies share one is the same
  a: WRITE "/g/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: WRITE "/g/b\0"
    = WRITE req=2 tx=0 "OK\0"
  a: RM "/g/a\0"
    = RM req=3 tx=0 "OK\0"
  a: DIRECTORY_PART "/g\00\0"
    = DIRECTORY_PART req=4 tx=0 "10\0b\0\0"
    4.20 = DIRECTORY_PART req=4 tx=0 "12\0b\0\0"

case generation-after-child-value-change
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  xen-4.20: every DIRECTORY_PART generation is 2 higher (more changes at start-up); which replies share one is the same
  a: WRITE "/g/a\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: DIRECTORY_PART "/g\00\0"
    = DIRECTORY_PART req=2 tx=0 "5\0a\0\0"
    4.20 = DIRECTORY_PART req=2 tx=0 "7\0a\0\0"
  a: WRITE "/g/a\0w"
    = WRITE req=3 tx=0 "OK\0"
  a: DIRECTORY_PART "/g\00\0"
    = DIRECTORY_PART req=4 tx=0 "5\0a\0\0"
    4.20 = DIRECTORY_PART req=4 tx=0 "7\0a\0\0"

case generation-after-mkdir-existing
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  xen-4.20: every DIRECTORY_PART generation is 2 higher (more changes at start-up); which replies share one is the same
  a: WRITE "/g/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: MKDIR "/g\0"
    = MKDIR req=2 tx=0 "OK\0"
  a: DIRECTORY_PART "/g\00\0"
    = DIRECTORY_PART req=3 tx=0 "5\0a\0\0"
    4.20 = DIRECTORY_PART req=3 tx=0 "7\0a\0\0"

case generation-root
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  a: DIRECTORY_PART "/\00\0"
    = DIRECTORY_PART req=1 tx=0 "1\0tool\0\0"

case generation-after-aborted-tx
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  xen-4.20: every DIRECTORY_PART generation is 2 higher (more changes at start-up); which replies share one is the same
  a: WRITE "/g/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=2 tx=0 "$t\0"
  a: WRITE tx=$t "/g/b\0"
    = WRITE req=3 tx=$t "OK\0"
  a: TRANSACTION_END tx=$t "F\0"
    = TRANSACTION_END req=4 tx=$t "OK\0"
  a: WRITE "/g/c\0"
    = WRITE req=5 tx=0 "OK\0"
  a: DIRECTORY_PART "/g\00\0"
    = DIRECTORY_PART req=6 tx=0 "11\0a\0c\0\0"
    4.20 = DIRECTORY_PART req=6 tx=0 "13\0a\0c\0\0"

case offset-exact-boundary
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  xen-4.20: every DIRECTORY_PART generation is 2 higher (more changes at start-up); which replies share one is the same
  a: WRITE "/g/aa\0"
    = WRITE req=1 tx=0 "OK\0"
  a: WRITE "/g/bb\0"
    = WRITE req=2 tx=0 "OK\0"
  a: DIRECTORY_PART "/g\03\0"
    = DIRECTORY_PART req=3 tx=0 "8\0bb\0\0"
    4.20 = DIRECTORY_PART req=3 tx=0 "10\0bb\0\0"
  a: DIRECTORY_PART "/g\02\0"
    = DIRECTORY_PART req=4 tx=0 "8\0\0bb\0\0"
    4.20 = DIRECTORY_PART req=4 tx=0 "10\0\0bb\0\0"
  a: DIRECTORY_PART "/g\04\0"
    = DIRECTORY_PART req=5 tx=0 "8\0b\0\0"
    4.20 = DIRECTORY_PART req=5 tx=0 "10\0b\0\0"

case relative-path
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  xen-4.20: every DIRECTORY_PART generation is 2 higher (more changes at start-up); which replies share one is the same
  a: WRITE "/local/domain/0/rg/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: DIRECTORY_PART "rg\00\0"
    = DIRECTORY_PART req=2 tx=0 "5\0a\0\0"
    4.20 = DIRECTORY_PART req=2 tx=0 "7\0a\0\0"
