# SPDX-License-Identifier: LGPL-2.1-or-later
"""Bursts queue instead of failing: 300 concurrent session creates, then 300 concurrent
commands. Each gets a session or a command (or, if sandboxd's own queue of calls to
systemd is full, 503 "overloaded" with Retry-After), never a 502: before pid1-gate, 59 of
150 creates got "The maximum number of pending replies per connection has been
reached" from the bus. Every command accepted ends succeeded."""

import threading

import pytest

from conftest import Api, commands_path, wait_terminal

pytestmark = [pytest.mark.load, pytest.mark.time_limit(600)]

N = 300
SESSIONS_FOR_COMMANDS = 10


def burst(calls):
    """Runs every call (a function of no argument returning a response) at once, each on
    its own thread and connection; returns the responses or exceptions, in order."""
    out = [None] * len(calls)
    start = threading.Barrier(len(calls))

    def one(i):
        start.wait()
        try:
            out[i] = calls[i]()
        except Exception as e:  # noqa: BLE001 - every failure counts
            out[i] = e

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "requests still waiting after 300 s"
    return out


def check(answers, ok_statuses):
    """Each answer is one of OK_STATUSES or 503 overloaded; returns how many were refused."""
    refused = 0
    for a in answers:
        assert not isinstance(a, Exception), "no answer: %r" % a
        if a.status == 503:
            assert a.json["error"]["code"] == "overloaded", a
            assert a.headers.get("Retry-After"), a.headers
            refused += 1
            continue
        assert a.status in ok_statuses, a
    return refused


def test_300_creates_then_300_commands(scope):
    user, ws = scope
    names = ["%s-b%d" % (ws, i) for i in range(N)]
    # in exec mode session a session is active once its executor runs: 300 units for PID 1
    created = burst([lambda n=n: Api("unix", timeout=280).post("/v1/sessions", {"user": user, "workspace": n})
                     for n in names])
    refused = check(created, (200, 201))
    sids = [a.json["id"] for a in created if a.status in (200, 201)]
    print("\n%d creates: %d sessions, %d refused as overloaded" % (N, len(sids), refused))
    assert len(set(sids)) == len(sids)
    assert len(sids) >= SESSIONS_FOR_COMMANDS
    api = Api("unix")
    for sid in sids:
        assert api.get("/v1/sessions/" + sid).json["state"] == "active"

    targets = [(sids[i % SESSIONS_FOR_COMMANDS], "burst-%d" % i) for i in range(N)]
    started = burst([lambda sid=sid, rid=rid: Api("unix").post(commands_path(sid) + "?wait=false",
                                                              {"argv": ["true"], "request_id": rid, "timeout_ms": 600000})
                     for sid, rid in targets])
    refused = check(started, (202,))
    accepted = [(sid, rid) for (sid, rid), a in zip(targets, started) if a.status == 202]
    print("%d commands: %d accepted, %d refused as overloaded" % (N, len(accepted), refused))
    for sid, rid in accepted:
        done = wait_terminal(api, sid, rid, timeout=120)
        assert done["status"] == "succeeded", done

    closed = burst([lambda sid=sid: Api("unix").delete("/v1/sessions/" + sid) for sid in sids])
    for a in closed:
        assert not isinstance(a, Exception) and a.status == 200, a
