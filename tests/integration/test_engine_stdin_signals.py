# SPDX-License-Identifier: LGPL-2.1-or-later
"""Signals to running commands, and their stdin: given text, base64, a stream fed
piece by piece, or nothing (/dev/null)."""

import base64
import hashlib
import os
import time

import pytest

from conftest import (assert_error, commands_path, run, snapshot, snapshot_bytes, start_command, wait_for,
                      wait_terminal)


def post_signal(api, sid, rid, name):
    return api.post(commands_path(sid, rid, "/signal"), {"signal": name})


def wait_stdout(api, sid, rid, text, timeout=10):
    wait_for(lambda: text in (snapshot(api, sid, rid)["stdout"] or ""), timeout=timeout,
             what="%r in the output of %s" % (text, rid))


# --------------------------------------------------------------------------
# 9. signals

@pytest.mark.time_limit(30)
def test_sigint_runs_the_trap(api, session):
    sid = session["id"]
    script = "trap 'echo got INT; exit 42' INT; echo ready; while :; do sleep 0.1; done"
    start_command(api, sid, {"argv": ["sh", "-c", script], "request_id": "trap"})
    wait_stdout(api, sid, "trap", "ready\n")
    r = post_signal(api, sid, "trap", "SIGINT")
    assert r.status == 200, r
    assert r.json["signal"] == "SIGINT" and r.json["request_id"] == "trap", r.json
    snap = wait_terminal(api, sid, "trap", timeout=10)
    assert snap["stdout"] == "ready\ngot INT\n", snap["stdout"]
    assert snap["status"] == "failed" and snap["exit_code"] == 42 and snap["signal"] is None, snap


@pytest.mark.time_limit(30)
def test_sigkill_is_signaled(api, session):
    sid = session["id"]
    start_command(api, sid, {"argv": ["sh", "-c", "echo up; exec sleep 300"], "request_id": "victim"})
    wait_stdout(api, sid, "victim", "up\n")
    t0 = time.monotonic()
    r = post_signal(api, sid, "victim", "SIGKILL")
    assert r.status == 200, r
    snap = wait_terminal(api, sid, "victim", timeout=10)
    assert time.monotonic() - t0 < 5
    assert snap["status"] == "signaled" and snap["signal"] == "SIGKILL", snap
    assert snap["reason"] == "signal" and snap["exit_code"] is None, snap

    # after the end: 409
    r = post_signal(api, sid, "victim", "SIGTERM")
    assert_error(r, 409, "not_running")


@pytest.mark.time_limit(30)
def test_sigterm_default_action(api, session):
    sid = session["id"]
    start_command(api, sid, {"argv": ["sh", "-c", "echo up; exec sleep 300"], "request_id": "term"})
    wait_stdout(api, sid, "term", "up\n")
    assert post_signal(api, sid, "term", "SIGTERM").status == 200
    snap = wait_terminal(api, sid, "term", timeout=10)
    assert snap["status"] == "signaled" and snap["signal"] == "SIGTERM" and snap["reason"] == "signal", snap


@pytest.mark.time_limit(60)
def test_signal_right_after_start_is_delivered(api, session):
    """A signal sent as soon as ?wait=false answered (the unit may still be starting) is
    not lost: either it reaches the command, or the answer says it did not."""
    sid = session["id"]
    outcomes = []
    for i in range(6):  # a race: several tries to meet it
        rid = "early-%d" % i
        start_command(api, sid, {"argv": ["sleep", "300"], "request_id": rid})
        r = post_signal(api, sid, rid, "SIGKILL")
        deadline = time.monotonic() + 2
        snap = snapshot(api, sid, rid)
        while not snap["terminal"] and time.monotonic() < deadline:
            time.sleep(0.1)
            snap = snapshot(api, sid, rid)
        outcomes.append((rid, r.status, r.body, snap["status"], snap["signal"]))
        if not snap["terminal"]:
            assert post_signal(api, sid, rid, "SIGKILL").status == 200  # clean up
            wait_terminal(api, sid, rid, timeout=10)
    lost = [o for o in outcomes if o[1] == 200 and o[3] == "running"]
    assert not lost, "SIGKILL answered 200 but the command still ran 2 s later: %r" % lost
    for rid, status, body, st, sig in outcomes:
        assert status == 200 and (st, sig) == ("signaled", "SIGKILL"), (rid, status, body, st, sig)


@pytest.mark.parametrize("name", ["SIGSTOP", "KILL", "9", "sigint", "", "SIGINT "])
def test_bad_signal_name(api, session, name):
    sid = session["id"]
    start_command(api, sid, {"argv": ["sh", "-c", "echo up; exec sleep 30"], "request_id": "bad-sig"})
    wait_stdout(api, sid, "bad-sig", "up\n")
    r = post_signal(api, sid, "bad-sig", name)
    assert_error(r, 400, "invalid_value")
    # the command was not touched
    assert snapshot(api, sid, "bad-sig")["terminal"] is False
    assert post_signal(api, sid, "bad-sig", "SIGKILL").status == 200
    wait_terminal(api, sid, "bad-sig", timeout=10)


@pytest.mark.parametrize("body, code", [({"signal": 9}, "invalid_type"), ({}, "invalid_type"),
                                        ({"signal": "SIGINT", "x": 1}, "unknown_field"),
                                        ("not json", "invalid_json")])
def test_bad_signal_body(api, session, body, code):
    sid = session["id"]
    run(api, sid, {"argv": ["true"], "request_id": "done"})
    r = api.post(commands_path(sid, "done", "/signal"), body)
    assert_error(r, 400, code)


