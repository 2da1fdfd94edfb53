# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxctl mcp's resources (resources/list, resources/templates/list, resources/read) and
their subscriptions (resources/subscribe, notifications/resources/updated and list_changed),
with the official MCP SDK as the client (mcp-client.mjs), checked against sandboxd's HTTP
API."""

import json
import os
import select
import subprocess
import time

import pytest

from conftest import unique_user
from test_mcp import SANDBOXCTL, mcp

STATIC = {"sandboxd://runtime", "sandboxd://sessions", "sandboxd://policy", "sandboxd://schemas/session-create"}
NOT_FOUND = -32002


def result(call):
    assert "result" in call, call
    return call["result"]


def content(call, uri):
    contents = result(call)["contents"]
    assert len(contents) == 1, contents
    c = contents[0]
    assert c["uri"] == uri and c["mimeType"] == "application/json", c
    return json.loads(c["text"])


def rpc_error(call, code, *words):
    assert "rpcError" in call, call
    assert call["rpcError"]["code"] == code, call
    for w in words:
        assert w in call["rpcError"]["message"], call
    return call["rpcError"]


@pytest.fixture
def sid(api):
    s = api.create_session(unique_user(), "res")
    yield s["id"]
    api.request("DELETE", "/v1/sessions/" + s["id"])


def live_sessions(api):
    return {"sandboxd://sessions/" + s["id"] for s in api.get("/v1/sessions").json["sessions"]}


def test_list_templates_and_read(api, sid):
    uri = "sandboxd://sessions/" + sid
    before = live_sessions(api)
    out = mcp([
        {"method": "resources/list", "params": {}},
        {"method": "resources/templates/list", "params": {}},
        {"method": "resources/read", "params": {"uri": "sandboxd://runtime"}},
        {"method": "resources/read", "params": {"uri": "sandboxd://sessions"}},
        {"method": "resources/read", "params": {"uri": uri}},
        {"method": "resources/read", "params": {"uri": "sandboxd://policy"}},
        {"method": "resources/read", "params": {"uri": "sandboxd://schemas/session-create"}},
    ], "--jobs=2", "--timeout=9s")
    assert out["capabilities"]["resources"] == {"subscribe": True, "listChanged": True}, out["capabilities"]
    listed, templates, runtime, sessions, session, policy, schema = out["calls"]

    resources = {r["uri"]: r for r in result(listed)["resources"]}
    assert set(resources) >= STATIC | {uri}, resources
    for r in resources.values():
        assert r["name"] and r["mimeType"] == "application/json" and r["description"], r
    assert sid in resources[uri]["title"], resources[uri]
    # one per session sandboxd lists, no more (other tests' sessions come and go meanwhile)
    live = before | live_sessions(api)
    assert set(resources) - STATIC <= live, (set(resources) - STATIC) - live

    t = result(templates)["resourceTemplates"]
    assert [x["uriTemplate"] for x in t] == ["sandboxd://sessions/{session_id}"], t
    assert t[0]["mimeType"] == "application/json" and t[0]["name"], t

    rt = content(runtime, "sandboxd://runtime")
    health = api.get("/v1/health").json
    assert rt["sandboxd"]["reachable"] is True, rt
    assert rt["sandboxd"]["version"] == health["version"] and rt["sandboxd"]["status"] == health["status"], rt
    assert rt["sandboxd"]["pool"]["profile"] == health["pool"]["profile"], rt
    assert (rt["server"]["jobs"], rt["server"]["timeout_ms"], rt["server"]["transport"]) == (2, 9000, "dbus"), rt
    assert rt["api"]["network_modes"] == ["none", "proxy", "host"], rt

    assert sid in [s["id"] for s in content(sessions, "sandboxd://sessions")["sessions"]]
    s = content(session, uri)
    real = api.get_session(sid)
    for k in ("id", "user", "workspace", "state", "limits", "exec_mode", "ttl_s", "frozen", "network"):
        assert s[k] == real[k], (k, s, real)

    p = content(policy, "sandboxd://policy")
    assert p["exposed_by_api"] is False and p["network"]["modes"] == ["none", "proxy", "host"], p
    assert p["limits"]["request_bounds"]["cpu_quota"] == {"minimum": 1, "maximum": 100000}, p
    assert p["limits"]["maxima"] is None and "MaxCPUQuota=" in p["limits"]["maxima_source"], p

    tool = [x for x in out["tools"] if x["name"] == "sandbox_create_session"][0]
    assert content(schema, "sandboxd://schemas/session-create") == tool["inputSchema"]


def test_unknown_resources(api, sid):
    out = mcp([
        {"method": "resources/read", "params": {"uri": "sandboxd://nope"}},
        {"method": "resources/read", "params": {"uri": "sandboxd://sessions/0123456789abcdef"}},
        {"method": "resources/read", "params": {"uri": "sandboxd://sessions/xyz"}},
        {"method": "resources/read", "params": {"uri": "file:///etc/passwd"}},
        {"method": "resources/read", "params": {"uri": "sandboxd://" + "a" * 300}},
        {"method": "resources/read", "params": {}},
        {"method": "resources/subscribe", "params": {"uri": "sandboxd://nope"}},
        {"method": "resources/subscribe", "params": {"uri": "sandboxd://sessions/0123456789abcdef"}},
        {"method": "resources/unsubscribe", "params": {"uri": "sandboxd://never-subscribed"}},
        {"method": "resources/read", "params": {"uri": "sandboxd://sessions/" + sid}},
    ])
    nope, unknown_session, bad_id, other, too_long, no_uri, sub_nope, sub_unknown, unsub, fine = out["calls"]
    assert rpc_error(nope, NOT_FOUND, "sandboxd://nope")["data"] == {"uri": "sandboxd://nope"}, nope
    assert rpc_error(unknown_session, NOT_FOUND, "sandboxd://sessions/0123456789abcdef")["data"] == {
        "uri": "sandboxd://sessions/0123456789abcdef"}, unknown_session
    rpc_error(bad_id, NOT_FOUND, "sandboxd://sessions/xyz")
    rpc_error(other, NOT_FOUND, "file:///etc/passwd")
    rpc_error(too_long, -32602, "256")
    rpc_error(no_uri, -32602, "uri")
    rpc_error(sub_nope, NOT_FOUND, "sandboxd://nope")
    rpc_error(sub_unknown, NOT_FOUND, "0123456789abcdef")
    assert result(unsub) == {}, unsub
    assert content(fine, "sandboxd://sessions/" + sid)["id"] == sid


@pytest.mark.time_limit(180)
def test_subscriptions_notify(api, sid):
    uri = "sandboxd://sessions/" + sid
    user = unique_user()
    out = mcp([
        {"method": "resources/subscribe", "params": {"uri": uri}},                      # 0
        {"method": "resources/subscribe", "params": {"uri": "sandboxd://sessions"}},    # 1
        {"method": "resources/subscribe", "params": {"uri": "sandboxd://policy"}},      # 2
        {"method": "resources/subscribe", "params": {"uri": uri}},                      # 3: again: one
        {"sleep_ms": 3000},                                                              # 4: nothing changed
        {"name": "sandbox_exec", "arguments": {"session_id": sid, "argv": ["true"]}},    # 5: commands 0 -> 1
        {"wait": "notifications/resources/updated", "uri": uri, "since": 5, "timeout_ms": 20000},  # 6
        {"method": "resources/read", "params": {"uri": uri}},                            # 7
        {"name": "sandbox_freeze_session", "arguments": {"session_id": sid}},            # 8
        {"wait": "notifications/resources/updated", "uri": uri, "since": 8, "timeout_ms": 20000},  # 9
        {"name": "sandbox_thaw_session", "arguments": {"session_id": sid}},              # 10
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "new"}},  # 11
        {"wait": "notifications/resources/list_changed", "since": 11, "timeout_ms": 20000},   # 12
        {"wait": "notifications/resources/updated", "uri": "sandboxd://sessions", "since": 11,
         "timeout_ms": 20000},                                                           # 13
        {"method": "resources/unsubscribe", "params": {"uri": uri}},                     # 14
        {"method": "resources/list", "params": {}},                                      # 15
    ])
    calls = out["calls"]
    try:
        for i in (0, 1, 2, 3, 14):
            assert result(calls[i]) == {}, calls[i]
        n = calls[6]["notification"]
        assert n and n["method"] == "notifications/resources/updated" and n["params"] == {"uri": uri}, calls[6]
        assert content(calls[7], uri)["commands"] == 1
        if calls[8].get("isError"):  # no cgroup v2: nothing changed, nothing came
            assert calls[8]["body"]["error"]["code"] == "unsupported", calls[8]
            assert calls[9]["notification"] is None, out["notifications"]
        else:
            assert calls[9]["notification"] is not None, out["notifications"]
        assert calls[12]["notification"] is not None, out["notifications"]
        assert calls[13]["notification"] is not None, out["notifications"]
        new_id = calls[11]["body"]["data"]["id"]
        assert "sandboxd://sessions/" + new_id in {r["uri"] for r in result(calls[15])["resources"]}
        # nothing for the session before it changed, one a change (subscribed twice), never for
        # what did not change
        mine = [n for n in out["notifications"] if (n["params"] or {}).get("uri") == uri]
        assert mine and min(n["after"] for n in mine) >= 5, out["notifications"]
        # the command's start and end at most: not one more for the second subscription
        assert len([n for n in mine if n["after"] < 8]) <= 2, out["notifications"]
        assert not [n for n in out["notifications"] if (n["params"] or {}).get("uri") == "sandboxd://policy"]
    finally:
        for s in api.get("/v1/sessions?user=" + user).json["sessions"]:
            api.request("DELETE", "/v1/sessions/" + s["id"])


def test_watcher_ends_with_stdin(api, sid):
    """A subscription's watcher thread does not keep the server alive once stdin ends."""
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": "sandboxd://sessions/" + sid}},
    ]
    p = subprocess.Popen([SANDBOXCTL, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=dict(os.environ, LANG="C.UTF-8"))
    try:
        p.stdin.write(("\n".join(json.dumps(m) for m in msgs) + "\n").encode())
        p.stdin.flush()
        answers = {}
        deadline = time.monotonic() + 30
        while len(answers) < 2 and time.monotonic() < deadline:
            if select.select([p.stdout], [], [], 1)[0]:
                m = json.loads(p.stdout.readline())
                answers[m.get("id")] = m
        assert answers.get(2, {}).get("result") == {}, answers
        time.sleep(2.5)  # the watcher polls at least once
        began = time.monotonic()
        p.stdin.close()
        assert p.wait(timeout=10) == 0, p.stderr.read()
        assert time.monotonic() - began < 5
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
