# SPDX-License-Identifier: LGPL-2.1-or-later
"""Socket activation: sandboxd does not run until a request comes.

This module runs first (pytest takes files in alphabetical order): before it
nothing has talked to sandboxd."""

from conftest import Api, is_active, sh, systemctl_show, wait_for


def stop_daemon():
    sh("systemctl", "stop", "sandboxd.service")
    # forget earlier starts (StartLimitBurst=) when the suite is run again
    sh("systemctl", "reset-failed", "sandboxd.service", "sandboxd.socket", check=False)
    assert is_active("sandboxd.service") == "inactive"
    sock = systemctl_show("sandboxd.socket", "ActiveState", "SubState")
    assert sock == {"ActiveState": "active", "SubState": "listening"}, sock


def test_unix_request_starts_daemon(api_key):
    stop_daemon()
    r = Api("unix").get("/v1/health")
    assert r.status == 200, r
    assert r.json["status"] == "ok"
    assert is_active("sandboxd.service") == "active"
    # a daemon just started by this request
    assert r.json["uptime"] < 30, r.json
    st = systemctl_show("sandboxd.service", "MainPID", "TriggeredBy")
    assert st["MainPID"] not in ("", "0")
    assert "sandboxd.socket" in st["TriggeredBy"], st


def test_tcp_request_starts_daemon(api_key):
    stop_daemon()
    # /healthz needs no key
    r = Api("tcp").get("/healthz")
    assert r.status == 200, r
    assert r.json == {"status": "ok"}
    # if another system's sandboxd answered on this port, ours stays inactive
    wait_for(lambda: is_active("sandboxd.service") == "active", timeout=5,
             what="sandboxd.service started by the TCP request")
