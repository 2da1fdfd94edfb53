# SPDX-License-Identifier: LGPL-2.1-or-later
"""Requests that wait on systemd. Stopping sandboxd while they wait: each waiting client
gets an answer (503 "stopping", with Retry-After; on D-Bus the error Stopping) or the
clean end of its stream, sandboxd exits cleanly (it aborted in libmicrohttpd:
"MHD_stop_daemon() called while we have suspended connections"), and what was asked is
found after the restart. The stop comes as SIGTERM, as systemctl stop and as systemctl
restart. An upload cut off by the stop leaves no file. Closing a session before systemd
started a command's process: the command ends failed/not-started.

To hold requests at "waiting on systemd" for as long as the test needs, the system bus
is paused (SIGSTOP to dbus-daemon): every call of sandboxd to PID 1 then waits. systemctl
talks to PID 1 over its private socket and keeps working."""

import json
import os
import signal
import socket
import subprocess
import threading

import pytest

import sbxbus as B
from conftest import (EXEC_MODE, UNIX_SOCKET, assert_stopping, bus_paused, Client, commands_path, daemon_pid,
                      dbus_daemon_pid,
                      exited_cleanly, gone, journal_cursor, journal_since, open_events, pid1_quiet, sh, snapshot,
                      start_command, start_waiting, systemctl_show, wait_daemon_running, wait_for, wait_terminal)
from test_files import host_dir, put_head

pytestmark = [pytest.mark.restarts_daemon, pytest.mark.time_limit(120)]

OCTETS = {"Content-Type": "application/octet-stream"}
# sandboxd's stdin pipes hold 1 MiB at most; where root's pipe buffers on the host pass
# fs.pipe-user-pages-soft, the kernel gives new pipes its minimum (two pages, 8 KiB; one page
# on older kernels): FILL_BYTES always fit, and PIPE_BYTES (MaxBodySize=) is more than any of
# them holds, so that write waits for a reader
FILL_BYTES = 4 << 10
PIPE_BYTES = 1 << 20
# A command's start waits on PID 1 (StartTransientUnit) only in unit mode: in session mode the
# session's executor starts it, and there is no start to hold with the bus paused.
START_WAITS_ON_PID1 = EXEC_MODE == "unit"


def held_start(sid):
    """[a Client whose command start waits on PID 1] in unit mode, [] in session mode."""
    if not START_WAITS_ON_PID1:
        return []
    return [Client("POST", commands_path(sid) + "?wait=false", {"argv": ["true"], "request_id": "held"})]


def held_on_pid1(user, ws, other):
    """A Client that waits on PID 1: closing session OTHER, which has a running command
    (unit mode: PID 1 stops its unit), or in session mode creating a session (it is active
    once PID 1 started its executor)."""
    if START_WAITS_ON_PID1:
        return Client("DELETE", "/v1/sessions/" + other)
    return Client("POST", "/v1/sessions", {"user": user, "workspace": ws + "-held"})


def check_other(api, other):
    """Session OTHER after the stop: closed, its command stopped, where closing it was the
    request held on PID 1 (unit mode); else untouched, its command running."""
    if START_WAITS_ON_PID1:
        wait_for(lambda: api.get("/v1/sessions/" + other).json["state"] == "closed", timeout=30,
                 what="the session closed before the stop to end closed")
        long = wait_terminal(api, other, "long")
        assert (long["status"], long["reason"]) == ("signaled", "stopped"), long
    else:
        assert api.get(commands_path(other, "long")).json["status"] == "running"


def check_held(api, sid):
    """The command held at its start was recorded before PID 1 was asked, and ends with a
    result either way."""
    if START_WAITS_ON_PID1:
        held = wait_terminal(api, sid, "held")
        assert (held["status"], held["reason"]) in (("succeeded", "success"), ("failed", "not-started")), held


@pytest.fixture(autouse=True)
def _forget_earlier_starts():
    """Each test here stops sandboxd, seconds after the one before: the starts that
    follow must not add up to StartLimitBurst= (start-limit-hit)."""
    sh("systemctl", "reset-failed", "sandboxd.service", check=False)


class Follower(threading.Thread):
    def __init__(self, api, sid, rid):
        super().__init__(daemon=True)
        self.stream = open_events(api, sid, rid, 0, timeout=60)
        self.error = None
        self.ended = False

    def run(self):
        try:
            self.stream.read_all()
            self.ended = True
        except Exception as e:  # noqa: BLE001
            self.error = e
        finally:
            self.stream.close()


