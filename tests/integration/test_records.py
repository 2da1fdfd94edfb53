# SPDX-License-Identifier: LGPL-2.1-or-later
"""Records on disk: coalesced (an activity ping is not a write), and at start-up a record
that cannot be read is logged, set aside and skipped while the others load; a slice that
still has units but no record is never handed to a new session."""

import glob
import json
import os
import re
import threading
import time

import pytest

from conftest import (assert_error, commands_path, daemon_pid, is_active, journal_cursor, journal_since, run, sh,
                      snapshot, start_command, unique_user, wait_daemon_running, wait_for, wait_terminal)

pytestmark = pytest.mark.restarts_daemon

SESSIONS_DIR = "/var/lib/sandboxd/sessions"


class InodeWatch(threading.Thread):
    """The inodes PATH had while it ran: each rename of a new file onto it is a new one.
    (inotify sees only some of the renames sandboxd makes on the testbed's overlayfs.)"""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.inodes = []
        self.running = True

    def run(self):
        while self.running:
            try:
                ino = os.stat(self.path).st_ino
            except FileNotFoundError:
                continue
            if not self.inodes or self.inodes[-1] != ino:
                self.inodes.append(ino)
            time.sleep(0.0005)

    def stop(self):
        self.running = False
        self.join()
        return len(self.inodes) - 1  # changes seen


def metric(api, name):
    text = api.get("/metrics").body.decode()
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    assert m, "%s not in /metrics" % name
    return float(m.group(1))


def read_record(sid, name="session.json"):
    import json
    with open(os.path.join(SESSIONS_DIR, sid, name)) as f:
        return json.load(f)


@pytest.mark.time_limit(60)
def test_activity_pings_are_coalesced(api, session):
    sid = session["id"]
    N = 200
    time.sleep(0.5)  # the writes of its creation are done
    watch = InodeWatch(os.path.join(SESSIONS_DIR, sid, "session.json"))
    watch.start()
    time.sleep(0.05)
    writes_before = metric(api, "sandboxd_record_writes_total")
    t0 = time.monotonic()
    for _ in range(N):
        assert api.post("/v1/sessions/%s/activity" % sid).status == 200
    took = time.monotonic() - t0
    time.sleep(0.6)  # the last coalesced write is due 250 ms after the first ping it holds
    renames = watch.stop()
    writes = metric(api, "sandboxd_record_writes_total") - writes_before
    print("%d activity pings in %.2f s: %d new session.json seen, %d record writes (/metrics)"
          % (N, took, renames, writes))
    # one write a 250 ms at most, plus the one that was due when the burst began
    bound = int(took / 0.25) + 2
    assert renames <= bound, "%d pings in %.2f s wrote session.json %d times (at most %d)" % (
        N, took, renames, bound)
    assert 1 <= writes <= bound + 2, writes  # a command or pool record may be written meanwhile
    # the last ping is what is on disk
    last = api.get_session(sid)["last_activity_usec"]
    assert read_record(sid)["last_activity_usec"] == last
    assert metric(api, "sandboxd_records_queued") == 0
    assert metric(api, "sandboxd_record_write_errors_total") == 0


def make_session(api, tag, commands):
    s = api.create_session(unique_user(), "records-" + tag)
    for rid, argv in commands:
        res = run(api, s["id"], {"argv": argv, "request_id": rid})
        assert res["exit"]["status"] == "succeeded", res["exit"]
    return s["id"]


def stop_daemon():
    sh("systemctl", "stop", "sandboxd.service")
    assert daemon_pid() == 0


def start_daemon():
    sh("systemctl", "start", "sandboxd.service")
    return wait_daemon_running(timeout=20)


def record_of(session_dir, rid):
    """The record file (<n>.json) of command RID, found by its content: the command's number
    is in no name the API gives in session mode."""
    found = []
    for name in os.listdir(session_dir):
        if re.fullmatch(r"\d+\.json", name):
            with open(os.path.join(session_dir, name)) as f:
                if json.load(f).get("request_id") == rid:
                    found.append(os.path.join(session_dir, name))
    assert len(found) == 1, (rid, found)
    return found[0]


