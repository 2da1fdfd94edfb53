# SPDX-License-Identifier: LGPL-2.1-or-later
"""Clients that misbehave, or just speak another HTTP: HTTP/1.0 and keep-alive, huge
headers and URLs, malformed requests, unsupported versions, codings and methods, no CORS,
truncated bodies, clients that stall (ConnectionTimeoutSec=), too many connections
(MaxConnections=, MaxConnectionsPerIP=), floods without a key (MaxUnauthenticatedConnections=,
AuthenticationTimeoutSec=), clients that go away, mid-request or mid-stream.

Where libmicrohttpd answers by itself, before sandboxd sees the request, the answer is
its own (HTML body, no JSON envelope): those answers are asserted byte for byte here, and
listed in sandboxd(8) and docs/openapi.yaml. libmicrohttpd 0.9.75 has no way to replace
them."""

import os
import re
import socket
import time

import pytest

from conftest import (TCP_HOST, TCP_PORT, UNIX_SOCKET, EventStream, assert_error, commands_path, config_dropin,
                      open_events, replay, units, wait_for, wait_terminal)

DROPIN = "/etc/sandboxd/sandboxd.conf.d/50-test-bad-clients.conf"

MHD_431 = (b"<html><head><title>Request too big</title></head><body>Your HTTP header was too big for the memory "
           b"constraints of this webserver.</body></html>")
MHD_400 = (b"<html><head><title>Request malformed</title></head><body>Your HTTP request was syntactically "
           b"incorrect.</body></html>")
MHD_400_CHUNKED = (b"<html><head><title>Request malformed</title></head><body>Your HTTP chunked encoding was "
                   b"syntactically incorrect.</body></html>")
MHD_400_LENGTH = (b"<html><head><title>Request malformed</title></head><body>Your HTTP request has wrong value for "
                  b"<b>Content-Length</b> header.</body></html>")
MHD_505 = (b"<html><head><title>Requested HTTP version is not supported</title></head><body>Requested HTTP version "
           b"is not supported.</body></html>")


def connect(transport="unix", timeout=10.0):
    if transport == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(UNIX_SOCKET)
    else:
        s = socket.create_connection((TCP_HOST, TCP_PORT), timeout=timeout)
    return s


def read_until_close(s, limit=10.0):
    """Everything the server sends until it closes (b"<reset>" appended if it reset)."""
    out = b""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            c = s.recv(65536)
        except ConnectionResetError:
            return out + b"<reset>"
        except socket.timeout:
            raise AssertionError("the server did not close the connection; got %r" % out[:500])
        if not c:
            return out
        out += c
    raise AssertionError("the server did not close the connection; got %r" % out[:500])


class Raw:
    """One parsed HTTP/1.x response from raw bytes."""

    def __init__(self, data):
        head, _, self.body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status_line = lines[0]
        self.status = int(lines[0].split()[1])
        self.headers = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            self.headers[k.strip().lower()] = v.strip()

    def __repr__(self):
        return "<Raw %r %r %r>" % (self.status_line, self.headers, self.body[:200])


def exchange(data, transport="unix", shut=False):
    """Sends DATA on a fresh connection, reads until the server closes it."""
    s = connect(transport)
    try:
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        return read_until_close(s)
    finally:
        s.close()


def assert_mhd_answer(data, status, reason, body):
    """libmicrohttpd's own refusal: status, Connection: close, its HTML body, nothing else."""
    assert data.startswith(("HTTP/1.1 %d %s\r\n" % (status, reason)).encode()), data[:300]
    r = Raw(data.replace(b"<reset>", b""))
    assert r.headers.get("connection") == "close", r
    assert body in r.body, r
    assert not any(k.startswith("access-control-") for k in r.headers), r


def healthy(api):
    r = api.get("/v1/health")
    assert r.status == 200, r


@pytest.fixture
def dropin():
    """Writes a config drop-in and restarts sandboxd with it; removes it after."""
    with config_dropin(DROPIN) as write:
        yield write


# --------------------------------------------------------------------------
# HTTP versions and keep-alive

def test_http10(api):
    data = exchange(b"GET /v1/health HTTP/1.0\r\n\r\n")
    r = Raw(data)
    assert r.status == 200 and r.headers["connection"] == "close", r
    assert r.headers["content-type"] == "application/json"
    assert int(r.headers["content-length"]) == len(r.body)
    assert b'"status":"ok"' in r.body


