# SPDX-License-Identifier: LGPL-2.1-or-later
"""One failure, one code: the same failures provoked over HTTP and over D-Bus answer the
code, status and D-Bus name of one row of the error table (src/shared/error-table.c), and
sandboxctl reports the same code whichever transport it used."""

import json
import os
import re
import subprocess

import dbus
import pytest

import sbxbus as B
from conftest import assert_error, run

SRCDIR = os.environ.get("SANDBOXD_SRCDIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SANDBOXCTL = os.environ.get("SANDBOXD_TEST_SANDBOXCTL", "/usr/bin/sandboxctl")
UNKNOWN_ID = "0123456789abcdef"
STD = {"ACCESS_DENIED": B.ACCESS_DENIED, "INTERACTIVE_AUTHORIZATION_REQUIRED": B.INTERACTIVE_REQUIRED}


def load_table():
    """{code: (status, [D-Bus names])}, read from the C table itself."""
    with open(os.path.join(SRCDIR, "src", "shared", "error-table.c")) as f:
        src = f.read()
    table = {}
    for code, status, own, std in re.findall(
            r'\{ "(\w+)", E\w+, (\d{3}), (?:NULL|E\("(\w+)"\)|SD_BUS_ERROR_(\w+)), SANDBOXD_ERROR_\w+ \}', src):
        name = B.ERROR + own if own else STD.get(std)
        table[code] = (int(status), [name] if name else [])
    for own, std, code in re.findall(r'\{ (?:E\("(\w+)"\)|SD_BUS_ERROR_(\w+)), "(\w+)" \}', src):
        table[code][1].append(B.ERROR + own if own else STD[std])
    assert len(table) > 30 and "not_found" in table, table
    return table


TABLE = load_table()


def code_of_bus_name(name):
    codes = [code for code, (_, names) in TABLE.items() if name in names]
    assert len(codes) == 1, "%s is the name of %s" % (name, codes)
    return codes[0]


def http_is(resp, code):
    """The answer is the row of code: its status, its code."""
    assert code in TABLE, code
    assert_error(resp, TABLE[code][0], code)


def bus_is(fn, args, code, name=None):
    """The call fails with a name of the row of code (name, if given)."""
    got = B.error_of(fn, *args)
    assert got in TABLE[code][1], "%s is not a D-Bus name of %s %s" % (got, code, TABLE[code][1])
    assert code_of_bus_name(got) == code
    if name:
        assert got == B.ERROR + name, got


@pytest.fixture
def both(api, scope):
    """A session made over HTTP, and its D-Bus object."""
    user, ws = scope
    s = api.create_session(user, ws)
    return s["id"], "%s/session/%s" % (B.PATH, s["id"])


def test_no_such_session(api):
    http_is(api.get("/v1/sessions/" + UNKNOWN_ID), "not_found")
    http_is(api.post("/v1/sessions/%s/commands" % UNKNOWN_ID, {"argv": ["true"]}), "not_found")
    bus_is(B.manager, ("GetSession", "s", UNKNOWN_ID), "not_found", "NoSuchSession")
    bus_is(B.manager, ("Exec", "sasa{sv}", UNKNOWN_ID, ["true"], {}), "not_found", "NoSuchSession")


def test_no_such_command(api, both):
    sid, path = both
    http_is(api.get("/v1/sessions/%s/commands/7" % sid), "not_found")
    http_is(api.post("/v1/sessions/%s/commands/7/signal" % sid, {"signal": "SIGTERM"}), "not_found")
    bus_is(B.call, (path + "/command/7", B.COMMAND, "Signal", "s", "SIGTERM"), "not_found", "NoSuchCommand")


@pytest.mark.parametrize("argv0", ["no-such-program-sbx", "bin/true"])
def test_executable_not_found(api, both, argv0):
    sid, path = both
    http_is(api.post("/v1/sessions/%s/commands" % sid, {"argv": [argv0]}), "executable_not_found")
    bus_is(B.manager, ("Exec", "sasa{sv}", sid, [argv0], {}), "executable_not_found", "ExecutableNotFound")
    bus_is(B.call, (path, B.SESSION, "Run", "asa{sv}", [argv0], {}), "executable_not_found", "ExecutableNotFound")
    assert api.get_session(sid)["commands"] == 0


def test_invalid_arguments(api, both, scope):
    sid, path = both
    user, ws = scope
    # bodies that are not JSON: HTTP only (a D-Bus call is typed by its signature)
    http_is(api.request("POST", "/v1/sessions", body=b"{not json", headers={"Content-Type": "application/json"}),
            "invalid_json")
    assert TABLE["invalid_json"][1] == []
    # the same wrong values, both ways
    http_is(api.post("/v1/sessions", {"user": "Not A User", "workspace": ws}), "invalid_name")
    bus_is(B.manager, ("CreateSession", "ssa{sv}", "Not A User", ws, {}), "invalid_name")
    http_is(api.post("/v1/sessions/%s/commands" % sid, {"argv": ["true"], "bogus": 1}), "unknown_field")
    bus_is(B.manager, ("Exec", "sasa{sv}", sid, ["true"], {"bogus": dbus.String("x")}), "unknown_field")
    http_is(api.post("/v1/sessions/%s/commands" % sid, {"argv": ["true"], "timeout_ms": "100"}), "invalid_type")
    bus_is(B.manager, ("Exec", "sasa{sv}", sid, ["true"], {"timeout_ms": dbus.String("100")}), "invalid_type")
    http_is(api.post("/v1/sessions/%s/commands" % sid, {"argv": []}), "invalid_value")
    bus_is(B.manager, ("Exec", "sasa{sv}", sid, dbus.Array([], signature="s"), {}), "invalid_value")
    http_is(api.post("/v1/sessions/%s/commands" % sid, {"argv": ["true"], "cwd": "../.."}), "invalid_path")
    bus_is(B.manager, ("Exec", "sasa{sv}", sid, ["true"], {"cwd": dbus.String("../..")}), "invalid_path")
    http_is(api.post("/v1/sessions/%s/commands" % sid, {"argv": ["true"], "env": {"HOME": "/root"}}), "reserved_env")
    bus_is(B.manager, ("Exec", "sasa{sv}", sid, ["true"], {"env": dbus.Array(["HOME=/root"], signature="s")}),
           "reserved_env")
    # D-Bus's own word for a wrong signature is the code of a wrong type
    bus_is(B.manager, ("GetSession", "i", 5), "invalid_type", "InvalidArguments")
    assert api.get_session(sid)["commands"] == 0


def test_command_not_running(api, both):
    sid, path = both
    res = run(api, sid, {"argv": ["true"], "request_id": "done"})
    assert res["exit"]["status"] == "succeeded", res
    http_is(api.post("/v1/sessions/%s/commands/done/signal" % sid, {"signal": "SIGTERM"}), "not_running")
    # the session's first command: command/1 on the bus
    bus_is(B.call, (path + "/command/1", B.COMMAND, "Signal", "s", "SIGTERM"), "not_running",
           "CommandNotRunning")


def test_session_not_active(api, both):
    sid, path = both
    r = api.delete("/v1/sessions/" + sid)
    assert r.status == 200, r
    http_is(api.post("/v1/sessions/%s/commands" % sid, {"argv": ["true"]}), "session_not_active")
    http_is(api.post("/v1/sessions/%s/activity" % sid), "session_not_active")
    bus_is(B.manager, ("Exec", "sasa{sv}", sid, ["true"], {}), "session_not_active")
    bus_is(B.call, (path, B.SESSION, "Touch"), "session_not_active")


def test_freeze_unsupported_or_busy(api, both):
    sid, path = both
    if open("/proc/self/mounts").read().find(" /sys/fs/cgroup cgroup2 ") >= 0:
        pytest.skip("cgroup v2: freezing works here")
    http_is(api.post("/v1/sessions/%s/freeze" % sid), "unsupported")
    bus_is(B.call, (path, B.SESSION, "Freeze"), "unsupported", "NotSupported")


# ---------------------------------------------------------------- sandboxctl, both ways

def ctl(transport, *args, input=None):
    env = dict(os.environ, SANDBOXD_TRANSPORT=transport)
    env.pop("SANDBOXD_URL", None)
    env.pop("SANDBOXD_KEY", None)
    return subprocess.run([SANDBOXCTL] + list(args), capture_output=True, input=input, env=env, timeout=60)


def mcp_exec(transport, sid, argv):
    """The error sandboxctl mcp's sandbox_exec reports, over that transport."""
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "sandbox_exec", "arguments": {"session_id": sid, "argv": argv}}},
    ]
    p = ctl(transport, "mcp", input="".join(json.dumps(m) + "\n" for m in msgs).encode())
    answers = {a.get("id"): a for a in map(json.loads, p.stdout.decode().splitlines())}
    result = answers[2]["result"]
    assert result["isError"] is True, result
    return result["structuredContent"]["error"]