def test_signal_unknown_command(api, session):
    r = post_signal(api, session["id"], "no-such-command", "SIGINT")
    assert_error(r, 404, "not_found")


# --------------------------------------------------------------------------
# 10. stdin

def test_stdin_text(api, session):
    text = "hello\nw\u00f6rld \u2713\nno newline at the end"
    res = run(api, session["id"], {"argv": ["cat"], "stdin": {"text": text}})
    assert res["exit"]["status"] == "succeeded", res["exit"]
    assert res["stdout"] == text
    snap = snapshot(api, session["id"], res["accepted"]["request_id"])
    assert snap["stdin"] == "data", snap["stdin"]


def test_stdin_base64_binary(api, session):
    data = os.urandom(200 * 1024) + bytes(range(256))
    res = run(api, session["id"], {"argv": ["cat"], "stdin": {"base64": base64.b64encode(data).decode()},
                                   "request_id": "b64"})
    assert res["exit"]["status"] == "succeeded", res["exit"]
    assert res["stdout_bytes"] == data
    snap = snapshot(api, session["id"], "b64")
    assert snapshot_bytes(snap, "stdout") == data
    assert snap["stdout"] is None and snap["stdout_b64"], "binary output in the text field"
    # and what the command read is exactly that
    res = run(api, session["id"], {"argv": ["sha256sum"], "stdin": {"base64": base64.b64encode(data).decode()}})
    assert res["stdout"].split()[0] == hashlib.sha256(data).hexdigest()


@pytest.mark.time_limit(30)
def test_stdin_stream_in_order(api, session):
    sid = session["id"]
    start_command(api, sid, {"argv": ["cat"], "stdin": "stream", "request_id": "feed"})
    path = commands_path(sid, "feed", "/stdin")

    r = api.post(path, b"first\n", headers={"Content-Type": "application/octet-stream"})
    assert r.status == 200, r
    assert r.json == {"written": 6}, r.json
    # cat echoes it at once: the command reads while stdin is still open
    wait_stdout(api, sid, "feed", "first\n")
    assert snapshot(api, sid, "feed")["terminal"] is False

    for chunk in (b"second\n", b"thi", b"rd\n", b"\xc3\xa9\n"):
        r = api.post(path, chunk, headers={"Content-Type": "application/octet-stream"})
        assert r.status == 200 and r.json == {"written": len(chunk)}, r
    r = api.post(path + "?eof=1", b"last", headers={"Content-Type": "application/octet-stream"})
    assert r.status == 200 and r.json == {"written": 4}, r

    snap = wait_terminal(api, sid, "feed", timeout=10)
    assert snap["status"] == "succeeded", snap
    assert snap["stdout"] == "first\nsecond\nthird\n\u00e9\nlast", snap["stdout"]
    assert snap["stdin"] == "stream", snap

    # closed: no more
    r = api.post(path, b"more", headers={"Content-Type": "application/octet-stream"})
    assert_error(r, 409, "stdin_closed")


@pytest.mark.time_limit(30)
def test_stdin_stream_eof_alone(api, session):
    sid = session["id"]
    start_command(api, sid, {"argv": ["wc", "-c"], "stdin": "stream", "request_id": "wc"})
    path = commands_path(sid, "wc", "/stdin")
    chunk = b"x" * (900 << 10)  # under MaxBodySize=1M; 4 of them are more than the pipe holds
    for _ in range(4):
        r = api.post(path, chunk, headers={"Content-Type": "application/octet-stream"})
        assert r.status == 200 and r.json == {"written": len(chunk)}, r
    r = api.post(path + "?eof=1", b"", headers={"Content-Type": "application/octet-stream"})
    assert r.status == 200 and r.json == {"written": 0}, r
    snap = wait_terminal(api, sid, "wc", timeout=10)
    assert snap["status"] == "succeeded", snap
    assert snap["stdout"].strip() == str(4 * len(chunk)), snap


def test_stdin_on_a_command_without_stream(api, session):
    sid = session["id"]
    start_command(api, sid, {"argv": ["sleep", "30"], "request_id": "nostream"})
    r = api.post(commands_path(sid, "nostream", "/stdin"), b"data",
                 headers={"Content-Type": "application/octet-stream"})
    assert_error(r, 409, "stdin_not_streamed")
    api.post(commands_path(sid, "nostream", "/signal"), {"signal": "SIGKILL"})
    # a given text is not a stream either
    run(api, sid, {"argv": ["cat"], "stdin": {"text": "x"}, "request_id": "text"})
    r = api.post(commands_path(sid, "text", "/stdin"), b"data", headers={"Content-Type": "application/octet-stream"})
    assert_error(r, 409, "stdin_not_streamed")


@pytest.mark.time_limit(30)
def test_no_stdin_is_dev_null(api, session):
    t0 = time.monotonic()
    res = run(api, session["id"], ["cat"])
    assert time.monotonic() - t0 < 5, "cat waited for input"
    assert res["exit"]["status"] == "succeeded", res["exit"]
    assert res["stdout"] == "" and res["stderr"] == ""
    assert snapshot(api, session["id"], res["accepted"]["request_id"])["stdin"] == "null"
    res = run(api, session["id"], ["sh", "-c", "readlink /proc/self/fd/0; test -c /proc/self/fd/0 && echo chr"])
    assert res["stdout"].splitlines()[-1] == "chr", res
