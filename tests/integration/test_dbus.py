# SPDX-License-Identifier: LGPL-2.1-or-later
"""The D-Bus API as root, with python3-dbus and busctl against the real dbus-daemon:
bus activation, sessions, Exec with the caller's fds, Run, signals, the objects."""

import os
import re
import select
import subprocess
import time

import dbus
import pytest

import sbxbus as B
from conftest import (DEFAULT_CPU_QUOTA, DEFAULT_MEMORY_MAX, DEFAULT_TASKS_MAX, EXEC_MODE, LOCAL_TENANT, WORKSPACE_ROOT,
                      command_unit_name, is_active, sh, systemctl_show, unique_user, wait_command_running, wait_for,
                      workspace_for)

OUTPUT_MAX = 1 << 20  # OutputMax= default


@pytest.fixture
def bus_session(api, scope):
    """A session created over D-Bus: (id, object path)."""
    user, ws = scope
    sid, path = B.manager("CreateSession", "ssa{sv}", user, ws, {})
    yield sid, path
    try:
        B.manager("CloseSession", "s", sid)
    except B.BusError:
        pass


def command_path(sid, n):
    return "%s/session/%s/command/%d" % (B.PATH, sid, n)


def wait_terminal(path, timeout=30):
    return wait_for(lambda: B.get_property(path, B.COMMAND, "Status") not in ("pending", "running"), timeout=timeout,
                    what="command %s to end" % path)


# --------------------------------------------------------------------------
# activation

def test_bus_call_starts_stopped_daemon(api_key):
    sh("systemctl", "stop", "sandboxd.service")
    sh("systemctl", "reset-failed", "sandboxd.service", check=False)
    assert is_active("sandboxd.service") == "inactive"
    cursor = sh("journalctl", "-n", "0", "--show-cursor", "--no-pager").stdout.split("cursor: ")[-1].strip()

    out = B.busctl("call", B.NAME, B.PATH, B.MANAGER, "ListSessions").stdout
    assert out.startswith("a(sssso) "), out
    assert is_active("sandboxd.service") == "active"
    # dbus-daemon had systemd start the service of the name: bus activation, not the socket
    wait_for(lambda: "Successfully activated service 'io.sandboxd.sandbox1'" in sh(
        "journalctl", "--no-pager", "--after-cursor", cursor, "-u", "dbus.service").stdout,
        what="dbus-daemon's activation message")
    assert B.get_property(B.PATH, B.MANAGER, "Version")


def test_activation_files_installed():
    svc = open("/usr/share/dbus-1/system-services/io.sandboxd.sandbox1.service").read()
    assert re.search(r"^SystemdService=sandboxd\.service$", svc, re.M), svc
    assert re.search(r"^Name=io\.sandboxd\.sandbox1$", svc, re.M), svc


# --------------------------------------------------------------------------
# sessions

def test_create_session(api, scope):
    user, ws = scope
    sid, path = B.manager("CreateSession", "ssa{sv}", user, ws, {})
    assert re.fullmatch(r"[a-z][a-z0-9]{0,31}_[0-9a-f]{16}", sid), sid  # NODE_HEX
    assert path == "%s/session/%s" % (B.PATH, sid)
    props = B.get_all(path, B.SESSION)
    assert props["Id"] == sid and props["User"] == user and props["Workspace"] == ws
    assert props["State"] == "active"
    assert props["WorkspacePath"] == "%s/%s/%s/%s" % (WORKSPACE_ROOT, LOCAL_TENANT, user, ws)
    assert props["Unit"] == "sandboxd-%s.slice" % sid
    assert (props["MemoryMax"], props["CPUQuota"], props["TasksMax"]) == (DEFAULT_MEMORY_MAX, DEFAULT_CPU_QUOTA,
                                                                         DEFAULT_TASKS_MAX)
    assert abs(props["CreatedAt"] / 1e6 - time.time()) < 60
    assert props["LastActivity"] >= props["CreatedAt"]
    assert props["Frozen"] is False and props["CloseReason"] == ""
    # a pooled slice: PID 1 took its start, and makes it before any command of the session
    wait_for(lambda: is_active("sandboxd-%s.slice" % sid) == "active", timeout=10, what="the slice")

    # one active session per scope, whichever front end asks
    assert B.manager("CreateSession", "ssa{sv}", user, ws, {}) == [sid, path]
    assert api.create_session(user, ws)["id"] == sid
    assert B.manager("GetSession", "s", sid) == [path]
    assert [sid, user, ws, "active", path] in [list(x) for x in B.manager("ListSessions")[0]]


