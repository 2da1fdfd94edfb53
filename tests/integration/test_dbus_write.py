# SPDX-License-Identifier: LGPL-2.1-or-later
"""Files.Write() takes the file's bytes in an fd: a pipe, read as it fills, or a regular
file. Large files round-trip byte for byte, the limits of the HTTP upload hold, other
kinds of fd are refused, and a failed or abandoned write leaves nothing behind."""

import fcntl
import os
import select
import socket
import struct
import subprocess
import sys
import termios
import threading
import time

import dbus
import pytest

import sbxbus as B
from conftest import config_dropin, restart_daemon, wait_for
from test_files import DROPIN, host_dir, no_leftovers, small_file_cap, url  # noqa: F401 (a fixture)
from test_sandboxctl_polkit import SANDBOXCTL, as_user, polkit_user  # noqa: F401 (a fixture)

FILES = "io.sandboxd.sandbox1.Files"


def write_fd(sid, path, fd, options=None):
    return B.call("%s/session/%s" % (B.PATH, sid), FILES, "Write", "sha{sv}", path, dbus.types.UnixFd(fd),
                  dbus.Dictionary(options or {}, signature="sv"))


def write_pipe(sid, path, data, options=None, chunk=65536):
    """Write() from a pipe that a thread fills in chunks while the call waits (and stops
    filling once the call was answered: dbus-python keeps a copy of the read end)."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    answered = threading.Event()

    def feed():
        i = 0
        try:
            while i < len(data) and not answered.is_set():
                if select.select([], [w], [], 0.1)[1]:
                    try:
                        i += os.write(w, data[i:i + chunk])
                    except BlockingIOError:
                        pass
        except BrokenPipeError:
            pass
        finally:
            os.close(w)

    t = threading.Thread(target=feed)
    t.start()
    try:
        return write_fd(sid, path, r, options)
    finally:
        answered.set()
        os.close(r)
        t.join()


def write_file(sid, path, data, options=None):
    fd = os.memfd_create("data")
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
        return write_fd(sid, path, fd, options)
    finally:
        os.close(fd)


def content(api, sid, path):
    r = api.get(url(sid, path))
    assert r.status == 200, r
    return r.body


def test_large_files_round_trip(api, session):
    sid = session["id"]
    data = os.urandom(3 << 20)
    entry, created = write_pipe(sid, "big.bin", data)
    assert created is True and '"size":%d' % len(data) in entry, entry
    assert content(api, sid, "big.bin") == data

    # from a regular file, replacing; with a matching "size" from a pipe
    other = os.urandom((3 << 19) + 7)
    entry, created = write_file(sid, "big.bin", other, {"mode": dbus.UInt32(0o640)})
    assert created is False and '"mode":"0640"' in entry, entry
    assert content(api, sid, "big.bin") == other
    assert write_pipe(sid, "sized", data, {"size": B.t(len(data))})[1] is True
    assert content(api, sid, "sized") == data
    assert write_pipe(sid, "empty", b"")[1] is True and content(api, sid, "empty") == b""
    assert no_leftovers(session)


def test_other_fds_are_refused(api, session):
    sid = session["id"]
    a, b = socket.socketpair()
    null = os.open("/dev/null", os.O_RDONLY)
    r, w = os.pipe()
    try:
        for fd, what in ((a.fileno(), "a socket"), (null, "a character device")):
            with pytest.raises(B.BusError) as e:
                write_fd(sid, "x", fd)
            assert e.value.name == B.ERROR + "InvalidValue", e.value
            assert "must be a pipe or a regular file, not %s" % what in e.value.message, e.value
        with pytest.raises(B.BusError) as e:
            write_fd(sid, "x", w)  # the end one writes to
        assert e.value.name == B.ERROR + "InvalidValue" and "open for reading" in e.value.message, e.value
    finally:
        a.close()
        b.close()
        os.close(null)
        os.close(r)
        os.close(w)
    assert not os.path.exists(host_dir(session)) or os.listdir(host_dir(session)) == []


def test_bad_paths_change_nothing(api, session):
    sid = session["id"]
    write_file(sid, "kept", b"old")
    os.mkdir(os.path.join(host_dir(session), "dir"))
    before = sorted(os.listdir(host_dir(session)))
    for path, name in (("/etc/x", "InvalidPath"), ("../x", "InvalidPath"), ("no/such/dir/x", "NoSuchFile"),
                       ("kept/x", "NotADirectory")):
        assert B.error_of(write_pipe, sid, path, b"data") == B.ERROR + name, path
    assert B.error_of(write_pipe, sid, "dir", b"data") in (B.ERROR + "IsADirectory", B.ERROR + "Exists")
    assert B.error_of(write_pipe, sid, "kept", b"x", {"size": "3"}) == B.ERROR + "InvalidType"
    assert B.error_of(write_pipe, sid, "kept", b"x", {"offset": B.t(0)}) == B.ERROR + "UnknownOption"
    assert B.error_of(write_pipe, sid, "kept", b"x", {"mode": dbus.UInt32(0o4755)}) == B.ERROR + "InvalidValue"
    assert sorted(os.listdir(host_dir(session))) == before
    assert content(api, sid, "kept") == b"old"


def test_short_or_long_against_size(api, session):
    """A pipe that ends before the bytes "size" announced (a writer that died) or gives
    more: nothing is written, the old file stays."""
    sid = session["id"]
    write_file(sid, "kept", b"old")
    for data, size in ((b"x" * 100000, 200000), (b"x" * 100, 99)):
        with pytest.raises(B.BusError) as e:
            write_pipe(sid, "kept", data, {"size": B.t(size)})
        assert e.value.name == B.ERROR + "InvalidValue" and "option 'size'" in e.value.message, e.value
        with pytest.raises(B.BusError) as e:
            write_file(sid, "new", data, {"size": B.t(size)})
        assert e.value.name == B.ERROR + "InvalidValue", e.value
    assert content(api, sid, "kept") == b"old"
    assert no_leftovers(session, "new")


_LEAVE = r'''
import os, sys, time, dbus, dbus.lowlevel
msg = dbus.lowlevel.MethodCallMessage("io.sandboxd.sandbox1", sys.argv[1], "io.sandboxd.sandbox1.Files", "Write")
msg.append("left", dbus.types.UnixFd(int(sys.argv[2])), dbus.Dictionary({}, signature="sv"), signature="sha{sv}")
bus = dbus.SystemBus()
bus.send_message(msg)
bus.flush()
time.sleep(1)  # sandboxd took the call and reads the pipe
os._exit(0)
'''


def test_caller_gone_mid_way(api, session):
    """The caller leaves the bus while its pipe is open: when the pipe ends, no file."""
    sid = session["id"]
    r, w = os.pipe()
    try:
        os.write(w, b"partial" * 1000)
        subprocess.run([sys.executable, "-c", _LEAVE, "%s/session/%s" % (B.PATH, sid), str(r)], pass_fds=(r,),
                       check=True, timeout=30)
        os.close(r)
        r = -1
        # sandboxd dropped the upload and its end of the pipe: writing fails
        def dropped():
            try:
                os.write(w, b"more")
                return False
            except BrokenPipeError:
                return True
        wait_for(dropped, timeout=10, what="sandboxd to drop the pipe")
    finally:
        if r >= 0:
            os.close(r)
        os.close(w)
    time.sleep(0.2)
    assert no_leftovers(session, "left")


@pytest.mark.restarts_daemon
def test_a_stalled_pipe_is_given_up(api, scope):
    """A pipe that gives nothing for ConnectionTimeoutSec= ends the Write() with Timeout and
    no file, while sandboxd answers others meanwhile."""
    with config_dropin(DROPIN) as write:
        write("[HTTP]\nConnectionTimeoutSec=2\n")
        s = api.create_session(*scope)
        sid = s["id"]
        r, w = os.pipe()
        try:
            os.write(w, b"some")
            t0 = time.monotonic()
            assert B.error_of(write_fd, sid, "stalled.bin", r) == "org.freedesktop.DBus.Error.Timeout"
            assert 1.5 < time.monotonic() - t0 < 30
        finally:
            os.close(r)
            os.close(w)
        assert no_leftovers(s, "stalled.bin")


@pytest.mark.restarts_daemon
def test_stop_while_a_pipe_is_read(api, session):
    """sandboxd stops while a Write() still reads its pipe: the caller is answered Stopping,
    once, rather than NoReply when the connection goes; no file is left."""
    sid = session["id"]
    r, w = os.pipe()
    answer = {}

    def call():
        try:
            answer["error"] = B.error_of(write_fd, sid, "stopped.bin", r)
        except AssertionError as e:
            answer["error"] = str(e)

    t = threading.Thread(target=call)
    try:
        os.write(w, b"x" * 1000)
        t.start()
        # sandboxd took the call once it read what the pipe holds
        wait_for(lambda: struct.unpack("i", fcntl.ioctl(r, termios.FIONREAD, b"\0" * 4))[0] == 0, timeout=15,
                 what="sandboxd to read the pipe")
        restart_daemon()
        t.join(timeout=30)
        assert not t.is_alive()
        assert answer["error"] == "io.sandboxd.sandbox1.Error.Stopping", answer
    finally:
        os.close(w)
        t.join(timeout=30)
        os.close(r)
    assert no_leftovers(session, "stopped.bin")


@pytest.mark.restarts_daemon
def test_max_file_size(api, scope, small_file_cap):  # noqa: F811
    s = api.create_session(*scope)
    sid = s["id"]
    cap = small_file_cap
    assert write_pipe(sid, "exact", b"e" * cap)[1] is True
    write_file(sid, "kept", b"old")
    for fn in (write_pipe, write_file):
        with pytest.raises(B.BusError) as e:
            fn(sid, "kept", b"c" * (2 * cap))
        assert e.value.name == B.ERROR + "FileTooLarge" and str(cap) in e.value.message, e.value
        with pytest.raises(B.BusError) as e:
            fn(sid, "over", b"c" * (cap + 1))
        assert e.value.name == B.ERROR + "FileTooLarge", e.value
    # announced: refused before a byte is read
    assert B.error_of(write_pipe, sid, "over", b"", {"size": B.t(cap + 1)}) == B.ERROR + "FileTooLarge"
    assert content(api, sid, "kept") == b"old"
    assert no_leftovers(s, "over")
    assert sorted(os.listdir(host_dir(s))) == ["exact", "kept"]


def test_sandboxctl_cp_streams_stdin(api, polkit_user):  # noqa: F811
    """sandboxctl over D-Bus, as a user polkit authorizes: cp - from a pipe and from a file."""
    user, home = polkit_user

    def ctl(*args, **kw):
        return as_user(user, home, SANDBOXCTL, "--transport=dbus", *args, **kw)

    wait_for(lambda: ctl("create", user, "ws").returncode == 0, timeout=30, what="polkit to load the rule")
    sid = ctl("create", user, "ws", check=0).stdout.decode().strip()
    try:
        data = os.urandom((2 << 20) + 3)
        ctl("cp", "-", sid + ":in.bin", input=data, check=0)  # stdin is a pipe
        assert content(api, sid, "in.bin") == data
        src = os.path.join(home, "src.bin")
        with open(src, "wb") as f:
            f.write(data[::-1])
        os.chmod(src, 0o644)
        ctl("cp", src, sid + ":file.bin", check=0)
        assert content(api, sid, "file.bin") == data[::-1]
        assert ctl("cp", sid + ":in.bin", "-", check=0).stdout == data
    finally:
        ctl("rm", sid)
