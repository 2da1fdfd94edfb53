# SPDX-License-Identifier: LGPL-2.1-or-later
"""Leftovers: a command whose main process ends while a child of it goes on, and that child
ignores SIGTERM. The command's result is its main process's; what it left behind gets
SIGTERM, then SIGKILL after TimeoutStopSec= (sandboxd.conf(5)), and then its unit, which
PID 1 leaves failed (result "timeout"), is collected all the same: with sandboxd watching,
and when sandboxd was away while it happened. In session mode there is no unit of the
command: what it left behind is killed all the same, and its cgroup ends empty."""

import secrets
import time

import pytest

from conftest import (EXEC_MODE, config_dropin, daemon_pid, restart_daemon, run, sh, snapshot, start_command,
                      systemctl_show, units, wait_command_ended, wait_daemon_running, wait_for, wait_terminal)

KILL_GRACE = 5  # TimeoutStopSec=5s, the default
LONG_GRACE = 20  # the drop-in of test_leftover_collected_after_a_restart_while_it_is_killed
DROPIN = "/etc/sandboxd/sandboxd.conf.d/50-test-leftovers.conf"


def leftover_script(marker):
    # the main process echoes and exits 0 at once; its background subshell ignores SIGTERM
    # (and so do the sleeps it starts), and keeps stdout open; the marker is in the command
    # line of every shell of it (a forked shell keeps it)
    return '(trap "" TERM; while :; do sleep 1; done) & echo done # ' + marker


def processes(marker):
    return sh("pgrep", "-af", marker, check=False).stdout.strip()


def failed_units(sid):
    out = sh("systemctl", "list-units", "--all", "--state=failed", "--plain", "--no-legend",
             "sandboxd-%s-*" % sid).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def check_collected(api, sid, rid, unit, marker, grace):
    """Nothing of the command runs once its grace is over, its unit is gone from PID 1 (not
    left failed; in session mode: its cgroup is empty), and its result is still what it was."""
    wait_for(lambda: not processes(marker), timeout=grace + 30, interval=0.2,
             what="the leftovers of %s to be killed" % unit)
    if EXEC_MODE == "unit":
        wait_for(lambda: unit not in units(), timeout=60, interval=0.5,
                 what="%s to be collected (it is %r)" % (unit, systemctl_show(unit, "ActiveState", "SubState",
                                                                              "Result")))
    else:
        wait_command_ended(snapshot(api, sid, rid), timeout=30)
    assert not failed_units(sid), failed_units(sid)
    snap = snapshot(api, sid, rid)
    assert snap["status"] == "succeeded" and snap["exit_code"] == 0 and snap["terminal"] is True, snap
    assert snap["stdout"] == "done\n", snap["stdout"]


@pytest.mark.time_limit(150)
def test_leftover_ignoring_sigterm_is_collected(api, session):
    sid = session["id"]
    marker = "sbxleft" + secrets.token_hex(6)
    res = run(api, sid, {"argv": ["sh", "-c", leftover_script(marker)], "request_id": "leftover"}, timeout=60)
    ex = res["exit"]
    unit = res["accepted"]["unit"]
    # the result is the main process's: it exited 0, whatever became of what it left
    assert ex["status"] == "succeeded" and ex["exit_code"] == 0 and ex["signal"] is None, ex
    assert ex["reason"] == "success", ex
    assert res["stdout"] == "done\n", res["stdout"]
    check_collected(api, sid, "leftover", unit, marker, KILL_GRACE)


@pytest.mark.unit_mode_only
@pytest.mark.restarts_daemon
@pytest.mark.time_limit(150)
def test_leftover_collected_when_it_fails_while_sandboxd_is_stopped(api, session):
    sid = session["id"]
    marker = "sbxleft" + secrets.token_hex(6)
    acc = start_command(api, sid, {"argv": ["sh", "-c", leftover_script(marker)], "request_id": "leftover"})
    unit = acc["unit"]
    snap = wait_terminal(api, sid, "leftover", timeout=60)
    assert snap["status"] == "succeeded" and snap["exit_code"] == 0, snap

    sh("systemctl", "stop", "sandboxd.service")
    assert daemon_pid() == 0
    # the leftovers are killed, and the unit ends, while nobody watches it
    wait_for(lambda: not processes(marker), timeout=KILL_GRACE + 30, interval=0.2,
             what="the leftovers of %s to be killed" % unit)
    wait_for(lambda: systemctl_show(unit, "ActiveState")["ActiveState"] in ("failed", "inactive"), timeout=30,
             what="%s to end" % unit)
    sh("systemctl", "start", "sandboxd.service")
    wait_daemon_running(timeout=30)
    check_collected(api, sid, "leftover", unit, marker, KILL_GRACE)


@pytest.fixture
def long_grace():
    """TimeoutStopSec=LONG_GRACE, for a restart of sandboxd well inside the grace."""
    with config_dropin(DROPIN, timeout=30) as write:
        write("[Command]\nTimeoutStopSec=%ds\n" % LONG_GRACE)
        yield lambda: restart_daemon(timeout=30)


@pytest.mark.unit_mode_only
@pytest.mark.restarts_daemon
@pytest.mark.time_limit(240)
def test_leftover_collected_after_a_restart_while_it_is_killed(api, long_grace, session):
    restart = long_grace
    sid = session["id"]
    marker = "sbxleft" + secrets.token_hex(6)
    acc = start_command(api, sid, {"argv": ["sh", "-c", leftover_script(marker)], "request_id": "leftover"})
    unit = acc["unit"]
    t0 = time.monotonic()
    snap = wait_terminal(api, sid, "leftover", timeout=60)
    assert snap["status"] == "succeeded" and snap["exit_code"] == 0, snap
    assert systemctl_show(unit, "TimeoutStopUSec")["TimeoutStopUSec"] == "%ds" % LONG_GRACE

    # the result is recorded and the leftovers had their SIGTERM: a new sandboxd comes in
    # while PID 1 waits for them to go
    restart()
    state = systemctl_show(unit, "ActiveState", "SubState")
    if time.monotonic() - t0 < LONG_GRACE - 2:
        assert state["ActiveState"] == "deactivating", state
    check_collected(api, sid, "leftover", unit, marker, LONG_GRACE)
