# XS_DIRECTORY_PART (22): "<path>\0<offset>\0" -> "<generation>\0" then
# children from offset, each NUL-terminated, and a final extra NUL.
case from-zero
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  a: WRITE "/d/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: WRITE "/d/b\0"
    = WRITE req=2 tx=0 "OK\0"
  a: DIRECTORY_PART "/d\00\0"
    = DIRECTORY_PART req=3 tx=0 "8\0a\0b\0\0"

case offset-into-names
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  a: WRITE "/d/alpha\0"
    = WRITE req=1 tx=0 "OK\0"
  a: WRITE "/d/beta\0"
    = WRITE req=2 tx=0 "OK\0"
  a: DIRECTORY_PART "/d\06\0"
    = DIRECTORY_PART req=3 tx=0 "8\0beta\0\0"

case past-end
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  a: WRITE "/d/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: DIRECTORY_PART "/d\099\0"
    = DIRECTORY_PART req=2 tx=0 "5\0\0"

case empty-dir
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  a: WRITE "/d\0"
    = WRITE req=1 tx=0 "OK\0"
  a: DIRECTORY_PART "/d\00\0"
    = DIRECTORY_PART req=2 tx=0 "4\0\0"

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
  a: WRITE "/d/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: DIRECTORY_PART "/d\0x\0"
    = DIRECTORY_PART req=2 tx=0 "5\0a\0\0"

case generation-changes
  oxenstored: DIRECTORY_PART unimplemented (ENOSYS); DIRECTORY may exceed 4096 bytes
  a: WRITE "/d/a\0"
    = WRITE req=1 tx=0 "OK\0"
  a: DIRECTORY_PART "/d\00\0"
    = DIRECTORY_PART req=2 tx=0 "5\0a\0\0"
  a: WRITE "/d/b\0"
    = WRITE req=3 tx=0 "OK\0"
  a: DIRECTORY_PART "/d\00\0"
    = DIRECTORY_PART req=4 tx=0 "8\0a\0b\0\0"