def test_stop_while_requests_wait(api, scope):
    user, ws = scope
    sid = api.create_session(user, ws)["id"]
    other = api.create_session(user, ws + "-2")["id"]
    # a command that never reads its stdin, and a client following its events
    start_command(api, sid, {"argv": ["sleep", "300"], "stdin": "stream", "request_id": "deaf"})
    fill = api.post(commands_path(sid, "deaf", "/stdin"), b"x" * FILL_BYTES, headers=OCTETS)
    assert fill.status == 200, fill
    # closing a session waits for its commands to end
    start_command(api, other, {"argv": ["sleep", "300"], "request_id": "long"})
    follower = Follower(api, sid, "deaf")
    follower.start()
    wait_for(lambda: follower.stream.events, timeout=10, what="the follower's first event")

    pid = daemon_pid()
    with bus_paused(api):
        # held_start: waits on PID 1 for its unit
        clients = held_start(sid) + [
            # waits on PID 1 (to stop the session's command, or to start an executor)
            held_on_pid1(user, ws, other),
            # waits for a reader that never comes
            Client("POST", commands_path(sid, "deaf", "/stdin"), b"x" * PIPE_BYTES, OCTETS),
        ]
        start_waiting(api, clients)
        os.kill(pid, signal.SIGTERM)
        for c in clients:
            c.join(20)
        follower.join(20)
        assert not follower.is_alive(), "the event stream did not end at the stop"

    for c in clients:
        assert_stopping(c)
    assert follower.error is None and follower.ended, follower.error
    assert "exit" not in [e["type"] for e in follower.stream.events]

    # a clean exit: no abort, no core
    wait_for(lambda: daemon_pid() != pid, timeout=20, what="sandboxd to exit")
    show = systemctl_show("sandboxd.service", "Result", "ExecMainCode", "ExecMainStatus")
    assert show["Result"] == "success", show
    assert show["ExecMainCode"] == "1" and show["ExecMainStatus"] == "0", show  # CLD_EXITED, 0

    # after the restart: the command held at its start was recorded before PID 1 was
    # asked, and ends with a result either way; the session being closed ends closed; the
    # command that was fed is still running, and its stream re-attaches where it broke off
    assert api.get("/v1/health").status == 200  # socket activation starts it again
    wait_daemon_running(not_pid=pid)
    check_held(api, sid)
    check_other(api, other)
    r = api.get(commands_path(sid, "deaf"))
    assert r.status == 200 and r.json["terminal"] is False, r
    st = open_events(api, sid, "deaf", follower.stream.offset, timeout=5)
    try:
        assert st.status == 200, st.error_body
    finally:
        st.close()
    assert api.post(commands_path(sid, "deaf", "/signal"), {"signal": "SIGKILL"}).status == 200


@pytest.mark.unit_mode_only  # holds the command's start at PID 1
def test_close_before_the_process_started(api, scope):
    """The start of the command and the stop of the close reach PID 1 in this order, in
    one go: the stop job replaces the start job, the command never runs."""
    sid = api.create_session(*scope)["id"]
    with bus_paused(api):
        start = Client("POST", commands_path(sid) + "?wait=false", {"argv": ["sleep", "30"], "request_id": "early"})
        start_waiting(api, [start], what="the start to wait on systemd")
        close = Client("DELETE", "/v1/sessions/" + sid)
        start_waiting(api, [close], what="the close to wait", waiting=2)
    for c in (start, close):
        c.join(30)
        assert not c.is_alive() and c.error is None, (c.path, c.error)
    assert start.answer.status == 202, start.answer
    assert close.answer.status == 200, close.answer
    done = wait_terminal(api, sid, "early")
    assert (done["status"], done["reason"]) == ("failed", "not-started"), done


# --------------------------------------------------------------------------
# an upload whose body is cut off by the stop

UPLOAD_PART = 256 << 10  # what the client sends of its 8 MiB before it pauses


def upload_files(pid, session):
    """{fd: size} of the files sandboxd has open in the session's workspace directory: the
    uploads under way (anonymous files, O_TMPFILE)."""
    dirs = (host_dir(session), session["workspace_path"])
    found = {}
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            # (in a testbed, the path is the one outside it)
            if os.path.dirname(link.removesuffix(" (deleted)")).endswith(dirs):
                found[fd] = os.stat("/proc/%d/fd/%s" % (pid, fd)).st_size
        except OSError:
            pass
    return found


