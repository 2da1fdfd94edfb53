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
    fill_many(api, s["id"])
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


# On the loop, each listing of N_FILES entries stalled every client for a good part of a
# second (and the removal as long): every try of such a build waits that long. Off the
# loop a /healthz answers in milliseconds; on a loaded machine one of them may still wait
# for the scheduler past STALL_S, so a measurement is tried up to TRIES times and the best
# one counts: a stall of sandboxd's shows in every try, a scheduler's hiccup in one.
STALL_S = 0.25
TRIES = 3


def least_stall(work, before=None):
    """Runs work() while another client probes /healthz, up to TRIES times (before() ahead
    of each try after the first); returns the worst wait of each try, stopping at the
    first under STALL_S."""
    worsts = []
    for i in range(TRIES):
        if i and before:
            before()
        with Prober() as probe:
            work()
        worsts.append(probe.worst)
        if probe.worst < STALL_S:
            break
    return worsts


def fill_many(api, sid):
    res = run(api, sid, ["sh", "-c", "mkdir many && cd many && seq 1 %d | xargs touch" % N_FILES], timeout=120)
    assert res["exit"]["status"] == "succeeded", res


def test_listings_and_removal_do_not_stall_others(api, big):
    sid = big["id"]

    def list_four():
        listed = in_parallel(4, lambda: Api("unix").get(url(sid, "many")))
        for r in listed:
            assert r.status == 200, r
            assert len(r.json["entries"]) == N_FILES and not r.json["truncated"]
        # the walk behind disk_bytes is in the background: the session answers at once
        t = time.monotonic()
        assert api.get_session(sid)["state"] == "active"
        assert time.monotonic() - t < 0.5

    def remove():
        r = api.request("DELETE", url(sid, "many", "recursive=true"))
        assert r.status == 200 and r.json == {"path": "many", "deleted": True}, r
        assert api.get(url(sid, "many")).status == 404

    listing = least_stall(list_four)
    removal = least_stall(remove, before=lambda: fill_many(api, sid))
    assert min(listing) < STALL_S, "a /healthz waited %s s during the listings" % listing
    assert min(removal) < STALL_S, "a /healthz waited %s s during the removal" % removal


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
