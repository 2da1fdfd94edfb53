# SPDX-License-Identifier: LGPL-2.1-or-later
"""The file API runs off the event loop: another client's /healthz does not wait for a
large listing, walk or recursive removal; one session's file requests beyond its share
are refused with 429 too_many_file_operations; a file request waiting when sandboxd stops
is answered 503 stopping, and sandboxd exits cleanly."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import (UNIX_SOCKET, Api, assert_error, daemon_pid, run, systemctl_show, unique_user, wait_daemon_running,
                      wait_for)

N_FILES = 60000


def url(sid, path="", query=""):
    return "/v1/sessions/%s/files/%s" % (sid, path) + ("?" + query if query else "")


@pytest.fixture
def big(api):
    """A session whose workspace has a directory of N_FILES empty files."""
    s = api.create_session(unique_user(), "offloop")
    res = run(api, s["id"], ["sh", "-c", "mkdir many && cd many && seq 1 %d | xargs touch" % N_FILES], timeout=120)
    assert res["exit"]["status"] == "succeeded", res
    yield s
    api.delete("/v1/sessions/" + s["id"])


PROBE = r"""
import socket, sys, time, select
worst = 0.0
while not select.select([sys.stdin], [], [], 0.005)[0]:
    s = socket.socket(socket.AF_UNIX)
    t = time.monotonic()
    s.connect(%r)
    s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
    data = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        data += b
    assert data.startswith(b"HTTP/1.1 200") or data.startswith(b"HTTP/1.0 200"), data
    worst = max(worst, time.monotonic() - t)
    s.close()
print(worst)
"""


class Prober:
    """Another client asking /healthz again and again, in a process of its own (a thread of
    the test would wait for the GIL while the test parses large listings)."""

    def __enter__(self):
        self.p = subprocess.Popen([sys.executable, "-c", PROBE % UNIX_SOCKET], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *exc):
        out, _ = self.p.communicate("stop\n", timeout=30)
        assert self.p.returncode == 0
        self.worst = float(out)


def in_parallel(n, fn):
    results = [None] * n

    def one(i):
        results[i] = fn()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def test_listings_and_removal_do_not_stall_others(api, big):
    sid = big["id"]
    with Prober() as probe:
        listed = in_parallel(4, lambda: Api("unix").get(url(sid, "many")))
        for r in listed:
            assert r.status == 200, r
            assert len(r.json["entries"]) == N_FILES and not r.json["truncated"]
        # the walk behind disk_bytes is in the background: the session answers at once
        t = time.monotonic()
        assert api.get_session(sid)["state"] == "active"
        assert time.monotonic() - t < 0.5
        r = api.request("DELETE", url(sid, "many", "recursive=true"))
        assert r.status == 200 and r.json == {"path": "many", "deleted": True}, r
    assert api.get(url(sid, "many")).status == 404
    # on the loop, each listing stalled every client for a good part of a second
    assert probe.worst < 0.25, "a /healthz waited %.3f s" % probe.worst


def test_a_session_beyond_its_share_is_refused(api, big):
    sid = big["id"]
    answers = in_parallel(48, lambda: Api("unix").get(url(sid, "many")))
    statuses = sorted(r.status for r in answers)
    assert set(statuses) <= {200, 429}, statuses
    assert 200 in statuses and 429 in statuses, statuses
    refused = next(r for r in answers if r.status == 429)
    assert_error(refused, 429, "too_many_file_operations")
    assert refused.headers.get("Retry-After") == "1"
    # another session is not held up by this one's share
    other = api.create_session(unique_user(), "offloop-other")
    try:
        assert api.get(url(other["id"], "")).status == 200
    finally:
        api.delete("/v1/sessions/" + other["id"])


@pytest.mark.restarts_daemon
def test_stop_answers_waiting_file_requests(api, big):
    sid = big["id"]
    pid = daemon_pid()
    answers = []

    def remove():
        answers.append(Api("unix").request("DELETE", url(sid, "many", "recursive=true")))
    threads = [threading.Thread(target=remove)] + [
        threading.Thread(target=lambda: answers.append(Api("unix").get(url(sid, "many")))) for _ in range(6)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    os.kill(pid, signal.SIGTERM)
    for t in threads:
        t.join(60)
    assert len(answers) == len(threads)
    for r in answers:
        assert r.status in (200, 404, 503), r
        if r.status == 503:
            assert_error(r, 503, "stopping")
    wait_for(lambda: systemctl_show("sandboxd.service", "ActiveState")["ActiveState"] == "inactive",
             timeout=20, what="sandboxd to exit")
    show = systemctl_show("sandboxd.service", "Result", "ExecMainCode", "ExecMainStatus")
    assert show["Result"] == "success", show
    assert show["ExecMainCode"] == "1" and show["ExecMainStatus"] == "0", show  # CLD_EXITED, 0
    assert api.get("/v1/health").status == 200  # socket activation starts it again
    wait_daemon_running(not_pid=pid)