def test_create_session_with_limits(api, scope):
    user, ws = scope
    sid, path = B.manager("CreateSession", "ssa{sv}", user, ws,
                          {"memory_max": dbus.String("256M"), "cpu_quota": B.t(50), "tasks_max": B.t(32),
                           "ttl_s": B.t(600), "network": dbus.String("none")})
    props = B.get_all(path, B.SESSION)
    assert (props["MemoryMax"], props["CPUQuota"], props["TasksMax"]) == (256 << 20, 50, 32)
    assert props["IdleTimeoutUSec"] == 600 * 10**6
    # the same session, as the HTTP API sees it
    h = api.get_session(sid)
    assert h["limits"] == {"memory_max": 256 << 20, "cpu_quota": 50, "tasks_max": 32}, h
    assert systemctl_show("sandboxd-%s.slice" % sid, "TasksMax")["TasksMax"] == "32"


def test_session_created_over_http_is_an_object(api, session):
    path = B.manager("GetSession", "s", session["id"])[0]
    props = B.get_all(path, B.SESSION)
    assert props["User"] == session["user"] and props["Workspace"] == session["workspace"]
    assert props["DynamicUser"] == session["dynamic_user"]


def test_close_session(api, bus_session):
    sid, path = bus_session
    with B.Monitor() as mon:
        B.call(path, B.SESSION, "Close", "b", False)
        assert mon.properties_changed(path, B.SESSION, "State", "closed") == "closed"
        # the object stays until the session is forgotten (test_dbus_removed.py): no
        # SessionRemoved yet
        B.manager("ListSessions")  # a round trip: what was sent before it has come
        time.sleep(0.5)
        while not mon.q.empty():
            mon.seen.append(mon.q.get())
        assert not [m for m in mon.seen if m.get("member") == "SessionRemoved"], mon.seen
    props = B.get_all(path, B.SESSION)
    assert props["State"] == "closed" and props["CloseReason"] == "deleted"
    assert api.get_session(sid)["state"] == "closed"
    wait_for(lambda: is_active("sandboxd-%s.slice" % sid) != "active", what="slice stopped")
    # closing again is fine; running something is not
    B.manager("CloseSession", "s", sid)
    assert B.error_of(B.call, path, B.SESSION, "Exec", "asa{sv}", ["true"], {}) == B.ERROR + "SessionNotActive"


def test_touch_pushes_activity(bus_session):
    sid, path = bus_session
    before = B.get_property(path, B.SESSION, "LastActivity")
    time.sleep(0.05)
    B.call(path, B.SESSION, "Touch")
    assert B.get_property(path, B.SESSION, "LastActivity") > before


def test_freeze(bus_session):
    sid, path = bus_session
    v2 = sh("stat", "-fc", "%T", "/sys/fs/cgroup", check=False).stdout.strip() == "cgroup2fs"
    if not v2:
        assert B.error_of(B.call, path, B.SESSION, "Freeze") == B.ERROR + "NotSupported"
        assert B.get_property(path, B.SESSION, "Frozen") is False
        return
    B.call(path, B.SESSION, "Freeze")
    assert B.get_property(path, B.SESSION, "Frozen") is True
    B.call(path, B.SESSION, "Thaw")
    assert B.get_property(path, B.SESSION, "Frozen") is False


def test_signals_and_tree(api, scope):
    user, ws = scope
    with B.Monitor() as mon:
        sid, path = B.manager("CreateSession", "ssa{sv}", user, ws, {})
        assert mon.wait("SessionNew", lambda d: d[0] == sid) == [sid, path]
        rid, cpath = B.manager("Exec", "sasa{sv}", sid, ["sh", "-c", "exit 7"], {})
        done = mon.wait("CommandFinished", lambda d: d[2] == cpath)
        assert done == [sid, rid, cpath, "failed", 7], done
        assert mon.properties_changed(cpath, B.COMMAND, "Status", "failed") == "failed"

    tree = B.busctl("tree", "--list", B.NAME).stdout.split()
    for p in (B.PATH, B.PATH + "/session", path, path + "/command", cpath):
        assert p in tree, (p, tree)


