# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxctl mcp as a protocol server: calls served concurrently, progress, cancellation and
the bounds of what a client may send. The official SDK is the client where it can be
(mcp-protocol.mjs); a raw JSON-RPC exchange where the SDK would not send what is tested.

Times are only compared with each other or with generous bounds: the commands' own start and
end times from sandboxd prove that calls overlapped; bench/mcp.py measures the latencies."""

import json
import os
import select
import shutil
import signal
import subprocess
import time

import pytest

from conftest import snapshot, unique_user, wait_command_ended, wait_for

SDK = os.environ.get("SANDBOXD_MCP_SDK")
SANDBOXCTL = os.environ.get("SANDBOXD_TEST_SANDBOXCTL", "/usr/bin/sandboxctl")
SCENARIOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mcp-protocol.mjs")

needs_sdk = pytest.mark.skipif(not SDK, reason="SANDBOXD_MCP_SDK is not set: run through tools/dev test")


def scenario(name, args, *mcp_args, timeout=180):
    node = shutil.which("node")
    assert node, "node is not installed"
    p = subprocess.run([node, SCENARIOS, SDK, SANDBOXCTL, name, json.dumps(args)] + list(mcp_args),
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, "the scenario failed (%d)\nstdout: %s\nstderr: %s" % (p.returncode, p.stdout, p.stderr)
    return json.loads(p.stdout)


@pytest.fixture
def sid(api):
    s = api.create_session(unique_user(), "proto")
    yield s["id"]
    api.request("DELETE", "/v1/sessions/" + s["id"])


def commands(api, sid):
    return api.get("/v1/sessions/%s/commands" % sid).json["commands"]


def exec_call(srv, call_id, sid, **arguments):
    srv.send({"jsonrpc": "2.0", "id": call_id, "method": "tools/call",
              "params": {"name": "sandbox_exec", "arguments": dict(arguments, session_id=sid)}})


def running_command(api, sid):
    """The request id of the session's command once it runs."""
    return wait_for(lambda: next((c["request_id"] for c in commands(api, sid) if c["status"] == "running"), None),
                    timeout=30, what="the command to run")


def ended(api, sid, rid):
    """Its snapshot once it is no longer running."""
    return wait_for(lambda: (lambda s: s if s["status"] != "running" else None)(snapshot(api, sid, rid)),
                    timeout=30, what="the command to end")


@needs_sdk
def test_ping_is_answered_while_a_call_runs(api, sid):
    out = scenario("ping", {"session_id": sid, "long_s": 4, "pings": 5})
    assert out["long"]["ok"] and out["long"]["data"]["status"] == "succeeded", out
    # every ping came back while the sleep still ran, long before it could end
    assert all(p["call_running"] for p in out["pings"]), out
    assert max(p["ms"] for p in out["pings"]) < 1000, out["pings"]


# a command that says when it began and ended (ns, the host's clock)
TIMED = ["sh", "-c", "date +%s%N; sleep {s}; date +%s%N"]


def spans(results):
    out = []
    for r in results:
        assert r["ok"] and r["data"]["status"] == "succeeded", r
        begin, end = (int(x) for x in r["data"]["stdout"].split())
        out.append((begin, end))
    return sorted(out)


@needs_sdk
def test_parallel_calls_run_at_once(api, sid):
    out = scenario("parallel", {"session_id": sid, "n": 4, "argv": [a.format(s=2) for a in TIMED]})
    runs = spans(out["parallel"])
    # all four ran at the same time: each began before any ended
    assert max(b for b, _ in runs) < min(e for _, e in runs), runs
    # and the client waited for about one of them, not four
    assert out["parallel_ms"] < 4 * 2000, out


@needs_sdk
def test_jobs_bounds_the_calls_at_once(api, sid):
    out = scenario("parallel", {"session_id": sid, "n": 3, "argv": [a.format(s=1) for a in TIMED]}, "--jobs=1")
    runs = spans(out["parallel"])
    # one at a time: each began after the one before had ended
    for (_, end), (begin, _) in zip(runs, runs[1:]):
        assert begin >= end, runs


