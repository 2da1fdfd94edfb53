# SPDX-License-Identifier: LGPL-2.1-or-later
"""Exposed ports (POST/GET/DELETE /v1/sessions/ID/ports[/P], the Session object's
ExposePort/ListPorts/UnexposePort): a server started in a session is reached through
sandboxd-<sid>-port-<P>.socket on /run/sandboxd/ports/<sid>/<P>.sock, and on a host port
of 127.0.0.1 if asked, relayed by systemd-socket-proxyd in the session's network namespace."""

import json
import os
import re
import subprocess

import pytest

from conftest import (EXEC_MODE, Api, assert_error, config_dropin, restart_daemon, sh, start_command, systemctl_show,
                      units, wait_for)

PORT = 8000
PORTS_DIR = "/run/sandboxd/ports"
SANDBOXCTL = os.environ.get("SANDBOXD_TEST_SANDBOXCTL", "/usr/bin/sandboxctl")


def ports_path(sid, port=None):
    return "/v1/sessions/%s/ports" % sid + ("" if port is None else "/%d" % port)


def serve(api, sid, port=PORT, marker="marker.txt"):
    """Starts python3's http.server on 127.0.0.1:PORT in the session's workspace, with a file
    MARKER in it to be listed; returns the command's request id."""
    script = "echo hi > %s; exec python3 -m http.server %d --bind 127.0.0.1" % (marker, port)
    c = start_command(api, sid, {"argv": ["sh", "-c", script], "timeout_ms": 600000})
    return c["request_id"]


