# SPDX-License-Identifier: LGPL-2.1-or-later
"""Quotas (sandboxd.conf(5)): sessions per tenant and per unix user, commands kept and
running per session, spool bytes per session and in total. Each refusal is a JSON
error with its own code (429 or 507) and a named D-Bus error, and changes nothing."""

import json
import os
import secrets

import pytest

import sbxbus as B
from conftest import (UNIX_SOCKET, Api, EventStream, assert_error, commands_path, config_dropin, run, sh, snapshot,
                      start_command, stream_output, units, wait_for, wait_terminal)

DROPIN = "/etc/sandboxd/sandboxd.conf.d/50-test-quotas.conf"
SPOOL = "/run/sandboxd/spool"
CURL = ["curl", "-sS", "--max-time", "20", "--unix-socket", UNIX_SOCKET, "-o", "-", "-w", "\n%{http_code}"]


@pytest.fixture
def quotas():
    """Writes the drop-in and restarts sandboxd with it; removes it after."""
    with config_dropin(DROPIN) as write:
        yield write


@pytest.fixture
def member():
    name = "sbxq" + secrets.token_hex(4)
    sh("useradd", "-M", "-N", "-s", "/usr/sbin/nologin", "-G", "sandboxd", name)
    try:
        yield name
    finally:
        sh("userdel", name, check=False)


def create_as(user, workspace):
    p = sh("setpriv", "--reuid=" + user, "--regid=users", "--init-groups", "--", *CURL,
           "-H", "Content-Type: application/json", "-d", json.dumps({"user": user, "workspace": workspace}),
           "http://localhost/v1/sessions", check=False)
    body, status = p.stdout.rsplit("\n", 1)
    return int(status), json.loads(body)


def refused(status, body, code):
    assert status == {"spool_full": 507}.get(code, 429), (status, body)
    assert body["error"]["code"] == code and body["error"]["message"], body
    return body["error"]["message"]


@pytest.mark.restarts_daemon
@pytest.mark.time_limit(180)
def test_sessions_per_tenant(quotas, tcp, tcp2, scope):
    # the tenant's sessions of other tests count too: room for two more
    held = [s for s in tcp.get("/v1/sessions").json["sessions"] if s["state"] in ("starting", "active", "closing")]
    quotas("[Session]\nMaxSessionsPerTenant=%d\n" % (len(held) + 2))
    user, ws = scope
    sids = [tcp.create_session(user, "%s-%d" % (ws, i))["id"] for i in range(2)]
    before = units()
    r = tcp.post("/v1/sessions", {"user": user, "workspace": ws + "-3"})
    msg = assert_error(r, 429, "too_many_sessions")["message"]
    assert "MaxSessionsPerTenant=" in msg, msg
    assert units() == before
    # the scope of an existing session answers with it, as always
    r = tcp.post("/v1/sessions", {"user": user, "workspace": ws + "-0"})
    assert r.status == 200 and r.json["id"] == sids[0], r
    # another tenant has its own count, and local callers none of it
    tcp2.create_session(user, ws + "-other")
    Api("unix").create_session(user, ws + "-local")
    # a closed session no longer counts
    assert tcp.delete("/v1/sessions/" + sids[1]).status == 200
    tcp.create_session(user, ws + "-3")


@pytest.mark.restarts_daemon
@pytest.mark.time_limit(180)
def test_a_reused_uid_is_not_charged_the_old_users_sessions(quotas, api):
    """userdel, then a new user gets the same uid: the old user's open sessions are not the
    new one's (authz.c), so they do not count towards its MaxSessionsPerUser= either."""
    quotas("[Session]\nMaxSessionsPerUser=1\n")
    old, new = "sbxq" + secrets.token_hex(4), "sbxq" + secrets.token_hex(4)
    sh("useradd", "-M", "-N", "-s", "/usr/sbin/nologin", "-G", "sandboxd", old)
    try:
        uid = int(sh("id", "-u", old).stdout)
        status, body = create_as(old, "w1")
        assert status == 201, (status, body)
        assert refused(*create_as(old, "w2"), "too_many_sessions")
    finally:
        sh("userdel", old, check=False)
    sh("useradd", "-M", "-N", "-s", "/usr/sbin/nologin", "-G", "sandboxd", "-u", str(uid), new)
    try:
        status, body = create_as(new, "w1")
        assert status == 201, (status, body)
        assert body["user"] == new
        assert refused(*create_as(new, "w2"), "too_many_sessions")
    finally:
        sh("userdel", new, check=False)


@pytest.mark.restarts_daemon
@pytest.mark.time_limit(180)
def test_sessions_per_unix_user(quotas, member, api):
    quotas("[Session]\nMaxSessionsPerUser=1\n")
    status, body = create_as(member, "w1")
    assert status == 201, (status, body)
    before = units()
    status, body = create_as(member, "w2")
    assert "MaxSessionsPerUser=" in refused(status, body, "too_many_sessions")
    # over D-Bus the same uid counts the same sessions
    err = B.error_of(B.call_as, member, B.PATH, B.MANAGER, "CreateSession", "ssa{sv}", member, "w3", {})
    assert err == B.ERROR + "TooManySessions", err
    assert units() == before
    # root has no quota
    for i in range(3):
        api.create_session(member, "root-%d" % i)


