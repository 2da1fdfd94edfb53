# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd exits when idle and socket activation brings it back.

Runs last (file name): it restarts sandboxd with a short IdleExitSec=, which drops the
in-memory sessions of earlier tests.
"""

import json
import subprocess
import time

import pytest

from conftest import config_dropin

pytestmark = pytest.mark.restarts_daemon

DROPIN = "/etc/sandboxd/sandboxd.conf.d/50-test-idle.conf"


def systemctl(*args):
    return subprocess.run(["systemctl", *args], capture_output=True, text=True)


def is_active(unit):
    return systemctl("is-active", unit).stdout.strip()


def health():
    return subprocess.run(["curl", "-sS", "--max-time", "10", "--unix-socket", "/run/sandboxd/http.sock",
                           "http://localhost/v1/health"], capture_output=True, text=True, check=True).stdout


def wait_for(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.2)
    return pred()


def close_all_sessions():
    """Sessions persist across restarts and keep sandboxd up: close what earlier tests left."""
    out = subprocess.run(["curl", "-sS", "--max-time", "10", "--unix-socket", "/run/sandboxd/http.sock",
                          "http://localhost/v1/sessions"], capture_output=True, text=True, check=True).stdout
    for s in json.loads(out)["sessions"]:
        if s["state"] != "closed":
            subprocess.run(["curl", "-sS", "--max-time", "30", "-X", "DELETE", "--unix-socket",
                            "/run/sandboxd/http.sock", "http://localhost/v1/sessions/" + s["id"]],
                           capture_output=True, check=True)


def test_exits_when_idle_and_comes_back():
    with config_dropin(DROPIN) as idle_exit:
        close_all_sessions()
        idle_exit("[Daemon]\nIdleExitSec=2s\n")
        assert is_active("sandboxd.service") == "active"
        assert '"status":"ok"' in health()

        # no live session, no command, no connection: gone after about 2 s, socket still listening
        assert wait_for(lambda: is_active("sandboxd.service") != "active", 15)
        assert is_active("sandboxd.socket") == "active"
        result = systemctl("show", "-p", "Result", "--value", "sandboxd.service").stdout.strip()
        assert result == "success", "an idle exit is a clean exit, not a failure"

        # the next request activates it again
        assert '"status":"ok"' in health()
        assert is_active("sandboxd.service") == "active"


def test_stays_while_a_session_exists():
    with config_dropin(DROPIN) as idle_exit:
        idle_exit("[Daemon]\nIdleExitSec=1s\n")
        out = subprocess.run(["curl", "-sS", "--max-time", "10", "--unix-socket", "/run/sandboxd/http.sock",
                              "-d", '{"user":"idle","workspace":"keep"}', "http://localhost/v1/sessions"],
                             capture_output=True, text=True, check=True).stdout
        assert '"state":"active"' in out
        time.sleep(3)
        assert is_active("sandboxd.service") == "active"