# --------------------------------------------------------------------------
# Run

def test_run_returns_status_and_output(bus_session):
    sid, path = bus_session
    r = B.call(path, B.SESSION, "Run", "asa{sv}", ["sh", "-c", "echo out; printf 'err\\377' >&2; exit 3"], {})
    assert r == ["failed", 3, b"out\n", b"err\xff"], r
    r = B.manager("Run", "sasa{sv}", sid, ["/bin/echo", "-n", "hello"], {})
    assert r == ["succeeded", 0, b"hello", b""], r
    # what the objects and the HTTP API say about the same commands
    c1 = B.get_all(command_path(sid, 1), B.COMMAND)
    assert c1["Status"] == "failed" and c1["ExitCode"] == 3 and c1["Reason"] == "exit-code", c1
    assert c1["Argv"] == ["sh", "-c", "echo out; printf 'err\\377' >&2; exit 3"]
    assert c1["StdoutBytes"] == 4 and c1["StderrBytes"] == 4 and c1["Truncated"] is False


def test_run_with_options(bus_session):
    sid, path = bus_session
    # cwd must exist first
    assert B.call(path, B.SESSION, "Run", "asa{sv}", ["mkdir", "-p", "sub"], {})[0] == "succeeded"
    r = B.call(path, B.SESSION, "Run", "asa{sv}", ["sh", "-c", "pwd; echo $GREETING; cat"],
               {"cwd": dbus.String("sub"), "env": dbus.Array(["GREETING=hi"], signature="s"),
                "stdin_data": dbus.ByteArray(b"from stdin"), "request_id": dbus.String("run.1")})
    assert r[0] == "succeeded", r
    # (pwd shows where the workspace of a dynamic user really is, below /var/lib/private)
    ws = B.get_property(path, B.SESSION, "Workspace")
    assert r[2].endswith(("/%s/sub\nhi\nfrom stdin" % ws).encode()), r
    # the same request id again: the first command's result, nothing run twice
    again = B.call(path, B.SESSION, "Run", "asa{sv}", ["false"], {"request_id": dbus.String("run.1")})
    assert again == r
    assert B.get_property(path, B.SESSION, "RunningCommands") == 0


def test_network_and_command_count(api, scope):
    """Network is the session's mode (it read "none" for every session once), Commands
    counts the commands started (sandboxctl over D-Bus showed 0), with PropertiesChanged."""
    user, ws = scope
    sid, path = B.manager("CreateSession", "ssa{sv}", user, ws, {"network": dbus.String("proxy")})
    try:
        assert B.get_property(path, B.SESSION, "Network") == "proxy"
        assert api.get_session(sid)["network"]["mode"] == "proxy"
        assert B.get_property(path, B.SESSION, "Commands") == 0
        with B.Monitor() as mon:
            for i in range(3):
                assert B.call(path, B.SESSION, "Run", "asa{sv}", ["true"], {})[0] == "succeeded"
                assert mon.properties_changed(path, B.SESSION, "Commands", i + 1) == i + 1
        assert B.get_property(path, B.SESSION, "Commands") == 3 == api.get_session(sid)["commands"]
        assert B.get_property(path, B.SESSION, "RunningCommands") == 0
    finally:
        B.manager("CloseSession", "s", sid)
    sid2, path2 = B.manager("CreateSession", "ssa{sv}", user, ws + "-none", {"network": dbus.String("none")})
    try:
        assert B.get_property(path2, B.SESSION, "Network") == "none"
        assert B.get_property(path2, B.SESSION, "NetworkAllow") == (False, [])
    finally:
        B.manager("CloseSession", "s", sid2)


