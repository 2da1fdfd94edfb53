# SPDX-License-Identifier: LGPL-2.1-or-later
"""POST /v1/drain end to end: readyz turns 503, new sessions and commands get 503 with
Retry-After, the running command finishes and its result stays, sandboxd then exits
(cleanly), stays draining when the socket activates it again, until DELETE /v1/drain."""

import os
import secrets

import pytest

from conftest import (EventStream, assert_error, commands_path, daemon_pid, is_active, start_command, systemctl_show,
                      unique_user, wait_for, wait_terminal)

pytestmark = pytest.mark.restarts_daemon

FLAG = "/run/sandboxd/draining"


def assert_draining_refusal(r):
    assert_error(r, 503, "draining")
    assert r.headers.get("Retry-After") == "30", r.headers


@pytest.fixture
def undrain(api):
    yield
    r = api.delete("/v1/drain")
    assert r.status == 200 and r.json["draining"] is False, r


def close_other_sessions(api, keep):
    """Sessions of earlier tests may have commands running, which a drain waits for."""
    for s in api.get("/v1/sessions").json["sessions"]:
        if s["id"] != keep and s["state"] not in ("closed", "failed"):
            api.delete("/v1/sessions/" + s["id"])


@pytest.mark.time_limit(120)
def test_drain_end_to_end(api, session, undrain):
    sid = session["id"]
    close_other_sessions(api, sid)
    start_command(api, sid, {"argv": ["true"], "request_id": "before"})
    wait_terminal(api, sid, "before")
    pid = daemon_pid()
    assert pid

    # a command that runs through the drain, its output streamed on
    stream = EventStream(api, "POST", commands_path(sid),
                         {"argv": ["sh", "-c", "sleep 2; echo finished"], "request_id": "through"})
    assert next(stream)["type"] == "accepted"

    r = api.post("/v1/drain")
    assert r.status == 200, r
    assert r.json == {"draining": True, "running_commands": 1}, r.json
    assert os.path.exists(FLAG)

    r = api.get("/readyz")
    assert r.status == 503 and r.json == {"status": "draining"}, r
    assert api.get("/healthz").status == 200  # alive all the same
    assert api.get("/v1/health").json["status"] == "draining"
    assert api.get("/v1/drain").json == {"draining": True, "running_commands": 1}
    assert "\nsandboxd_draining 1\n" in api.get("/metrics").body.decode()

    # no new work
    assert_draining_refusal(api.post("/v1/sessions", {"user": unique_user(), "workspace": "w"}))
    assert_draining_refusal(api.post(commands_path(sid), {"argv": ["true"]}))
    assert_draining_refusal(api.post(commands_path(sid) + "?wait=false", {"argv": ["true"], "request_id": "new"}))
    # asking again for a command that exists is not new work
    r = api.post(commands_path(sid) + "?wait=false", {"argv": ["true"], "request_id": "before"})
    assert r.status == 200 and r.json["request_id"] == "before", r
    # reads go on
    assert api.get(commands_path(sid, "before")).status == 200

    # the running command finishes, its stream complete
    events = stream.read_all()
    stream.close()
    assert events[-1]["type"] == "exit" and events[-1]["status"] == "succeeded", events[-1]
    assert any(e.get("data") == "finished\n" for e in events), events

    # then sandboxd exits by itself, cleanly
    wait_for(lambda: is_active("sandboxd.service") != "active", timeout=15, what="sandboxd to exit")
    assert systemctl_show("sandboxd.service", "Result")["Result"] == "success"
    assert is_active("sandboxd.socket") == "active"
    assert os.path.exists(FLAG)

    # the next request starts it again, still draining; the result is there
    r = api.get("/readyz")
    assert r.status == 503 and r.json == {"status": "draining"}, r
    assert daemon_pid() not in (0, pid)
    snap = api.get(commands_path(sid, "through")).json
    assert snap["status"] == "succeeded" and snap["stdout"] == "finished\n", snap
    assert_draining_refusal(api.post("/v1/sessions", {"user": unique_user(), "workspace": "w"}))

    # until DELETE undoes it
    r = api.delete("/v1/drain")
    assert r.status == 200 and r.json["draining"] is False, r
    assert not os.path.exists(FLAG)
    assert api.get("/readyz").status == 200
    r = api.post("/v1/sessions", {"user": unique_user(), "workspace": "w" + secrets.token_hex(2)})
    assert r.status == 201, r
    r = api.post(commands_path(sid) + "?wait=false", {"argv": ["true"], "request_id": "after"})
    assert r.status == 202, r


def test_drain_is_idempotent_and_local_or_admin(api, tcp, undrain):
    assert api.post("/v1/drain").status == 200
    assert api.post("/v1/drain").json["draining"] is True
    # over TCP a tenant that is not in AdminTenants= may neither see nor change it
    assert_error(tcp.delete("/v1/drain"), 403, "forbidden")
    assert api.get("/v1/drain").json["draining"] is True
    assert api.delete("/v1/drain").json["draining"] is False
    assert api.delete("/v1/drain").json["draining"] is False
