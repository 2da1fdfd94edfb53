# SPDX-License-Identifier: LGPL-2.1-or-later
"""The relay of ANY /v1/sessions/ID/ports/P/<path> to what an exposed port serves: method,
path, query, headers (hop-by-hop ones and sandboxd's Authorization dropped, X-Forwarded-*
added) and body up, status, headers and body down, both streamed with bounded buffers; 502
when nothing listens, 404 for a port not exposed or another tenant's session, 429 past the
relays of a session; a WebSocket upgrade relayed both ways."""

import json
import os
import socket
import time

import pytest

from conftest import (SOCKET_TIMEOUT, UNIX_SOCKET, Api, assert_error, daemon_pid, start_command, wait_for)

PORT = 8000
WS_PORT = 8001
UPSTREAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "relay_upstream.py")


def relay_path(sid, port=PORT, tail="/"):
    return "/v1/sessions/%s/ports/%d%s" % (sid, port, tail)


def upload(api, sid, name, data):
    r = api.request("PUT", "/v1/sessions/%s/files/%s" % (sid, name), body=data,
                    headers={"Content-Type": "application/octet-stream"})
    assert r.status in (200, 201), r


def start_upstream(api, sid, ws=False):
    with open(UPSTREAM, "rb") as f:
        upload(api, sid, "relay_upstream.py", f.read())
    argv = ["python3", "relay_upstream.py", str(PORT)] + ([str(WS_PORT)] if ws else [])
    start_command(api, sid, {"argv": argv, "timeout_ms": 900000})


def expose(api, sid, port=PORT):
    r = api.post("/v1/sessions/%s/ports" % sid, {"port": port})
    assert r.status in (200, 201), r


def wait_relay(api, sid, tail="/echo"):
    """Polls until the upstream answers through the relay (it takes a while to start)."""
    def ok():
        r = api.get(relay_path(sid, tail=tail))
        return r if r.status == 200 else None
    return wait_for(ok, timeout=90, interval=0.3, what="the upstream to answer through the relay")


def upstream_session(api, scope, ws=False):
    s = api.create_session(*scope)
    start_upstream(api, s["id"], ws=ws)
    expose(api, s["id"])
    if ws:
        expose(api, s["id"], WS_PORT)
    wait_relay(api, s["id"])
    return s


@pytest.fixture
def upstream(api, scope):
    s = upstream_session(api, scope)
    yield s
    api.delete("/v1/sessions/" + s["id"])


def header(echo, name):
    return [v for k, v in echo["headers"] if k.lower() == name.lower()]


def test_relay_echo_over_unix(api, upstream):
    sid = upstream["id"]
    r = api.request("POST", relay_path(sid, tail="/echo/a%20b/c?x=1&y=%2F&z"), body=b"hello \x00 body",
                    headers={"Content-Type": "text/plain", "X-Custom": "kept", "Connection": "keep-alive, X-Custom",
                             "Keep-Alive": "timeout=5", "TE": "trailers"})
    assert r.status == 200, r
    assert r.headers["X-Upstream"] == "relay-test"
    e = r.json
    assert e["method"] == "POST"
    assert e["path"] == "/echo/a%20b/c?x=1&y=%2F&z", e
    assert e["body"] == "hello \x00 body"
    assert header(e, "X-Custom") == ["kept"]
    assert header(e, "Content-Type") == ["text/plain"]
    for hop in ("Keep-Alive", "TE", "Upgrade", "Authorization"):
        assert header(e, hop) == [], (hop, e["headers"])
    assert header(e, "X-Forwarded-Prefix") == ["/v1/sessions/%s/ports/%d" % (sid, PORT)]
    assert header(e, "X-Forwarded-Proto") == ["http"]

    # the empty path is the upstream's "/"; every relayed method gets through
    for method in ("GET", "PUT", "PATCH", "DELETE", "OPTIONS"):
        r = api.request(method, relay_path(sid), body=b"m" if method in ("PUT", "PATCH") else None)
        assert r.status == 200, (method, r)
        assert r.json["method"] == method and r.json["path"] == "/", r.json
    # a chunked body is streamed up as it comes
    r = api.request("POST", relay_path(sid, tail="/echo"), body=iter([b"one ", b"two ", b"three"]),
                    encode_chunked=True)
    assert r.status == 200 and r.json["body"] == "one two three", r

    # HEAD: the head, no body
    r = api.request("HEAD", relay_path(sid, tail="/big?n=12345"))
    assert r.status == 200 and r.body == b"" and r.headers["Content-Length"] == "12345", r
    # the port itself is still the port's JSON, not relayed
    r = api.get("/v1/sessions/%s/ports/%d" % (sid, PORT))
    assert r.status == 200 and r.json["port"] == PORT, r