@needs_sdk
def test_progress_notifications(api, sid):
    out = scenario("progress", {"session_id": sid, "script": "for i in 1 2 3; do echo line $i; sleep 1; done"})
    assert out["result"]["ok"] and out["result"]["data"]["stdout"] == "line 1\nline 2\nline 3\n", out
    progress = out["progress"]
    assert len(progress) >= 2, out
    values = [p["progress"] for p in progress]
    assert values == sorted(values) and len(set(values)) == len(values), values  # increasing, as MCP wants
    assert all("bytes of output" in p["message"] for p in progress), progress
    assert any(not p["message"].endswith(" 0 bytes of output") for p in progress), progress


@needs_sdk
def test_no_progress_without_a_token(api, sid):
    # the raw exchange below sends no progressToken: nothing but the answer comes
    with RawServer() as srv:
        srv.initialize()
        srv.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                  "params": {"name": "sandbox_exec", "arguments": {"session_id": sid, "argv": ["sleep", "2"]}}})
        msgs = srv.read_until(lambda m: m.get("id") == 7, timeout=60)
    assert [m for m in msgs if m.get("method") == "notifications/progress"] == [], msgs


@needs_sdk
def test_cancel_stops_the_command(api, sid):
    out = scenario("cancel", {"session_id": sid, "long_s": 120, "cancel_ms": 1500})
    assert out["long"] == "rejected", out
    # the next call did not wait for the cancelled one
    assert out["next"]["ok"] and out["next"]["data"]["stdout"] == "next\n", out
    assert out["next_ms"] < 30000, out
    cmds = [c for c in commands(api, sid) if c.get("argv", [None])[0] == "sleep"]
    assert len(cmds) == 1, cmds
    snap = wait_for(lambda: (lambda s: s if s["status"] != "running" else None)(
        snapshot(api, sid, cmds[0]["request_id"])), timeout=30, what="the cancelled command to end")
    assert snap["signal"] == "SIGTERM" and snap["duration_ms"] < 60000, snap
    wait_command_ended(snap, timeout=30, collected=True)


@needs_sdk
def test_cancel_kills_a_command_that_ignores_sigterm(api, sid):
    with RawServer("--kill-grace=1s") as srv:
        srv.initialize()
        exec_call(srv, 9, sid, argv=["sh", "-c", "trap '' TERM; echo ready; sleep 100 & wait"])
        rid = running_command(api, sid)
        # the trap is set once it said so: before, SIGTERM would end it
        wait_for(lambda: "ready" in (snapshot(api, sid, rid).get("stdout") or ""), timeout=30,
                 what="the command to ignore SIGTERM")
        srv.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9,
                                                                                    "reason": "test"}})
        snap = ended(api, sid, rid)
        # a ping is still answered, and the cancelled call never is
        srv.send({"jsonrpc": "2.0", "id": 10, "method": "ping"})
        msgs = srv.read_until(lambda m: m.get("id") == 10, timeout=30)
    assert snap["signal"] == "SIGKILL", snap
    assert not [m for m in msgs if m.get("id") == 9], msgs


@needs_sdk
def test_sdk_timeout_cancels_and_the_server_goes_on(api, sid):
    out = scenario("timeout", {"session_id": sid, "long_s": 120, "timeout_ms": 1500})
    assert out["long"] == "rejected" and "timed out" in out["error"].lower(), out
    cmds = [c for c in commands(api, sid) if c.get("argv", [None])[0] == "sleep"]
    assert ended(api, sid, cmds[0]["request_id"])["signal"] == "SIGTERM", cmds


def test_cancel_of_a_waiting_call_runs_nothing(api, sid):
    with RawServer("--jobs=1") as srv:
        srv.initialize()
        srv.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                  "params": {"name": "sandbox_exec", "arguments": {"session_id": sid, "argv": ["sleep", "2"]}}})
        srv.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                  "params": {"name": "sandbox_exec", "arguments": {"session_id": sid, "argv": ["echo", "never"]}}})
        srv.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
        srv.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                  "params": {"name": "sandbox_exec", "arguments": {"session_id": sid, "argv": ["echo", "after"]}}})
        msgs = srv.read_until(lambda m: m.get("id") == 3, timeout=60)
    ids = [m.get("id") for m in msgs if "id" in m]
    assert 1 in ids and 2 not in ids, msgs
    assert [c["argv"] for c in commands(api, sid)] == [["sleep", "2"], ["echo", "after"]]


