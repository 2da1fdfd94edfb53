# SPDX-License-Identifier: LGPL-2.1-or-later
"""Session lifecycle: idle expiry (ttl_s) and what pushes it back, closing with
running commands, purging the workspace, what a closed session still answers,
freeze on a host without cgroup v2, and the warm pool of slices."""

import time

import pytest

from conftest import (SESSION_ID_RE, assert_error, commands_path, is_active, replay, run, sh, snapshot, start_command,
                      units, wait_command_ended, wait_for)


def slice_of(sid):
    return "sandboxd-%s.slice" % sid


def state(api, sid):
    return api.get_session(sid)["state"]


def wait_closed(api, sid, timeout):
    return wait_for(lambda: (lambda s: s if s["state"] == "closed" else None)(api.get_session(sid)),
                    timeout=timeout, interval=0.1, what="session %s to close" % sid)


def wait_slice_gone(sid, timeout=10):
    wait_for(lambda: is_active(slice_of(sid)) in ("inactive", "unknown", "failed"), timeout=timeout,
             what="%s to be stopped" % slice_of(sid))


def unified_cgroup():
    return sh("stat", "-fc", "%T", "/sys/fs/cgroup", check=False).stdout.strip() == "cgroup2fs"


# --------------------------------------------------------------------------
# ttl_s

@pytest.mark.time_limit(30)
def test_idle_session_closes_after_its_ttl(api, scope):
    user, ws = scope
    t0 = time.monotonic()
    s = api.create_session(user, ws, ttl_s=2)
    assert s["ttl_s"] == 2, s
    assert slice_of(s["id"]) in units()
    closed = wait_closed(api, s["id"], timeout=8)
    elapsed = time.monotonic() - t0
    assert 1.8 <= elapsed <= 4.5, "closed after %.1f s with ttl_s=2" % elapsed
    assert closed["close_reason"] == "idle", closed
    wait_slice_gone(s["id"])
    # the scope is free: a new session for it is a new one
    again = api.post("/v1/sessions", {"user": user, "workspace": ws})
    assert again.status == 201 and again.json["id"] != s["id"], again


@pytest.mark.time_limit(30)
def test_activity_pushes_the_expiry_back(api, scope):
    user, ws = scope
    s = api.create_session(user, ws, ttl_s=2)
    sid = s["id"]
    last = s["expires_at_usec"]
    t0 = time.monotonic()
    while time.monotonic() - t0 < 4.2:
        time.sleep(1)
        r = api.post("/v1/sessions/%s/activity" % sid)
        assert r.status == 200, r
        assert r.json["state"] == "active", r.json
        assert r.json["expires_at_usec"] > last, (r.json["expires_at_usec"], last)
        last = r.json["expires_at_usec"]
    assert state(api, sid) == "active", "closed although touched every second"
    assert is_active(slice_of(sid)) == "active"
    # left alone, it closes
    closed = wait_closed(api, sid, timeout=6)
    assert closed["close_reason"] == "idle", closed


@pytest.mark.time_limit(30)
def test_running_command_keeps_the_session_alive(api, scope):
    user, ws = scope
    s = api.create_session(user, ws, ttl_s=2)
    sid = s["id"]
    res = run(api, sid, ["sh", "-c", "sleep 4.5; echo still here"])
    assert res["exit"]["status"] == "succeeded", res["exit"]
    assert res["stdout"] == "still here\n"
    assert state(api, sid) == "active", "the session closed under a running command"
    t_end = time.monotonic()
    closed = wait_closed(api, sid, timeout=6)
    assert time.monotonic() - t_end >= 1.0, "closed right after the command, not ttl_s after it"
    assert closed["close_reason"] == "idle", closed


# --------------------------------------------------------------------------
# closing

@pytest.mark.time_limit(30)
def test_delete_stops_running_commands_and_the_slice(api, session):
    sid = session["id"]
    start_command(api, sid, {"argv": ["sh", "-c", "echo up; exec sleep 300"], "request_id": "long"})
    wait_for(lambda: snapshot(api, sid, "long")["stdout"] == "up\n", timeout=10, what="the command to run")
    t0 = time.monotonic()
    r = api.delete("/v1/sessions/" + sid)
    assert r.status == 200, r
    assert time.monotonic() - t0 < 8
    assert r.json["state"] == "closed" and r.json["close_reason"] == "deleted", r.json
    # answered once closed: the command is over already
    snap = snapshot(api, sid, "long")
    assert snap["terminal"] is True, snap
    assert snap["status"] == "signaled" and snap["reason"] == "stopped", snap
    assert snap["signal"] == "SIGTERM", snap
    wait_slice_gone(sid)
    wait_command_ended(snap, collected=True)
    # deleting again: still closed, same answer
    r = api.delete("/v1/sessions/" + sid)
    assert r.status == 200 and r.json["state"] == "closed", r


