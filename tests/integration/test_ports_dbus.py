# SPDX-License-Identifier: LGPL-2.1-or-later
"""Exposed ports over D-Bus: the Session object's ExposePort(q, a{sv}) -> (q, s, q),
ListPorts() -> a(qsq) and UnexposePort(q), called with busctl and python3-dbus as root and
as a member of group sandboxd through polkit; each refusal's error name; and that what
D-Bus answers is what HTTP lists."""

import json
import secrets

import dbus
import pytest

import sbxbus as B
from conftest import sh, wait_for, workspace_for
from test_ports import PORT, PORTS_DIR, curl_unix, listing_via, ports_path, serve, unit_state


def session_path(sid):
    return "%s/session/%s" % (B.PATH, sid)


def expose(path, port=PORT, host=False, as_user=None):
    if as_user:
        opts = {"host": host} if host else {}
        return B.call_as(as_user, path, B.SESSION, "ExposePort", "qa{sv}", port, opts)
    return B.call(path, B.SESSION, "ExposePort", "qa{sv}", port,
                  dbus.Dictionary({"host": dbus.Boolean(host)}, signature="sv"))


def list_ports(path, as_user=None):
    if as_user:
        return [tuple(x) for x in B.call_as(as_user, path, B.SESSION, "ListPorts")[0]]
    return B.call(path, B.SESSION, "ListPorts")[0]


def http_as_tuples(api, sid):
    """GET .../ports as D-Bus would say it: (port, socket, host port or 0)."""
    r = api.get(ports_path(sid))
    assert r.status == 200, r
    return [(p["port"], p["socket"], p["host_port"] or 0) for p in r.json["ports"]]


@pytest.fixture
def served_bus(api, scope):
    """A session created over D-Bus (by root) with a server on 127.0.0.1:8000."""
    user, ws = scope
    sid, path = B.manager("CreateSession", "ssa{sv}", user, ws, {})
    serve(api, sid)
    yield sid, path
    api.delete("/v1/sessions/" + sid)


@pytest.fixture
def member(api):
    name = "sbxp" + secrets.token_hex(4)
    sh("useradd", "-M", "-N", "-s", "/usr/sbin/nologin", "-G", "sandboxd", name)
    yield name
    sh("userdel", name, check=False)


def test_expose_list_unexpose_as_root(api, served_bus):
    sid, path = served_bus
    port, sock, host_port = expose(path)
    assert (port, sock, host_port) == (PORT, "%s/%s/%d.sock" % (PORTS_DIR, sid, PORT), 0)
    out = listing_via(lambda: curl_unix(sock))
    assert "Directory listing" in out, out

    # the same again: the same answer, no second port
    assert expose(path) == [PORT, sock, 0]
    assert list_ports(path) == [(PORT, sock, 0)]
    # what HTTP lists is what D-Bus lists
    assert http_as_tuples(api, sid) == list_ports(path)
    h = api.get(ports_path(sid, PORT)).json
    assert (h["port"], h["socket"], h["host_port"]) == (PORT, sock, None), h

    B.call(path, B.SESSION, "UnexposePort", "q", PORT)
    assert list_ports(path) == []
    assert api.get(ports_path(sid)).json == {"ports": []}
    wait_for(lambda: unit_state("sandboxd-%s-port-%d.socket" % (sid, PORT)) == "inactive", timeout=30,
             what="the port's socket unit to stop")
    assert B.error_of(B.call, path, B.SESSION, "UnexposePort", "q", PORT) == B.ERROR + "PortNotExposed"


def test_busctl_host_port_matches_http(api, served_bus):
    sid, path = served_bus
    p = B.busctl("--json=short", "call", B.NAME, path, B.SESSION, "ExposePort", "qa{sv}", str(PORT),
                 "1", "host", "b", "true")
    port, sock, host_port = json.loads(p.stdout)["data"]
    assert port == PORT and 40000 <= host_port <= 40999, p.stdout
    h = api.get(ports_path(sid, PORT)).json
    assert (h["port"], h["socket"], h["host_port"]) == (port, sock, host_port), h
    assert h["url"] == "http://127.0.0.1:%d/" % host_port, h

    p = B.busctl("--json=short", "call", B.NAME, path, B.SESSION, "ListPorts")
    assert json.loads(p.stdout)["data"] == [[[port, sock, host_port]]], p.stdout
    assert http_as_tuples(api, sid) == [(port, sock, host_port)]

    # with the other "host": Busy, nothing changed
    p = B.busctl("call", B.NAME, path, B.SESSION, "ExposePort", "qa{sv}", str(PORT), "0", check=False)
    assert p.returncode != 0, p.stdout
    assert B.error_of(expose, path, host=False) == B.ERROR + "Busy"
    assert list_ports(path) == [(port, sock, host_port)]

    B.busctl("call", B.NAME, path, B.SESSION, "UnexposePort", "q", str(PORT))
    assert http_as_tuples(api, sid) == []