def test_relay_over_tcp_keeps_the_key(api, tcp, scope):
    s = upstream_session(tcp, scope)
    sid = s["id"]
    try:
        r = tcp.request("POST", relay_path(sid, tail="/echo?q=tcp"), body=b"over tcp",
                        headers={"Content-Type": "application/octet-stream"})
        assert r.status == 200, r
        e = r.json
        assert e["path"] == "/echo?q=tcp" and e["body"] == "over tcp", e
        assert header(e, "Authorization") == [], "the bearer key went upstream: %r" % e["headers"]
        assert header(e, "X-Forwarded-For") == ["127.0.0.1"], e["headers"]
        # without a key: 401, as every route
        assert_error(Api("tcp").get(relay_path(sid, tail="/echo")), 401, "unauthorized")
    finally:
        tcp.delete("/v1/sessions/" + sid)


def test_relay_python_http_server_listing(api, scope):
    s = api.create_session(*scope)
    sid = s["id"]
    try:
        start_command(api, sid, {"argv": ["sh", "-c", "echo hi > listed.txt; exec python3 -m http.server %d "
                                          "--bind 127.0.0.1" % PORT], "timeout_ms": 600000})
        expose(api, sid)
        r = wait_relay(api, sid, tail="/")
        assert b"listed.txt" in r.body, r
        r = api.get(relay_path(sid, tail="/listed.txt"))
        assert r.status == 200 and r.body == b"hi\n", r
        r = api.get(relay_path(sid, tail="/missing"))
        assert r.status == 404 and b"File not found" in r.body, r
    finally:
        api.delete("/v1/sessions/" + sid)


def test_relay_refusals(api, tcp, tcp2, scope):
    s = api.create_session(*scope)
    sid = s["id"]
    try:
        # not exposed, not a port
        assert_error(api.get(relay_path(sid, 9999)), 404, "port_not_exposed")
        assert_error(api.get(relay_path(sid, 0)), 404, "port_not_exposed")
        # exposed, nothing listens: 502
        expose(api, sid, 8765)
        assert_error(api.get(relay_path(sid, 8765)), 502, "upstream_unavailable")
        assert_error(api.request("POST", relay_path(sid, 8765, "/x"), body=b"data"), 502, "upstream_unavailable")
        # a method not relayed
        r = api.request("TRACE", relay_path(sid, 8765))
        assert_error(r, 405, "method_not_allowed")
        # no such session
        assert_error(api.get(relay_path("0123456789abcdef", 8765)), 404, "not_found")
    finally:
        api.delete("/v1/sessions/" + sid)

    # another tenant's session: 404, as if there were none
    t = tcp.create_session(*scope)
    try:
        expose(tcp, t["id"], 8765)
        assert_error(tcp2.get(relay_path(t["id"], 8765)), 404, "not_found")
        assert_error(tcp.get(relay_path(t["id"], 8765)), 502, "upstream_unavailable")
    finally:
        tcp.delete("/v1/sessions/" + t["id"])


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def raw_request(path, method="GET", headers=()):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(SOCKET_TIMEOUT)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    s.connect(UNIX_SOCKET)
    req = "%s %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (method, path, "".join("%s: %s\r\n" % h for h in headers))
    s.sendall(req.encode())
    return s


def read_head(s):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        assert chunk, data
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    return head.decode(), rest


