# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxctl mcp's terminal tools (sandbox_terminal_start, _send, _resize) with the official
MCP SDK as the client, as test_mcp.py uses it: an agent drives an interactive command by
rounds, each call typing and then reading the command's output until it is quiet."""

import pytest

from conftest import commands_path, sh, snapshot, start_command, unique_user, wait_for
from test_mcp import mcp

# generous: the suite runs under heavy load; a call returns early once the output was quiet
WAIT = 30000


def tool(out, name):
    return [t for t in out["tools"] if t["name"] == name][0]


def ok(call):
    assert call["isError"] is False and call["body"]["ok"] is True, call
    assert call["structured"] == call["body"], call
    return call["body"]["data"]


def refused(call, *words):
    assert call["isError"] is True and call["body"]["ok"] is False, call
    for w in words:
        assert w in call["body"]["error"]["message"], call
    return call["body"]["error"]


@pytest.fixture
def sid(api):
    s = api.create_session(unique_user(), "term")
    yield s["id"]
    api.request("DELETE", "/v1/sessions/" + s["id"])


@pytest.mark.time_limit(240)
@pytest.mark.parametrize("transport", ["dbus", "http"])
def test_python_round_trip(api, sid, transport):
    args = ["--transport=http"] if transport == "http" else []
    out = mcp([
        {"name": "sandbox_terminal_start", "arguments": {"session_id": sid, "command": ["python3", "-q", "-i"],
                                                         "wait_ms": WAIT}},
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                        "input": "6*7\n", "wait_ms": WAIT, "quiet_ms": 3000}},
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                        "eof": True, "wait_ms": WAIT}},
    ], *args)
    start, send, eof = out["calls"]
    d = ok(start)
    assert ">>>" in d["output"] and d["running"] is True and d["exit"] is None, d
    assert d["dropped_bytes"] == 0 and d["cursor"] > 0, d
    # sandboxd ran it on a terminal, in this session
    snap = snapshot(api, sid, d["request_id"])
    assert snap["tty"] == {"rows": 24, "cols": 80}, snap
    s = ok(send)
    assert "42\n" in s["output"] and "\x1b" not in s["output"] and "\r" not in s["output"], s
    assert s["cursor"] > d["cursor"], s
    e = ok(eof)
    assert e["running"] is False and e["exit"]["status"] == "succeeded" and e["exit"]["exit_code"] == 0, e

    schema = tool(out, "sandbox_terminal_start")["inputSchema"]
    assert schema["required"] == ["session_id", "command"], schema
    for k, lo, hi in (("rows", 1, 1000), ("cols", 1, 1000), ("wait_ms", 0, 30000), ("quiet_ms", 0, 30000),
                      ("max_bytes", 1, 1048576)):
        p = schema["properties"][k]
        assert (p["type"], p["minimum"], p["maximum"]) == ("integer", lo, hi), (k, p)
    send_schema = tool(out, "sandbox_terminal_send")["inputSchema"]
    assert send_schema["required"] == ["session_id", "request_id"], send_schema
    assert "pattern" in send_schema["properties"]["keys"]["items"], send_schema
    resize_schema = tool(out, "sandbox_terminal_resize")["inputSchema"]
    assert resize_schema["required"] == ["session_id", "request_id", "rows", "cols"], resize_schema


@pytest.mark.time_limit(240)
def test_ctrl_c_interrupts_sleep_in_a_shell(api, sid):
    out = mcp([
        {"name": "sandbox_terminal_start", "arguments": {"session_id": sid, "command": ["sh", "-i"],
                                                         "wait_ms": WAIT}},
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                        "input": "sleep 100\n", "wait_ms": WAIT}},
    ])
    rid = ok(out["calls"][0])["request_id"]
    wait_for(lambda: "sleep 100" in sh("ps", "-eo", "args").stdout, timeout=60, what="sleep to run")
    out = mcp([
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": rid, "keys": ["C-c"],
                                                        "wait_ms": WAIT}},
        # sleep 100 still running would hold this past its wait
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": rid,
                                                        "input": "echo alive-$((2+3))\n", "wait_ms": WAIT,
                                                        "quiet_ms": 3000}},
    ])
    ok(out["calls"][0])
    d = ok(out["calls"][1])
    assert "alive-5" in d["output"] and d["running"] is True, d
    wait_for(lambda: "sleep 100" not in sh("ps", "-eo", "args").stdout, timeout=30, what="sleep to be gone")