def test_refusals_error_names(api, scope):
    user, ws = scope
    sid, path = B.manager("CreateSession", "ssa{sv}", user, ws, {})
    for port, name in [(80, "InvalidValue"),       # outside Range=
                       (3128, "InvalidValue"),     # the egress proxy's own port
                       (0, "InvalidValue")]:
        assert B.error_of(expose, path, port) == B.ERROR + name, port
    # an unknown option, an option of the wrong type
    assert B.error_of(B.call, path, B.SESSION, "ExposePort", "qa{sv}", PORT,
                      dbus.Dictionary({"extra": dbus.Boolean(True)}, signature="sv")) == B.ERROR + "UnknownOption"
    assert B.error_of(B.call, path, B.SESSION, "ExposePort", "qa{sv}", PORT,
                      dbus.Dictionary({"host": dbus.String("yes")}, signature="sv")) == B.ERROR + "InvalidType"
    # the wrong signature altogether
    assert B.error_of(B.call, path, B.SESSION, "ExposePort", "s", "8000") == B.ERROR + "InvalidArguments"
    assert B.error_of(B.call, path, B.SESSION, "UnexposePort", "q", 9999) == B.ERROR + "PortNotExposed"
    assert list_ports(path) == [] and api.get(ports_path(sid)).json == {"ports": []}

    # the per-session limit (the testbed's MaxPerSession=8)
    for i in range(8):
        expose(path, 9000 + i)
    assert B.error_of(expose, path, 9100) == B.ERROR + "TooManyPorts"
    assert len(list_ports(path)) == 8 == len(api.get(ports_path(sid)).json["ports"])

    # a closed session
    B.call(path, B.SESSION, "Close", "b", True)
    assert B.error_of(expose, path, PORT) == B.ERROR + "SessionNotActive"


def test_mode_none_unavailable(api, scope):
    user, ws = scope
    sid, path = B.manager("CreateSession", "ssa{sv}", user, ws + "-none",
                          dbus.Dictionary({"network": dbus.String("none"), "exec_mode": dbus.String("unit")},
                                          signature="sv"))
    try:
        assert B.error_of(expose, path) == B.ERROR + "PortExposureUnavailable"
        assert list_ports(path) == []
    finally:
        api.delete("/v1/sessions/" + sid)


def test_member_own_session_through_polkit(api, member):
    sid, path = B.call_as(member, B.PATH, B.MANAGER, "CreateSession", "ssa{sv}", member,
                          workspace_for("ports-member"), {})
    try:
        serve(api, sid)
        port, sock, host_port = expose(path, as_user=member)
        assert (port, host_port) == (PORT, 0) and sock == "%s/%s/%d.sock" % (PORTS_DIR, sid, PORT)
        assert list_ports(path, as_user=member) == [(PORT, sock, 0)] == http_as_tuples(api, sid)
        listing_via(lambda: curl_unix(sock))
        # busctl as the member, too
        p = sh("runuser", "-u", member, "--", "busctl", "--json=short", "call", B.NAME, path, B.SESSION, "ListPorts")
        assert json.loads(p.stdout)["data"] == [[[PORT, sock, 0]]], p.stdout
        B.call_as(member, path, B.SESSION, "UnexposePort", "q", PORT)
        assert http_as_tuples(api, sid) == []
    finally:
        api.delete("/v1/sessions/" + sid)


def test_member_denied_others_ports(api, member, served_bus):
    sid, path = served_bus
    expose(path)
    for c in [(path, B.SESSION, "ExposePort", "qa{sv}", 9001, {}),
              (path, B.SESSION, "ListPorts"),
              (path, B.SESSION, "UnexposePort", "q", PORT)]:
        with pytest.raises(B.BusError) as e:
            B.call_as(member, *c)
        assert e.value.name == B.ACCESS_DENIED, (c, e.value)
    # nothing changed
    assert [p[0] for p in list_ports(path)] == [PORT]
