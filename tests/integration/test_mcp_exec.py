# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxctl mcp's tools of commands with the official MCP SDK as the client (as test_mcp.py
uses it): sandbox_exec and sandbox_run, sandbox_wait, commands by rounds (sandbox_exec_start,
_poll, _write, _signal, _close), sandbox_list_commands and sandbox_read_output, their
refusals, cancellation and progress."""

import threading

import pytest

from conftest import commands_path, snapshot, unique_user, wait_for
from test_mcp import mcp

NEW_TOOLS = ("sandbox_wait", "sandbox_exec_start", "sandbox_exec_poll", "sandbox_exec_write", "sandbox_exec_signal",
             "sandbox_exec_close", "sandbox_list_commands", "sandbox_read_output")


def tool(out, name):
    return [t for t in out["tools"] if t["name"] == name][0]


def ok(call):
    assert call.get("isError") is False and call["body"]["ok"] is True, call
    assert call["structured"] == call["body"], call
    return call["body"]["data"]


def refused(call, code=None, status=None, *words):
    assert call.get("isError") is True and call["body"]["ok"] is False, call
    err = call["body"]["error"]
    if code:
        assert err["code"] == code, call
    if status:
        assert err["http_status"] == status, call
    for w in words:
        assert w in err["message"], call
    return err


@pytest.fixture
def sid(api):
    s = api.create_session(unique_user(), "exec")
    yield s["id"]
    api.request("DELETE", "/v1/sessions/" + s["id"])


def session_state(api, sid):
    return api.get_session(sid)["state"]


def test_schemas(api):
    out = mcp([])
    names = {t["name"] for t in out["tools"]}
    assert names >= set(NEW_TOOLS) | {"sandbox_exec", "sandbox_run"}, names
    for name in NEW_TOOLS + ("sandbox_exec", "sandbox_run"):
        t = tool(out, name)
        s = t["inputSchema"]
        assert s["type"] == "object" and s["additionalProperties"] is False, t
        out_s = t["outputSchema"]
        assert out_s["properties"]["data"]["type"] == "object" and out_s["properties"]["data"]["properties"], t
        assert out_s["properties"]["error"]["required"] == ["code", "message", "http_status"], t
        if "session_id" in s["properties"]:
            assert s["properties"]["session_id"]["pattern"] == "^([a-z][a-z0-9]{0,31}_)?[0-9a-f]{16}$", t
        if "request_id" in s["properties"]:
            assert s["properties"]["request_id"]["pattern"] == "^[A-Za-z0-9._-]{1,64}$", t
            assert "request_id" in s["required"], t
        if "timeout_ms" in s["properties"]:
            assert s["properties"]["timeout_ms"]["minimum"] == 1, t
        if "max_output_bytes" in s["properties"]:
            p = s["properties"]["max_output_bytes"]
            assert (p["minimum"], p["maximum"]) == (0, 16777216), t
        if "cursor" in s["properties"]:
            assert s["properties"]["cursor"]["minimum"] == 0, t
        for k in ("wait_ms", "follow_ms"):
            if k in s["properties"]:
                assert (s["properties"][k]["minimum"], s["properties"][k]["maximum"]) == (0, 30000), t
    assert tool(out, "sandbox_wait")["inputSchema"]["properties"]["timeout_ms"]["maximum"] == 30000
    sig = tool(out, "sandbox_exec_signal")["inputSchema"]
    assert sig["required"] == ["session_id", "request_id", "signal"], sig
    assert set(sig["properties"]["signal"]["enum"]) == {"SIGTERM", "SIGKILL", "SIGINT", "SIGHUP", "SIGUSR1",
                                                        "SIGUSR2"}, sig
    start = tool(out, "sandbox_exec_start")["inputSchema"]["properties"]
    assert start["stdin_stream"]["type"] == "boolean" and "argv" in start and "command" in start, start
    run = tool(out, "sandbox_run")["outputSchema"]["properties"]["data"]
    assert {"session_created", "session_removed"} <= set(run["required"]), run
    poll = tool(out, "sandbox_exec_poll")["outputSchema"]["properties"]["data"]
    assert {"cursor", "running", "exit", "more"} <= set(poll["required"]), poll


@pytest.mark.time_limit(240)
def test_exec_env_and_refusals(api, sid):
    out = mcp([
        {"name": "sandbox_exec", "arguments": {"session_id": sid, "command": "echo \"$GREETING\"",
                                               "env": {"GREETING": "hi there"}}},
        {"name": "sandbox_exec", "arguments": {"session_id": sid, "argv": ["true"], "env": {"1BAD": "x"}}},
        {"name": "sandbox_exec", "arguments": {"session_id": sid, "argv": ["true"], "env": {"A=B": "x"}}},
        {"name": "sandbox_exec", "arguments": {"session_id": sid, "argv": ["true"], "env": {"HOME": "/tmp"}}},
        {"name": "sandbox_exec", "arguments": {"session_id": sid, "argv": ["true"], "timeout_ms": 0}},
        {"name": "sandbox_exec", "arguments": {"session_id": sid, "argv": ["true"], "command": "true"}},
        {"name": "sandbox_exec", "arguments": {"session_id": sid, "argv": ["true"], "max_output_bytes": 16777217}},
        {"name": "sandbox_exec_start", "arguments": {"session_id": sid, "argv": ["true"], "timeout_ms": 0}},
        {"name": "sandbox_exec_start", "arguments": {"session_id": sid, "argv": ["true"], "command": "true"}},
        {"name": "sandbox_exec_start", "arguments": {"session_id": sid, "argv": ["true"], "max_output_bytes": 5}},
        {"name": "sandbox_exec_start", "arguments": {"session_id": sid, "argv": ["true"], "stdin_stream": "yes"}},
        {"name": "sandbox_wait", "arguments": {"session_id": sid, "request_id": "nope"}},
        {"name": "sandbox_wait", "arguments": {"session_id": sid, "request_id": "nope", "timeout_ms": 30001}},
        {"name": "sandbox_wait", "arguments": {"session_id": sid, "request_id": "nope", "timeout_ms": 0}},
        {"name": "sandbox_exec_poll", "arguments": {"session_id": sid, "request_id": "nope"}},
        {"name": "sandbox_exec_poll", "arguments": {"session_id": sid, "request_id": "nope", "wait_ms": 30001}},
        {"name": "sandbox_exec_poll", "arguments": {"session_id": sid, "request_id": "nope", "cursor": -1}},
        {"name": "sandbox_exec_poll", "arguments": {"session_id": sid, "request_id": "nope", "max_bytes": 0}},
        {"name": "sandbox_exec_write", "arguments": {"session_id": sid, "request_id": "nope", "input": "x"}},
        {"name": "sandbox_exec_write", "arguments": {"session_id": sid, "request_id": "nope"}},
        {"name": "sandbox_exec_write", "arguments": {"session_id": sid, "request_id": "nope", "input": "y" * 70000}},
        {"name": "sandbox_exec_signal", "arguments": {"session_id": sid, "request_id": "nope", "signal": "SIGTERM"}},
        {"name": "sandbox_exec_signal", "arguments": {"session_id": sid, "request_id": "nope", "signal": "SIGSEGV"}},
        {"name": "sandbox_exec_signal", "arguments": {"session_id": sid, "request_id": "nope", "signal": "TERM"}},
        {"name": "sandbox_exec_signal", "arguments": {"session_id": sid, "request_id": "nope"}},
        {"name": "sandbox_exec_close", "arguments": {"session_id": sid, "request_id": "nope"}},
        {"name": "sandbox_read_output", "arguments": {"session_id": sid, "request_id": "nope"}},
        {"name": "sandbox_read_output", "arguments": {"session_id": sid, "request_id": "nope", "follow_ms": 30001}},
        {"name": "sandbox_list_commands", "arguments": {"session_id": sid, "extra": 1}},
        {"name": "sandbox_list_commands", "arguments": {"session_id": "zz"}},
        {"name": "sandbox_exec_poll", "arguments": {"session_id": sid, "request_id": "a/b"}},
    ])
    (env_ok, env_digit, env_eq, env_home, t0, both, max_big, st_t0, st_both, st_max, st_stream, wait_nf, wait_big,
     wait_0, poll_nf, poll_wait, poll_cursor, poll_max0, write_nf, write_nothing, write_long, sig_nf, sig_segv,
     sig_term, sig_none, close_nf, read_nf, read_follow, list_extra, list_bad, poll_bad_rid) = out["calls"]
    assert ok(env_ok)["stdout"] == "hi there\n", env_ok
    refused(env_digit, "invalid_value", 400, "1BAD")
    refused(env_eq, "invalid_value", 400)
    refused(env_home, "reserved_env", 400, "HOME")
    refused(t0, "invalid_value", 400, "timeout_ms")
    refused(both, "invalid_value", 400, "argv", "command")
    refused(max_big, "invalid_value", 400, "max_output_bytes")
    refused(st_t0, "invalid_value", 400, "timeout_ms")
    refused(st_both, "invalid_value", 400, "argv")
    refused(st_max, "unknown_field", 400, "max_output_bytes")
    refused(st_stream, "invalid_type", 400, "stdin_stream")
    for call in (wait_nf, poll_nf, write_nf, sig_nf, close_nf, read_nf):
        refused(call, "not_found", 404)
    refused(wait_big, "invalid_value", 400, "timeout_ms", "30000")
    refused(wait_0, "invalid_value", 400, "timeout_ms")
    refused(poll_wait, "invalid_value", 400, "wait_ms")
    refused(poll_cursor, "invalid_type", 400, "cursor")
    refused(poll_max0, "invalid_value", 400, "max_bytes")
    refused(write_nothing, "missing_field", 400, "input")
    refused(write_long, "invalid_value", 400, "65536")
    refused(sig_segv, "invalid_value", 400, "SIGTERM")
    refused(sig_term, "invalid_value", 400)
    refused(sig_none, "missing_field", 400, "signal")
    refused(read_follow, "invalid_value", 400, "follow_ms")
    refused(list_extra, "unknown_field", 400, "extra")
    refused(list_bad, "invalid_value", 400, "session id")
    refused(poll_bad_rid, "invalid_value", 400, "request id")
    # the refused calls started nothing: the one command is the echo
    cmds = api.get(commands_path(sid)).json["commands"]
    assert [c["request_id"] for c in cmds] == [ok(env_ok)["request_id"]], cmds


@pytest.mark.time_limit(240)
def test_run_once_removes_the_session_it_created(api):
    user = unique_user()
    out = mcp([
        {"name": "sandbox_run", "arguments": {"user": user, "workspace": "once", "tasks_max": 32,
                                              "command": "echo kept > note.txt; echo ran"}},
        {"name": "sandbox_run", "arguments": {"user": user, "workspace": "once", "argv": ["cat", "note.txt"]}},
        {"name": "sandbox_run", "arguments": {"user": user, "workspace": "once", "argv": ["true"],
                                              "env": {"9": "x"}}},
    ])
    first, second, bad = out["calls"]
    d = ok(first)
    assert d["stdout"] == "ran\n" and d["exit_code"] == 0, d
    assert d["session_created"] is True and d["session_removed"] is True, d
    s = api.get_session(d["session_id"])
    assert s["state"] == "closed" and s["limits"]["tasks_max"] == 32, s
    # closed, not purged: the next session of the scope finds the file
    d2 = ok(second)
    assert d2["stdout"] == "kept\n" and d2["session_id"] != d["session_id"], d2
    assert d2["session_created"] is True and d2["session_removed"] is True, d2
    assert session_state(api, d2["session_id"]) == "closed"
    refused(bad, "invalid_value", 400)
    # the refused run created no session
    assert [s["id"] for s in api.get("/v1/sessions?user=" + user).json["sessions"]
            if s["state"] != "closed"] == []


@pytest.mark.time_limit(240)
def test_run_once_leaves_an_existing_session(api):
    user = unique_user()
    s = api.create_session(user, "there")
    try:
        out = mcp([{"name": "sandbox_run", "arguments": {"user": user, "workspace": "there", "argv": ["true"]}}])
        d = ok(out["calls"][0])
        assert d["session_id"] == s["id"] and d["status"] == "succeeded", d
        assert d["session_created"] is False and d["session_removed"] is False, d
        assert session_state(api, s["id"]) == "active"
    finally:
        api.request("DELETE", "/v1/sessions/" + s["id"])


@pytest.mark.time_limit(240)
def test_run_cancelled_stops_the_command_and_closes_its_session(api):
    user = unique_user()
    result = {}
    client = threading.Thread(target=lambda: result.update(out=mcp([
        {"name": "sandbox_run", "arguments": {"user": user, "workspace": "cancel", "command": "sleep 100"},
         "cancel_after_ms": 8000}])))
    client.start()
    try:
        # the session the run creates, while it runs
        wait_for(lambda: api.get("/v1/sessions?user=" + user).json["sessions"], timeout=60,
                 what="sandbox_run to create its session")
        sid = api.get("/v1/sessions?user=" + user).json["sessions"][0]["id"]
        wait_for(lambda: api.get(commands_path(sid)).json["commands"], timeout=60, what="the command to start")
    finally:
        client.join(timeout=120)
    call = result["out"]["calls"][0]
    assert "protocolError" in call and call["ms"] < 30000, call
    wait_for(lambda: session_state(api, sid) == "closed", timeout=30, what="the run's session to be closed")
    cmds = api.get(commands_path(sid)).json["commands"]
    assert len(cmds) == 1 and cmds[0]["terminal"] and cmds[0]["status"] == "signaled", cmds


@pytest.mark.time_limit(240)
def test_start_poll_yields_all_output_exactly_once(api, sid):
    script = "for i in $(seq 1 20); do echo out-$i; echo err-$i >&2; sleep 0.05; done"
    calls = [{"name": "sandbox_exec_start", "arguments": {"session_id": sid, "command": script}},
             {"name": "sandbox_exec_poll", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                         "cursor": 0, "max_bytes": 50, "wait_ms": 20000}}]
    for i in range(1, 40):
        calls.append({"name": "sandbox_exec_poll", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                                 "cursor": "$%d.cursor" % i, "max_bytes": 50,
                                                                 "wait_ms": 20000}})
    calls += [
        {"name": "sandbox_read_output", "arguments": {"session_id": sid, "request_id": "$0.request_id"}},
        {"name": "sandbox_read_output", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                      "cursor": "$40.cursor"}},
        {"name": "sandbox_list_commands", "arguments": {"session_id": sid}},
    ]
    out = mcp(calls)
    start = ok(out["calls"][0])
    assert start["cursor"] == 0 and start["stdin_stream"] is False, start
    polls = [ok(c) for c in out["calls"][1:41]]
    whole, end, listed = [ok(c) for c in out["calls"][41:]]
    stdout = "".join(p["stdout"] for p in polls)
    stderr = "".join(p["stderr"] for p in polls)
    assert stdout == "".join("out-%d\n" % i for i in range(1, 21)), stdout
    assert stderr == "".join("err-%d\n" % i for i in range(1, 21)), stderr
    for p in polls:
        assert len(p["stdout"]) + len(p["stderr"]) <= 50, p
    assert any(p["more"] for p in polls), polls
    cursors = [p["cursor"] for p in polls]
    assert cursors == sorted(cursors) and cursors[0] > 0, cursors
    last = polls[-1]
    assert last["running"] is False and last["exit"] == {"status": "succeeded", "exit_code": 0, "signal": None,
                                                         "reason": "success"}, last
    # past the end: nothing more, the same cursor, the end again
    assert last["stdout"] == "" and last["cursor"] == polls[-2]["cursor"], polls[-2:]
    snap = snapshot(api, sid, start["request_id"])
    assert last["cursor"] == snap["events_bytes"], (last, snap["events_bytes"])
    # the log read whole, at once
    assert whole["stdout"] == stdout and whole["stderr"] == stderr and whole["running"] is False, whole
    assert whole["more"] is False and whole["cursor"] == last["cursor"], whole
    assert end["stdout"] == "" and end["running"] is False and end["exit"]["exit_code"] == 0, end
    cmd = [c for c in listed["commands"] if c["request_id"] == start["request_id"]][0]
    assert cmd["status"] == "succeeded" and cmd["running"] is False and cmd["exit_code"] == 0, cmd
    assert cmd["argv"] == ["/bin/sh", "-c", script], cmd
    assert cmd["stdout_bytes"] == len(stdout) and cmd["events_bytes"] == last["cursor"], cmd


@pytest.mark.time_limit(240)
def test_wait_times_out_then_returns_the_result(api, sid):
    out = mcp([
        {"name": "sandbox_exec_start", "arguments": {"session_id": sid, "command": "sleep 4; echo done"}},
        {"name": "sandbox_wait", "arguments": {"session_id": sid, "request_id": "$0.request_id", "timeout_ms": 500}},
        {"name": "sandbox_wait", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                               "timeout_ms": 30000}},
        {"name": "sandbox_wait", "arguments": {"session_id": sid, "request_id": "$0.request_id", "timeout_ms": 1,
                                               "max_output_bytes": 2}},
    ])
    start, short, long, again = out["calls"]
    rid = ok(start)["request_id"]
    s = ok(short)
    assert s == {"session_id": sid, "request_id": rid, "running": True, "status": "running"}, s
    assert short["ms"] < 15000, short
    d = ok(long)
    assert d["running"] is False and d["status"] == "succeeded" and d["stdout"] == "done\n", d
    a = ok(again)
    assert a["running"] is False and a["stdout"] == "do", a
    assert a["truncation"]["stdout"]["truncated"] is True and a["truncation"]["stdout"]["total_bytes"] == 5, a


@pytest.mark.time_limit(240)
def test_exec_close_stops_a_running_command(api, sid):
    out = mcp([
        {"name": "sandbox_exec_start", "arguments": {"session_id": sid, "argv": ["sleep", "100"]}},
        {"name": "sandbox_exec_close", "arguments": {"session_id": sid, "request_id": "$0.request_id"}},
        {"name": "sandbox_exec_close", "arguments": {"session_id": sid, "request_id": "$0.request_id"}},
        {"name": "sandbox_exec_signal", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                      "signal": "SIGTERM"}},
    ])
    start, close, again, late = out["calls"]
    rid = ok(start)["request_id"]
    d = ok(close)
    assert d["request_id"] == rid and d["stopped"] is True, d
    assert d["status"] == "signaled" and d["signal"] == "SIGTERM" and d["exit_code"] is None, d
    assert close["ms"] < 20000, close  # SIGTERM ends sleep: no wait for the grace
    assert snapshot(api, sid, rid)["status"] == "signaled"
    a = ok(again)
    assert a["stopped"] is False and a["signal"] == "SIGTERM", a
    refused(late, "not_running", 409)


@pytest.mark.time_limit(240)
def test_write_signal_and_stdin_refusals(api, sid):
    out = mcp([
        {"name": "sandbox_exec_start", "arguments": {"session_id": sid, "command": "cat; echo cat-done; sleep 100",
                                                     "stdin": "first\n", "stdin_stream": True}},
        {"name": "sandbox_exec_write", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                     "input": "second\n"}},
        {"name": "sandbox_exec_write", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                     "eof": True}},
        {"name": "sandbox_exec_poll", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                    "wait_ms": 20000}},
        {"name": "sandbox_exec_write", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                     "input": "late\n"}},
        {"name": "sandbox_exec_signal", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                      "signal": "SIGKILL"}},
        {"name": "sandbox_wait", "arguments": {"session_id": sid, "request_id": "$0.request_id"}},
        # stdin not streamed
        {"name": "sandbox_exec_start", "arguments": {"session_id": sid, "argv": ["sleep", "100"]}},
        {"name": "sandbox_exec_write", "arguments": {"session_id": sid, "request_id": "$7.request_id",
                                                     "input": "x"}},
        {"name": "sandbox_exec_close", "arguments": {"session_id": sid, "request_id": "$7.request_id"}},
    ])
    start, w1, w2, poll, late, kill, waited, plain, not_streamed, closed = out["calls"]
    assert ok(start)["stdin_stream"] is True
    assert ok(w1) == {"request_id": ok(start)["request_id"], "written_bytes": 7, "eof": False}, w1
    assert ok(w2)["eof"] is True and ok(w2)["written_bytes"] == 0, w2
    p = ok(poll)
    assert p["stdout"].startswith("first\n") and p["running"] is True, p
    refused(late, "stdin_closed", 409)
    assert ok(kill)["signal"] == "SIGKILL"
    d = ok(waited)
    assert d["status"] == "signaled" and d["signal"] == "SIGKILL", d
    assert d["stdout"].startswith("first\nsecond\n"), d
    refused(not_streamed, "stdin_not_streamed", 409)
    assert ok(closed)["signal"] == "SIGTERM"


@pytest.mark.time_limit(240)
def test_progress_while_output_arrives(api, sid):
    script = "for i in $(seq 1 8); do echo tick-$i; sleep 0.5; done"
    out = mcp([
        {"name": "sandbox_exec", "arguments": {"session_id": sid, "command": script}, "progress": True},
        {"name": "sandbox_exec_start", "arguments": {"session_id": sid, "command": script}},
        {"name": "sandbox_wait", "arguments": {"session_id": sid, "request_id": "$1.request_id"},
         "progress": True},
    ])
    run, _, waited = out["calls"]
    assert ok(run)["stdout"].count("tick-") == 8
    assert ok(waited)["stdout"].count("tick-") == 8
    for call in (run, waited):
        prog = call["progress"]
        assert len(prog) >= 2, call
        assert [p["progress"] for p in prog] == sorted(p["progress"] for p in prog), prog
        assert any("bytes of output" in p.get("message", "") and not p["message"].endswith(" 0 bytes of output")
                   for p in prog), prog


@pytest.mark.time_limit(240)
def test_read_output_of_a_sandbox_exec_command_over_http(api, sid):
    out = mcp([
        {"name": "sandbox_exec", "arguments": {"session_id": sid, "command": "printf 'a\\377b'; echo err >&2"}},
        {"name": "sandbox_read_output", "arguments": {"session_id": sid, "request_id": "$0.request_id"}},
        {"name": "sandbox_list_commands", "arguments": {"session_id": sid}},
    ], "--transport=http")
    ran, read, listed = [ok(c) for c in out["calls"]]
    assert ran["stdout_b64"] == "Yf9i" and ran["stderr"] == "err\n", ran
    assert read["stdout_b64"] == "Yf9i" and read["stderr"] == "err\n" and read["running"] is False, read
    assert read["exit"]["status"] == "succeeded", read
    assert [c["request_id"] for c in listed["commands"]] == [ran["request_id"]], listed
    assert listed["commands"][0]["argv"][0] == "/bin/sh", listed


@pytest.mark.time_limit(240)
def test_cancelled_reads_free_the_worker(api, sid):
    # one worker: a read still waiting after its cancellation would hold up the next call
    out = mcp([
        {"name": "sandbox_exec_start", "arguments": {"session_id": sid, "argv": ["sleep", "100"]}},
        {"name": "sandbox_exec_poll", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                                    "wait_ms": 30000}, "cancel_after_ms": 1500},
        {"name": "sandbox_list_commands", "arguments": {"session_id": sid}},
        {"name": "sandbox_terminal_start", "arguments": {"session_id": sid, "command": ["sh", "-c", "sleep 100"],
                                                         "wait_ms": 30000}, "cancel_after_ms": 3000},
        {"name": "sandbox_wait", "arguments": {"session_id": sid, "request_id": "$0.request_id",
                                               "timeout_ms": 30000}, "cancel_after_ms": 1500},
        {"name": "sandbox_exec_close", "arguments": {"session_id": sid, "request_id": "$0.request_id"}},
    ], "--jobs=1")
    start, poll, listed, term, waited, closed = out["calls"]
    ok(start)
    for call in (poll, term, waited):
        assert "protocolError" in call, call
    assert listed["ms"] < 10000 and len(ok(listed)["commands"]) == 1, listed
    assert closed["ms"] < 15000 and ok(closed)["stopped"] is True, closed
    # the terminal's command was started, but the answer that named it never went out: it
    # was stopped with the call, not left running with nobody knowing it
    cmds = wait_for(lambda: (lambda l: l if all(c["terminal"] for c in l) else None)(
        api.get(commands_path(sid)).json["commands"]), timeout=30, what="both commands to end")
    assert len(cmds) == 2 and cmds[1]["signal"] == "SIGTERM", cmds


def test_input_with_nul_bytes(api, sid):
    # JSON strings may hold U+0000: every byte reaches the command, none is cut there
    out = mcp([
        {"name": "sandbox_exec", "arguments": {"session_id": sid, "argv": ["od", "-An", "-c"], "stdin": "a\u0000b"}},
        {"name": "sandbox_exec_start", "arguments": {"session_id": sid, "argv": ["od", "-An", "-c"],
                                                     "stdin_stream": True}},
        {"name": "sandbox_exec_write", "arguments": {"session_id": sid, "request_id": "$1.request_id",
                                                     "input": "x\u0000y", "eof": True}},
        {"name": "sandbox_wait", "arguments": {"session_id": sid, "request_id": "$1.request_id"}},
    ])
    run, _, written, waited = out["calls"]
    assert ok(run)["stdout"].split() == ["a", "\\0", "b"], run
    assert ok(written)["written_bytes"] == 3, written
    assert ok(waited)["stdout"].split() == ["x", "\\0", "y"], waited