@pytest.mark.time_limit(240)
def test_cursor_semantics(api, sid):
    out = mcp([
        {"name": "sandbox_terminal_start", "arguments": {"session_id": sid, "command": ["sh", "-i"],
                                                         "wait_ms": WAIT}},
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                        "input": "echo one-$((10+1))\n", "wait_ms": WAIT,
                                                        "quiet_ms": 2000}},
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                        "input": "echo two-$((20+2))\n", "wait_ms": WAIT,
                                                        "quiet_ms": 2000}},
        # no input, an old cursor: what came since then, again
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                        "cursor": "$0.cursor", "wait_ms": 2000, "quiet_ms": 500}},
        # no input, no cursor: from the end, nothing new
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                        "wait_ms": 1000, "quiet_ms": 500}},
    ])
    start, one, two, again, nothing = [ok(c) for c in out["calls"]]
    assert "one-11" in one["output"] and "two-22" not in one["output"], one
    assert "two-22" in two["output"] and "one-11" not in two["output"], two
    assert start["cursor"] < one["cursor"] < two["cursor"], (start, one, two)
    assert "one-11" in again["output"] and "two-22" in again["output"], again
    assert again["cursor"] == two["cursor"], again
    assert nothing["output"] == "" and nothing["cursor"] == two["cursor"] and nothing["running"], nothing


@pytest.mark.time_limit(240)
def test_strip_ansi(api, sid):
    cmd = ["sh", "-c", "printf '\\033[1mX\\033[0m\\n'"]
    out = mcp([
        {"name": "sandbox_terminal_start", "arguments": {"session_id": sid, "command": cmd, "wait_ms": WAIT,
                                                         "strip_ansi": False}},
        {"name": "sandbox_terminal_start", "arguments": {"session_id": sid, "command": cmd, "wait_ms": WAIT}},
    ])
    raw, text = [ok(c) for c in out["calls"]]
    assert raw["output"] == "\x1b[1mX\x1b[0m\r\n" and raw["running"] is False, raw
    assert text["output"] == "X\n" and text["exit"]["exit_code"] == 0, text


@pytest.mark.time_limit(240)
def test_max_bytes_returns_the_tail(api, sid):
    cmd = ["sh", "-c", "head -c 100000 /dev/zero | tr '\\000' a; echo END"]
    out = mcp([
        {"name": "sandbox_terminal_start", "arguments": {"session_id": sid, "command": cmd, "wait_ms": WAIT,
                                                         "max_bytes": 1000}},
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                        "cursor": 0, "max_bytes": 1000000, "wait_ms": WAIT}},
    ])
    tail, whole = [ok(c) for c in out["calls"]]
    everything = "a" * 100000 + "END\n"
    assert tail["running"] is False and tail["exit"]["status"] == "succeeded", tail
    assert tail["output"] == everything[-1000:], tail["output"][:100]
    assert tail["dropped_bytes"] == len(everything) - 1000, tail["dropped_bytes"]
    # read again from the start (the command has ended: its log is still there)
    assert whole["output"] == everything and whole["dropped_bytes"] == 0, whole["dropped_bytes"]


@pytest.mark.time_limit(240)
def test_resize_and_pipe_commands(api, sid):
    start_command(api, sid, {"argv": ["sleep", "100"], "request_id": "pipe"})
    start_command(api, sid, {"argv": ["cat"], "request_id": "cat", "stdin": "stream"})
    out = mcp([
        {"name": "sandbox_terminal_start", "arguments": {"session_id": sid, "command": ["sh", "-i"],
                                                         "rows": 30, "cols": 90, "wait_ms": WAIT}},
        {"name": "sandbox_terminal_resize", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                          "rows": 33, "cols": 101}},
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                        "input": "stty size\n", "wait_ms": WAIT, "quiet_ms": 2000}},
        {"name": "sandbox_terminal_resize", "arguments": {"session_id": sid, "request_id": "pipe",
                                                          "rows": 33, "cols": 101}},
        # a command on pipes takes keys too: bytes are bytes
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": "cat", "input": "hi",
                                                        "keys": ["Tab", "Up"], "eof": True, "cursor": 0,
                                                        "strip_ansi": False, "wait_ms": WAIT}},
    ])
    start, resized, size, pipe, cat = out["calls"]
    rid = ok(start)["request_id"]
    assert ok(resized) == {"request_id": rid, "rows": 33, "cols": 101}, resized
    assert snapshot(api, sid, rid)["tty"] == {"rows": 33, "cols": 101}
    assert "33 101" in ok(size)["output"], size
    err = refused(pipe)
    assert err["code"] == "not_a_terminal" and err["http_status"] == 409, err
    c = ok(cat)
    assert c["output"] == "hi\t\x1b[A" and c["exit"]["exit_code"] == 0, c