def curl_unix(sock, path="/", timeout=10):
    r = subprocess.run(["curl", "-sS", "--max-time", str(timeout), "--unix-socket", sock, "http://x" + path],
                       capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def curl_tcp(port, path="/", timeout=10):
    r = subprocess.run(["curl", "-sS", "--max-time", str(timeout), "http://127.0.0.1:%d%s" % (port, path)],
                       capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def listing_via(fetch, marker="marker.txt"):
    """Polls until the server's directory listing, fetched with FETCH(), names MARKER."""
    return wait_for(lambda: (lambda out: out if out and marker in out else None)(fetch()), timeout=60,
                    what="the server's listing through the exposed port")


def expose(api, sid, port=PORT, host=False, status=201):
    r = api.post(ports_path(sid), {"port": port, "host": host})
    assert r.status == status, r
    return r.json


def unit_state(unit):
    return systemctl_show(unit, "ActiveState")["ActiveState"]


@pytest.fixture
def served(api, scope):
    """A session of this lane's exec mode in the default network mode (proxy) with a server on
    127.0.0.1:8000."""
    s = api.create_session(*scope)
    serve(api, s["id"])
    yield s
    api.delete("/v1/sessions/" + s["id"])


def test_expose_unix_socket(api, served):
    sid = served["id"]
    p = expose(api, sid)
    sock = "%s/%s/%d.sock" % (PORTS_DIR, sid, PORT)
    assert p["port"] == PORT and p["socket"] == sock and p["host_port"] is None, p
    assert p["unit"] == "sandboxd-%s-port-%d.socket" % (sid, PORT), p
    st = os.stat(sock)
    assert oct(st.st_mode & 0o777) == oct(0o660), oct(st.st_mode)
    out = listing_via(lambda: curl_unix(sock))
    assert "Directory listing" in out, out

    # the relay is a dynamic user in the session's slice
    svc = "sandboxd-%s-port-%d.service" % (sid, PORT)
    props = systemctl_show(svc, "Slice", "DynamicUser", "JoinsNamespaceOf")
    assert props["Slice"] == served["unit"], props
    assert props["DynamicUser"] == "yes", props

    # idempotent: the same object, 200
    again = expose(api, sid, status=200)
    assert again == api.get(ports_path(sid, PORT)).json
    assert again["port"] == PORT and again["socket"] == sock

    lst = api.get(ports_path(sid)).json
    assert [x["port"] for x in lst["ports"]] == [PORT], lst

    # removed: the socket goes at once, the units become inactive
    r = api.delete(ports_path(sid, PORT))
    assert r.status == 200, r
    assert not os.path.exists(sock)
    wait_for(lambda: unit_state("sandboxd-%s-port-%d.socket" % (sid, PORT)) == "inactive", timeout=30,
             what="the port's socket unit to stop")
    assert_error(api.get(ports_path(sid, PORT)), 404, "port_not_exposed")
    assert_error(api.delete(ports_path(sid, PORT)), 404, "port_not_exposed")
    assert api.get(ports_path(sid)).json == {"ports": []}


def test_expose_host_port(api, served):
    sid = served["id"]
    p = expose(api, sid, host=True)
    h = p["host_port"]
    assert 40000 <= h <= 40999, p
    assert p["url"] == "http://127.0.0.1:%d/" % h, p
    out = listing_via(lambda: curl_tcp(h))
    assert "marker.txt" in out
    # with the other "host" it is a conflict, not a second object
    assert_error(api.post(ports_path(sid), {"port": PORT, "host": False}), 409, "busy")
    api.delete(ports_path(sid, PORT))
    wait_for(lambda: curl_tcp(h, timeout=3) is None, timeout=30, what="host port %d to close" % h)


def test_session_close_removes_ports(api, served):
    sid = served["id"]
    expose(api, sid)
    sock = "%s/%s/%d.sock" % (PORTS_DIR, sid, PORT)
    listing_via(lambda: curl_unix(sock))
    r = api.delete("/v1/sessions/" + sid)
    assert r.status == 200, r
    assert not os.path.exists(sock)
    wait_for(lambda: not any(u.startswith("sandboxd-%s-port-" % sid) and unit_state(u) == "active" for u in units()),
             timeout=30, what="the port units to stop with the session")


def test_two_sessions_same_port(api, scope):
    user, ws = scope
    a = api.create_session(user, ws)
    b = api.create_session(user, ws + "-b")
    try:
        serve(api, a["id"], marker="from-a.txt")
        serve(api, b["id"], marker="from-b.txt")
        pa, pb = expose(api, a["id"]), expose(api, b["id"])
        out_a = listing_via(lambda: curl_unix(pa["socket"]), marker="from-a.txt")
        out_b = listing_via(lambda: curl_unix(pb["socket"]), marker="from-b.txt")
        assert "from-b.txt" not in out_a and "from-a.txt" not in out_b
    finally:
        api.delete("/v1/sessions/" + a["id"])
        api.delete("/v1/sessions/" + b["id"])


def test_port_survives_restart(api, served):
    sid = served["id"]
    p = expose(api, sid, host=True)
    listing_via(lambda: curl_unix(p["socket"]))
    restart_daemon()
    assert api.get(ports_path(sid, PORT)).json == p
    listing_via(lambda: curl_unix(p["socket"]))
    listing_via(lambda: curl_tcp(p["host_port"]))
    # the host port stays taken: another session's gets another one
    other = api.create_session(served["user"], served["workspace"] + "-2")
    try:
        q = expose(api, other["id"], host=True)
        assert q["host_port"] != p["host_port"], (p, q)
    finally:
        api.delete("/v1/sessions/" + other["id"])


def test_refusals(api, scope, session):
    sid = session["id"]
    for body, status, code in [
        ({"port": 80}, 400, "invalid_value"),          # outside Range=
        ({"port": 3128}, 400, "invalid_value"),        # the egress proxy's own port
        ({"port": 0}, 400, "invalid_value"),
        ({"port": 65536}, 400, "invalid_value"),
        ({"port": "8000"}, 400, "invalid_type"),
        ({"host": True}, 400, "missing_field"),
        ({"port": 8000, "extra": 1}, 400, "unknown_field"),
    ]:
        assert_error(api.post(ports_path(sid), body), status, code)
    assert api.get(ports_path(sid)).json == {"ports": []}
    assert_error(api.get(ports_path(sid, 9999)), 404, "port_not_exposed")
    assert_error(api.get("/v1/sessions/%s/ports/abc" % sid), 404, "port_not_exposed")
    assert_error(api.delete(ports_path(sid, 9999)), 404, "port_not_exposed")

    # mode none with one namespace per command: nothing to reach
    user, ws = scope
    none = api.create_session(user, ws + "-none", network={"mode": "none"}, exec_mode="unit")
    r = api.post(ports_path(none["id"]), {"port": PORT})
    assert_error(r, 409, "port_exposure_unavailable")
    assert "network mode 'none'" in r.json["error"]["message"], r.json
    api.delete("/v1/sessions/" + none["id"])

    # a closed session
    api.delete("/v1/sessions/" + sid)
    assert_error(api.post(ports_path(sid), {"port": PORT}), 409, "session_not_active")


def test_too_many_ports(api, session):
    sid = session["id"]
    for i in range(8):
        expose(api, sid, port=9000 + i)
    assert_error(api.post(ports_path(sid), {"port": 9100}), 429, "too_many_ports")
    assert len(api.get(ports_path(sid)).json["ports"]) == 8
    api.delete(ports_path(sid, 9000))
    expose(api, sid, port=9100)


def test_host_ports_exhausted(api, scope):
    with config_dropin("/etc/sandboxd/sandboxd.conf.d/50-ports.conf") as write:
        write("[Ports]\nHostRange=40500-40500\n")
        a = api.create_session(*scope)
        p = expose(api, a["id"], host=True)
        assert p["host_port"] == 40500
        assert_error(api.post(ports_path(a["id"]), {"port": 9001, "host": True}), 503, "host_ports_exhausted")
        api.delete("/v1/sessions/" + a["id"])


def test_mode_none_exec_session_refused(api, scope):
    """Mode none in exec mode session: refused as well (sandboxd-api(7))."""
    s = api.create_session(*scope, network={"mode": "none"}, exec_mode="session")
    try:
        assert_error(api.post(ports_path(s["id"]), {"port": PORT}), 409, "port_exposure_unavailable")
    finally:
        api.delete("/v1/sessions/" + s["id"])


def test_other_tenant_404(api, tcp, tcp2, scope):
    s = tcp.create_session(*scope)
    sid = s["id"]
    assert_error(tcp2.post(ports_path(sid), {"port": PORT}), 404, "not_found")
    assert_error(tcp2.get(ports_path(sid)), 404, "not_found")
    assert_error(tcp2.delete(ports_path(sid, PORT)), 404, "not_found")
    assert tcp.post(ports_path(sid), {"port": PORT}).status == 201
    assert_error(tcp2.get(ports_path(sid, PORT)), 404, "not_found")
    assert tcp.get(ports_path(sid)).json["ports"][0]["port"] == PORT
    tcp.delete("/v1/sessions/" + sid)


def test_relay_hardening_and_own_namespace(api, served, scope):
    """The relay: a dynamic user, exposure <= 1.0 as commands, and only its own session's
    namespace (a server of another session on the same port is not what it reaches)."""
    sid = served["id"]
    expose(api, sid)
    listing_via(lambda: curl_unix("%s/%s/%d.sock" % (PORTS_DIR, sid, PORT)))
    svc = "sandboxd-%s-port-%d.service" % (sid, PORT)
    out = sh("systemd-analyze", "security", "--no-pager", svc).stdout
    m = re.search(r"Overall exposure level for %s: ([0-9.]+)" % re.escape(svc), out)
    assert m and float(m.group(1)) <= 1.0, out
    props = systemctl_show(svc, "JoinsNamespaceOf", "PrivateNetwork", "User")
    assert props["PrivateNetwork"] == "yes", props
    assert props["JoinsNamespaceOf"].split() == ["sandboxd-%s-proxy.socket" % sid], props

    # a second session without a server on 8000: its exposed 8000 reaches nothing
    other = api.create_session(scope[0], scope[1] + "-x")
    try:
        q = expose(api, other["id"])
        assert curl_unix(q["socket"], timeout=5) in (None, "")
    finally:
        api.delete("/v1/sessions/" + other["id"])
