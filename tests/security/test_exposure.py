# SPDX-License-Identifier: LGPL-2.1-or-later
"""systemd-analyze security on a running command unit: the brief's target is an
exposure of at most 1.0, in network modes none and proxy."""

import re

import pytest

from conftest import sh, start_command, wait_unit_running

MAX_EXPOSURE = 1.0


def exposure(unit):
    out = sh("systemd-analyze", "security", "--no-pager", unit).stdout
    m = re.search(r"Overall exposure level for %s: ([0-9.]+)" % re.escape(unit), out)
    assert m, out
    return float(m.group(1)), out


@pytest.mark.parametrize("mode", ["none", "proxy"])
def test_command_unit_exposure(api, scope, secnet, mode):
    user, ws = scope
    s = api.create_session(user, ws, network={"mode": mode})
    c = start_command(api, s["id"], ["sleep", "30"])
    wait_unit_running(c["unit"])
    try:
        score, out = exposure(c["unit"])
        print("%s (mode %s): exposure %.1f" % (c["unit"], mode, score))
        bad = [l for l in out.splitlines() if l.startswith("✗")]
        assert score <= MAX_EXPOSURE, "exposure %.1f > %.1f:\n%s" % (score, MAX_EXPOSURE, "\n".join(bad))
    finally:
        api.post("/v1/sessions/%s/commands/%s/signal" % (s["id"], c["request_id"]), {"signal": "SIGKILL"})


def test_daemon_exposure(api, secnet):
    """sandboxd.service itself (runs as root, connects out for the proxy): recorded, and
    bounded so that a regression shows."""
    score, out = exposure("sandboxd.service")
    print("sandboxd.service: exposure %.1f" % score)
    assert score <= 2.5, out
