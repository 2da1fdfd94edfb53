# SPDX-License-Identifier: LGPL-2.1-or-later
"""The command engine's results: re-attaching to a stream by byte offset, background
commands (?wait=false), idempotent request ids, the output cap, binary output, and
timeouts that leave nothing behind."""

import base64
import secrets
import threading
import time

import pytest

from conftest import (EventStream, assert_error, assert_well_formed, command_unit_name, commands_path, open_events,
                      replay, run, session_commands_seen, sh, snapshot, snapshot_bytes, start_command, stream_output,
                      units, wait_command_ended, wait_for, wait_terminal)

MIB = 1 << 20
OUTPUT_MAX = 1 * MIB  # OutputMax=1M, the default


# --------------------------------------------------------------------------
# 4. a client that hangs up and re-attaches by byte offset

@pytest.mark.time_limit(60)
def test_reattach_by_offset_after_disconnect(api, session):
    sid = session["id"]
    script = 'for i in $(seq 1 30); do echo "line $i"; sleep 0.1; done; echo end >&2; exit 3'
    expected = "".join("line %d\n" % i for i in range(1, 31))
    body = {"argv": ["sh", "-c", script], "request_id": "reattach"}

    st = EventStream(api, "POST", commands_path(sid), body)
    first = []
    for ev in st:
        first.append(ev)
        if sum(1 for e in first if e["type"] == "stdout") >= 5:
            break
    offset = st.offset
    head = st.kept_raw
    st.close()
    assert first[0]["type"] == "accepted", first
    assert offset == len(head) > 0

    # the command goes on without a reader
    snap = snapshot(api, sid, "reattach")
    assert snap["terminal"] is False and snap["status"] == "running", snap
    time.sleep(0.5)

    with open_events(api, sid, "reattach", offset) as again:
        assert again.status == 200, again.error_body
        assert again.headers.get("Content-Type", "").startswith("application/x-ndjson")
        again.read_all()
        tail = again.kept_raw
        tail_events = again.events
    types = [e["type"] for e in tail_events]
    assert "accepted" not in types, "the accepted event came again after offset %d: %r" % (offset, types[:3])
    assert types.count("exit") == 1 and types[-1] == "exit", types[-3:]

    full_events, full = replay(api, sid, "reattach", 0)
    assert_well_formed(full_events, "replay from 0")
    assert head + tail == full, "no gap, no duplicate: the two parts must make up the whole log"
    assert stream_output(full_events).decode() == expected
    assert stream_output(full_events, "stderr") == b"end\n"

    snap = snapshot(api, sid, "reattach")
    assert snap["terminal"] is True and snap["status"] == "failed" and snap["exit_code"] == 3, snap
    assert snap["stdout"] == expected and snap["stderr"] == "end\n", snap
    assert snap["events_bytes"] == len(full), snap


def test_events_offset_bounds(api, session):
    sid = session["id"]
    res = run(api, sid, {"argv": ["echo", "hi"], "request_id": "bounds"})
    assert res["exit"]["status"] == "succeeded", res
    snap = snapshot(api, sid, "bounds")
    size = snap["events_bytes"]
    assert size > 0

    # at the end: nothing more, and the stream ends (the command is over)
    events, raw = replay(api, sid, "bounds", size)
    assert events == [] and raw == b""
    # past the end
    r = api.get(commands_path(sid, "bounds", "/events?offset=%d" % (size + 1)))
    assert_error(r, 416, "invalid_offset")
    r = api.get(commands_path(sid, "bounds", "/events?offset=abc"))
    assert_error(r, 400, "invalid_value")
    r = api.get(commands_path(sid, "no-such-rid", "/events"))
    assert_error(r, 404, "not_found")


# --------------------------------------------------------------------------
# 5. ?wait=false

@pytest.mark.time_limit(60)
def test_wait_false_answers_at_once(api, session):
    sid = session["id"]
    t0 = time.monotonic()
    acc = start_command(api, sid, {"argv": ["sh", "-c", "sleep 2; echo done"], "request_id": "bg"})
    elapsed = time.monotonic() - t0
    assert elapsed < 1.5, "202 took %.2f s: it waited for the command" % elapsed
    assert acc["request_id"] == "bg" and acc["session"] == sid, acc
    assert acc["unit"] == command_unit_name(sid, 1), acc
    assert acc["status"] == "running", acc

    snap = snapshot(api, sid, "bg")
    assert snap["found"] is True and snap["request_id"] == "bg", snap
    assert snap["terminal"] is False and snap["status"] == "running", snap
    assert snap["exit_code"] is None and snap["duration_ms"] is None, snap
    assert snap["stdout"] == "", snap
    listed = api.get(commands_path(sid)).json["commands"]
    assert [c["request_id"] for c in listed] == ["bg"] and listed[0]["terminal"] is False, listed

    snap = wait_terminal(api, sid, "bg", timeout=20)
    assert snap["status"] == "succeeded" and snap["exit_code"] == 0, snap
    assert snap["stdout"] == "done\n", snap
    assert snap["duration_ms"] >= 1900, snap
    # the same id with ?wait=false again: the first command's summary, 200
    r = api.post(commands_path(sid) + "?wait=false", {"argv": ["false"], "request_id": "bg"})
    assert r.status == 200, r
    assert r.json["unit"] == acc["unit"] and r.json["status"] == "succeeded", r.json