@pytest.mark.time_limit(240)
def test_exit_is_reported(api, sid):
    out = mcp([
        {"name": "sandbox_terminal_start", "arguments": {"session_id": sid, "command": ["sh", "-i"],
                                                         "wait_ms": WAIT}},
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                        "input": "exit 3\n", "wait_ms": WAIT}},
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                        "input": "echo late\n"}},
        {"name": "sandbox_terminal_start", "arguments": {"session_id": sid, "command": ["sh", "-c", "kill -9 $$"],
                                                         "wait_ms": WAIT}},
    ])
    d = ok(out["calls"][1])
    assert d["running"] is False, d
    assert d["exit"] == {"status": "failed", "exit_code": 3, "signal": None, "reason": "exit-code"}, d
    late = refused(out["calls"][2])
    assert late["http_status"] == 409, late
    k = ok(out["calls"][3])
    assert k["exit"]["status"] == "signaled" and k["exit"]["signal"] == "SIGKILL", k


@pytest.mark.time_limit(240)
def test_bad_arguments_are_refused(api, sid):
    start = {"session_id": sid, "command": ["sh", "-i"]}
    out = mcp([
        {"name": "sandbox_terminal_start", "arguments": dict(start, rows=0)},
        {"name": "sandbox_terminal_start", "arguments": dict(start, cols=1001)},
        {"name": "sandbox_terminal_start", "arguments": dict(start, wait_ms=30001)},
        {"name": "sandbox_terminal_start", "arguments": dict(start, max_bytes=0)},
        {"name": "sandbox_terminal_start", "arguments": dict(start, quiet_ms=-1)},
        {"name": "sandbox_terminal_start", "arguments": dict(start, strip_ansi="no")},
        {"name": "sandbox_terminal_start", "arguments": dict(start, command=[])},
        {"name": "sandbox_terminal_start", "arguments": dict(start, command="sh -i")},
        {"name": "sandbox_terminal_start", "arguments": dict(start, tty=True)},
        {"name": "sandbox_terminal_start", "arguments": {"command": ["sh"]}},
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "input": "x"}},
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": "x", "keys": ["Hyper"]}},
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": "x", "keys": "Enter"}},
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": "x/y"}},
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": "x", "input": "y" * 70000}},
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": "x", "wait_ms": 40000}},
        {"name": "sandbox_terminal_send", "arguments": {"session_id": sid, "request_id": "nope"}},
        {"name": "sandbox_terminal_resize", "arguments": {"session_id": sid, "request_id": "x", "rows": 10}},
        {"name": "sandbox_terminal_resize", "arguments": {"session_id": sid, "request_id": "x", "rows": 10,
                                                          "cols": 0}},
    ])
    (rows0, cols_big, wait_big, max0, quiet_neg, strip_str, empty, string, extra, no_session, no_rid, key, keys_str,
     bad_rid, long_input, send_wait, unknown, no_cols, cols0) = out["calls"]
    refused(rows0, "rows", "1 to 1000")
    refused(cols_big, "cols")
    refused(wait_big, "wait_ms", "0 to 30000")
    refused(max0, "max_bytes")
    refused(quiet_neg, "quiet_ms")
    refused(strip_str, "strip_ansi")
    refused(empty, "command")
    refused(string, "command")
    refused(extra, "tty")
    refused(no_session, "session_id")
    refused(no_rid, "request_id")
    refused(key, "Hyper")
    refused(keys_str, "keys")
    refused(bad_rid, "request id")
    refused(long_input, "65536")
    refused(send_wait, "wait_ms")
    assert refused(unknown)["http_status"] == 404, unknown
    refused(no_cols, "cols")
    refused(cols0, "cols")
    # the refused starts started nothing
    assert api.get(commands_path(sid)).json["commands"] == []