def test_exec_mode(api, scope):
    """ExecMode is the session's exec mode: the option's, the configured one (the lane's)
    without one; a second
    CreateSession of the scope answers the session as it is, whatever mode it names."""
    user, ws = scope
    sid, path = B.manager("CreateSession", "ssa{sv}", user, ws, {"exec_mode": dbus.String("session")})
    sid2, path2 = B.manager("CreateSession", "ssa{sv}", user, ws + "-unit", {})  # the lane's default
    try:
        assert B.get_property(path, B.SESSION, "ExecMode") == "session"
        assert api.get_session(sid)["exec_mode"] == "session"
        assert B.get_property(path2, B.SESSION, "ExecMode") == EXEC_MODE
        assert api.get_session(sid2)["exec_mode"] == EXEC_MODE
        assert B.manager("CreateSession", "ssa{sv}", user, ws, {"exec_mode": dbus.String("unit")}) == [sid, path]
        assert B.get_property(path, B.SESSION, "ExecMode") == "session"
        # its commands run
        assert B.call(path, B.SESSION, "Run", "asa{sv}", ["echo", "hi"], {})[:3] == ["succeeded", 0, b"hi\n"]
    finally:
        B.manager("CloseSession", "s", sid)
        B.manager("CloseSession", "s", sid2)


def test_run_timeout(bus_session):
    sid, path = bus_session
    r = B.call(path, B.SESSION, "Run", "asa{sv}", ["sleep", "30"], {"timeout_ms": B.t(500)})
    assert r[0] == "timed_out" and r[1] == -1, r


def test_run_output_is_bounded(bus_session):
    sid, path = bus_session
    r = B.call(path, B.SESSION, "Run", "asa{sv}", ["head", "-c", str(3 * OUTPUT_MAX), "/dev/zero"], {})
    assert r[0] == "succeeded", r[:2]
    assert r[2] == b"\0" * OUTPUT_MAX
    c = B.get_all(command_path(sid, 1), B.COMMAND)
    assert c["Truncated"] is True and c["StdoutBytes"] == 3 * OUTPUT_MAX


