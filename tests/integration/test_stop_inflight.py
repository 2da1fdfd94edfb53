# SPDX-License-Identifier: LGPL-2.1-or-later
"""Stopping sandboxd while requests wait on systemd: each waiting client gets an answer
(503 "stopping", with Retry-After), sandboxd exits cleanly (it aborted in
libmicrohttpd: "MHD_stop_daemon() called while we have suspended connections"), and
what was asked is found after the restart.

To hold requests at "waiting on systemd" for as long as the test needs, the system bus
is paused (SIGSTOP to dbus-daemon): every call of sandboxd to PID 1 then waits. systemctl
talks to PID 1 over its private socket and keeps working."""

import os
import signal
import threading

import pytest

from conftest import (Api, commands_path, daemon_pid, systemctl_show, wait_daemon_running, wait_for,
                      wait_terminal)

pytestmark = [pytest.mark.restarts_daemon, pytest.mark.time_limit(120)]


def dbus_daemon_pid():
    pid = int(systemctl_show("dbus.service", "MainPID")["MainPID"] or 0)
    assert pid > 0, "no dbus-daemon"
    return pid


def pid1_calls(api):
    body = api.get("/metrics").body.decode()
    n = 0
    for line in body.splitlines():
        if line.startswith("sandboxd_pid1_calls{"):
            n += int(float(line.split()[-1]))
    return n


class Client(threading.Thread):
    def __init__(self, method, path, body):
        super().__init__(daemon=True)
        self.method, self.path, self.body = method, path, body
        self.answer = self.error = None

    def run(self):
        try:
            self.answer = Api("unix").request(self.method, self.path, self.body)
        except Exception as e:  # noqa: BLE001 - a dropped connection is a failure here
            self.error = e


def test_stop_while_requests_wait_on_systemd(api, scope):
    user, ws = scope
    sid = api.create_session(user, ws)["id"]
    pid = daemon_pid()
    before = pid1_calls(api)
    bus = dbus_daemon_pid()

    os.kill(bus, signal.SIGSTOP)
    try:
        clients = [
            Client("POST", commands_path(sid) + "?wait=false", {"argv": ["true"], "request_id": "held"}),
            Client("POST", "/v1/sessions", {"user": user, "workspace": ws + "-2"}),
        ]
        for c in clients:
            c.start()
        # both wait on PID 1 now: their calls are sent or queued
        wait_for(lambda: pid1_calls(api) >= before + 2, timeout=10, what="the requests to wait on systemd")
        os.kill(pid, signal.SIGTERM)
        for c in clients:
            c.join(20)
            assert not c.is_alive(), "%s %s still waiting after SIGTERM" % (c.method, c.path)
    finally:
        os.kill(bus, signal.SIGCONT)

    for c in clients:
        assert c.error is None, "%s %s: no answer, %r" % (c.method, c.path, c.error)
        assert c.answer.status == 503, (c.path, c.answer)
        assert c.answer.json["error"]["code"] == "stopping", c.answer
        assert c.answer.headers.get("Retry-After"), c.answer.headers

    # a clean exit: no abort, no core
    wait_for(lambda: daemon_pid() != pid, timeout=20, what="sandboxd to exit")
    show = systemctl_show("sandboxd.service", "Result", "ExecMainCode", "ExecMainStatus")
    assert show["Result"] == "success", show
    assert show["ExecMainCode"] == "1" and show["ExecMainStatus"] == "0", show  # CLD_EXITED, 0

    # what was asked is found after the restart: the command was recorded before PID 1
    # was asked, and ends with a result either way
    wait_daemon_running(not_pid=pid)
    r = api.get(commands_path(sid, "held"))
    assert r.status == 200, r
    done = wait_terminal(api, sid, "held")
    assert done["status"] in ("succeeded", "lost"), done
    # the session create asked again gives one session for the scope, active
    again = api.create_session(user, ws + "-2")
    assert again["state"] == "active", again
