# SPDX-License-Identifier: LGPL-2.1-or-later
"""Sessions: one per scope, a slice in systemd with the session's limits."""

import re

import pytest

import sbxbus as B
from conftest import (DEFAULT_CPU_QUOTA, DEFAULT_MEMORY_MAX, DEFAULT_TASKS_MAX, EXEC_MODE, MAX_CPU_QUOTA, MAX_MEMORY_MAX,
                      LOCAL_TENANT, MAX_TASKS_MAX, WORKSPACE_ROOT, assert_error, config_dropin, run, systemctl_show,
                      unique_user, units, wait_for)

DROPIN = "/etc/sandboxd/sandboxd.conf.d/50-test-sessions.conf"


def cpu_quota_property(percent):
    """systemctl show's CPUQuotaPerSecUSec= for a CPUQuota= in percent."""
    usec = percent * 10000
    if usec % 1000000 == 0:
        return "%ds" % (usec // 1000000)
    if usec > 1000000:
        return "%ds %dms" % (usec // 1000000, usec % 1000000 // 1000)
    return "%dms" % (usec // 1000)


def slice_of(session):
    return "sandboxd-%s.slice" % session["id"]


def assert_slice(session, memory_max, cpu_quota, tasks_max):
    # A slice of the pool is handed out once PID 1 took its start (the session's commands
    # queue behind it there), which may be a moment before PID 1 made it.
    wait_for(lambda: systemctl_show(slice_of(session), "ActiveState")["ActiveState"] == "active", timeout=10,
             what="%s to be active" % slice_of(session))
    p = systemctl_show(slice_of(session), "ActiveState", "LoadState", "Slice", "MemoryMax", "CPUQuotaPerSecUSec",
                       "TasksMax")
    assert p["LoadState"] == "loaded" and p["ActiveState"] == "active", p
    assert p["Slice"] == "sandboxd.slice", p
    assert p["MemoryMax"] == str(memory_max), p
    assert p["CPUQuotaPerSecUSec"] == cpu_quota_property(cpu_quota), p
    assert p["TasksMax"] == str(tasks_max), p


def test_create_new_session(api, scope):
    user, ws = scope
    r = api.post("/v1/sessions", {"user": user, "workspace": ws})
    assert r.status == 201, r
    assert r.headers["Content-Type"].startswith("application/json")
    s = r.json
    assert re.fullmatch(r"[a-z][a-z0-9]{0,31}_[0-9a-f]{16}", s["id"]), s  # NODE_HEX
    assert s["user"] == user and s["workspace"] == ws
    assert s["state"] == "active"
    assert s["unit"] == slice_of(s)
    assert re.fullmatch(r"sbx-[0-9a-f]{16}", s["dynamic_user"]), s
    assert s["workspace_path"] == "%s/%s/%s/%s" % (WORKSPACE_ROOT, LOCAL_TENANT, user, ws)
    assert s["limits"] == {"memory_max": DEFAULT_MEMORY_MAX, "cpu_quota": DEFAULT_CPU_QUOTA,
                           "tasks_max": DEFAULT_TASKS_MAX}, s
    assert s["network"] == {"mode": "proxy", "deny": []}  # DefaultMode=proxy
    assert s["exec_mode"] == EXEC_MODE  # ExecMode=, the lane's
    assert s["commands"] == 0 and s["running"] == 0
    # systemd has the slice, with the configured default limits
    assert slice_of(s) in units()
    assert_slice(s, DEFAULT_MEMORY_MAX, DEFAULT_CPU_QUOTA, DEFAULT_TASKS_MAX)


def test_create_again_returns_the_same_session(api, scope):
    user, ws = scope
    r1 = api.post("/v1/sessions", {"user": user, "workspace": ws})
    assert r1.status == 201, r1
    before = units()
    r2 = api.post("/v1/sessions", {"user": user, "workspace": ws})
    assert r2.status == 200, r2
    assert r2.json["id"] == r1.json["id"]
    assert r2.json["unit"] == r1.json["unit"]
    assert units() == before, "a second slice was started"


@pytest.mark.parametrize("mode", ["unit", "session"])
def test_exec_mode_is_the_requests(api, scope, mode):
    r = api.post("/v1/sessions", {"user": scope[0], "workspace": scope[1], "exec_mode": mode})
    assert r.status == 201 and r.json["exec_mode"] == mode, r
    sid = r.json["id"]
    assert api.get_session(sid)["exec_mode"] == mode
    assert [s["exec_mode"] for s in api.get("/v1/sessions?user=" + scope[0]).json["sessions"]] == [mode]
    # in either mode its commands run
    res = run(api, sid, ["echo", "hi"])
    assert res["exit"]["status"] == "succeeded" and res["stdout"] == "hi\n", res["exit"]


def test_create_again_with_another_exec_mode_answers_the_session_as_it_is(api, scope):
    # as for the network mode: the scope's session, unchanged, whatever the second request says
    first = api.create_session(*scope, exec_mode="session")
    before = units()
    for body in ({"exec_mode": "unit"}, {}):
        r = api.post("/v1/sessions", dict(body, user=scope[0], workspace=scope[1]))
        assert r.status == 200 and r.json["id"] == first["id"] and r.json["exec_mode"] == "session", r
    assert units() == before


@pytest.mark.restarts_daemon
def test_exec_mode_default_is_the_configs(api, scope):
    user, ws = scope
    other = "session" if EXEC_MODE == "unit" else "unit"  # not the lane's own default
    with config_dropin(DROPIN) as write:
        write("[Session]\nExecMode=%s\n" % other)
        s = api.create_session(user, ws)
        assert s["exec_mode"] == other, s
        path = B.manager("GetSession", "s", s["id"])[0]
        assert B.get_property(path, B.SESSION, "ExecMode") == other
        sid, path = B.manager("CreateSession", "ssa{sv}", user, ws + "-bus", {})
        assert B.get_property(path, B.SESSION, "ExecMode") == other
        # a request still chooses
        assert api.create_session(user, ws + "-mine", exec_mode=EXEC_MODE)["exec_mode"] == EXEC_MODE
    # the default back to the lane's; the sessions keep theirs
    assert api.get_session(s["id"])["exec_mode"] == other
    assert api.create_session(user, ws + "-after")["exec_mode"] == EXEC_MODE


def test_other_workspace_or_user_is_another_session(api, scope):
    user, ws = scope
    a = api.post("/v1/sessions", {"user": user, "workspace": ws})
    b = api.post("/v1/sessions", {"user": user, "workspace": ws + "-b"})
    c = api.post("/v1/sessions", {"user": user + "x", "workspace": ws})
    assert (a.status, b.status, c.status) == (201, 201, 201), (a, b, c)
    ids = {a.json["id"], b.json["id"], c.json["id"]}
    assert len(ids) == 3
    # another scope, another dynamic user
    assert len({a.json["dynamic_user"], b.json["dynamic_user"], c.json["dynamic_user"]}) == 3
    u = units()
    for s in (a.json, b.json, c.json):
        assert slice_of(s) in u


def test_requested_limits_are_on_the_slice(api, scope):
    s = api.create_session(*scope, limits={"memory_max": "64M", "cpu_quota": 50, "tasks_max": 32})
    assert s["limits"] == {"memory_max": 64 << 20, "cpu_quota": 50, "tasks_max": 32}, s
    assert_slice(s, 64 << 20, 50, 32)


def test_memory_max_in_bytes_and_at_the_maximum(api, scope):
    s = api.create_session(*scope, limits={"memory_max": 100 * 1024 * 1024,
                                           "cpu_quota": MAX_CPU_QUOTA, "tasks_max": MAX_TASKS_MAX})
    assert s["limits"]["memory_max"] == 100 * 1024 * 1024
    assert_slice(s, 100 * 1024 * 1024, MAX_CPU_QUOTA, MAX_TASKS_MAX)


@pytest.mark.parametrize("limits", [
    {"memory_max": "9G"},
    {"memory_max": MAX_MEMORY_MAX + 1},
    {"cpu_quota": MAX_CPU_QUOTA + 1},
    {"tasks_max": MAX_TASKS_MAX + 1},
], ids=["memory_max-9G", "memory_max-bytes", "cpu_quota", "tasks_max"])
def test_limits_above_the_maximum(api, scope, limits):
    before = units()
    r = api.post("/v1/sessions", {"user": scope[0], "workspace": scope[1], "limits": limits})
    err = assert_error(r, 400, "limit_exceeded")
    assert list(limits)[0] in err["message"]
    assert units() == before
    # nothing of the scope was kept
    r = api.get("/v1/sessions?user=" + scope[0])
    assert r.status == 200 and r.json["sessions"] == [], r


def test_list_and_filter_by_user(api, scope):
    user, ws = scope
    other = unique_user()
    a = api.create_session(user, ws)
    b = api.create_session(user, ws + "-2")
    c = api.create_session(other, ws)

    r = api.get("/v1/sessions")
    assert r.status == 200, r
    listed = {s["id"]: s for s in r.json["sessions"]}
    for s in (a, b, c):
        assert s["id"] in listed
        assert listed[s["id"]] == s

    r = api.get("/v1/sessions?user=" + user)
    assert r.status == 200, r
    assert sorted(s["id"] for s in r.json["sessions"]) == sorted([a["id"], b["id"]])
    assert all(s["user"] == user for s in r.json["sessions"])

    r = api.get("/v1/sessions?user=" + unique_user())
    assert r.status == 200 and r.json == {"sessions": []}, r


def test_list_with_invalid_user_filter(api):
    assert_error(api.get("/v1/sessions?user=Not-Valid"), 400, "invalid_name")


def test_get_one(api, session):
    r = api.get("/v1/sessions/" + session["id"])
    assert r.status == 200, r
    assert r.json == session


@pytest.mark.parametrize("sid", ["0123456789abcdef", "ffffffffffffffff", "xyz", "0123456789ABCDEF",
                                 "0123456789abcdef0"])
def test_get_unknown_session(api, sid):
    assert_error(api.get("/v1/sessions/" + sid), 404, "not_found")