def test_run_caller_goes_away(api, bus_session):
    """The caller of Run disconnects while the command runs: nothing breaks, the
    result is kept."""
    sid, path = bus_session
    p = subprocess.Popen(["busctl", "--timeout=60", "call", "--", B.NAME, path, B.SESSION, "Run", "asa{sv}",
                          "3", "sh", "-c", "sleep 2; echo done", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    cpath = command_path(sid, 1)
    wait_for(lambda: B.get_property(cpath, B.COMMAND, "Status") == "running" if _exists(cpath) else False,
             what="the command to run")
    p.kill()
    p.wait()
    wait_terminal(cpath)
    assert B.get_property(cpath, B.COMMAND, "Status") == "succeeded"
    snap = api.get("/v1/sessions/%s/commands/1" % sid).json
    assert snap["status"] == "succeeded" and snap["stdout"] == "done\n", snap
    # sandboxd still answers
    assert B.call(path, B.SESSION, "Run", "asa{sv}", ["true"], {})[0] == "succeeded"


def _exists(path):
    try:
        B.get_property(path, B.COMMAND, "Status")
        return True
    except B.BusError:
        return False


# --------------------------------------------------------------------------
# Exec, with and without the caller's fds

def test_exec_and_signal(api, bus_session):
    sid, path = bus_session
    rid, cpath = B.call(path, B.SESSION, "Exec", "asa{sv}", ["sleep", "60"], {"request_id": dbus.String("long")})
    assert (rid, cpath) == ("long", command_path(sid, 1))
    assert B.get_property(cpath, B.COMMAND, "Status") == "running"
    assert B.get_property(cpath, B.COMMAND, "Unit") == command_unit_name(sid, 1)
    wait_command_running(api, sid, "long")
    # HTTP sees the same command
    assert api.get("/v1/sessions/%s/commands/long" % sid).json["status"] == "running"
    B.call(cpath, B.COMMAND, "Signal", "s", "SIGTERM")
    wait_terminal(cpath)
    c = B.get_all(cpath, B.COMMAND)
    assert c["Status"] == "signaled" and c["Signal"] == "SIGTERM" and c["ExitCode"] == -1, c
    assert B.error_of(B.call, cpath, B.COMMAND, "Signal", "s", "SIGTERM") == B.ERROR + "CommandNotRunning"


def test_exec_streams_into_callers_pipe(bus_session):
    sid, path = bus_session
    r, w = os.pipe()
    er, ew = os.pipe()
    try:
        rid, cpath = B.manager("Exec", "sasa{sv}", sid,
                               ["sh", "-c", "echo first; echo to-stderr >&2; sleep 2; echo second"],
                               {"stdout": dbus.types.UnixFd(w), "stderr": dbus.types.UnixFd(ew)})
        os.close(w)
        os.close(ew)
        w = ew = -1
        got = {}
        buf = b""
        t0 = time.monotonic()
        while b"second\n" not in buf:
            ready, _, _ = select.select([r], [], [], 30)
            assert ready, "nothing on the pipe within 30 s: %r" % buf
            chunk = os.read(r, 4096)
            assert chunk, "EOF before the second line: %r" % buf
            buf += chunk
            for line in (b"first\n", b"second\n"):
                if line in buf and line not in got:
                    got[line] = time.monotonic() - t0
        # streamed: the first line came while the command still ran
        assert got[b"second\n"] - got[b"first\n"] > 1.5, got
        assert buf == b"first\nsecond\n"
        assert os.read(er, 100) == b"to-stderr\n"
        wait_terminal(cpath)
        c = B.get_all(cpath, B.COMMAND)
        assert c["Status"] == "succeeded" and c["ExitCode"] == 0
        # sandboxd kept nothing of streams that went to the caller
        assert c["StdoutBytes"] == 0 and c["StderrBytes"] == 0
        # systemd lets go of its copy once the result is recorded: EOF
        ready, _, _ = select.select([r], [], [], 30)
        assert ready and os.read(r, 100) == b""
    finally:
        for fd in (r, w, er, ew):
            if fd >= 0:
                os.close(fd)


def test_exec_reads_callers_stdin(bus_session):
    sid, path = bus_session
    ir, iw = os.pipe()
    orr, ow = os.pipe()
    try:
        rid, cpath = B.manager("Exec", "sasa{sv}", sid, ["tr", "a-z", "A-Z"],
                               {"stdin": dbus.types.UnixFd(ir), "stdout": dbus.types.UnixFd(ow)})
        os.close(ir)
        os.close(ow)
        ir = ow = -1
        os.write(iw, b"hello over a pipe\n")
        os.close(iw)
        iw = -1
        wait_terminal(cpath)
        assert B.get_property(cpath, B.COMMAND, "Stdin") == "fd"
        out = b""
        while True:
            ready, _, _ = select.select([orr], [], [], 30)
            assert ready
            chunk = os.read(orr, 4096)
            if not chunk:
                break
            out += chunk
        assert out == b"HELLO OVER A PIPE\n"
        assert B.get_property(cpath, B.COMMAND, "Status") == "succeeded"
    finally:
        for fd in (ir, iw, orr, ow):
            if fd >= 0:
                os.close(fd)


def test_run_with_callers_stdout_returns_only_the_rest(bus_session):
    sid, path = bus_session
    r, w = os.pipe()
    try:
        res = B.call(path, B.SESSION, "Run", "asa{sv}", ["sh", "-c", "echo mine; echo kept >&2"],
                     {"stdout": dbus.types.UnixFd(w)})
        os.close(w)
        w = -1
        assert res == ["succeeded", 0, b"", b"kept\n"], res
        assert os.read(r, 100) == b"mine\n"
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_exec_same_request_id_across_front_ends(api, bus_session):
    sid, path = bus_session
    rid, cpath = B.manager("Exec", "sasa{sv}", sid, ["echo", "once"], {"request_id": dbus.String("shared-1")})
    wait_terminal(cpath)
    # over HTTP, the same request id is the same command
    r = api.post("/v1/sessions/%s/commands?wait=false" % sid, {"argv": ["echo", "twice"], "request_id": "shared-1"})
    assert r.status == 200 and r.json["unit"] == command_unit_name(sid, 1), r
    assert B.manager("Exec", "sasa{sv}", sid, ["echo", "thrice"], {"request_id": dbus.String("shared-1")}) == \
        [rid, cpath]
    assert api.get("/v1/sessions/%s/commands/shared-1" % sid).json["stdout"] == "once\n"
    assert api.get_session(sid)["commands"] == 1


def test_root_manages_every_users_sessions(api):
    ws = workspace_for("root-all")
    users = [unique_user(), unique_user()]
    ids = [B.manager("CreateSession", "ssa{sv}", u, ws, {})[0] for u in users]
    listed = {x[0]: x[1] for x in B.manager("ListSessions")[0]}
    for sid, u in zip(ids, users):
        assert listed[sid] == u
        assert B.manager("Run", "sasa{sv}", sid, ["true"], {})[0] == "succeeded"
        B.manager("CloseSession", "s", sid)
        assert api.get_session(sid)["state"] == "closed"