# --------------------------------------------------------------------------
# 6. idempotent request ids

@pytest.mark.time_limit(60)
def test_same_request_id_twice_is_one_command(api, session):
    sid = session["id"]
    script = "echo start; sleep 1.5; echo end; exit 4"
    body = {"argv": ["sh", "-c", script], "request_id": "once-" + secrets.token_hex(3)}
    results = [None, None]
    errors = []
    barrier = threading.Barrier(2)

    def client(i):
        try:
            barrier.wait()
            results[i] = run(api, sid, body)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    # while they run: one command of this session in systemd (a unit, or a cgroup)
    time.sleep(0.7)
    running = session_commands_seen(sid)
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert list(running) == [1], running

    a, b = results
    assert a["accepted"]["unit"] == b["accepted"]["unit"] == command_unit_name(sid, 1)
    assert a["accepted"]["request_id"] == b["accepted"]["request_id"] == body["request_id"]
    for res in results:
        assert res["stdout"] == "start\nend\n", res["stdout"]
        assert res["exit"]["status"] == "failed" and res["exit"]["exit_code"] == 4, res["exit"]
    assert a["exit"]["duration_ms"] == b["exit"]["duration_ms"]

    listed = api.get(commands_path(sid)).json["commands"]
    assert [c["request_id"] for c in listed] == [body["request_id"]], listed
    assert api.get_session(sid)["commands"] == 1

    # and a third time, after the end: the stored result, no new unit
    before = units()
    c = run(api, sid, dict(body, argv=["echo", "something else"]))
    assert c["accepted"]["unit"] == a["accepted"]["unit"]
    assert c["stdout"] == "start\nend\n" and c["exit"]["exit_code"] == 4, c
    assert not {u for u in units() - before if u.startswith("sandboxd-%s-" % sid)}
    assert api.get_session(sid)["commands"] == 1


# --------------------------------------------------------------------------
# 7. the output cap, and binary output

