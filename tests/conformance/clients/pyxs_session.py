"""A pyxs (python3-pyxs) session whose printed transcript must be the same
against the shim and against C xenstored. Usage: pyxs_session.py <socket>"""
import sys

from pyxs import Client, PyXSError


def show(label, fn):
    try:
        print(label, "->", repr(fn()))
    except PyXSError as e:
        print(label, "-> error", e.args[0] if e.args else e)


sock = sys.argv[1]
with Client(unix_socket_path=sock) as c:
    show("write", lambda: c.write(b"/py/a", b"1"))
    show("write nested", lambda: c.write(b"/py/b/c", b"two"))
    show("read", lambda: c.read(b"/py/a"))
    show("read missing", lambda: c.read(b"/py/missing"))
    show("read default", lambda: c.read(b"/py/missing", b"dflt"))
    show("list", lambda: c.list(b"/py"))
    show("list missing", lambda: c.list(b"/nope"))
    show("exists", lambda: c.exists(b"/py/b"))
    show("exists missing", lambda: c.exists(b"/py/zz"))
    show("mkdir", lambda: c.mkdir(b"/py/dir"))
    show("read mkdir", lambda: c.read(b"/py/dir"))
    show("get_perms", lambda: c.get_perms(b"/py/a"))
    show("set_perms", lambda: c.set_perms(b"/py/a", [b"n0", b"r5"]))
    show("get_perms after", lambda: c.get_perms(b"/py/a"))
    show("set_perms bad", lambda: c.set_perms(b"/py/missing", [b"n0"]))
    show("walk", lambda: list(c.walk(b"/py")))
    show("delete", lambda: c.delete(b"/py/b"))
    show("delete missing", lambda: c.delete(b"/py/none"))
    show("list after delete", lambda: c.list(b"/py"))
    show("domain path", lambda: c.get_domain_path(3))
    show("introduced 0", lambda: c.is_domain_introduced(0))
    show("introduced 9", lambda: c.is_domain_introduced(9))
    show("introduce", lambda: c.introduce_domain(9, 1234, 5))
    show("introduced 9 after", lambda: c.is_domain_introduced(9))
    show("resume", lambda: c.resume_domain(9))
    show("release", lambda: c.release_domain(9))
    show("release again", lambda: c.release_domain(9))
    show("bad path", lambda: c.read(b"/py/a b"))
    show("relative", lambda: c.write(b"rel", b"x"))
    show("read relative abs", lambda: c.read(b"/local/domain/0/rel"))

    c.transaction()
    show("tx write", lambda: c.write(b"/py/tx", b"in-tx"))
    show("tx read", lambda: c.read(b"/py/tx"))
    show("tx commit", lambda: c.commit())
    show("after commit", lambda: c.read(b"/py/tx"))

    c.transaction()
    show("tx2 write", lambda: c.write(b"/py/tx2", b"gone"))
    show("tx2 rollback", lambda: c.rollback())
    show("after rollback", lambda: c.read(b"/py/tx2"))

    # A conflict: another connection changes what the transaction read.
    c.transaction()
    show("tx3 read", lambda: c.read(b"/py/a"))
    with Client(unix_socket_path=sock) as other:
        show("other write", lambda: other.write(b"/py/a", b"changed"))
    show("tx3 write", lambda: c.write(b"/py/a", b"mine"))
    show("tx3 commit", lambda: c.commit())
    show("after conflict", lambda: c.read(b"/py/a"))

with Client(unix_socket_path=sock) as c, Client(unix_socket_path=sock) as w:
    m = w.monitor()
    m.watch(b"/py/w", b"tok")
    events = m.wait()
    print("initial event", next(events))
    c.write(b"/py/w/x", b"1")
    print("event", next(events))
    c.delete(b"/py/w")
    print("event", next(events))
    m.unwatch(b"/py/w", b"tok")
    m.watch(b"@introduceDomain", b"intro")
    print("special initial", next(events))
    c.introduce_domain(11, 77, 3)
    print("special event", next(events))
