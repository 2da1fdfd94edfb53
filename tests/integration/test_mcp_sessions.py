# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxctl mcp's session tools (sandbox_health, _create_session, _list_sessions,
_session_status, _close_session, _freeze_session, _thaw_session, _touch_session,
_session_metrics) with the official MCP SDK as the client (mcp-client.mjs, as test_mcp.py
uses it), checked against what sandboxd's HTTP API says. The SDK validates every result's
structuredContent against the tool's outputSchema, so a result that does not match its
schema fails the client."""

import time

import pytest

from conftest import (EXEC_MODE, MAX_CPU_QUOTA, memory_cgroup_v2, start_command, unique_user, wait_command_running,
                      wait_terminal)
from test_mcp import SDK, mcp

# as the other MCP tests: without the SDK (SANDBOXD_SKIP_MCP=1) every test here would fail in mcp()
pytestmark = pytest.mark.skipif(not SDK, reason="SANDBOXD_MCP_SDK is not set: run through tools/dev test, "
                                                "which installs the MCP SDK")

SESSION_TOOLS = ["sandbox_health", "sandbox_create_session", "sandbox_list_sessions", "sandbox_session_status",
                 "sandbox_close_session", "sandbox_freeze_session", "sandbox_thaw_session", "sandbox_touch_session",
                 "sandbox_session_metrics", "sandbox_expose_port", "sandbox_list_ports", "sandbox_unexpose_port"]


def ok(call):
    assert call.get("isError") is False and call["body"]["ok"] is True, call
    assert call["structured"] == call["body"], call
    return call["body"]["data"]


def refused(call, code, status, *words):
    assert call.get("isError") is True and call["body"]["ok"] is False, call
    err = call["body"]["error"]
    assert (err["code"], err["http_status"]) == (code, status), call
    for w in words:
        assert w in err["message"], call
    return err


def sessions_of(api, user):
    return [s for s in api.get("/v1/sessions?user=" + user).json["sessions"] if s["state"] != "closed"]


def close_all(api, user):
    for s in sessions_of(api, user):
        api.request("DELETE", "/v1/sessions/" + s["id"])


@pytest.fixture
def user(api):
    u = unique_user()
    yield u
    close_all(api, u)


def test_schemas_and_health(api):
    out = mcp([{"name": "sandbox_health", "arguments": {}},
               {"name": "sandbox_health", "arguments": {"verbose": True}}],
              "--jobs=3", "--timeout=7s", "--kill-grace=2s", "--host-path=/tmp:rw")
    tools = {t["name"]: t for t in out["tools"]}
    for name in SESSION_TOOLS:
        t = tools[name]
        assert t["title"] and t["description"], t
        schema = t["inputSchema"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False, t
        if "session_id" in schema["properties"]:
            assert schema["properties"]["session_id"]["pattern"] == "^([a-z][a-z0-9]{0,31}_)?[0-9a-f]{16}$", t
            assert "session_id" in schema["required"], t
        out_schema = t["outputSchema"]["properties"]
        assert out_schema["data"]["type"] == "object" and out_schema["data"].get("properties"), t
        assert set(out_schema["error"]["required"]) == {"code", "message", "http_status"}, t
        assert set(t["annotations"]) >= {"readOnlyHint", "idempotentHint"}, t
    for name in ("sandbox_health", "sandbox_list_sessions", "sandbox_session_status", "sandbox_session_metrics",
                 "sandbox_list_ports"):
        assert tools[name]["annotations"]["readOnlyHint"] is True, name
    assert tools["sandbox_close_session"]["annotations"]["destructiveHint"] is True

    create = tools["sandbox_create_session"]["inputSchema"]["properties"]
    assert create["user"]["pattern"] and create["workspace"]["pattern"], create
    assert create["exec_mode"]["enum"] == ["unit", "session"], create
    assert (create["cpu_quota"]["minimum"], create["cpu_quota"]["maximum"]) == (1, 100000), create
    assert create["tasks_max"]["minimum"] == 1 and create["ttl_s"]["minimum"] == 1, create
    assert create["memory_max"]["pattern"] == "^[0-9]{1,23}[KMGT]?$", create
    net = create["network"]
    assert net["additionalProperties"] is False, net
    assert net["properties"]["mode"]["enum"] == ["none", "proxy", "host"], net
    for k in ("allow", "deny"):
        lst = net["properties"][k]
        assert lst["maxItems"] == 256 and lst["items"]["pattern"] and lst["items"]["maxLength"] == 255, lst
    close = tools["sandbox_close_session"]["inputSchema"]["properties"]
    assert close["purge"]["type"] == "boolean" and close["confirm"]["type"] == "boolean", close

    health, extra = out["calls"]
    d = ok(health)
    real = api.get("/v1/health").json
    assert d["sandboxd"]["status"] == real["status"] and d["sandboxd"]["version"] == real["version"], d
    assert isinstance(d["sandboxd"]["sessions"], int) and "pool" in d["sandboxd"], d
    srv = d["server"]
    assert (srv["jobs"], srv["timeout_ms"], srv["kill_grace_ms"]) == (3, 7000, 2000), srv
    assert srv["host_paths"] == [{"dir": "/tmp", "writable": True}], srv
    assert srv["transport"] == "dbus" and srv["workspace"] == "mcp" and srv["name"] == "sandboxctl", srv
    refused(extra, "unknown_field", 400, "verbose")


def test_create_status_list_and_close(api, user):
    out = mcp([
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "main", "memory_max": "256M",
                                                         "cpu_quota": 150, "tasks_max": 77, "ttl_s": 600,
                                                         "network": {"mode": "none"}}},
        {"name": "sandbox_session_status", "arguments": {"session_id": "$session"}},
        {"name": "sandbox_list_sessions", "arguments": {"user": user}},
        {"name": "sandbox_close_session", "arguments": {"session_id": "$session", "purge": True}},
        {"name": "sandbox_close_session", "arguments": {"session_id": "$session", "purge": True, "confirm": False}},
        {"name": "sandbox_session_status", "arguments": {"session_id": "0123456789abcdef"}},
        {"name": "sandbox_session_status", "arguments": {"session_id": "not-a-session"}},
        {"name": "sandbox_session_status", "arguments": {}},
        {"name": "sandbox_list_sessions", "arguments": {"user": "Bad User"}},
        {"name": "sandbox_close_session", "arguments": {"session_id": "0123456789abcdef"}},
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "main"}},
    ])
    (created, status, listed, no_confirm, confirm_false, unknown, bad_id, no_id, bad_user, close_unknown,
     again) = out["calls"]
    c = ok(created)
    sid = c["id"]
    assert c["created"] is True and c["network"] == {"mode": "none"}, c
    assert c["limits"] == {"memory_max": 256 << 20, "cpu_quota": 150, "tasks_max": 77}, c
    s = ok(status)
    real = api.get_session(sid)
    assert s["state"] == "active" and s["network"]["mode"] == "none" and real["network"]["mode"] == "none", s
    assert s["ttl_s"] == 600 == real["ttl_s"] and s["limits"] == real["limits"], s
    assert s["exec_mode"] == real["exec_mode"] and s["disk_bytes"] >= 0 and s["frozen"] is False, s
    assert [x["id"] for x in ok(listed)["sessions"]] == [sid], listed

    # purge without confirm: refused, nothing closed
    refused(no_confirm, "invalid_value", 400, "confirm")
    refused(confirm_false, "invalid_value", 400, "confirm")
    assert api.get_session(sid)["state"] == "active"
    a = ok(again)
    assert a["id"] == sid and a["created"] is False, a

    refused(unknown, "not_found", 404)
    refused(bad_id, "invalid_value", 400, "session id")
    refused(no_id, "missing_field", 400, "session_id")
    refused(bad_user, "invalid_name", 400, "user")
    refused(close_unknown, "not_found", 404)

    # with confirm the workspace goes too
    api.post("/v1/sessions/%s/commands" % sid, {"argv": ["sh", "-c", "echo x > kept"]})
    out = mcp([{"name": "sandbox_close_session", "arguments": {"session_id": sid, "purge": True, "confirm": True}},
               {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "main"}},
               {"name": "sandbox_exec", "arguments": {"session_id": "$session", "command": "ls"}}])
    closed, new, ls = out["calls"]
    assert ok(closed)["state"] == "closed" and api.get_session(sid)["state"] == "closed", closed
    assert ok(new)["id"] != sid and ok(ls)["stdout"] == "", ls


def test_create_refusals_create_nothing(api, user):
    out = mcp([
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "q", "cpu_quota": MAX_CPU_QUOTA + 1}},
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "q", "cpu_quota": 0}},
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "q", "memory_max": "12Q"}},
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "q", "memory_max": "1M"}},
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "q", "ttl_s": 0}},
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "q", "exec_mode": "warp"}},
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "q", "network": {"mode": "warp"}}},
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "q", "network": {"mode": "host"}}},
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "q", "network": {"rules": 1}}},
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "q", "network": "none"}},
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "Q!"}},
    ])
    (quota, zero, mem, mem_small, ttl, mode, net_mode, host, net_field, net_str, bad_ws) = out["calls"]
    refused(quota, "limit_exceeded", 400, "cpu_quota")  # sandboxd's MaxCPUQuota=
    refused(zero, "invalid_value", 400, "cpu_quota")
    refused(mem, "invalid_value", 400, "memory_max")
    refused(mem_small, "invalid_value", 400, "memory_max")  # sandboxd: at least 4M
    refused(ttl, "invalid_value", 400, "ttl_s")
    refused(mode, "invalid_value", 400, "exec_mode")
    refused(net_mode, "invalid_value", 400, "network.mode")
    refused(host, "forbidden", 403, "host")  # this tenant is not in HostModeTenants=
    refused(net_field, "unknown_field", 400, "network.rules")
    refused(net_str, "invalid_type", 400, "network")
    refused(bad_ws, "invalid_name", 400, "workspace")
    assert sessions_of(api, user) == []


@pytest.mark.parametrize("transport", ["dbus", "http"])
def test_network_lists(api, user, transport):
    out = mcp([
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "net", "network": {
            "mode": "proxy", "allow": ["example.com", "*.example.org"], "deny": ["Bad.Example.COM."]}}},
        {"name": "sandbox_session_status", "arguments": {"session_id": "$session"}},
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "net2", "network": {
            "mode": "none", "deny": ["example.com"]}}},
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "net3", "network": {
            "mode": "proxy", "allow": ["not a domain"]}}},
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "net4", "network": {
            "allow": ["a.example"] * 257}}},
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "net5", "network": {
            "deny": [7]}}},
    ], "--transport=" + transport)
    created, status, none_deny, bad_domain, too_many, not_string = out["calls"]
    c = ok(created)
    want = {"mode": "proxy", "allow": ["example.com", "*.example.org"], "deny": ["bad.example.com"]}
    assert c["network"] == want and ok(status)["network"] == want, c
    assert api.get_session(c["id"])["network"] == want
    refused(none_deny, "invalid_value", 400, "proxy")
    refused(bad_domain, "invalid_value", 400, "network.allow")
    refused(too_many, "invalid_value", 400, "256")
    refused(not_string, "invalid_type", 400, "network.deny")
    assert [s["workspace"] for s in sessions_of(api, user)] == ["net"]


def test_freeze_and_thaw(api, user):
    s = api.create_session(user, "freeze")
    sid = s["id"]
    out = mcp([
        {"name": "sandbox_freeze_session", "arguments": {"session_id": sid}},
        {"name": "sandbox_session_status", "arguments": {"session_id": sid}},
        {"name": "sandbox_freeze_session", "arguments": {"session_id": "0123456789abcdef"}},
        {"name": "sandbox_thaw_session", "arguments": {"session_id": "x"}},
    ])
    frozen, status, unknown, bad = out["calls"]
    refused(unknown, "not_found", 404)
    refused(bad, "invalid_value", 400)
    if frozen.get("isError"):
        # a host without cgroup v2 (sandboxd-api(7)): refused, and nothing changed
        refused(frozen, "unsupported", 501, "cgroup v2")
        assert ok(status)["frozen"] is False and api.get_session(sid)["frozen"] is False
        out = mcp([{"name": "sandbox_thaw_session", "arguments": {"session_id": sid}}])
        refused(out["calls"][0], "unsupported", 501)
        return
    assert ok(frozen)["frozen"] is True and ok(status)["frozen"] is True, frozen
    assert api.get_session(sid)["frozen"] is True
    # a command started while frozen waits for the thaw
    rid = start_command(api, sid, ["sh", "-c", "echo thawed"])["request_id"]
    time.sleep(1)
    assert api.get("/v1/sessions/%s/commands/%s" % (sid, rid)).json["terminal"] is False
    out = mcp([{"name": "sandbox_thaw_session", "arguments": {"session_id": sid}},
               {"name": "sandbox_thaw_session", "arguments": {"session_id": sid}}])
    thawed, again = out["calls"]
    assert ok(thawed)["frozen"] is False and ok(again)["frozen"] is False, thawed
    assert api.get_session(sid)["frozen"] is False
    assert wait_terminal(api, sid, rid)["stdout"] == "thawed\n"


def test_touch_moves_expiry(api, user):
    s = api.create_session(user, "touch", ttl_s=600)
    sid = s["id"]
    out = mcp([
        {"name": "sandbox_session_status", "arguments": {"session_id": sid}},
        {"sleep_ms": 1500},
        {"name": "sandbox_touch_session", "arguments": {"session_id": sid}},
        {"name": "sandbox_touch_session", "arguments": {"session_id": "0123456789abcdef"}},
        {"name": "sandbox_touch_session", "arguments": {"session_id": sid, "ttl_s": 5}},
    ])
    before, _, touched, unknown, extra = out["calls"]
    b, t = ok(before), ok(touched)
    assert t["id"] == sid and t["expires_at_usec"] >= b["expires_at_usec"] + 1000000, (b, t)
    assert t["last_activity_usec"] > b["last_activity_usec"], (b, t)
    assert t["expires_at_usec"] == t["last_activity_usec"] + 600 * 1000000, t
    assert api.get_session(sid)["expires_at_usec"] == t["expires_at_usec"]
    refused(unknown, "not_found", 404)
    refused(extra, "unknown_field", 400, "ttl_s")


@pytest.mark.time_limit(180)
def test_metrics_of_a_busy_session(api, user):
    s = api.create_session(user, "metrics")
    sid = s["id"]
    rid = start_command(api, sid, {"argv": ["sh", "-c", "while :; do :; done"], "timeout_ms": 60000})["request_id"]
    wait_command_running(api, sid, rid)
    out = mcp([
        {"name": "sandbox_session_metrics", "arguments": {"session_id": sid}},
        {"sleep_ms": 1500},
        {"name": "sandbox_session_metrics", "arguments": {"session_id": sid}},
        {"name": "sandbox_session_metrics", "arguments": {"session_id": "0123456789abcdef"}},
        {"name": "sandbox_session_metrics", "arguments": {"session_id": sid, "x": 1}},
    ])
    first, _, second, unknown, extra = out["calls"]
    a, b = ok(first), ok(second)
    real = api.get_session(sid)
    for d in (a, b):
        assert d["session_id"] == sid and d["state"] == "active" and d["limits"] == real["limits"], d
        assert d["running_commands"] == 1 and d["commands"] >= 1 and d["disk_bytes"] >= 0, d
        if EXEC_MODE == "unit" or memory_cgroup_v2():
            assert d["tasks"] >= 1 and d["memory_bytes"] > 0, d
        # else (exec mode session, controllers on cgroup v1): sandboxd has no memory or tasks
        # of a running command (sandboxd(8), EXEC MODES), and the sums are what it has
        assert d["tasks"] == sum(x["tasks"] for x in d["running"]), d
        assert d["memory_bytes"] == sum(x["memory_bytes"] for x in d["running"]), d
        assert [x["request_id"] for x in d["running"]] == [rid], d
    assert b["cpu_usec"] > 0 and b["cpu_usec"] > a["cpu_usec"], (a, b)
    assert b["running"][0]["cpu_usec"] == b["cpu_usec"] or b["commands"] > 1, b
    refused(unknown, "not_found", 404)
    refused(extra, "unknown_field", 400)

    # once it ended: no running command, its CPU time stays counted
    api.post("/v1/sessions/%s/commands/%s/signal" % (sid, rid), {"signal": "SIGKILL"})
    wait_terminal(api, sid, rid)
    out = mcp([{"name": "sandbox_session_metrics", "arguments": {"session_id": sid}}])
    c = ok(out["calls"][0])
    assert c["running_commands"] == 0 and c["running"] == [] and c["tasks"] == 0 and c["memory_bytes"] == 0, c
    assert c["cpu_usec"] >= b["cpu_usec"], (b, c)


@pytest.mark.parametrize("transport", ["dbus", "http"])
def test_wrong_node_is_a_clear_tool_error(api, transport):
    """A session id of another node (zz_...): the tool error wrong_node names the node."""
    sid = "zz_" + "0123456789abcdef"
    out = mcp([
        {"name": "sandbox_session_status", "arguments": {"session_id": sid}},
        {"name": "sandbox_exec", "arguments": {"session_id": sid, "argv": ["true"]}},
        {"name": "sandbox_touch_session", "arguments": {"session_id": sid}},
    ], "--transport=" + transport)
    for call in out["calls"]:
        err = refused(call, "wrong_node", 421, "zz")
        # over D-Bus, libsandboxd takes it from Error.WrongNode's message (the id's prefix)
        assert err["node"] == "zz", err