@pytest.mark.time_limit(90)
def test_output_cap_live_stream_snapshot_and_replay(api, session):
    sid = session["id"]
    total = 3 * MIB
    line = b"0123456789abcdef0123456789abcde\n"  # 32 bytes
    expected = line * (total // len(line))
    res = run(api, sid, {"argv": ["sh", "-c", "yes 0123456789abcdef0123456789abcde 2>/dev/null | head -c %d" % total],
                         "request_id": "big"}, timeout=60)
    assert res["exit"]["status"] == "succeeded", res["exit"]

    # live: everything, the part past the cap in "live":true lines
    events = res["events"]
    kept = stream_output(events, live=False)
    live = stream_output(events, live=True)
    got = res["stdout_bytes"]
    assert len(got) == total, "the live stream delivered %d of %d bytes (%d kept, %d live)" % (
        len(got), total, len(kept), len(live))
    assert got == expected
    assert kept == expected[:OUTPUT_MAX], "kept part: %d bytes" % len(kept)
    trunc = [e for e in events if e["type"] == "truncated"]
    assert trunc == [dict(trunc[0], type="truncated", stream="stdout", kept_bytes=OUTPUT_MAX)], trunc

    snap = snapshot(api, sid, "big")
    assert snap["truncated"] is True and snap["stdout_truncated"] is True, snap["truncated"]
    assert snap["stderr_truncated"] is False
    assert snap["stdout_bytes"] == total, snap["stdout_bytes"]
    assert snap["stderr_bytes"] == 0
    assert snapshot_bytes(snap, "stdout") == expected[:OUTPUT_MAX]

    # replay from 0: the kept part, the mark, the exit; nothing live
    rev, raw = replay(api, sid, "big", 0)
    assert_well_formed([e for e in rev if e["type"] != "truncated"], "replay from 0")
    assert not [e for e in rev if e.get("live")], "live lines in a replay"
    assert stream_output(rev) == expected[:OUTPUT_MAX]
    types = [e["type"] for e in rev]
    assert types.count("truncated") == 1, types[-5:]
    assert types.index("truncated") < types.index("exit")
    assert [e for e in rev if e["type"] == "truncated"][0]["kept_bytes"] == OUTPUT_MAX
    assert len(raw) == snap["events_bytes"]


@pytest.mark.time_limit(60)
def test_output_cap_with_a_late_reader(api, session):
    """A reader attached while output past the cap streams gets it live, from then on."""
    sid = session["id"]
    # 1.5 MiB at once (past the cap), then numbered lines for 2 s
    script = ('head -c 1572864 /dev/zero | tr "\\0" x; echo; '
              'for i in $(seq 1 20); do echo "tail $i"; sleep 0.1; done')
    start_command(api, sid, {"argv": ["sh", "-c", script], "request_id": "late"})
    wait_for(lambda: snapshot(api, sid, "late")["stdout_truncated"], timeout=10, what="the cap to be reached")
    with open_events(api, sid, "late", 0) as st:
        st.read_all()
    live = stream_output(st.events, live=True).decode()
    lines = [l for l in live.splitlines() if l.startswith("tail ")]
    assert lines, "no live line after the cap reached a reader attached later"
    n = int(lines[0].split()[1])
    assert lines == ["tail %d" % i for i in range(n, 21)], "live lines not complete from the first one on: %r" % lines
    snap = snapshot(api, sid, "late")
    assert snap["stdout_bytes"] == 1572864 + 1 + sum(len("tail %d\n" % i) for i in range(1, 21)), snap["stdout_bytes"]


def test_binary_output_round_trips(api, session):
    sid = session["id"]
    expected = bytes(range(256)) * 64
    res = run(api, sid, {"argv": ["python3", "-c", "import sys; sys.stdout.buffer.write(bytes(range(256)) * 64)"],
                         "request_id": "bin"})
    assert res["exit"]["status"] == "succeeded", res["exit"]
    assert res["stdout_bytes"] == expected
    assert any("data_b64" in e for e in res["events"] if e["type"] == "stdout")
    snap = snapshot(api, sid, "bin")
    assert snap["stdout"] is None, "non-UTF-8 output in the text field"
    assert base64.b64decode(snap["stdout_b64"]) == expected
    assert snap["stdout_bytes"] == len(expected)
    rev, _ = replay(api, sid, "bin")
    assert stream_output(rev) == expected


@pytest.mark.time_limit(30)
def test_character_cut_between_writes_stays_text(api, session):
    # U+2713 written as 1 byte, then 2 bytes 0.3 s later
    res = run(api, session["id"], ["sh", "-c", r"printf '\342'; sleep 0.3; printf '\234\223 ok\n'"])
    assert res["stdout"] == "\u2713 ok\n"
    outs = [e for e in res["events"] if e["type"] == "stdout"]
    assert all("data" in e and "data_b64" not in e for e in outs), outs
    snap = snapshot(api, session["id"], res["accepted"]["request_id"])
    assert snap["stdout"] == "\u2713 ok\n", snap


# --------------------------------------------------------------------------
# 8. timeouts leave nothing behind

@pytest.mark.time_limit(60)
def test_timeout_kills_every_process(api, session):
    sid = session["id"]
    marker = "sbxmark" + secrets.token_hex(6)
    # background loops (one ignores SIGTERM), and a foreground sleep; the marker is in
    # every process's command line (forked shells keep it)
    script = ('(while :; do sleep 1; done) & (trap "" TERM; while :; do sleep 1; done) & '
              'echo started; sleep 300 # ' + marker)
    t0 = time.monotonic()
    # 3 s: under load, 1 s once ended the command before sh had written "started"
    res = run(api, sid, {"argv": ["sh", "-c", script], "timeout_ms": 3000}, timeout=40)
    elapsed = time.monotonic() - t0
    ex = res["exit"]
    assert res["stdout"] == "started\n"
    assert ex["status"] == "timed_out" and ex["reason"] == "timeout", ex
    assert ex["exit_code"] is None, ex
    assert 3.0 <= elapsed < 25, elapsed

    # reported as over: nothing of it runs any more
    left = sh("pgrep", "-af", marker, check=False).stdout
    assert not left.strip(), "processes of the timed-out command are left:\n" + left
    snap = snapshot(api, sid, res["accepted"]["request_id"])
    wait_command_ended(snap, collected=True)
    assert snap["status"] == "timed_out" and snap["terminal"] is True, snap
