# SPDX-License-Identifier: LGPL-2.1-or-later
"""Freezing a session (FreezeUnit on its slice) on a cgroup-v2 host: its
processes stop, keep their state, and go on after the thaw; what happens to
signals, new commands, closing and restarts of sandboxd in between."""

import json
import time

import pytest

from conftest import (assert_error, assert_stopping, bus_paused, Client, commands_path, daemon_pid, gone,
                      journal_cursor, journal_since, sh, snapshot, snapshot_bytes, start_command, start_waiting,
                      systemctl_show, units, wait_daemon_running, wait_for, wait_terminal)

COUNTER = "i=0; while :; do i=$((i+1)); echo $i; sleep 0.05; done"
TRAPPING_COUNTER = 'trap "echo got-TERM; exit 3" TERM; ' + COUNTER
STILL = 2.0  # seconds a frozen counter must not move


def last_count(api, sid, rid):
    out = snapshot_bytes(snapshot(api, sid, rid), "stdout").decode().split()
    return int(out[-1]) if out else 0


def start_counter(api, sid, rid="counter", script=COUNTER):
    start_command(api, sid, {"argv": ["sh", "-c", script], "request_id": rid})
    wait_for(lambda: last_count(api, sid, rid) >= 3, timeout=30, what="the counter to count")


def freezer_state(unit):
    return systemctl_show(unit, "FreezerState")["FreezerState"]


def cgroup_frozen(unit):
    cg = systemctl_show(unit, "ControlGroup")["ControlGroup"]
    with open("/sys/fs/cgroup%s/cgroup.events" % cg) as f:
        return dict(l.split() for l in f)["frozen"] == "1"


def freeze(api, sid, action="freeze"):
    r = api.post("/v1/sessions/%s/%s" % (sid, action))
    assert r.status == 200, r
    assert r.json["frozen"] is (action == "freeze"), r.json
    return r.json


def assert_still(api, sid, rid):
    """The counter does not move while frozen (after what was in flight arrived)."""
    time.sleep(0.3)
    before = last_count(api, sid, rid)
    time.sleep(STILL)
    after = last_count(api, sid, rid)
    assert after == before, "a frozen counter went on from %d to %d" % (before, after)
    return after


def test_frozen_counter_stops_and_resumes_after_thaw(api, session):
    sid, slice_ = session["id"], session["unit"]
    start_counter(api, sid)
    freeze(api, sid)
    assert freezer_state(slice_) == "frozen"
    assert cgroup_frozen(slice_), "the kernel does not report the slice's cgroup frozen"
    assert api.get_session(sid)["frozen"] is True
    stopped_at = assert_still(api, sid, "counter")
    assert snapshot(api, sid, "counter")["status"] == "running"

    freeze(api, sid, "thaw")
    assert freezer_state(slice_) == "running"
    assert not cgroup_frozen(slice_)
    wait_for(lambda: last_count(api, sid, "counter") > stopped_at + 5, timeout=30,
             what="the counter to go on after the thaw")
    # it resumed where it stopped: no restart, no lost state
    out = snapshot_bytes(snapshot(api, sid, "counter"), "stdout").decode().split()
    assert [int(x) for x in out] == list(range(1, len(out) + 1))


def test_freeze_and_thaw_are_idempotent(api, session):
    sid = session["id"]
    start_counter(api, sid)
    freeze(api, sid)
    freeze(api, sid)
    assert freezer_state(session["unit"]) == "frozen"
    freeze(api, sid, "thaw")
    freeze(api, sid, "thaw")
    assert freezer_state(session["unit"]) == "running"


def test_command_started_while_frozen_waits_for_the_thaw(api, session):
    sid = session["id"]
    freeze(api, sid)
    acc = start_command(api, sid, {"argv": ["sh", "-c", "echo started"], "request_id": "late"})
    assert acc["status"] == "running", acc
    time.sleep(STILL)
    snap = snapshot(api, sid, "late")
    assert not snap["terminal"] and snap["stdout"] == "", snap
    freeze(api, sid, "thaw")
    snap = wait_terminal(api, sid, "late", timeout=60)
    assert snap["status"] == "succeeded" and snap["stdout"] == "started\n", snap


def test_sigterm_waits_for_the_thaw_sigkill_does_not(api, session):
    sid = session["id"]
    start_counter(api, sid, "term", TRAPPING_COUNTER)
    start_counter(api, sid, "kill", TRAPPING_COUNTER)
    freeze(api, sid)

    r = api.post(commands_path(sid, "term", "/signal"), {"signal": "SIGTERM"})
    assert r.status == 200, r
    r = api.post(commands_path(sid, "kill", "/signal"), {"signal": "SIGKILL"})
    assert r.status == 200, r
    # SIGKILL ends a frozen process; a handled signal runs its handler only once thawed
    snap = wait_terminal(api, sid, "kill", timeout=30)
    assert snap["status"] == "signaled" and snap["signal"] == "SIGKILL", snap
    time.sleep(1)
    assert not snapshot(api, sid, "term")["terminal"]

    freeze(api, sid, "thaw")
    snap = wait_terminal(api, sid, "term", timeout=30)
    assert snap["status"] == "failed" and snap["exit_code"] == 3, snap
    assert snapshot_bytes(snap, "stdout").endswith(b"got-TERM\n")