@pytest.mark.restarts_daemon
@pytest.mark.time_limit(180)
def test_running_and_kept_commands_per_session(quotas, api, scope):
    quotas("[Command]\nMaxRunningCommandsPerSession=2\nMaxCommandsPerSession=3\n")
    user, ws = scope
    sid = api.create_session(user, ws)["id"]
    for rid in ("a", "b"):
        start_command(api, sid, {"argv": ["sleep", "60"], "request_id": rid})
    before = units()
    r = api.post(commands_path(sid) + "?wait=false", {"argv": ["true"], "request_id": "c"})
    assert "MaxRunningCommandsPerSession=" in assert_error(r, 429, "too_many_running")["message"]
    err = B.error_of(B.manager, "Exec", "sasa{sv}", sid, ["true"], {})
    assert err == B.ERROR + "TooManyRunning", err
    assert units() == before
    assert api.get(commands_path(sid, "c")).status == 404
    # the same request id is no new command: answered as before
    assert api.post(commands_path(sid) + "?wait=false", {"argv": ["sleep", "60"], "request_id": "a"}).status == 200

    for rid in ("a", "b"):
        assert api.post(commands_path(sid, rid, "/signal"), {"signal": "SIGKILL"}).status == 200
        wait_terminal(api, sid, rid)
    # three kept: a fourth forgets the oldest finished one
    assert run(api, sid, {"argv": ["echo", "c"], "request_id": "c"})["stdout"] == "c\n"
    assert api.get(commands_path(sid, "a")).status == 200
    assert run(api, sid, {"argv": ["echo", "d"], "request_id": "d"})["stdout"] == "d\n"
    assert api.get(commands_path(sid, "a")).status == 404
    for rid in ("b", "c", "d"):
        assert snapshot(api, sid, rid)["status"] in ("signaled", "succeeded")


@pytest.mark.restarts_daemon
@pytest.mark.time_limit(180)
def test_spool_per_session(quotas, api, scope):
    quotas("[Command]\nOutputMax=4M\nSpoolMaxPerSession=1M\n")
    user, ws = scope
    sid = api.create_session(user, ws)["id"]
    # 3 MiB of control bytes: kept up to the session's budget, all of it streamed live
    with EventStream(api, "POST", commands_path(sid),
                     {"argv": ["sh", "-c", "head -c 3145728 /dev/zero"], "request_id": "big"}, timeout=60) as first:
        events = first.read_all()
    assert events[-1]["type"] == "exit" and events[-1]["status"] == "succeeded", events[-1]
    assert len(stream_output(events)) == 3 << 20
    trunc = [e for e in events if e["type"] == "truncated"]
    assert len(trunc) == 1 and trunc[0]["reason"] == "session_spool", trunc
    # the spool holds raw bytes and an index, not escaped JSON ("\u0000", 6 bytes each): the
    # session's megabyte keeps nearly a megabyte of them
    kept = trunc[0]["kept_bytes"]
    assert (1 << 20) * 9 // 10 < kept < 1 << 20, kept
    assert len(stream_output(events, live=False)) == kept
    spool = os.path.join(SPOOL, sid)
    assert sum(os.path.getsize(os.path.join(spool, f)) for f in os.listdir(spool)) <= 1 << 20
    # the log replays as it went out, from the start and from a line's start (one inside a
    # line is refused: 416)
    line = first.kept_raw.index(b"\n", 12345) + 1
    for offset in (0, line):
        again = api.get(commands_path(sid, "big", "/events?offset=%d" % offset))
        assert again.status == 200, again
        assert again.body == first.kept_raw[offset:], (offset, len(again.body), len(first.kept_raw))
    assert_error(api.get(commands_path(sid, "big", "/events?offset=%d" % (line - 1))), 416, "invalid_offset")

    # a running command that cannot keep its output: no new one until it ends
    start_command(api, sid, {"argv": ["sh", "-c", "head -c 2097152 /dev/zero; exec sleep 60"], "request_id": "hold"})
    # the finished one was forgotten to make room for it
    assert api.get(commands_path(sid, "big")).status == 404
    wait_for(lambda: snapshot(api, sid, "hold").get("stdout_truncated"), what="hold's output cut")
    before = units()
    r = api.post(commands_path(sid) + "?wait=false", {"argv": ["true"], "request_id": "refused"})
    assert "SpoolMaxPerSession=" in assert_error(r, 507, "spool_full")["message"]
    err = B.error_of(B.manager, "Exec", "sasa{sv}", sid, ["true"], {})
    assert err == B.ERROR + "SpoolFull", err
    assert units() == before
    assert api.post(commands_path(sid, "hold", "/signal"), {"signal": "SIGKILL"}).status == 200
    wait_terminal(api, sid, "hold")
    assert run(api, sid, {"argv": ["echo", "ok"]})["stdout"] == "ok\n"


@pytest.mark.restarts_daemon
@pytest.mark.time_limit(180)
def test_spool_in_total(quotas, api, scope):
    # what the other tests' sessions keep counts too: 1 MiB more than that
    held = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(SPOOL) for f in fs)
    total = held + (1 << 20)
    quotas("[Command]\nSpoolMaxPerSession=%d\nSpoolMax=%d\n" % (total, total))
    user, ws = scope
    a = api.create_session(user, ws + "-a")["id"]
    b = api.create_session(user, ws + "-b")["id"]
    res = run(api, a, {"argv": ["sh", "-c", "head -c 2097152 /dev/zero"], "request_id": "big"})
    assert len(res["stdout_bytes"]) == 2 << 20
    trunc = [e for e in res["events"] if e["type"] == "truncated"]
    assert len(trunc) == 1 and trunc[0]["reason"] == "spool", trunc
    before = units()
    r = api.post(commands_path(b) + "?wait=false", {"argv": ["true"]})
    assert "SpoolMax=" in assert_error(r, 507, "spool_full")["message"]
    assert units() == before
    # the session holding it forgets its finished command to run the next one
    assert run(api, a, {"argv": ["echo", "ok"]})["stdout"] == "ok\n"
    assert api.get(commands_path(a, "big")).status == 404
    assert api.post(commands_path(b) + "?wait=false", {"argv": ["true"]}).status == 202
