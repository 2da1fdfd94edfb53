# SPDX-License-Identifier: LGPL-2.1-or-later
"""The API over TCP: bearer keys from /etc/sandboxd/api-keys."""

import pytest

from conftest import Api, assert_error, run, unique_user, units


@pytest.fixture
def anonymous(tcp):
    """TCP without a key (the tcp fixture made sure the port is our daemon's)."""
    return Api("tcp")


def assert_unauthorized(r):
    assert_error(r, 401, "unauthorized")
    assert r.headers.get("WWW-Authenticate", "").split()[0] == "Bearer", r.headers


def test_no_key_is_401(anonymous):
    assert_unauthorized(anonymous.get("/v1/health"))
    assert_unauthorized(anonymous.get("/v1/sessions"))


@pytest.mark.parametrize("authorization", [
    "Bearer wrong-key-0123456789abcdef",
    "Bearer ",
    "Basic dGVuYW50MTpwYXNzd29yZA==",
    "bearer-ish",
])
def test_wrong_key_is_401(anonymous, authorization):
    assert_unauthorized(anonymous.get("/v1/health", headers={"Authorization": authorization}))


def test_key_of_another_form_is_401(anonymous, api_key):
    # the right key, but not as a bearer token
    assert_unauthorized(anonymous.get("/v1/health", headers={"Authorization": api_key}))
    assert_unauthorized(anonymous.get("/v1/health", headers={"Authorization": "Bearer " + api_key + "x"}))


def test_unauthorized_requests_start_nothing(anonymous):
    before = units()
    user = unique_user()
    r = anonymous.post("/v1/sessions", {"user": user, "workspace": "w"})
    assert_unauthorized(r)
    r = anonymous.post("/v1/sessions", {"user": user, "workspace": "w"},
                       headers={"Authorization": "Bearer not-the-key-at-all-xx"})
    assert_unauthorized(r)
    assert units() == before


@pytest.mark.parametrize("path,status", [("/healthz", 200), ("/readyz", 200)])
def test_probes_need_no_key(anonymous, path, status):
    r = anonymous.get(path)
    assert r.status == status, r
    assert r.json["status"] in ("ok", "ready")


def test_health_with_key(tcp):
    r = tcp.get("/v1/health")
    assert r.status == 200, r
    assert r.json["status"] == "ok"


def test_session_and_echo_over_tcp(tcp, scope):
    user, ws = scope
    r = tcp.post("/v1/sessions", {"user": user, "workspace": ws})
    assert r.status == 201, r
    s = r.json
    assert "sandboxd-%s.slice" % s["id"] in units()
    res = run(tcp, s["id"], ["sh", "-c", "echo over-tcp; echo tcp-err >&2; id -un"])
    assert res["exit"]["status"] == "succeeded", res["exit"]
    assert res["stdout"] == "over-tcp\n%s\n" % s["dynamic_user"]
    assert res["stderr"] == "tcp-err\n"
    r = tcp.get("/v1/sessions/" + s["id"])
    assert r.status == 200 and r.json["commands"] == 1, r


def test_bad_input_over_tcp(tcp, scope):
    before = units()
    assert_error(tcp.post("/v1/sessions", {"user": "Root", "workspace": "w"}), 400, "invalid_name")
    assert units() == before
    s = tcp.create_session(*scope)
    before = units()
    assert_error(tcp.post("/v1/sessions/%s/commands" % s["id"], {"argv": []}), 400, "invalid_value")
    assert units() == before


def test_command_stream_needs_the_key(tcp, anonymous, scope):
    s = tcp.create_session(*scope)
    before = units()
    assert_unauthorized(anonymous.post("/v1/sessions/%s/commands" % s["id"], {"argv": ["true"]}))
    assert units() == before
    assert tcp.get_session(s["id"])["commands"] == 0
