# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxctl mcp with the official MCP SDK as the client (tests/integration/mcp-client.mjs).

The SDK comes from the npm registry: tools/dev installs it (npm ci from mcp-sdk/'s lock)
into the build directory before the testbed boots, which has no network, and passes
its place in SANDBOXD_MCP_SDK."""

import json
import os
import shutil
import subprocess

import pytest

from conftest import EXEC_MODE, unique_user

SDK = os.environ.get("SANDBOXD_MCP_SDK")
SANDBOXCTL = os.environ.get("SANDBOXD_TEST_SANDBOXCTL", "/usr/bin/sandboxctl")
CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mcp-client.mjs")

pytestmark = pytest.mark.skipif(not SDK, reason="SANDBOXD_MCP_SDK is not set: run through tools/dev test, "
                                                "which installs the MCP SDK")


def mcp(calls, *args):
    node = shutil.which("node")
    assert node, "node is not installed"
    assert os.path.isdir(os.path.join(SDK, "node_modules/@modelcontextprotocol/sdk")), \
        "the MCP SDK is missing in %s" % SDK
    p = subprocess.run([node, CLIENT, SDK, SANDBOXCTL, json.dumps(calls)] + list(args),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, "the MCP client failed (%d)\nstdout: %s\nstderr: %s" % (p.returncode, p.stdout, p.stderr)
    return json.loads(p.stdout)


def test_lists_tools_and_runs_a_command(api):
    user = unique_user()
    out = mcp([{"name": "sandbox_run",
                "arguments": {"argv": ["sh", "-c", "echo hello from mcp; echo oops >&2; exit 3"]}}],
              "--user=" + user)

    assert out["server"]["name"] == "sandboxctl"
    assert "tools" in out["capabilities"]
    names = {t["name"] for t in out["tools"]}
    assert names >= {"sandbox_create_session", "sandbox_list_sessions", "sandbox_exec", "sandbox_run",
                     "sandbox_read_file", "sandbox_write_file", "sandbox_list_files", "sandbox_close_session"}, names
    for t in out["tools"]:
        assert t["description"] and t["inputSchema"]["type"] == "object", t

    call = out["calls"][0]
    assert call["isError"] is False, call
    body = call["body"]
    assert body["ok"] is True and call["structured"] == body, call
    d = body["data"]
    assert d["status"] == "failed" and d["exit_code"] == 3 and d["reason"] == "exit-code", d
    assert d["stdout"] == "hello from mcp\n" and d["stderr"] == "oops\n", d
    assert d["truncation"]["stdout"] == {"truncated": False, "total_bytes": 15, "returned_bytes": 15,
                                         "kept_bytes": 15, "sandboxd_truncated": False}, d["truncation"]
    # it really ran in sandboxd, in the session of that user
    sess = api.get("/v1/sessions/" + d["session_id"]).json
    assert sess["user"] == user and sess["workspace"] == "mcp", sess
    api.request("DELETE", "/v1/sessions/" + d["session_id"])


def test_session_exec_truncation_and_close(api):
    user = unique_user()
    out = mcp([
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "tools", "tasks_max": 64}},
        {"name": "sandbox_exec", "arguments": {"session_id": "$session", "command": "seq 1 20000",
                                               "max_output_bytes": 100}},
        {"name": "sandbox_exec", "arguments": {"session_id": "$session", "argv": ["cat"], "stdin": "fed",
                                               "env": {"A": "1"}}},
        {"name": "sandbox_exec", "arguments": {"session_id": "$session", "argv": ["sleep", "30"],
                                               "timeout_ms": 500}},
        {"name": "sandbox_list_sessions", "arguments": {"user": user}},
        {"name": "sandbox_close_session", "arguments": {"session_id": "$session"}},
        {"name": "sandbox_exec", "arguments": {"session_id": "$session", "argv": ["true"]}},
        {"name": "sandbox_exec", "arguments": {"session_id": "$session"}},
        {"name": "no_such_tool", "arguments": {}},
    ])
    created, seq, cat, slow, listed, closed, after, bad, unknown = out["calls"]

    assert created["body"]["ok"] and created["body"]["data"]["limits"]["tasks_max"] == 64, created
    sid = created["body"]["data"]["id"]

    d = seq["body"]["data"]
    total = len("".join("%d\n" % i for i in range(1, 20001)))
    assert d["status"] == "succeeded" and d["stdout"] == "".join("%d\n" % i for i in range(1, 100))[:100], d
    assert d["truncation"]["stdout"] == {"truncated": True, "total_bytes": total, "returned_bytes": 100,
                                         "kept_bytes": total, "sandboxd_truncated": False}, d["truncation"]

    assert cat["body"]["data"]["stdout"] == "fed", cat
    assert slow["body"]["data"]["status"] == "timed_out", slow
    assert [s["id"] for s in listed["body"]["data"]["sessions"]] == [sid], listed
    assert closed["body"]["ok"] and closed["body"]["data"]["state"] == "closed", closed

    # failures are results with ok:false, not protocol errors
    assert after["isError"] is True and after["body"]["ok"] is False, after
    assert after["body"]["error"]["http_status"] == 409 and after["body"]["error"]["code"] == "session_not_active", after
    assert bad["isError"] is True and "argv" in bad["body"]["error"]["message"], bad
    assert unknown.get("protocolError") or unknown.get("isError"), unknown


def test_create_session_exec_mode(api):
    user = unique_user()
    out = mcp([
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "modes", "exec_mode": "session"}},
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "default"}},
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "warp", "exec_mode": "warp"}},
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "num", "exec_mode": 1}},
    ])
    tool = [t for t in out["tools"] if t["name"] == "sandbox_create_session"][0]
    assert tool["inputSchema"]["properties"]["exec_mode"]["enum"] == ["unit", "session"], tool
    session, default, warp, num = out["calls"]
    assert session["body"]["ok"] and session["body"]["data"]["exec_mode"] == "session", session
    assert api.get_session(session["body"]["data"]["id"])["exec_mode"] == "session"
    assert default["body"]["ok"] and default["body"]["data"]["exec_mode"] == EXEC_MODE, default  # the lane's
    assert warp["isError"] is True and warp["body"]["error"]["code"] == "invalid_value", warp
    assert "exec_mode" in warp["body"]["error"]["message"], warp
    assert num["isError"] is True and "exec_mode" in num["body"]["error"]["message"], num
    # the refused ones created nothing
    listed = api.get("/v1/sessions?user=" + user).json["sessions"]
    assert sorted(s["workspace"] for s in listed) == ["default", "modes"], listed
    for s in listed:
        api.request("DELETE", "/v1/sessions/" + s["id"])


def files_api_exists(api):
    s = api.create_session(unique_user(), "probe")
    r = api.get("/v1/sessions/%s/files/" % s["id"])
    api.request("DELETE", "/v1/sessions/" + s["id"])
    return not (r.status == 404 and b"route" in r.body)


def test_file_tools(api):
    if not files_api_exists(api):
        pytest.skip("the file API (/v1/sessions/{sid}/files/) is not on this branch yet")
    user = unique_user()
    out = mcp([
        {"name": "sandbox_create_session", "arguments": {"user": user, "workspace": "files"}},
        {"name": "sandbox_write_file", "arguments": {"session_id": "$session", "path": "notes/a.txt",
                                                     "content": "written by mcp\n", "make_parents": True}},
        {"name": "sandbox_exec", "arguments": {"session_id": "$session", "argv": ["cat", "notes/a.txt"]}},
        {"name": "sandbox_write_file", "arguments": {"session_id": "$session", "path": "b.bin",
                                                     "content": "/wA=", "encoding": "base64"}},
        {"name": "sandbox_read_file", "arguments": {"session_id": "$session", "path": "b.bin"}},
        {"name": "sandbox_list_files", "arguments": {"session_id": "$session"}},
        {"name": "sandbox_close_session", "arguments": {"session_id": "$session", "purge": True}},
    ])
    _, w, cat, _, r, ls, _ = out["calls"]
    assert w["body"]["ok"], w
    assert cat["body"]["data"]["stdout"] == "written by mcp\n", cat
    assert r["body"]["data"]["content_b64"] == "/wA=", r
    names = {e["name"]: e["type"] for e in ls["body"]["data"]["entries"]}
    assert names.get("notes") == "dir" and names.get("b.bin") == "file", ls


def test_port_tools(api):
    from test_ports import PORT, curl_tcp, curl_unix, listing_via, ports_path, serve

    s = api.create_session(unique_user(), "ports")
    sid = s["id"]
    try:
        serve(api, sid)
        out = mcp([
            {"name": "sandbox_expose_port", "arguments": {"session_id": sid, "port": PORT, "host": True}},
            {"name": "sandbox_list_ports", "arguments": {"session_id": sid}},
        ])
        tools = {t["name"]: t for t in out["tools"]}
        for name in ("sandbox_expose_port", "sandbox_unexpose_port"):
            schema = tools[name]["inputSchema"]
            assert schema["required"] == ["session_id", "port"], schema
            port = schema["properties"]["port"]
            assert (port["type"], port["minimum"], port["maximum"]) == ("integer", 1, 65535), port
        assert tools["sandbox_expose_port"]["inputSchema"]["properties"]["host"]["type"] == "boolean"
        assert tools["sandbox_list_ports"]["inputSchema"]["required"] == ["session_id"]

        exposed, listed = out["calls"]
        assert exposed["isError"] is False and exposed["structured"] == exposed["body"], exposed
        p = exposed["body"]["data"]
        assert p["port"] == PORT and p["url"] == "http://127.0.0.1:%d/" % p["host_port"], p
        assert p == api.get(ports_path(sid, PORT)).json
        assert listed["body"]["data"] == api.get(ports_path(sid)).json == {"ports": [p]}, listed
        # what the tool said reaches the server in the session
        listing_via(lambda: curl_unix(p["socket"]))
        listing_via(lambda: curl_tcp(p["host_port"]))

        out = mcp([
            {"name": "sandbox_expose_port", "arguments": {"session_id": sid, "port": 80}},
            {"name": "sandbox_expose_port", "arguments": {"session_id": sid, "port": 70000}},
            {"name": "sandbox_expose_port", "arguments": {"session_id": sid, "port": 9001, "host": "yes"}},
            {"name": "sandbox_expose_port", "arguments": {"session_id": sid}},
            {"name": "sandbox_expose_port", "arguments": {"session_id": sid, "port": PORT, "host": False}},
            {"name": "sandbox_unexpose_port", "arguments": {"session_id": sid, "port": PORT}},
            {"name": "sandbox_unexpose_port", "arguments": {"session_id": sid, "port": PORT}},
            {"name": "sandbox_list_ports", "arguments": {"session_id": sid, "extra": 1}},
            {"name": "sandbox_list_ports", "arguments": {"session_id": sid}},
        ])
        outside, too_big, host_str, no_port, other_host, removed, again, extra, empty = out["calls"]
        assert outside["isError"] and outside["body"]["error"]["code"] == "invalid_value", outside
        assert outside["body"]["error"]["http_status"] == 400, outside
        assert too_big["isError"] and "1 to 65535" in too_big["body"]["error"]["message"], too_big
        assert host_str["isError"] and "host" in host_str["body"]["error"]["message"], host_str
        assert no_port["isError"] and "port" in no_port["body"]["error"]["message"], no_port
        assert other_host["isError"] and other_host["body"]["error"]["code"] == "busy", other_host
        assert removed["isError"] is False and removed["body"]["data"] == {"port": PORT, "exposed": False}, removed
        assert again["isError"] and again["body"]["error"]["code"] == "port_not_exposed", again
        assert again["body"]["error"]["http_status"] == 404, again
        assert extra["isError"] and "extra" in extra["body"]["error"]["message"], extra
        assert empty["body"]["data"] == {"ports": []} == api.get(ports_path(sid)).json, empty
    finally:
        api.request("DELETE", "/v1/sessions/" + sid)