# SIGTERM with stdin open, and after closing it (what an MCP client does to stop a server)
@pytest.mark.parametrize("close_stdin", [False, True])
def test_sigterm_stops_the_calls_and_their_commands(api, sid, close_stdin):
    with RawServer() as srv:
        srv.initialize()
        exec_call(srv, 1, sid, argv=["sleep", "100"])
        rid = running_command(api, sid)
        if close_stdin:
            srv.p.stdin.close()
            time.sleep(0.5)
        srv.p.send_signal(signal.SIGTERM)
        assert srv.p.wait(timeout=30) == 0
    snap = snapshot(api, sid, rid)
    assert snap["status"] != "running" and snap["signal"] == "SIGTERM", snap


def test_end_of_input_answers_the_calls_read(api, sid):
    with RawServer() as srv:
        srv.initialize()
        srv.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                  "params": {"name": "sandbox_exec", "arguments": {"session_id": sid, "command": "sleep 1; echo x"}}})
        srv.p.stdin.close()
        msgs = srv.read_until(lambda m: m.get("id") == 1, timeout=60)
        assert srv.p.wait(timeout=30) == 0
    assert msgs[-1]["result"]["structuredContent"]["data"]["stdout"] == "x\n", msgs


def test_default_timeout_flag(api, sid):
    with RawServer("--timeout=1s") as srv:
        srv.initialize()
        srv.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                  "params": {"name": "sandbox_exec", "arguments": {"session_id": sid, "argv": ["sleep", "30"]}}})
        srv.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                  "params": {"name": "sandbox_exec", "arguments": {"session_id": sid, "argv": ["sleep", "30"],
                                                                   "timeout_ms": 0}}})
        msgs = srv.read_until(lambda m: m.get("id") == 1, timeout=60)
    res = {m["id"]: m["result"]["structuredContent"] for m in msgs if m.get("id") in (1, 2)}
    assert res[1]["ok"] and res[1]["data"]["status"] == "timed_out", res
    assert not res[2]["ok"] and res[2]["error"]["code"] == "invalid_value", res
    assert res[2]["error"]["http_status"] == 400 and "timeout_ms" in res[2]["error"]["message"], res