def test_relay_large_download_is_streamed(api, upstream):
    """64 MiB through a client that stops reading: sandboxd holds a bounded buffer, not the body."""
    sid = upstream["id"]
    size = 64 << 20
    pid = daemon_pid()
    before = rss_kib(pid)
    s = raw_request(relay_path(sid, tail="/big?n=%d" % size))
    try:
        head, got = read_head(s)
        assert head.startswith("HTTP/1.1 200"), head
        assert "Content-Length: %d" % size in head, head
        total = len(got)
        while total < (1 << 20):
            total += len(s.recv(65536))
        # the client reads nothing for a while: the upstream can only fill the buffers
        peak = before
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            peak = max(peak, rss_kib(pid))
            time.sleep(0.2)
        # then everything
        pattern = bytes(range(256)) * 256
        while total < size:
            chunk = s.recv(1 << 20)
            assert chunk, "the body ended after %d of %d bytes" % (total, size)
            total += len(chunk)
            if total % (8 << 20) < len(chunk):
                peak = max(peak, rss_kib(pid))
        assert total == size
        del pattern
    finally:
        s.close()
    assert peak - before < 16 * 1024, "sandboxd's RSS grew by %d KiB relaying 64 MiB" % (peak - before)


def test_relay_bounded_per_session(api, upstream):
    """RELAYS_PER_SESSION_MAX (64) relays held open by a slow upstream; the next is 429."""
    sid = upstream["id"]
    held = []
    try:
        for _ in range(64):
            held.append(raw_request(relay_path(sid, tail="/hold")))

        def refused():
            r = api.get(relay_path(sid, tail="/echo"))
            return r if r.status == 429 else None
        r = wait_for(refused, timeout=60, interval=0.3, what="the 65th relay to be refused")
        assert_error(r, 429, "too_many_relays")
    finally:
        upload(api, sid, "release", b"")
        for s in held:
            s.close()
    # once they are gone, relays go through again
    wait_for(lambda: api.get(relay_path(sid, tail="/echo")).status == 200, timeout=60, interval=0.3,
             what="relays after the held ones ended")


def test_relay_held_request_answers_when_released(api, upstream):
    sid = upstream["id"]
    s = raw_request(relay_path(sid, tail="/hold?n=1"))
    try:
        upload(api, sid, "release", b"")
        head, rest = read_head(s)
        assert head.startswith("HTTP/1.1 200"), head
    finally:
        s.close()


def test_relay_websocket_echo(api, tcp, scope):
    """A WebSocket upgrade through the relay path (python3-websockets as client and server),
    over the unix socket and over TCP with a key."""
    import asyncio
    import websockets

    s = upstream_session(tcp, scope, ws=True)
    sid = s["id"]
    path = relay_path(sid, WS_PORT, "/ws?x=1")

    async def echo(connect):
        async with connect() as ws:
            for msg in ("hello", "x" * 300000, b"\x00\x01binary"):
                await ws.send(msg)
                assert await asyncio.wait_for(ws.recv(), 60) == msg

    def ready():
        r = tcp.get(relay_path(sid, WS_PORT, "/"))
        # websockets answers a plain GET with 426 (or 400): it listens
        return r if r.status in (400, 426) else None
    try:
        wait_for(ready, timeout=90, interval=0.3, what="the WebSocket server through the relay")
        asyncio.run(echo(lambda: websockets.unix_connect(UNIX_SOCKET, "ws://localhost" + path)))
        asyncio.run(echo(lambda: websockets.connect("ws://%s:%d%s" % (tcp.host, tcp.port, path),
                                                    extra_headers={"Authorization": "Bearer " + tcp.key})))
        # a refused upgrade is an ordinary answer: nothing listens on 8000's neighbour
        expose(tcp, sid, 8765)
        r = tcp.get(relay_path(sid, 8765, "/ws"), headers={"Connection": "Upgrade", "Upgrade": "websocket",
                                                          "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                                                          "Sec-WebSocket-Version": "13"})
        assert_error(r, 502, "upstream_unavailable")
    finally:
        tcp.delete("/v1/sessions/" + sid)