def test_closing_a_frozen_session_ends_its_commands(api, session):
    sid, slice_ = session["id"], session["unit"]
    start_counter(api, sid)
    freeze(api, sid)
    r = api.delete("/v1/sessions/" + sid)
    assert r.status == 200, r
    s = api.get_session(sid)
    assert s["state"] == "closed" and s["frozen"] is False, s
    snap = wait_terminal(api, sid, "counter", timeout=30)
    assert snap["status"] == "signaled" and snap["signal"] == "SIGTERM", snap
    wait_for(lambda: slice_ not in units(), timeout=30, what="the slice to go away")


def test_freezing_a_closed_session_is_refused(api, session):
    sid = session["id"]
    assert api.delete("/v1/sessions/" + sid).status == 200
    for action in ("freeze", "thaw"):
        err = assert_error(api.post("/v1/sessions/%s/%s" % (sid, action)), 409, "session_not_active")
        assert err["message"], err
    assert api.get_session(sid)["frozen"] is False


@pytest.mark.restarts_daemon
def test_a_frozen_session_stays_frozen_across_a_restart(api, session):
    sid, slice_ = session["id"], session["unit"]
    start_counter(api, sid)
    freeze(api, sid)
    old = int(systemctl_show("sandboxd.service", "MainPID")["MainPID"])
    sh("systemctl", "reset-failed", "sandboxd.service", check=False)  # not the start rate limit
    sh("systemctl", "restart", "sandboxd.service")
    wait_daemon_running(not_pid=old, timeout=60)

    s = api.get_session(sid)
    assert s["state"] == "active" and s["frozen"] is True, s
    assert freezer_state(slice_) == "frozen"
    stopped_at = assert_still(api, sid, "counter")

    freeze(api, sid, "thaw")
    wait_for(lambda: last_count(api, sid, "counter") > stopped_at + 5, timeout=30,
             what="the counter to go on after the thaw")


@pytest.mark.restarts_daemon
@pytest.mark.time_limit(240)
def test_restart_while_a_freeze_and_a_thaw_wait(api, scope):
    """A freeze and a thaw waiting on PID 1 (the bus paused) when sandboxd is restarted
    (systemctl restart: the fd store is kept, so the counters' output goes on): both
    clients get 503 stopping and sandboxd exits cleanly. PID 1 may still get the calls once
    the bus goes on, after sandboxd is gone: after the restart each session says what
    systemd has (frozen or not), and a freeze and a thaw asked again work."""
    user, ws = scope
    a = api.create_session(user, ws)
    b = api.create_session(user, ws + "-2")
    start_counter(api, a["id"])
    start_counter(api, b["id"])
    freeze(api, b["id"])
    # the test before restarted sandboxd too: its starts must not add up to StartLimitBurst=
    sh("systemctl", "reset-failed", "sandboxd.service", check=False)

    cursor = journal_cursor()
    pid = daemon_pid()
    with bus_paused(api):
        clients = [Client("POST", "/v1/sessions/%s/freeze" % a["id"]), Client("POST", "/v1/sessions/%s/thaw" % b["id"])]
        start_waiting(api, clients, timeout=30, what="the freeze and the thaw to wait")
        # the new sandboxd waits for the bus as it starts: do not wait for it here
        sh("systemctl", "restart", "--no-block", "sandboxd.service")
        for c in clients:
            c.join(30)
            assert_stopping(c)
        wait_for(lambda: gone(pid), timeout=30, what="sandboxd to exit")
    wait_daemon_running(not_pid=pid, timeout=60)
    # the first run's end, as PID 1 logged it (a crash would fail the test in conftest too); all
    # the journal since the cursor (the new run logs a line per recovered session), and
    # journald may write it a little late
    wait_for(lambda: "sandboxd.service: Deactivated successfully." in
             journal_since(cursor, "sandboxd.service", lines=1 << 20), timeout=15,
             what="PID 1's record of the first run's clean end")
    for s in (a, b):
        state = wait_for(lambda: freezer_state(s["unit"]) in ("frozen", "running") and freezer_state(s["unit"]),
                         timeout=30, what="systemd to be done with %s" % s["unit"])
        wait_for(lambda: api.get_session(s["id"])["frozen"] is (state == "frozen"), timeout=30,
                 what="session %s to say it is %s, as systemd has it" % (s["id"], state))
    for s in (a, b):
        freeze(api, s["id"])
        assert freezer_state(s["unit"]) == "frozen"
        freeze(api, s["id"], "thaw")
        assert freezer_state(s["unit"]) == "running"
    for s in (a, b):
        counted = last_count(api, s["id"], "counter")
        wait_for(lambda: last_count(api, s["id"], "counter") > counted + 5, timeout=30,
                 what="the counter of %s to go on" % s["id"])


def test_sandboxctl_freeze_and_thaw(api, session):
    sid = session["id"]
    start_counter(api, sid)
    for transport in ("dbus", "http"):
        ctl = ("env", "SANDBOXD_TRANSPORT=" + transport, "sandboxctl")
        sh(*ctl, "freeze", sid)
        assert freezer_state(session["unit"]) == "frozen", transport
        shown = json.loads(sh(*ctl, "--json", "show", sid).stdout)
        assert shown["session"]["frozen"] is True, (transport, shown)
        assert "(frozen)" in sh(*ctl, "show", sid).stdout
        sh(*ctl, "thaw", sid)
        assert freezer_state(session["unit"]) == "running", transport
        shown = json.loads(sh(*ctl, "--json", "show", sid).stdout)
        assert shown["session"]["frozen"] is False, (transport, shown)
