# SPDX-License-Identifier: LGPL-2.1-or-later
"""Idle exit and the bus name: sandboxd tells systemd it stops, gives the name up and exits
when idle, and the next D-Bus call activates it again.

Runs near the end (file name): it restarts sandboxd with a short IdleExitSec= and
closes the sessions earlier tests left."""

import subprocess
import time

import pytest

import sbxbus as B
from conftest import (bus_paused, config_dropin, daemon_pid, gone, is_active, journal_cursor, journal_since,
                      wait_for)

pytestmark = pytest.mark.restarts_daemon

DROPIN = "/etc/sandboxd/sandboxd.conf.d/50-test-dbus-idle.conf"


def close_all_sessions():
    for sid, user, ws, state, path in B.manager("ListSessions")[0]:
        if state not in ("closed", "failed"):
            B.manager("CloseSession", "s", sid)


@pytest.mark.time_limit(90)
def test_idle_exit_then_bus_activation(api_key):
    with config_dropin(DROPIN) as idle_exit:
        close_all_sessions()
        # this test starts sandboxd three times in a few seconds: config_dropin() restarts it
        # after a reset-failed (which clears the unit's start count), so that neither earlier
        # starts count against StartLimitBurst= nor these against the tests that follow
        idle_exit("[Daemon]\nIdleExitSec=2s\n")
        assert is_active("sandboxd.service") == "active"
        # calls keep it up while they come, each one starting the countdown again...
        for _ in range(4):
            B.manager("ListSessions")
            time.sleep(1)
        assert is_active("sandboxd.service") == "active"
        # ...then it gives up the name and exits
        wait_for(lambda: is_active("sandboxd.service") == "inactive", timeout=30, interval=0.2,
                 what="sandboxd to exit when idle")
        owned = B.busctl("call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                         "NameHasOwner", "s", B.NAME).stdout
        assert owned.strip() == "b false", owned
        # the next call starts it again, and is answered
        out = B.busctl("call", B.NAME, B.PATH, B.MANAGER, "ListSessions").stdout
        assert out.startswith("a(sssso)"), out
        assert is_active("sandboxd.service") == "active"


@pytest.mark.time_limit(120)
def test_idle_exit_says_stopping_before_the_name_goes(api):
    """STOPPING=1 comes before the name is released: with the bus paused, ReleaseName
    cannot be answered, yet systemd already has the unit deactivating. A call made then
    is answered promptly, whether the bus gives it to this sandboxd (before the release)
    or activates the next one (after): with the name released first, an activation while
    the unit was still active started nothing and waited out the activation timeout."""
    with config_dropin(DROPIN) as idle_exit:
        close_all_sessions()
        idle_exit("[Daemon]\nIdleExitSec=2s\n")
        pid = daemon_pid()
        cursor = journal_cursor()
        with bus_paused(api):
            wait_for(lambda: "Idle for 2 s: exiting" in journal_since(cursor, "sandboxd.service"), timeout=30,
                     interval=0.2, what="sandboxd to reach its idle exit")
            # told systemd, while its ReleaseName waits on the paused bus
            assert is_active("sandboxd.service") == "deactivating"
            assert daemon_pid() == pid
            caller = subprocess.Popen(["busctl", "--timeout=60", "call", B.NAME, B.PATH, B.MANAGER, "ListSessions"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(0.5)
        t0 = time.monotonic()
        out, err = caller.communicate(timeout=90)
        took = time.monotonic() - t0
        assert caller.returncode == 0 and out.startswith("a(sssso)"), (out, err)
        assert took < 15, "the call took %.1f s: it waited for an activation" % took
        wait_for(lambda: gone(pid), timeout=30, what="the idle sandboxd to exit")
