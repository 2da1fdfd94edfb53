# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxctl mcp driven by a third party's client: the MCP Inspector's CLI
(@modelcontextprotocol/inspector-cli, `--cli --method ...`), which tools/dev installs from
the lock in mcp-sdk/ beside the SDK. It lists the tools and calls every one of them, each
from the table CALLS: a tool the server lists without an entry there fails the test, so a
new tool comes with its call. Resources and prompts are listed (and read) once the server
advertises them in its capabilities; until then they must be refused as unknown methods."""

import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import unique_user
from test_mcp import SANDBOXCTL, SDK, mcp

pytestmark = pytest.mark.skipif(not SDK, reason="SANDBOXD_MCP_SDK is not set: run through tools/dev test, "
                                                "which installs the MCP SDK and the MCP Inspector CLI")

# a port the sessions' servers would listen on; the session is in the default network
# mode (proxy), which can expose ports (network mode none cannot: test_ports.py)
PORT = 8000
# generous, as in test_mcp_terminal.py: a call returns early once the output was quiet
WAIT = 30000
# the host directory the server may copy files from and to (--host-path=), made by the test
HOST_DIR = "/tmp/sbx-mcp-inspector-host"


class Call:
    """How the test calls a tool: ARGS (a value "$name" is CTX[name], saved by an earlier
    call), EXPECT(data, ctx) true for its result's data, SAVE {ctx name: data key}, and
    REFUSALS: error codes that are an answer too, where the host cannot do it (freezing
    without cgroup v2)."""

    def __init__(self, args, expect, save=None, refusals=()):
        self.args, self.expect, self.save, self.refusals = args, expect, save or {}, refusals


def names(entries):
    return sorted(e["name"] for e in entries)


# Every tool sandboxctl mcp lists, called in this order in one session of a user of its own.
CALLS = {
    "sandbox_health": Call(
        {},
        lambda d, c: d["sandboxd"]["status"] and d["server"]["name"] == "sandboxctl"),
    "sandbox_create_session": Call(
        {"user": "$user", "workspace": "inspector"},
        lambda d, c: re.fullmatch(r"[a-z][a-z0-9]{0,31}_[0-9a-f]{16}", d["id"]) and d["user"] == c["user"], save={"session": "id"}),
    "sandbox_list_sessions": Call(
        {"user": "$user"},
        lambda d, c: [s["id"] for s in d["sessions"]] == [c["session"]]),
    "sandbox_exec": Call(
        {"session_id": "$session", "argv": ["sh", "-c", "echo from-$((6*7))"]},
        lambda d, c: d["status"] == "succeeded" and d["stdout"] == "from-42\n"),
    # the same scope: the session made above
    "sandbox_run": Call(
        {"user": "$user", "workspace": "inspector", "command": "echo ran; exit 3"},
        lambda d, c: d["exit_code"] == 3 and d["stdout"] == "ran\n" and d["session_id"] == c["session"]),
    "sandbox_exec_start": Call(
        {"session_id": "$session", "argv": ["sh", "-c", "echo started; read x; echo got-$x; exec sleep 100"],
         "stdin_stream": True},
        lambda d, c: d["cursor"] == 0 and d["stdin_stream"] is True, save={"exec_rid": "request_id"}),
    "sandbox_exec_write": Call(
        {"session_id": "$session", "request_id": "$exec_rid", "input": "v\n"},
        lambda d, c: d["written_bytes"] == 2),
    "sandbox_exec_poll": Call(
        {"session_id": "$session", "request_id": "$exec_rid", "wait_ms": WAIT},
        lambda d, c: d["stdout"].startswith("started\n") and d["running"] is True),
    "sandbox_read_output": Call(
        {"session_id": "$session", "request_id": "$exec_rid", "follow_ms": WAIT},
        lambda d, c: "started\n" in d["stdout"]),
    "sandbox_exec_signal": Call(
        {"session_id": "$session", "request_id": "$exec_rid", "signal": "SIGTERM"},
        lambda d, c: d["signal"] == "SIGTERM"),
    "sandbox_exec_close": Call(
        {"session_id": "$session", "request_id": "$exec_rid"},
        lambda d, c: d["status"] != "running" and d["stdout"] == "started\ngot-v\n"),
    "sandbox_wait": Call(
        {"session_id": "$session", "request_id": "$exec_rid", "timeout_ms": 10000},
        lambda d, c: d["running"] is False and d["signal"] == "SIGTERM"),
    "sandbox_list_commands": Call(
        {"session_id": "$session"},
        lambda d, c: c["exec_rid"] in [x["request_id"] for x in d["commands"]]),
    "sandbox_session_status": Call(
        {"session_id": "$session"},
        lambda d, c: d["id"] == c["session"] and d["state"] == "active" and d["commands"] >= 2),
    "sandbox_touch_session": Call(
        {"session_id": "$session"},
        lambda d, c: d["id"] == c["session"] and d["expires_at_usec"] > d["created_at_usec"]),
    "sandbox_session_metrics": Call(
        {"session_id": "$session"},
        lambda d, c: d["session_id"] == c["session"] and d["commands"] >= 2 and d["running_commands"] == 0),
    "sandbox_freeze_session": Call(
        {"session_id": "$session"},
        lambda d, c: d["frozen"] is True, refusals=("unsupported",)),
    "sandbox_thaw_session": Call(
        {"session_id": "$session"},
        lambda d, c: d["frozen"] is False, refusals=("unsupported",)),
    "sandbox_write_file": Call(
        {"session_id": "$session", "path": "dir/a.txt", "content": "inspected\n", "make_parents": True},
        lambda d, c: d["bytes"] == 10),
    "sandbox_read_file": Call(
        {"session_id": "$session", "path": "dir/a.txt"},
        lambda d, c: d["content"] == "inspected\n"),
    "sandbox_list_files": Call(
        {"session_id": "$session", "path": "dir"},
        lambda d, c: names(d["entries"]) == ["a.txt"]),
    "sandbox_stat": Call(
        {"session_id": "$session", "path": "dir/a.txt"},
        lambda d, c: d["size"] == 10),
    "sandbox_mkdir": Call(
        {"session_id": "$session", "path": "made"},
        lambda d, c: d is not None),
    "sandbox_copy": Call(
        {"session_id": "$session", "from": "dir/a.txt", "to": "made/b.txt"},
        lambda d, c: d is not None),
    "sandbox_move": Call(
        {"session_id": "$session", "from": "made/b.txt", "to": "made/c.txt"},
        lambda d, c: d is not None),
    "sandbox_copy_to_host": Call(
        {"session_id": "$session", "path": "made/c.txt", "host_path": HOST_DIR + "/out.txt"},
        lambda d, c: open(HOST_DIR + "/out.txt").read() == "inspected\n"),
    "sandbox_copy_from_host": Call(
        {"session_id": "$session", "host_path": HOST_DIR + "/out.txt", "path": "made/back.txt"},
        lambda d, c: d is not None),
    "sandbox_remove": Call(
        {"session_id": "$session", "path": "made", "recursive": True, "confirm": True},
        lambda d, c: d is not None),
    "sandbox_expose_port": Call(
        {"session_id": "$session", "port": PORT},
        lambda d, c: d["port"] == PORT and d["socket"].endswith("/%s/%d.sock" % (c["session"], PORT))),
    "sandbox_list_ports": Call(
        {"session_id": "$session"},
        lambda d, c: [p["port"] for p in d["ports"]] == [PORT]),
    "sandbox_unexpose_port": Call(
        {"session_id": "$session", "port": PORT},
        lambda d, c: d == {"port": PORT, "exposed": False}),
    "sandbox_terminal_start": Call(
        {"session_id": "$session", "command": ["sh", "-i"], "wait_ms": WAIT},
        lambda d, c: d["running"] is True and d["exit"] is None, save={"request_id": "request_id"}),
    "sandbox_terminal_send": Call(
        {"session_id": "$session", "request_id": "$request_id", "input": "echo t-$((6*7))\n", "wait_ms": WAIT,
         "quiet_ms": 2000},
        lambda d, c: "t-42" in d["output"] and d["running"] is True),
    "sandbox_terminal_resize": Call(
        {"session_id": "$session", "request_id": "$request_id", "rows": 30, "cols": 100},
        lambda d, c: d == {"request_id": c["request_id"], "rows": 30, "cols": 100}),
    "sandbox_close_session": Call(
        {"session_id": "$session", "purge": True, "confirm": True},
        lambda d, c: d["state"] == "closed"),
}


def inspector(method, *args, check=True):
    """Runs `mcp-inspector-cli --cli sandboxctl mcp --method METHOD ARGS...`: the JSON it printed
    (check), or the CompletedProcess (not check)."""
    node = shutil.which("node")
    assert node, "node is not installed"
    os.makedirs(HOST_DIR, exist_ok=True)  # --host-path= wants it there
    pkg = os.path.join(SDK, "node_modules/@modelcontextprotocol/inspector-cli")
    assert os.path.isdir(pkg), "the MCP Inspector CLI is missing in %s (tools/dev installs it)" % SDK
    # in its build directory: the CLI finds its own package.json relative to the working
    # directory (../package.json), or fails
    p = subprocess.run([node, os.path.join(pkg, "build/cli.js"), "--cli", SANDBOXCTL, "mcp",
                        "--host-path=%s:rw" % HOST_DIR, "--method", method]
                       + list(args), cwd=os.path.join(pkg, "build"), capture_output=True, text=True, timeout=180,
                       env={"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "HOME": "/root"})
    if not check:
        return p
    assert p.returncode == 0, "the Inspector (%s %s) failed (%d)\nstdout: %s\nstderr: %s" % (
        method, " ".join(args), p.returncode, p.stdout, p.stderr)
    return json.loads(p.stdout)


def tool_args(args, ctx):
    """--tool-arg pairs: every value as JSON (the CLI parses a value as JSON first, so a
    session id of digits would otherwise become a number)."""
    pairs = []
    for k, v in args.items():
        if isinstance(v, str) and v.startswith("$"):
            assert v[1:] in ctx, "%s=%s: no earlier call saved %s" % (k, v, v[1:])
            v = ctx[v[1:]]
        pairs.append("%s=%s" % (k, json.dumps(v)))
    return ["--tool-arg"] + pairs if pairs else []


@pytest.fixture(scope="module")
def listed():
    return inspector("tools/list")["tools"]


@pytest.fixture(scope="module")
def capabilities():
    return mcp([])["capabilities"]


def test_every_listed_tool_has_a_call(listed):
    served = names(listed)
    assert len(set(served)) == len(served), "a tool listed twice: %s" % served
    missing = [t for t in served if t not in CALLS]
    assert not missing, ("tools that sandboxctl mcp lists but test_mcp_inspector.py's CALLS has no entry for "
                         "(add one, with its arguments and what its result must hold): %s" % ", ".join(missing))
    stale = [t for t in CALLS if t not in served]
    assert not stale, "CALLS entries for tools sandboxctl mcp does not list: %s" % ", ".join(stale)
    for t in listed:
        assert t["description"] and t["inputSchema"]["type"] == "object", t


@pytest.mark.time_limit(600)
def test_call_every_tool(api, listed):
    for f in os.listdir(HOST_DIR) if os.path.isdir(HOST_DIR) else []:
        os.unlink(os.path.join(HOST_DIR, f))
    user = unique_user()
    ctx = {"user": user}
    served = set(names(listed))
    try:
        for name, call in CALLS.items():
            if name not in served:
                continue  # test_every_listed_tool_has_a_call says so
            res = inspector("tools/call", "--tool-name", name, *tool_args(call.args, ctx))
            if res.get("isError") and call.refusals:
                assert res["structuredContent"]["error"]["code"] in call.refusals, (name, res)
                continue
            assert res.get("isError") is False, (name, res)
            sc = res.get("structuredContent")
            assert isinstance(sc, dict) and sc.get("ok") is True, (name, res)
            # the text is the same JSON, for clients that do not read structuredContent
            assert json.loads(res["content"][0]["text"]) == sc, (name, res)
            data = sc["data"]
            assert call.expect(data, ctx), "%s with %s returned %s" % (name, call.args, json.dumps(data))
            for key, field in call.save.items():
                ctx[key] = data[field]
    finally:
        for s in api.get("/v1/sessions?user=" + user).json["sessions"]:
            api.request("DELETE", "/v1/sessions/" + s["id"])


def test_unknown_tool_is_an_error():
    # a protocol error (-32602, as the spec has it), or a result with isError
    p = inspector("tools/call", "--tool-name", "no_such_tool", check=False)
    if p.returncode != 0:
        assert "-32602" in p.stderr, (p.stdout, p.stderr)
    else:
        assert json.loads(p.stdout)["isError"] is True, p.stdout


def not_found(p):
    """The Inspector failed on a -32601 (method not found) from the server."""
    return p.returncode != 0 and "-32601" in p.stderr


def test_resources(capabilities):
    if "resources" not in capabilities:
        # not advertised: not served either
        for method in ("resources/list", "resources/templates/list"):
            p = inspector(method, check=False)
            assert not_found(p), "%s answered though resources are not in the capabilities: %s %s" % (
                method, p.stdout, p.stderr)
        return
    resources = inspector("resources/list")["resources"]
    assert resources, "resources are advertised but none is listed"
    for r in resources:
        assert r["uri"] and r["name"], r
    # every resource that is not one session's, and the first sessions': in the whole suite
    # other tests' sessions are listed, and go away (a read of one then is -32002)
    static = [r for r in resources if not r["uri"].startswith("sandboxd://sessions/")]
    per_session = [r for r in resources if r["uri"].startswith("sandboxd://sessions/")]
    for r in static + per_session[:2]:
        p = inspector("resources/read", "--uri", r["uri"], check=False)
        if p.returncode != 0 and r in per_session and "-32002" in p.stderr:
            continue  # closed and forgotten since the list
        assert p.returncode == 0, (r, p.stdout, p.stderr)
        read = json.loads(p.stdout)
        assert read["contents"], (r, read)
        for c in read["contents"]:
            assert c["uri"] and "text" in c, (r, c)
            assert c.get("mimeType", r.get("mimeType")) == "application/json", (r, c)
            json.loads(c["text"])
    templates = inspector("resources/templates/list")["resourceTemplates"]
    for t in templates:
        assert t["uriTemplate"] and t["name"], t


def test_prompts(capabilities):
    if "prompts" not in capabilities:
        p = inspector("prompts/list", check=False)
        assert not_found(p), "prompts/list answered though prompts are not in the capabilities: %s %s" % (
            p.stdout, p.stderr)
        return
    prompts = inspector("prompts/list")["prompts"]
    assert prompts, "prompts are advertised but none is listed"
    for pr in prompts:
        assert pr["name"], pr
        if any(a.get("required") for a in pr.get("arguments", [])):
            continue  # needs arguments only its own test knows
        got = inspector("prompts/get", "--prompt-name", pr["name"])
        assert got["messages"] and all(m["role"] in ("user", "assistant") for m in got["messages"]), (pr, got)