def test_http10_error_envelope(api):
    r = Raw(exchange(b"GET /nope HTTP/1.0\r\n\r\n"))
    assert r.status == 404 and r.body == b'{"error":{"code":"not_found","message":"No such route."}}\n', r


def test_http10_command_stream(api, session):
    """No chunked coding in HTTP/1.0: the NDJSON stream goes until the connection closes."""
    body = b'{"argv":["sh","-c","echo one; sleep 0.2; echo two"]}'
    data = exchange(b"POST /v1/sessions/%s/commands HTTP/1.0\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (session["id"].encode(), len(body), body))
    r = Raw(data)
    assert r.status == 200 and "transfer-encoding" not in r.headers and "content-length" not in r.headers, r
    assert r.headers["content-type"] == "application/x-ndjson"
    lines = r.body.decode().splitlines()
    assert '"type":"accepted"' in lines[0] and '"type":"exit"' in lines[-1], lines
    assert '"data":"one\\n"' in r.body.decode() and '"data":"two\\n"' in r.body.decode()


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_keep_alive_reuses_one_connection(api, tcp, session, transport):
    a = api if transport == "unix" else tcp
    sid = session["id"] if transport == "unix" else tcp.create_session("ka" + session["user"], "w")["id"]
    conn = a.connection()
    hdrs = a._headers({"Content-Type": "application/json"}, None)
    try:
        def req(method, path, body=None):
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
            assert not resp.will_close, (method, path, resp.getheaders())
            return resp.status, data

        conn.connect()
        first = conn.sock
        assert req("GET", "/v1/health")[0] == 200
        assert req("GET", "/nope")[0] == 404
        assert req("PATCH", "/v1/health")[0] == 405
        st, data = req("POST", "/v1/sessions/%s/commands" % sid, b'{"argv":["echo","kept"]}')
        assert st == 200 and b'"data":"kept\\n"' in data, data
        assert req("POST", "/v1/sessions/%s/commands?wait=false" % sid, b'{"argv":["true"],"request_id":"k2"}')[0] == 202
        assert req("GET", "/v1/sessions/%s/commands/k2" % sid)[0] == 200
        assert req("POST", "/v1/sessions/%s/commands" % sid, b'{"argv":')[0] == 400
        assert req("GET", "/v1/sessions/%s" % sid)[0] == 200
        assert conn.sock is first, "http.client had to reconnect: the server closed the connection"
    finally:
        conn.close()


def test_pipelined_requests(api):
    data = exchange(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
                    b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    statuses = re.findall(rb"^HTTP/1.1 (\d+)", data, re.M)
    assert statuses == [b"200", b"404", b"200"], data


def test_unsupported_http_version_is_505(api):
    assert_mhd_answer(exchange(b"GET /v1/health HTTP/2.0\r\nHost: x\r\n\r\n"), 505, "HTTP Version Not Supported",
                      MHD_505)
    # an HTTP/2 client that starts with the connection preface
    assert_mhd_answer(exchange(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 505, "HTTP Version Not Supported", MHD_505)


def test_malformed_request_line_is_400(api):
    assert_mhd_answer(exchange(b"GET /v1/health\r\n\r\n"), 400, "Bad Request", MHD_400)


def test_tls_to_the_plain_port_is_dropped(api, tcp):
    hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(64) + b"\r\n\r\n"
    data = exchange(hello, "tcp")
    # a client random with a space in it reads as a malformed request line to
    # libmicrohttpd, which then answers 400 and closes; otherwise it just closes
    if data not in (b"", b"<reset>"):
        assert_mhd_answer(data, 400, "Bad Request", MHD_400)
    healthy(api)


# --------------------------------------------------------------------------
# sizes

@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_huge_header_is_431(api, tcp, transport):
    """More than the 64 KiB a connection may use for its request head: MHD's own 431, before
    any key is looked at."""
    data = exchange(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (70 << 10) + b"\r\n\r\n", transport)
    assert_mhd_answer(data, 431, "Request Header Fields Too Large", MHD_431)
    data = exchange(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 100)
                                                                     for i in range(1000)) + b"\r\n", transport)
    assert_mhd_answer(data, 431, "Request Header Fields Too Large", MHD_431)
    healthy(api)


def test_huge_url_is_414(api):
    data = exchange(b"GET /v1/health?" + b"a" * (70 << 10) + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_mhd_answer(data, 414, "URI Too Long", MHD_431)
    healthy(api)


def test_large_header_below_the_limit_is_fine(api):
    r = api.get("/v1/health", headers={"X-Big": "a" * (32 << 10)})
    assert r.status == 200, r


def test_bad_content_length_is_400(api):
    data = exchange(b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
    assert_mhd_answer(data, 400, "Bad Request", MHD_400_LENGTH)


def test_bad_chunked_body_is_400(api):
    data = exchange(b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n")
    assert_mhd_answer(data, 400, "Bad Request", MHD_400_CHUNKED)


@pytest.mark.parametrize("coding", ["gzip", "gzip, chunked", "identity"])
def test_other_transfer_codings_are_501(api, coding):
    before = units()
    data = exchange(b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: %s\r\n\r\n" % coding.encode())
    r = Raw(data)
    assert r.status == 501, r
    assert r.body == (b'{"error":{"code":"not_implemented","message":"Only the chunked transfer coding is '
                      b'supported."}}\n'), r
    assert units() == before


def test_truncated_body_changes_nothing(api, session):
    """The client announces 200 bytes, sends 20 and hangs up: nothing is started, and
    sandboxd goes on. (One that only half-closes is dropped after ConnectionTimeoutSec=,
    see test_slow_clients_are_disconnected.)"""
    before = units()
    n = api.get_session(session["id"])["commands"]
    for req in (b"POST /v1/sessions/%s/commands HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 200\r\n\r\n{\"argv\":[\"touch\",\"x\"]" % session["id"].encode(),
                b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"10\r\n{\"user\":\"trunc"):
        s = connect()
        s.sendall(req)
        time.sleep(0.2)
        s.close()
    time.sleep(0.5)
    healthy(api)
    assert units() == before
    assert api.get_session(session["id"])["commands"] == n


# --------------------------------------------------------------------------
# methods and CORS

@pytest.mark.parametrize("method", ["OPTIONS", "PATCH", "TRACE", "PROPFIND"])
@pytest.mark.parametrize("path,allow", [
    ("/v1/health", "GET"), ("/v1/sessions", "GET, POST"), ("/v1/drain", "GET, POST, DELETE"),
])
def test_unsupported_methods_are_405_without_cors(api, method, path, allow):
    r = api.request(method, path, headers={"Origin": "https://evil.example",
                                           "Access-Control-Request-Method": "POST"})
    assert_error(r, 405, "method_not_allowed")
    assert r.headers.get("Allow") == allow
    assert not [h for h in r.headers if h.lower().startswith("access-control-")], r.headers.items()


def test_no_cors_on_success_either(api, tcp):
    for a in (api, tcp):
        r = a.get("/v1/health", headers={"Origin": "https://evil.example"})
        assert r.status == 200
        assert not [h for h in r.headers if h.lower().startswith("access-control-")], r.headers.items()


# --------------------------------------------------------------------------
# slow clients and connection limits

@pytest.mark.restarts_daemon
@pytest.mark.time_limit(120)
def test_slow_clients_are_disconnected(api, session, dropin):
    dropin("[HTTP]\nConnectionTimeoutSec=2s\n")
    sid = session["id"]
    stalled = []
    t0 = time.monotonic()
    for part in (b"",  # nothing at all
                 b"GET /v1/hea",  # half a request line
                 b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Half: ",  # half the headers
                 b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"user\":",  # half a body
                 b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"us"):
        s = connect(timeout=15)
        s.sendall(part)
        stalled.append(s)
    # half a body, then the client's half of the connection closed
    s = connect(timeout=15)
    s.sendall(b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
    s.shutdown(socket.SHUT_WR)
    stalled.append(s)
    # meanwhile others are served
    healthy(api)
    for s in stalled:
        assert read_until_close(s, limit=15) in (b"", b"<reset>")
        s.close()
    took = time.monotonic() - t0
    assert 1.5 < took < 8, took

    # an idle keep-alive connection goes the same way
    s = connect(timeout=15)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    t0 = time.monotonic()
    data = read_until_close(s, limit=15)
    assert data.startswith(b"HTTP/1.1 200"), data
    assert 1.5 < time.monotonic() - t0 < 8
    s.close()

    # but a command stream that is quiet for longer is not cut
    res = EventStream(api, "POST", commands_path(sid), {"argv": ["sh", "-c", "sleep 5; echo late"]}).read_all()
    assert res[-1]["type"] == "exit" and res[-1]["status"] == "succeeded", res[-1]
    assert any(e.get("data") == "late\n" for e in res)


def open_idle(n, transport):
    socks = []
    for _ in range(n):
        s = connect(transport)
        socks.append(s)
    return socks


def closed_at_once(s):
    """A connection MHD accepted and closed right away."""
    s.settimeout(5)
    try:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        return True
    return read_until_close(s, limit=5) in (b"", b"<reset>")


@pytest.mark.restarts_daemon
@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_connections_beyond_the_limit_wait(api, tcp, dropin, transport):
    """At MaxConnections= on a socket, MHD stops accepting on it: further connections wait
    in the socket's backlog (no answer, no fd used in sandboxd) and are served once a
    connection ends. The other socket is not affected."""
    dropin("[HTTP]\nMaxConnections=8\n")
    socks = open_idle(8, transport)
    extra = None
    try:
        time.sleep(0.3)  # let MHD accept them all
        extra = connect(transport)
        extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        extra.settimeout(1.5)
        with pytest.raises(socket.timeout):
            extra.recv(1)
        healthy(tcp if transport == "unix" else api)
        # one ends: the waiting one is accepted and answered
        socks.pop().close()
        extra.settimeout(10)
        assert read_until_close(extra).startswith(b"HTTP/1.1 200")
        # the ones within the limit are served all along
        socks[0].sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert read_until_close(socks[0]).startswith(b"HTTP/1.1 200")
    finally:
        for s in socks + [extra]:
            if s:
                s.close()
    time.sleep(0.3)
    healthy(api if transport == "unix" else tcp)


@pytest.mark.restarts_daemon
def test_connections_per_ip(api, tcp, dropin):
    dropin("[HTTP]\nMaxConnectionsPerIP=4\n")
    socks = open_idle(4, "tcp")
    try:
        time.sleep(0.3)
        extra = connect("tcp")
        assert closed_at_once(extra)
        extra.close()
        healthy(api)  # the unix socket has no such limit
    finally:
        for s in socks:
            s.close()
    time.sleep(0.3)
    healthy(tcp)


def unauthenticated_closed(api):
    prefix = "sandboxd_http_unauthenticated_closed_total "
    for line in api.get("/metrics").body.decode().splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix):])
    raise AssertionError("no " + prefix)


def closed_by_server(s):
    """True once the server closed S (EOF or reset), False while it is open."""
    s.setblocking(False)
    try:
        return s.recv(65536) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


@pytest.mark.time_limit(180)
def test_idle_unauthenticated_flood_does_not_lock_tenants_out(api, tcp):
    """530 idle TCP connections without a key (more than MaxConnections=512): a tenant's
    request is still answered at once, and every one of the flood is closed, either to
    make room (MaxUnauthenticatedConnections=64) or after AuthenticationTimeoutSec=5s."""
    before = unauthenticated_closed(api)
    flood = []
    try:
        for _ in range(530):
            flood.append(socket.create_connection((TCP_HOST, TCP_PORT), timeout=10))
        t0 = time.monotonic()
        r = tcp.get("/v1/sessions")
        took = time.monotonic() - t0
        assert r.status == 200, r
        print("a tenant's request behind 530 idle unauthenticated connections: %.3f s" % took)
        assert took < 5, took
        # a probe without a key is answered too, and its connection not kept
        s = connect("tcp")
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        data = read_until_close(s)
        s.close()
        assert data.startswith(b"HTTP/1.1 200") and Raw(data).headers.get("connection") == "close", data
        wait_for(lambda: all(closed_by_server(s) for s in flood), timeout=30, what="the flood closed by sandboxd")
        assert unauthenticated_closed(api) >= before + 530
    finally:
        for s in flood:
            s.close()
    healthy(tcp)


@pytest.mark.restarts_daemon
def test_authentication_deadline(api, tcp, api_key, dropin):
    """A TCP connection that does not send an authenticated request within
    AuthenticationTimeoutSec= is closed, however busy it keeps itself; one that did is
    not, and keeps its connection as long as ConnectionTimeoutSec= allows."""
    dropin("[HTTP]\nAuthenticationTimeoutSec=2s\nConnectionTimeoutSec=60s\n")
    # a slow client: a byte of its headers every 0.3 s, never done
    slow = connect("tcp", timeout=15)
    t0 = time.monotonic()
    slow.sendall(b"GET /v1/sessions HTTP/1.1\r\nHost: x\r\n")
    closed_after = None
    try:
        for _ in range(100):
            time.sleep(0.3)
            slow.sendall(b"X")
    except (BrokenPipeError, ConnectionResetError):
        closed_after = time.monotonic() - t0
    slow.close()
    assert closed_after is not None, "the slow client was never cut off"
    assert 1.5 < closed_after < 10, closed_after

    # an authenticated keep-alive connection outlives the deadline
    s = connect("tcp", timeout=15)
    req = b"GET /v1/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % api_key.encode()
    s.sendall(req)
    assert s.recv(65536).startswith(b"HTTP/1.1 200")
    time.sleep(3)  # past AuthenticationTimeoutSec=, not past ConnectionTimeoutSec=
    s.sendall(req)
    assert s.recv(65536).startswith(b"HTTP/1.1 200")
    s.close()


@pytest.mark.restarts_daemon
def test_unauthenticated_connections_have_their_own_limit(api, tcp, dropin):
    """At MaxUnauthenticatedConnections=, a new connection closes the oldest one without
    a key; connections with one are not counted."""
    dropin("[HTTP]\nMaxUnauthenticatedConnections=4\nAuthenticationTimeoutSec=60s\n")
    idle, newer = open_idle(4, "tcp"), []
    try:
        time.sleep(0.3)  # let MHD accept them all
        newer = open_idle(2, "tcp")
        wait_for(lambda: closed_by_server(idle[0]) and closed_by_server(idle[1]), timeout=10,
                 what="the two oldest closed")
        assert not closed_by_server(idle[2]) and not closed_by_server(idle[3])
        # a tenant gets in (and its connection stays out of their number)
        healthy(tcp)
        for s in newer:
            assert not closed_by_server(s)
    finally:
        for s in idle + newer:
            s.close()


# --------------------------------------------------------------------------
# a client that goes away

def test_client_gone_mid_stream_command_goes_on(api, session):
    sid = session["id"]
    st = EventStream(api, "POST", commands_path(sid),
                     {"argv": ["sh", "-c", "for i in 1 2 3 4 5; do echo $i; sleep 0.3; done"], "request_id": "gone"})
    assert next(st)["type"] == "accepted"
    assert next(st).get("data") == "1\n"
    st.close()  # hang up after the first line
    snap = wait_terminal(api, sid, "gone")
    assert snap["status"] == "succeeded" and snap["stdout"] == "1\n2\n3\n4\n5\n", snap
    events, _ = replay(api, sid, "gone")
    assert [e["data"] for e in events if e.get("type") == "stdout"] == ["1\n", "2\n", "3\n", "4\n", "5\n"]
    healthy(api)


def test_client_gone_from_events_follow(api, session):
    sid = session["id"]
    api.post(commands_path(sid) + "?wait=false", {"argv": ["sh", "-c", "sleep 1; echo end"], "request_id": "f"})
    with open_events(api, sid, "f") as st:
        assert next(st)["type"] == "accepted"
    snap = wait_terminal(api, sid, "f")
    assert snap["stdout"] == "end\n", snap
    healthy(api)


def test_client_gone_before_the_answer(api, session):
    """Hangs up right after sending its request: whether MHD got to hand it over or not,
    the command runs at most once, and asking again with its request id gives that one."""
    sid = session["id"]
    body = b'{"argv":["echo","orphan"],"request_id":"orphan"}'
    s = connect()
    s.sendall(b"POST /v1/sessions/%s/commands HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (sid.encode(), len(body), body))
    s.close()
    time.sleep(1)
    r = api.post(commands_path(sid) + "?wait=false", body)
    assert r.status in (200, 202), r  # 200: the first one ran; 202: it had not been taken
    snap = wait_terminal(api, sid, "orphan")
    assert snap["stdout"] == "orphan\n", snap
    assert len(api.get(commands_path(sid)).json["commands"]) == 1
    healthy(api)