def fd_links(pid):
    out = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            out.append(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
        except OSError:
            pass
    return [l for l in out if l.startswith("/")]


def after_stop(sock, timeout=20):
    """What the client of a cut-off upload gets: ("closed", why) for the end of the
    connection, or ("answer", status, code) for an HTTP answer; ("hang", ...) if nothing."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        return ("hang", data[:200])
    except ConnectionResetError:
        if not data:
            return ("closed", "reset")
    if not data:
        return ("closed", "eof")
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    try:
        code = json.loads(body.decode())["error"]["code"]
    except (ValueError, KeyError, TypeError):
        code = body[:200]
    return ("answer", status, code)


def test_stop_while_an_upload_is_mid_body(api, session):
    """Two uploads have sent their headers and part of their body (a new file, and a
    replacement of one that exists) when sandboxd stops: each client is told or cut off at
    once, and neither leaves anything in the workspace: no partial file under its name,
    no temporary file, the old file as it was."""
    sid = session["id"]
    r = api.request("PUT", "/v1/sessions/%s/files/kept.txt" % sid, b"old\n", headers=OCTETS)
    assert r.status == 201, r
    pid = daemon_pid()
    socks = []
    try:
        for name in ("new.bin", "kept.txt"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            socks.append(s)
            s.settimeout(30)
            s.connect(UNIX_SOCKET)
            s.sendall(put_head(sid, name, 8 << 20) + b"u" * UPLOAD_PART)
        try:
            wait_for(lambda: sorted(upload_files(pid, session).values()) == [UPLOAD_PART] * 2, timeout=20)
        except AssertionError:
            raise AssertionError("the uploads are not both in sandboxd: %r; its files: %r" % (
                upload_files(pid, session), fd_links(pid))) from None

        os.kill(pid, signal.SIGTERM)
        outcomes = [after_stop(s) for s in socks]
    finally:
        for s in socks:
            s.close()
    for o in outcomes:
        assert o[0] != "hang", "an upload cut off by the stop got neither an answer nor the end: %r" % (o,)
        assert o[0] == "closed" or o[1:] == (503, "stopping"), outcomes
    exited_cleanly(pid)

    assert api.get("/v1/health").status == 200
    wait_daemon_running(not_pid=pid)
    assert sorted(os.listdir(host_dir(session))) == ["kept.txt"]
    with open(os.path.join(host_dir(session), "kept.txt"), "rb") as f:
        assert f.read() == b"old\n"
    r = api.request("PUT", "/v1/sessions/%s/files/new.bin" % sid, b"whole\n", headers=OCTETS)
    assert r.status == 201, r  # the upload asked again works


# --------------------------------------------------------------------------
# D-Bus: Run waiting on PID 1, and Run waiting for its command's end

# The D-Bus client, in a process of its own. It is known to sandboxd before the bus is
# paused (sandboxd asks dbus-daemon who a sender is, synchronously, once a minute), starts
# a Run of a long command, and on "go" a Run whose start is held: dbus-daemon's answer to
# GetId, on the same connection, says it has passed that Run on to sandboxd.
_DBUS_CLIENT = r'''
import json, sys
import dbus, dbus.lowlevel
sid = sys.argv[1]
bus = dbus.SystemBus()
def msg(method, signature, *args):
    m = dbus.lowlevel.MethodCallMessage("io.sandboxd.sandbox1", "/io/sandboxd/sandbox1",
                                        "io.sandboxd.sandbox1.Manager", method)
    m.append(*args, signature=signature)
    return m
def run(argv, rid, answers):
    return bus.send_message_with_reply(msg("Run", "sasa{sv}", sid, argv, {"request_id": dbus.String(rid)}),
                                       answers.append, 120, require_main_loop=False)
bus.send_message_with_reply_and_block(msg("GetSession", "s", sid), 30)
long_answer, held_answer = [], []
long_call = run(["sleep", "300"], "dbus-long", long_answer)
print("ready", flush=True)
sys.stdin.readline()
held_call = run(["true"], "dbus-held", held_answer)
bus.send_message_with_reply_and_block(dbus.lowlevel.MethodCallMessage(
    "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetId"), 30)
print("sent", flush=True)
out = {}
for name, call, answer in (("long", long_call, long_answer), ("held", held_call, held_answer)):
    call.block()
    m = answer[0]
    if isinstance(m, dbus.lowlevel.ErrorMessage):
        out[name] = {"error": m.get_error_name(), "message": str((m.get_args_list() or [""])[0])}
    else:
        out[name] = {"reply": str(m.get_args_list()[0])}
print(json.dumps(out), flush=True)
'''


@pytest.mark.unit_mode_only  # holds the command's start at PID 1
def test_stop_while_dbus_run_waits(api, scope):
    """A D-Bus Run whose StartTransientUnit PID 1 has not answered, and a Run waiting for
    the end of its command, when sandboxd gets SIGTERM: both callers get the error
    Stopping (not NoReply after the timeout, nor NoSuchCommand), sandboxd exits cleanly,
    and both commands are found after the restart.

    To hold the Run at PID 1, its message must reach sandboxd while the bus is paused:
    sandboxd is paused (SIGSTOP) while dbus-daemon hands it the Run, then dbus-daemon is
    paused and sandboxd resumed."""
    sid = api.create_session(*scope)["id"]
    pid = daemon_pid()
    bus = dbus_daemon_pid()
    client = subprocess.Popen([B.PYTHON, "-c", _DBUS_CLIENT, sid], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert client.stdout.readline().strip() == "ready", client.stderr.read()
        wait_for(lambda: api.get(commands_path(sid, "dbus-long")).status == 200 and
                 snapshot(api, sid, "dbus-long")["status"] == "running", timeout=30, what="the long Run to run")
        pid1_quiet(api)
        os.kill(pid, signal.SIGSTOP)
        try:
            client.stdin.write("go\n")
            client.stdin.flush()
            assert client.stdout.readline().strip() == "sent"
            os.kill(bus, signal.SIGSTOP)
        finally:
            os.kill(pid, signal.SIGCONT)
        try:
            # the record is written before PID 1 is asked
            wait_for(lambda: api.get(commands_path(sid, "dbus-held")).status == 200, timeout=15,
                     what="the held Run to wait on PID 1")
            assert snapshot(api, sid, "dbus-held")["status"] == "pending"
            os.kill(pid, signal.SIGTERM)
            wait_for(lambda: gone(pid), timeout=20, what="sandboxd to exit")
        finally:
            os.kill(bus, signal.SIGCONT)
        out, err = client.communicate(timeout=30)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    answers = json.loads(out.strip().splitlines()[-1])
    for name in ("held", "long"):
        assert answers[name].get("error") == B.ERROR + "Stopping", (name, answers, err)
        assert answers[name]["message"], answers
    exited_cleanly(pid)

    assert api.get("/v1/health").status == 200
    wait_daemon_running(not_pid=pid)
    held = wait_terminal(api, sid, "dbus-held")
    assert (held["status"], held["reason"]) in (("succeeded", "success"), ("failed", "not-started")), held
    long = snapshot(api, sid, "dbus-long")
    assert long["status"] == "running" and not long["terminal"], long
    assert api.post(commands_path(sid, "dbus-long", "/signal"), {"signal": "SIGKILL"}).status == 200


# --------------------------------------------------------------------------
# the stop as systemctl does it

@pytest.mark.parametrize("how", ["stop", "restart"])
def test_systemctl_while_requests_wait(api, scope, how):
    """systemctl stop / restart sandboxd.service (PID 1 sends SIGTERM, and for a restart
    starts it again at once) while requests wait on PID 1: they are answered 503
    stopping, sandboxd exits 0, and the records of the commands are intact after: the
    one that had ended with its result and output, the one still running as running, the
    one held at its start with a result."""
    user, ws = scope
    sid = api.create_session(user, ws)["id"]
    other = api.create_session(user, ws + "-2")["id"]
    start_command(api, sid, {"argv": ["sh", "-c", "echo done"], "request_id": "done"})
    done = wait_terminal(api, sid, "done")
    start_command(api, sid, {"argv": ["sleep", "300"], "request_id": "long"})
    start_command(api, other, {"argv": ["sleep", "300"], "request_id": "long"})
    cursor = journal_cursor()

    pid = daemon_pid()
    with bus_paused(api):
        clients = held_start(sid) + [held_on_pid1(user, ws, other)]
        start_waiting(api, clients)
        if how == "stop":
            sh("systemctl", "stop", "sandboxd.service", timeout=60)
        else:
            # the new sandboxd waits for the bus as it starts: do not wait for it here
            sh("systemctl", "restart", "--no-block", "sandboxd.service")
        for c in clients:
            c.join(20)
            assert_stopping(c)
        wait_for(lambda: gone(pid), timeout=20, what="sandboxd to exit")
        if how == "stop":
            exited_cleanly(pid)

    if how == "stop":
        assert api.get("/v1/health").status == 200  # the socket starts it again
    wait_daemon_running(not_pid=pid, timeout=60)
    if how == "restart":
        # the first run's end, as PID 1 logged it before the second began; all the lines
        # since (the new run logs a line per session it recovers: hundreds by now), and
        # journald may write them a little late on a loaded machine
        wait_for(lambda: "sandboxd.service: Deactivated successfully." in
                 journal_since(cursor, "sandboxd.service", lines=1 << 20),
                 timeout=15, what="PID 1's record of the first run's clean end")

    again = snapshot(api, sid, "done")
    assert {k: again[k] for k in ("status", "reason", "exit_code", "stdout")} == \
        {k: done[k] for k in ("status", "reason", "exit_code", "stdout")}, (again, done)
    assert again["stdout"] == "done\n"
    long = snapshot(api, sid, "long")
    assert long["status"] == "running" and not long["terminal"], long
    check_held(api, sid)
    check_other(api, other)
    assert api.post(commands_path(sid, "long", "/signal"), {"signal": "SIGKILL"}).status == 200
