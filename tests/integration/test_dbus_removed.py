# SPDX-License-Identifier: LGPL-2.1-or-later
"""SessionRemoved is sent when a session's object goes, that is when the session is
forgotten RetainClosedSec= after it closed; closing sends PropertiesChanged of State.

Restarts sandboxd with RetainClosedSec=3s (the shortest a test can watch)."""

import time

import pytest

import sbxbus as B
from conftest import config_dropin, unique_user, wait_for

pytestmark = pytest.mark.restarts_daemon

DROPIN = "/etc/sandboxd/sandboxd.conf.d/50-test-dbus-removed.conf"


def on_bus(path):
    try:
        B.get_property(path, B.SESSION, "Id")
        return True
    except B.BusError as e:
        assert e.name == "org.freedesktop.DBus.Error.UnknownObject", e
        return False


@pytest.mark.time_limit(120)
def test_session_removed_when_forgotten(api):
    with config_dropin(DROPIN) as write:
        write("[Session]\nRetainClosedSec=3s\n")
        user = unique_user()
        sid, path = B.manager("CreateSession", "ssa{sv}", user, "removed", {})
        assert B.call(path, B.SESSION, "Run", "asa{sv}", ["true"], {})[0] == "succeeded"
        cpath = path + "/command/1"
        with B.Monitor() as mon:
            B.call(path, B.SESSION, "Close", "b", False)
            closed = time.monotonic()
            # at the close: State, and the object is still there, with its command
            assert mon.properties_changed(path, B.SESSION, "State", "closed") == "closed"
            assert on_bus(path) and B.get_property(cpath, B.COMMAND, "Status") == "succeeded"
            assert path in B.busctl("tree", "--list", B.NAME).stdout.split()
            assert not [m for m in mon.seen if m.get("member") == "SessionRemoved"], mon.seen

            # forgotten: the signal, and the object is gone with its commands
            assert mon.wait("SessionRemoved", lambda d: d[0] == sid, timeout=30) == [sid, path]
            assert time.monotonic() - closed >= 2.5, "removed before RetainClosedSec="
            assert not on_bus(path)
            assert B.error_of(B.get_property, cpath, B.COMMAND, "Status") == "org.freedesktop.DBus.Error.UnknownObject"
            assert path not in B.busctl("tree", "--list", B.NAME).stdout.split()
            assert B.error_of(B.manager, "GetSession", "s", sid) == B.ERROR + "NoSuchSession"
            assert api.get("/v1/sessions/" + sid).status == 404
            # sent once
            B.manager("ListSessions")
            time.sleep(0.5)
            while not mon.q.empty():
                mon.seen.append(mon.q.get())
            assert len([m for m in mon.seen if m.get("member") == "SessionRemoved"
                        and m["payload"]["data"][0] == sid]) == 1, mon.seen
