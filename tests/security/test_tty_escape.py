# SPDX-License-Identifier: LGPL-2.1-or-later
"""A command on a terminal can push input (TIOCSTI) into no terminal but its own: a D-Bus
caller's pty is refused without the tty option, and with it the command leads a session
whose controlling terminal is that pty alone; sandboxd's own pty is the command's."""

import os
import pty

import dbus

import sbxbus as B
from conftest import commands_path, wait_for, wait_terminal

# TIOCSTI on fd 0, then on /dev/tty: a byte pushed into the input of the terminal named.
TIOCSTI = ("import fcntl, termios, sys\n"
           "for name in sys.argv[1:]:\n"
           "    try:\n"
           "        f = None if name == '0' else open(name, 'rb', buffering=0)\n"
           "        fd = 0 if f is None else f.fileno()\n"
           "        fcntl.ioctl(fd, termios.TIOCSTI, b'Z'); print(name, 'pushed')\n"
           "    except OSError as e:\n"
           "        print(name, 'refused', e.errno)\n")


def test_caller_pty_without_tty_option_is_refused(api, scope, secnet):
    s = api.create_session(*scope)
    master, slave = pty.openpty()
    try:
        for opts in ({"stdin": dbus.types.UnixFd(slave)}, {"stdout": dbus.types.UnixFd(slave)},
                     {"stdin": dbus.types.UnixFd(master),
                      "tty": dbus.Struct((dbus.UInt16(24), dbus.UInt16(80)), signature="qq")},
                     {"stdout": dbus.types.UnixFd(slave),
                      "tty": dbus.Struct((dbus.UInt16(24), dbus.UInt16(80)), signature="qq")}):
            err = B.error_of(B.manager, "Exec", "sasa{sv}", s["id"], ["true"], opts)
            assert err == B.ERROR + "InvalidValue", (opts, err)
        assert api.get(commands_path(s["id"])).json["commands"] == []
    finally:
        os.close(master)
        os.close(slave)


def test_callers_own_terminal_cannot_become_the_commands(api, scope, secnet):
    """The caller's pty that already is a session's controlling terminal (here, this test's
    child's) cannot be taken: the command fails at set-up, having run nothing."""
    s = api.create_session(*scope)
    pid, master = pty.fork()
    if pid == 0:  # leads a session whose terminal is the pty, and waits
        os.execvp("sleep", ["sleep", "120"])
    try:
        # its stdin is the pty's slave once the child has set it up
        wait_for(lambda: os.readlink("/proc/%d/fd/0" % pid).startswith("/dev/pts/"), timeout=30,
                 what="the child on its terminal")
        slave = os.open("/proc/%d/fd/0" % pid, os.O_RDWR | os.O_NOCTTY)
        rid, cpath = B.manager("Exec", "sasa{sv}", s["id"], ["sh", "-c", "echo ran > ran.txt"],
                               {"stdin": dbus.types.UnixFd(slave), "stdout": dbus.types.UnixFd(slave),
                                "tty": dbus.Struct((dbus.UInt16(24), dbus.UInt16(80)), signature="qq")})
        os.close(slave)
        snap = wait_terminal(api, s["id"], rid, timeout=60)
        assert snap["status"] == "failed" and snap["reason"] == "setup-stdin", snap
        assert api.get("/v1/sessions/%s/files/ran.txt" % s["id"]).status == 404
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(master)


def test_tiocsti_reaches_only_the_commands_own_terminal(api, scope, secnet):
    s = api.create_session(*scope)
    r = api.post(commands_path(s["id"]) + "?wait=false",
                 {"argv": ["python3", "-c", TIOCSTI, "0", "/dev/tty"], "request_id": "sti",
                  "tty": {"rows": 24, "cols": 80}})
    assert r.status == 202, r
    snap = wait_terminal(api, s["id"], "sti", timeout=60)
    # its own terminal, whichever way it is named; there is no other it could name
    assert "0 pushed" in snap["stdout"] and "/dev/tty pushed" in snap["stdout"], snap
    # a pipe command has no terminal at all
    r = api.post(commands_path(s["id"]) + "?wait=false",
                 {"argv": ["python3", "-c", TIOCSTI, "0", "/dev/tty"], "request_id": "pipe"})
    snap = wait_terminal(api, s["id"], "pipe", timeout=60)
    assert "0 refused" in snap["stdout"] and "/dev/tty refused" in snap["stdout"], snap