def set_aside(path):
    """The names the record at PATH was moved to."""
    return glob.glob(glob.escape(path) + ".corrupt-*Z")


@pytest.mark.time_limit(90)
def test_exec_mode_is_kept_across_a_restart(api):
    """The record keeps a session's exec mode; a record from before exec modes is a unit
    session; a mode that cannot be read sets the record aside rather than guess."""
    user = unique_user()
    sids = {}
    for tag, extra in (("session", {"exec_mode": "session"}), ("unit", {"exec_mode": "unit"}), ("old", {"exec_mode": "session"}),
                       ("bad", {"exec_mode": "session"})):
        s = api.create_session(user, "records-mode-" + tag, **extra)
        sids[tag] = s["id"]
        res = run(api, s["id"], {"argv": ["echo", tag], "request_id": "before"})
        assert res["exit"]["status"] == "succeeded", res["exit"]

    cursor = journal_cursor()
    stop_daemon()
    assert read_record(sids["session"])["exec_mode"] == "session"
    assert read_record(sids["unit"])["exec_mode"] == "unit"
    for tag, mode in (("old", None), ("bad", "sessions")):
        rec = read_record(sids[tag])
        if mode is None:
            del rec["exec_mode"]
        else:
            rec["exec_mode"] = mode
        with open(os.path.join(SESSIONS_DIR, sids[tag], "session.json"), "w") as f:
            json.dump(rec, f)
    start_daemon()

    assert api.get_session(sids["session"])["exec_mode"] == "session"
    assert api.get_session(sids["unit"])["exec_mode"] == "unit"
    assert api.get_session(sids["old"])["exec_mode"] == "unit"
    d = os.path.join(SESSIONS_DIR, sids["bad"])
    assert_error(api.get("/v1/sessions/" + sids["bad"]), 404, "not_found")
    assert len(set_aside(d)) == 1, os.listdir(SESSIONS_DIR)
    assert re.search(r"session record directory %s cannot be read" % re.escape(d),
                     journal_since(cursor, "sandboxd.service", lines=100000))
    # the kept ones work on, their results there
    for tag in ("session", "old"):
        assert snapshot(api, sids[tag], "before")["stdout"] == tag + "\n"
        res = run(api, sids[tag], {"argv": ["echo", "after"], "request_id": "after"})
        assert res["exit"]["status"] == "succeeded" and res["stdout"] == "after\n", res["exit"]