@pytest.mark.parametrize("argv0", ["no-such-program-sbx", "bin/true"])
def test_sandboxctl_same_code_both_ways(api, both, argv0):
    sid, _ = both
    # the command line: the same message and exit status either way
    out = {t: ctl(t, "exec", sid, argv0) for t in ("dbus", "http")}
    for t, p in out.items():
        assert p.returncode == 125, (t, p)
        assert ("Executable '%s' not found" % argv0).encode() in p.stderr, (t, p.stderr)
    said = {t: re.sub(rb"ctl-[0-9a-f]{16}", b"ctl-ID", p.stderr) for t, p in out.items()}
    assert said["dbus"] == said["http"], said
    # what it hands on: the code and the status of the row, whichever transport
    errors = {t: mcp_exec(t, sid, [argv0]) for t in ("dbus", "http")}
    for t, e in errors.items():
        assert e["code"] == "executable_not_found", (t, e)
        assert e["http_status"] == TABLE["executable_not_found"][0] == 400, (t, e)
        assert set(e) == {"code", "message", "http_status"}, (t, e)
    assert errors["dbus"] == errors["http"], errors
    assert api.get_session(sid)["commands"] == 0


def test_sandboxctl_no_such_session_both_ways(api):
    errors = {t: mcp_exec(t, UNKNOWN_ID, ["true"]) for t in ("dbus", "http")}
    for t, e in errors.items():
        assert e["code"] == "not_found" and e["http_status"] == 404, (t, e)
    assert {t: ctl(t, "exec", UNKNOWN_ID, "true").returncode for t in ("dbus", "http")} == {"dbus": 125, "http": 125}