@pytest.mark.time_limit(60)
@pytest.mark.parametrize("purge", [True, False])
def test_purge_empties_the_workspace(api, scope, purge):
    user, ws = scope
    s = api.create_session(user, ws)
    res = run(api, s["id"], ["sh", "-c", 'echo kept > file.txt && mkdir -p d/e && echo h > "$HOME/h" && ls -A'])
    assert res["exit"]["status"] == "succeeded" and res["stdout"] == "d\nfile.txt\n", res
    r = api.delete("/v1/sessions/%s%s" % (s["id"], "?purge=true" if purge else ""))
    assert r.status == 200 and r.json["state"] == "closed", r

    s2 = api.post("/v1/sessions", {"user": user, "workspace": ws})
    assert s2.status == 201 and s2.json["id"] != s["id"], s2
    res = run(api, s2.json["id"], ["sh", "-c", 'ls -A; ls -A "$HOME"'])
    assert res["exit"]["status"] == "succeeded", res
    if purge:
        assert res["stdout"] == "", "the workspace or home was not emptied: %r" % res["stdout"]
    else:
        assert res["stdout"] == "d\nfile.txt\nh\n", res["stdout"]
        assert run(api, s2.json["id"], ["cat", "file.txt"])["stdout"] == "kept\n"


@pytest.mark.time_limit(30)
def test_closed_session_runs_nothing_but_keeps_results(api, session):
    sid = session["id"]
    res = run(api, sid, {"argv": ["sh", "-c", "echo result; exit 5"], "request_id": "before-close"})
    assert res["exit"]["exit_code"] == 5
    assert api.delete("/v1/sessions/" + sid).status == 200

    before = units()
    r = api.post(commands_path(sid), {"argv": ["true"]})
    assert_error(r, 409, "session_not_active")
    r = api.post(commands_path(sid) + "?wait=false", {"argv": ["true"], "request_id": "new-one"})
    assert_error(r, 409, "session_not_active")
    assert not {u for u in units() - before if u.startswith("sandboxd-%s-" % sid)}
    assert_error(api.post("/v1/sessions/%s/activity" % sid), 409, "session_not_active")

    snap = snapshot(api, sid, "before-close")
    assert snap["status"] == "failed" and snap["exit_code"] == 5 and snap["stdout"] == "result\n", snap
    events, _ = replay(api, sid, "before-close")
    assert [e["type"] for e in events] == ["accepted", "stdout", "exit"], events
    listed = api.get(commands_path(sid)).json["commands"]
    assert [c["request_id"] for c in listed] == ["before-close"], listed
    s = api.get_session(sid)
    assert s["state"] == "closed" and s["close_reason"] == "deleted", s
    assert sid in [x["id"] for x in api.get("/v1/sessions?user=" + session["user"]).json["sessions"]]


@pytest.mark.parametrize("action", ["freeze", "thaw"])
def test_freeze_needs_cgroup_v2(api, session, action):
    if unified_cgroup():
        pytest.skip("this host has cgroup v2: freezing is supported here")
    r = api.post("/v1/sessions/%s/%s" % (session["id"], action))
    err = assert_error(r, 501, "unsupported")
    assert "cgroup v2" in err["message"], err
    assert api.get_session(session["id"])["frozen"] is False


# --------------------------------------------------------------------------
# the warm pool

def pool(api):
    r = api.get("/v1/pool")
    assert r.status == 200, r
    return r.json


def close_leftover_sessions(api):
    """Earlier tests leave active sessions, which hold the pool's places (PoolSize=)."""
    for s in api.get("/v1/sessions").json["sessions"]:
        if s["state"] not in ("closed",):
            api.delete("/v1/sessions/" + s["id"])


