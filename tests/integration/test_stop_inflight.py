# SPDX-License-Identifier: LGPL-2.1-or-later
"""Requests that wait on systemd. Stopping sandboxd while they wait: each waiting client
gets an answer (503 "stopping", with Retry-After) or the clean end of its stream,
sandboxd exits cleanly (it aborted in libmicrohttpd: "MHD_stop_daemon() called while we
have suspended connections"), and what was asked is found after the restart. Closing a
session before systemd started a command's process: the command ends failed/not-started.

To hold requests at "waiting on systemd" for as long as the test needs, the system bus
is paused (SIGSTOP to dbus-daemon): every call of sandboxd to PID 1 then waits. systemctl
talks to PID 1 over its private socket and keeps working."""

import os
import signal
import threading

import pytest

from conftest import (Api, commands_path, daemon_pid, open_events, start_command, systemctl_show,
                      wait_daemon_running, wait_for, wait_terminal)

pytestmark = [pytest.mark.restarts_daemon, pytest.mark.time_limit(120)]

OCTETS = {"Content-Type": "application/octet-stream"}
PIPE_BYTES = 1 << 20  # sandboxd's stdin pipes hold 1 MiB: a write beyond waits for a reader


def dbus_daemon_pid():
    pid = int(systemctl_show("dbus.service", "MainPID")["MainPID"] or 0)
    assert pid > 0, "no dbus-daemon"
    return pid


def gauge(api, name):
    n = 0
    for line in api.get("/metrics").body.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            n += int(float(line.split()[-1]))
    return n


class Client(threading.Thread):
    def __init__(self, method, path, body=None, headers=None):
        super().__init__(daemon=True)
        self.method, self.path, self.body, self.headers = method, path, body, headers
        self.answer = self.error = None

    def run(self):
        try:
            self.answer = Api("unix").request(self.method, self.path, self.body, headers=self.headers)
        except Exception as e:  # noqa: BLE001 - a dropped connection is a failure here
            self.error = e


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
    fill = api.post(commands_path(sid, "deaf", "/stdin"), b"x" * (PIPE_BYTES - (64 << 10)), headers=OCTETS)
    assert fill.status == 200, fill
    # closing a session waits for its commands to end
    start_command(api, other, {"argv": ["sleep", "300"], "request_id": "long"})
    follower = Follower(api, sid, "deaf")
    follower.start()
    wait_for(lambda: follower.stream.events, timeout=10, what="the follower's first event")

    pid = daemon_pid()
    bus = dbus_daemon_pid()
    os.kill(bus, signal.SIGSTOP)
    try:
        clients = [
            # waits on PID 1 for its unit
            Client("POST", commands_path(sid) + "?wait=false", {"argv": ["true"], "request_id": "held"}),
            # waits on PID 1 to stop the session's command
            Client("DELETE", "/v1/sessions/" + other),
            # waits for a reader that never comes
            Client("POST", commands_path(sid, "deaf", "/stdin"), b"x" * (256 << 10), OCTETS),
        ]
        for c in clients:
            c.start()
        try:
            wait_for(lambda: gauge(api, "sandboxd_http_requests_waiting") >= len(clients), timeout=15,
                     what="the requests to wait")
        except AssertionError:
            raise AssertionError("not all requests wait: %r" % [(c.path, c.answer, c.error) for c in clients])
        os.kill(pid, signal.SIGTERM)
        for c in clients:
            c.join(20)
            assert not c.is_alive(), "%s %s still waiting after SIGTERM" % (c.method, c.path)
        follower.join(20)
        assert not follower.is_alive(), "the event stream did not end at the stop"
    finally:
        os.kill(bus, signal.SIGCONT)

    for c in clients:
        assert c.error is None, "%s %s: no answer, %r" % (c.method, c.path, c.error)
        assert c.answer.status == 503, (c.method, c.path, c.answer)
        assert c.answer.json["error"]["code"] == "stopping", c.answer
        assert c.answer.headers.get("Retry-After"), c.answer.headers
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
    done = wait_terminal(api, sid, "held")
    assert (done["status"], done["reason"]) in (("succeeded", "success"), ("failed", "not-started")), done
    wait_for(lambda: api.get("/v1/sessions/" + other).json["state"] == "closed", timeout=30,
             what="the session closed before the stop to end closed")
    long = wait_terminal(api, other, "long")
    assert (long["status"], long["reason"]) == ("signaled", "stopped"), long
    r = api.get(commands_path(sid, "deaf"))
    assert r.status == 200 and r.json["terminal"] is False, r
    st = open_events(api, sid, "deaf", follower.stream.offset, timeout=5)
    try:
        assert st.status == 200, st.error_body
    finally:
        st.close()
    assert api.post(commands_path(sid, "deaf", "/signal"), {"signal": "SIGKILL"}).status == 200


def test_close_before_the_process_started(api, scope):
    """The start of the command and the stop of the close reach PID 1 in this order, in
    one go: the stop job replaces the start job, the command never runs."""
    sid = api.create_session(*scope)["id"]
    bus = dbus_daemon_pid()
    os.kill(bus, signal.SIGSTOP)
    try:
        start = Client("POST", commands_path(sid) + "?wait=false", {"argv": ["sleep", "30"], "request_id": "early"})
        start.start()
        wait_for(lambda: gauge(api, "sandboxd_http_requests_waiting") >= 1, timeout=15,
                 what="the start to wait on systemd")
        close = Client("DELETE", "/v1/sessions/" + sid)
        close.start()
        wait_for(lambda: gauge(api, "sandboxd_http_requests_waiting") >= 2, timeout=15,
                 what="the close to wait")
    finally:
        os.kill(bus, signal.SIGCONT)
    for c in (start, close):
        c.join(30)
        assert not c.is_alive() and c.error is None, (c.path, c.error)
    assert start.answer.status == 202, start.answer
    assert close.answer.status == 200, close.answer
    done = wait_terminal(api, sid, "early")
    assert (done["status"], done["reason"]) == ("failed", "not-started"), done