def test_bad_messages_get_json_rpc_errors():
    with RawServer() as srv:
        srv.initialize()
        srv.send_raw(b"{not json\n")
        srv.send_raw(b"[1,2]\n")
        srv.send({"jsonrpc": "2.0", "id": 1, "method": 5})
        srv.send({"jsonrpc": "2.0", "id": 2, "method": "no/such"})
        srv.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "no_such_tool"}})
        srv.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "sandbox_exec",
                                                                                 "arguments": [1]}})
        srv.send({"jsonrpc": "2.0", "id": {"an": "object"}, "method": "ping"})
        # a line longer than the bound is refused and skipped; the next one is read as usual
        srv.send_raw(b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":"' + b"a" * (33 << 20) + b'"}}\n')
        # what json-c would take gigabytes for, refused unparsed: 200000 empty objects
        srv.send_raw(b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":[' + b"{}," * 200000 + b'{}]}}\n')
        # trailing bytes after the message, and an id of more than 1 KiB
        srv.send_raw(b'{"jsonrpc":"2.0","id":8,"method":"ping"} {"x":1}\n')
        srv.send({"jsonrpc": "2.0", "id": "i" * 2000, "method": "ping"})
        srv.send({"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"_meta": {"progressToken": "t" * 2000}}})
        srv.send({"jsonrpc": "2.0", "id": 6, "method": "ping"})
        msgs = srv.read_until(lambda m: m.get("id") == 6, timeout=60)
        # the big one cost no memory to speak of
        with open("/proc/%d/status" % srv.p.pid) as f:
            rss_kib = int(next(line for line in f if line.startswith("VmHWM:")).split()[1])
        assert rss_kib < 200 * 1024, rss_kib
    errors = [m["error"]["code"] for m in msgs if "error" in m]
    assert errors[:2] == [-32700, -32600], msgs
    by_id = {m["id"]: m for m in msgs if isinstance(m.get("id"), int)}
    assert by_id[1]["error"]["code"] == -32600 and by_id[2]["error"]["code"] == -32601, msgs
    assert by_id[3]["error"]["code"] == -32602 and "no_such_tool" in by_id[3]["error"]["message"], msgs
    assert by_id[4]["error"]["code"] == -32602, msgs
    assert 5 not in by_id and 7 not in by_id and 8 not in by_id and by_id[6]["result"] == {}, msgs
    assert by_id[9]["error"]["code"] == -32602 and "progressToken" in by_id[9]["error"]["message"], msgs
    # [..], method 5, {id}, the long line, 200000 objects, the long id
    assert sum(1 for m in msgs if m.get("error", {}).get("code") == -32600) == 6, msgs
    assert sum(1 for m in msgs if m.get("error", {}).get("code") == -32700) == 2, msgs  # {not json, trailing


def test_prompts_and_capabilities():
    with RawServer() as srv:
        init = srv.initialize()
        srv.send({"jsonrpc": "2.0", "id": 2, "method": "prompts/list"})
        srv.send({"jsonrpc": "2.0", "id": 3, "method": "prompts/get",
                  "params": {"name": "sandbox_task", "arguments": {"task": "print 6*7 in Python", "workspace": "w1"}}})
        srv.send({"jsonrpc": "2.0", "id": 4, "method": "prompts/get", "params": {"name": "sandbox_task"}})
        srv.send({"jsonrpc": "2.0", "id": 5, "method": "prompts/get",
                  "params": {"name": "sandbox_task", "arguments": {"task": "x", "workspace": "../w"}}})
        srv.send({"jsonrpc": "2.0", "id": 6, "method": "prompts/get", "params": {"name": "no_such_prompt"}})
        srv.send({"jsonrpc": "2.0", "id": 7, "method": "prompts/get", "params": {"name": "sandbox_overview"}})
        msgs = srv.read_until(lambda m: m.get("id") == 7, timeout=30)
    caps = init["result"]["capabilities"]
    assert set(caps) >= {"tools", "resources", "prompts"}, caps
    assert caps["resources"] == {"subscribe": True, "listChanged": True}, caps
    assert "proxy" in init["result"]["instructions"] and "no network" not in init["result"]["instructions"]
    by_id = {m["id"]: m for m in msgs}
    assert [p["name"] for p in by_id[2]["result"]["prompts"]] == ["sandbox_task", "sandbox_overview"], msgs
    text = by_id[3]["result"]["messages"][0]["content"]["text"]
    assert "print 6*7 in Python" in text and '"w1"' in text and "sandbox_exec_start" in text, text
    for i in (4, 5, 6):
        assert by_id[i]["error"]["code"] == -32602, by_id[i]
    assert "sandbox_health" in by_id[7]["result"]["messages"][0]["content"]["text"], by_id[7]


class RawServer:
    """sandboxctl mcp with JSON-RPC written and read by hand."""

    def __init__(self, *args):
        self.args = list(args)

    def __enter__(self):
        self.p = subprocess.Popen([SANDBOXCTL, "mcp"] + self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=None)
        self.buf = b""
        return self

    def __exit__(self, *exc):
        try:
            self.p.stdin.close()
        except (BrokenPipeError, ValueError):
            pass
        try:
            self.p.wait(timeout=60)
        finally:
            if self.p.poll() is None:
                self.p.kill()
                self.p.wait()
        self.p.stdout.close()

    def send_raw(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def send(self, msg):
        self.send_raw(json.dumps(msg).encode() + b"\n")

    def read_until(self, done, timeout):
        msgs = []
        deadline = time.monotonic() + timeout
        fd = self.p.stdout.fileno()
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                m = json.loads(line)
                msgs.append(m)
                if done(m):
                    return msgs
            left = deadline - time.monotonic()
            assert left > 0, "no answer in time: %r" % msgs
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 1 << 16)
                assert chunk, "sandboxctl mcp ended: %r" % msgs
                self.buf += chunk

    def initialize(self):
        self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "raw", "version": "1"}}})
        init = self.read_until(lambda m: m.get("id") == "init", timeout=30)[-1]
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return init