def pool_slice_ids(api):
    """Session slices in systemd that no open session owns: the prepared ones."""
    owned = {s["id"] for s in api.get("/v1/sessions").json["sessions"] if s["state"] != "closed"}
    ids = set()
    for u in units():
        if u.startswith("sandboxd-") and u.endswith(".slice") and is_active(u) == "active":
            sid = u[len("sandboxd-"):-len(".slice")]
            if SESSION_ID_RE.fullmatch(sid) and sid not in owned:
                ids.add(sid)
    return ids


@pytest.mark.time_limit(60)
def test_pool_keeps_slices_ready(api, scope):
    close_leftover_sessions(api)
    p = wait_for(lambda: (lambda p: p if p["ready"] >= p["min_ready"] else None)(pool(api)), timeout=10,
                 what="the pool to fill")
    assert p["profile"] == "shared", p
    assert (p["size"], p["min_ready"]) == (16, 4), p  # PoolSize=, MinReady= defaults
    assert p["in_use"] == 0, p
    assert p["ready"] + p["starting"] + p["in_use"] <= p["size"], p
    assert api.get("/v1/health").json["pool"] == p

    prepared = pool_slice_ids(api)
    assert len(prepared) >= p["ready"], (prepared, p)

    # a new session takes a prepared slice
    user, ws = scope
    t0 = time.monotonic()
    s = api.create_session(user, ws)
    took = time.monotonic() - t0
    assert s["id"] in prepared, "the session's slice %s was not one of the prepared %r" % (s["id"], prepared)
    p2 = pool(api)
    assert p2["in_use"] == 1, p2
    # the refill waits 250 ms, for PID 1 to start this session's first command first
    assert p2["refill_due"] is True, p2
    assert p2["ready"] + p2["starting"] >= p["min_ready"] - 1, p2
    assert p2["ready"] + p2["starting"] + p2["in_use"] <= p2["size"], p2
    assert took < 1.0, "creating a session from the pool took %.2f s" % took
    # refilled after a moment
    p3 = wait_for(lambda: (lambda q: q if q["ready"] >= q["min_ready"] else None)(pool(api)), timeout=10,
                  what="the pool to refill")
    assert p3["in_use"] == 1 and p3["ready"] + p3["starting"] + p3["in_use"] <= p3["size"], p3
    assert p3["refill_due"] is False, p3
    # it is a working session
    assert run(api, s["id"], ["echo", "ok"])["stdout"] == "ok\n"

    # closing gives the place back
    assert api.delete("/v1/sessions/" + s["id"]).status == 200
    p4 = pool(api)
    assert p4["in_use"] == 0, p4


@pytest.mark.time_limit(60)
def test_prepared_slices_come_with_their_proxy_socket(api, scope):
    """With the default network mode proxy, the pool prepares each slice's proxy socket too
    (it would otherwise hold up the first command); a session of another mode stops it."""
    close_leftover_sessions(api)

    def settled_pool():
        # the closed sessions' slices stop a moment later: only the pool's remain unowned
        ids, p = pool_slice_ids(api), pool(api)
        return ids if p["ready"] >= 2 and len(ids) == p["ready"] else None
    prepared = wait_for(settled_pool, timeout=20, what="the pool to fill and the closed slices to stop")
    have = units()
    assert prepared and all("sandboxd-%s-proxy.socket" % i in have for i in prepared), (prepared, have)

    user, ws = scope
    proxied = api.create_session(user, ws)
    assert proxied["id"] in prepared and proxied["network"]["mode"] == "proxy", proxied
    assert "sandboxd-%s-proxy.socket" % proxied["id"] in units()
    res = run(api, proxied["id"], ["sh", "-c", "echo $http_proxy"])
    assert res["stdout"].startswith("http://"), res

    prepared = wait_for(settled_pool, timeout=20, what="the pool to refill")
    none = api.create_session(user, ws + "-none", network={"mode": "none"})
    assert none["id"] in prepared and none["network"]["mode"] == "none", none
    sock = "sandboxd-%s-proxy.socket" % none["id"]
    wait_for(lambda: sock not in units() or is_active(sock) != "active", timeout=10,
             what="the unneeded proxy socket to stop")
    assert run(api, none["id"], ["echo", "ok"])["stdout"] == "ok\n"
    for s in (proxied, none):
        assert api.delete("/v1/sessions/" + s["id"]).status == 200
