# SPDX-License-Identifier: LGPL-2.1-or-later
"""Health endpoints, unknown routes and wrong methods."""

import datetime
import re
import time

import pytest

from conftest import SANDBOXD_BIN, assert_error, sh


def test_healthz(api):
    r = api.get("/healthz")
    assert r.status == 200, r
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.json == {"status": "ok"}


def test_readyz(api):
    r = api.get("/readyz")
    assert r.status == 200, r
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.json["status"] == "ready"


def test_v1_health_fields(api):
    r = api.get("/v1/health")
    assert r.status == 200, r
    h = r.json
    for k in ("status", "timestamp", "uptime", "version", "sessions", "running_commands", "pool"):
        assert k in h, "missing %r in %r" % (k, h)
    assert h["status"] == "ok"

    ts = datetime.datetime.strptime(h["timestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    now = datetime.datetime.now(datetime.timezone.utc)
    assert abs((now - ts).total_seconds()) < 60, (h["timestamp"], now)

    assert isinstance(h["uptime"], (int, float)) and h["uptime"] >= 0
    version = sh(SANDBOXD_BIN, "--version").stdout.split()
    assert version[0] == "sandboxd" and h["version"] == version[1], (h["version"], version)
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?\S*", h["version"]), h["version"]

    assert isinstance(h["sessions"], int) and h["sessions"] >= 0
    assert isinstance(h["running_commands"], int) and h["running_commands"] >= 0
    pool = h["pool"]
    for k in ("size", "ready", "in_use"):
        assert isinstance(pool[k], int) and pool[k] >= 0, pool
    assert pool["ready"] + pool["in_use"] <= pool["size"], pool


def test_v1_health_uptime_grows(api):
    a = api.get("/v1/health").json["uptime"]
    time.sleep(1.1)
    b = api.get("/v1/health").json["uptime"]
    assert 1.0 <= b - a < 30, (a, b)


def test_v1_health_counts_sessions(api, scope):
    before = api.get("/v1/health").json["sessions"]
    api.create_session(*scope)
    after = api.get("/v1/health").json["sessions"]
    assert after == before + 1, (before, after)


@pytest.mark.parametrize("path", [
    "/", "/nope", "/v1", "/v1/nope", "/v2/health", "/healthz/extra", "/v1/health/x",
    "/v1/sessions/0123456789abcdef/nope", "/v1/sessions/0123456789abcdef/commands/1/x/y/z/w",
])
def test_unknown_route_is_404(api, path):
    assert_error(api.get(path), 404, "not_found")


@pytest.mark.parametrize("method,path,allow", [
    ("POST", "/healthz", "GET"),
    ("DELETE", "/readyz", "GET"),
    ("PUT", "/v1/health", "GET"),
    ("PUT", "/v1/sessions", "GET, POST"),
    ("DELETE", "/v1/sessions", "GET, POST"),
])
def test_wrong_method_is_405_with_allow(api, method, path, allow):
    r = api.request(method, path, body={} if method in ("POST", "PUT") else None)
    assert_error(r, 405, "method_not_allowed")
    assert r.headers.get("Allow") == allow, r.headers.get("Allow")


def test_wrong_method_on_a_session(api, session):
    r = api.request("PUT", "/v1/sessions/" + session["id"], body={})
    assert_error(r, 405, "method_not_allowed")
    assert "GET" in r.headers.get("Allow", "")
