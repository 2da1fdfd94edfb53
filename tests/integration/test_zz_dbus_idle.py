# SPDX-License-Identifier: LGPL-2.1-or-later
"""Idle exit and the bus name: sandboxd gives the name up and exits when idle, and the
next D-Bus call activates it again.

Runs near the end (file name): it restarts sandboxd with a short IdleExitSec= and
closes the sessions earlier tests left."""

import time

import pytest

import sbxbus as B
from conftest import config_dropin, is_active, wait_for

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