@pytest.mark.time_limit(120)
def test_corrupt_records_are_set_aside_and_skipped(api):
    good = make_session(api, "good", [("ok", ["echo", "kept"]), ("trunc", ["echo", "a"]), ("junk", ["echo", "b"]),
                                      ("empty", ["echo", "c"]), ("wrong-n", ["echo", "d"])])
    other = make_session(api, "other", [("x", ["sh", "-c", "echo other; exit 0"])])
    bad = {kind: make_session(api, kind, [("y", ["echo", "lost"])]) for kind in ("truncated", "garbage", "empty")}
    running = start_command(api, other, {"argv": ["sleep", "30"], "request_id": "runs"})
    assert running["status"] == "running", running
    good_dir = os.path.join(SESSIONS_DIR, good)
    paths = {rid: record_of(good_dir, rid) for rid in ("ok", "trunc", "junk", "empty", "wrong-n")}

    cursor = journal_cursor()
    stop_daemon()
    with open(paths["trunc"], "rb") as f:
        text = f.read()
    with open(paths["trunc"], "wb") as f:
        f.write(text[:len(text) // 2])
    with open(paths["junk"], "wb") as f:
        f.write(b"\x00\xffnot json at all")
    open(paths["empty"], "wb").close()
    # valid JSON, but of another command: it would pass for that one
    with open(paths["ok"], "rb") as f, open(paths["wrong-n"], "wb") as g:
        g.write(f.read())
    for kind, sid in bad.items():
        p = os.path.join(SESSIONS_DIR, sid, "session.json")
        with open(p, "rb") as f:
            text = f.read()
        with open(p, "wb") as f:
            f.write({"truncated": text[:-10], "garbage": b"{{{]]]", "empty": b""}[kind])
    start_daemon()

    log = journal_since(cursor, "sandboxd.service", lines=100000)
    reasons = {"trunc": "truncated JSON", "junk": "NUL byte", "empty": "empty",
               "wrong-n": "the number in it is not its file's"}
    for rid, reason in reasons.items():
        p = paths[rid]
        assert not os.path.exists(p), "%s is still there" % p
        aside = set_aside(p)
        assert len(aside) == 1, (p, os.listdir(good_dir))
        assert re.search(r"command record %s cannot be read \(%s\): moved it to %s, skipping it"
                         % (re.escape(p), re.escape(reason), re.escape(aside[0])), log), (rid, log)
    for kind, sid in bad.items():
        d = os.path.join(SESSIONS_DIR, sid)
        assert not os.path.exists(d), d
        assert len(set_aside(d)) == 1, os.listdir(SESSIONS_DIR)
        assert re.search(r"session record directory %s cannot be read \(.+\): moved it to" % re.escape(d), log), (
            kind, log)
        assert_error(api.get("/v1/sessions/" + sid), 404, "not_found")
    assert "truncated JSON" in log and "empty" in log

    # the rest is intact: results readable, the running command still followed
    assert api.get_session(good)["state"] == "active"
    assert [c["request_id"] for c in api.get(commands_path(good)).json["commands"]] == ["ok"]
    snap = snapshot(api, good, "ok")
    assert snap["status"] == "succeeded" and snap["stdout"] == "kept\n", snap
    assert_error(api.get(commands_path(good, "trunc")), 404, "not_found")
    assert snapshot(api, other, "x")["stdout"] == "other\n"
    assert snapshot(api, other, "runs")["status"] == "running"
    # and works on: a new command takes a number no record set aside had
    res = run(api, good, {"argv": ["echo", "after"], "request_id": "after"})
    assert res["exit"]["status"] == "succeeded" and res["stdout"] == "after\n", res["exit"]
    api.post(commands_path(other, "runs", "/signal"), {"signal": "SIGKILL"})
    wait_terminal(api, other, "runs")

    # set aside once: the next start finds nothing to complain about
    cursor = journal_cursor()
    stop_daemon()
    start_daemon()
    assert "cannot be read" not in journal_since(cursor, "sandboxd.service", lines=100000)


@pytest.mark.time_limit(90)
def test_slice_with_units_and_no_record_is_not_pooled(api):
    sid = make_session(api, "orphan", [])
    acc = start_command(api, sid, {"argv": ["sleep", "300"], "request_id": "orphan"})
    assert acc["status"] == "running", acc
    unit, slice_ = acc["unit"], "sandboxd-%s.slice" % sid
    wait_for(lambda: is_active(unit) == "active", timeout=10, what="%s to run" % unit)

    cursor = journal_cursor()
    stop_daemon()
    # the record is lost; PID 1 still runs its command
    sh("rm", "-rf", os.path.join(SESSIONS_DIR, sid))
    assert is_active(unit) == "active" and is_active(slice_) == "active"
    start_daemon()

    wait_for(lambda: is_active(slice_) != "active", timeout=20, what="%s to be stopped" % slice_)
    assert is_active(unit) != "active"
    log = journal_since(cursor, "sandboxd.service", lines=100000)
    assert re.search(r"Stopping %s: no session record owns it, and %s is still in it" % (
        re.escape(slice_), re.escape(unit)), log), log
    # never handed out: every slice the pool has ready now goes to new sessions, none is it
    pool = api.get("/v1/pool").json
    made = [api.create_session(unique_user(), "records-new")["id"] for _ in range(pool["ready"] + 1)]
    assert sid not in made, made
    for s in made:
        api.delete("/v1/sessions/" + s)
