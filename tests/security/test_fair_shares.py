# SPDX-License-Identifier: LGPL-2.1-or-later
"""Fair shares of the egress proxy: a session that floods it with idle connections or
with lookups of names whose server never answers takes only its own share
(ProxyMaxConnectionsPerSession=, ProxyMaxLookupsPerSession=); another session's requests
go through, and the flooding one is told why it is refused (429, SOCKS5 reply 1)."""

import json
import os
import socket
import time

import pytest

from conftest import (SERVER_PORT, SERVER_BODY, config_dropin, run, sh_in, snapshot, start_command, unique_user,
                      wait_for)

DROPIN = "/etc/sandboxd/sandboxd.conf.d/91-fair-shares-tests.conf"
SHARE, TOTAL = 8, 40            # connections
LOOKUP_SHARE, LOOKUPS = 3, 8    # name lookups in flight
REFUSING = 16                   # PROXY_REFUSING_MAX: over-share connections answered at once

# Opens N connections to the proxy and holds them without a word for HOLD seconds.
FLOOD = r"""
import socket, sys, time
n, hold = int(sys.argv[1]), float(sys.argv[2])
held = []
for i in range(n):
    try:
        held.append(socket.create_connection(("127.0.0.1", 3128), timeout=10))
    except OSError:
        pass
print("open %d" % len(held), flush=True)
time.sleep(hold)
"""

# With the session's share of connections held idle: what a new HTTP request and a
# SOCKS5 CONNECT get; then, once those are closed, what the HTTP request gets.
OVER_SHARE = r"""
import json, socket, sys, time
share, port = int(sys.argv[1]), int(sys.argv[2])
def answer(data):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(data)
    out = b""
    while True:
        try:
            c = s.recv(65536)
        except OSError:
            break
        if not c:
            break
        out += c
    s.close()
    return out
http = b"GET http://allowed.sbx.test:%d/ HTTP/1.1\r\nHost: allowed.sbx.test:%d\r\n\r\n" % (port, port)
socks = b"\x05\x01\x00\x05\x01\x00\x03" + bytes([16]) + b"allowed.sbx.test" + port.to_bytes(2, "big")
held = [socket.create_connection(("127.0.0.1", 3128), timeout=10) for _ in range(share)]
# the relay passes them on to sandboxd as they come: wait until the share is taken
deadline = time.monotonic() + 30
while True:
    over = answer(http)
    if over.startswith(b"HTTP/1.1 429") or time.monotonic() > deadline:
        break
    time.sleep(0.2)
over_socks = answer(socks)
for s in held:
    s.close()
deadline = time.monotonic() + 30
while True:
    after = answer(http)
    if after.startswith((b"HTTP/1.0 200", b"HTTP/1.1 200")) or time.monotonic() > deadline:
        break
    time.sleep(0.2)
print(json.dumps({"over": over.decode("latin-1"), "socks": over_socks.hex(), "after": after.decode("latin-1")}))
"""

# Asks the proxy for each name on a connection of its own, all at once, and reports each
# answer's first line as it comes (the connections stay open until answered).
LOOKUPS_SCRIPT = r"""
import selectors, socket, sys, time
names = sys.argv[1:]
sel = selectors.DefaultSelector()
t0 = time.monotonic()
for n in names:
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(b"GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n" % (n.encode(), n.encode()))
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, n)
left = len(names)
while left:
    for key, _ in sel.select(timeout=120):
        data = key.fileobj.recv(4096)
        line = data.split(b"\r\n", 1)[0].decode("latin-1")
        body = data.split(b"\r\n\r\n", 1)[-1].decode("latin-1").strip()
        print("%.1f %s %s | %s" % (time.monotonic() - t0, key.data, line, body), flush=True)
        sel.unregister(key.fileobj)
        key.fileobj.close()
        left -= 1
"""


@pytest.fixture(scope="module")
def shares(secnet):
    """Small shares, so that floods stay small; idle connections wait long enough for the
    test (ProxyConnectTimeoutSec=)."""
    with config_dropin(DROPIN) as write:
        write("[Network]\nProxyMaxConnections=%d\nProxyMaxConnectionsPerSession=%d\n"
              "ProxyMaxLookups=%d\nProxyMaxLookupsPerSession=%d\nProxyConnectTimeoutSec=120s\n"
              % (TOTAL, SHARE, LOOKUPS, LOOKUP_SHARE))
        yield


def proxy_refused(api, reason):
    prefix = 'sandboxd_proxy_refused_total{reason="%s"} ' % reason
    for line in api.get("/metrics").body.decode().splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix):])
    raise AssertionError("no %s" % prefix)


def new_session(api, label):
    s = api.create_session(unique_user(), label)
    assert s["network"]["mode"] == "proxy", s
    return s["id"]


def curl_allowed(api, sid):
    """(HTTP code, seconds the command took) of a request through the proxy."""
    t0 = time.monotonic()
    res = sh_in(api, sid, "curl -sS -m 20 -o /dev/null -w '%%{http_code}' http://allowed.sbx.test:%d/; echo"
                % SERVER_PORT)
    return res["stdout"].strip(), time.monotonic() - t0, res


def stdout_of(api, sid, rid):
    return snapshot(api, sid, rid)["stdout"] or ""


@pytest.mark.time_limit(240)
def test_idle_connections_of_two_sessions_leave_others_their_share(api, shares):
    """Two sessions each open 150 idle proxy connections (together far more than
    ProxyMaxConnections=): each holds its share, no more; a third session's request
    still succeeds, promptly."""
    a, b, c = (new_session(api, w) for w in ("flood-a", "flood-b", "quiet-c"))
    try:
        before = proxy_refused(api, "session_share")
        floods = [(sid, start_command(api, sid, {"argv": ["/usr/bin/python3", "-c", FLOOD, "150", "150"]})["request_id"])
                  for sid in (a, b)]
        for sid, rid in floods:
            wait_for(lambda: "open" in stdout_of(api, sid, rid), timeout=60, what="the flood of %s" % sid)
        # both shares taken, and the connections over them refused (16 answered at a time each)
        wait_for(lambda: proxy_refused(api, "session_share") >= before + 2 * REFUSING, timeout=60,
                 what="both sessions over their share")

        code, took, res = curl_allowed(api, c)
        assert code == "200", res["stderr"]
        print("the third session's request through the proxy: %.2f s (the whole command)" % took)
        assert took < 15, took

        # the flooding sessions themselves get nothing more
        code, _, res = curl_allowed(api, a)
        assert code != "200", res
        for sid, rid in floods:
            assert not snapshot(api, sid, rid)["terminal"], "a flood ended early"
    finally:
        for sid in (a, b, c):
            api.delete("/v1/sessions/" + sid)


def test_a_session_over_its_share_is_told_so(api, shares):
    """With its share held, a session's next request is answered 429 with the reason
    (SOCKS5: general failure); once it lets go, its requests go through again."""
    sid = new_session(api, "over-share")
    before = proxy_refused(api, "session_share")
    res = run(api, sid, {"argv": ["/usr/bin/python3", "-c", OVER_SHARE, str(SHARE), str(SERVER_PORT)]})
    assert res["exit"]["status"] == "succeeded", res["stderr"]
    v = json.loads(res["stdout"].strip().splitlines()[-1])
    assert v["over"].startswith("HTTP/1.1 429 Too Many Requests\r\n"), v
    assert "ProxyMaxConnectionsPerSession=" in v["over"], v
    assert v["socks"].startswith("0500" + "0501"), v  # method "no authentication", then reply 1
    assert v["after"].split(" ", 2)[1] == "200" and v["after"].endswith(SERVER_BODY), v  # the server's answer
    assert proxy_refused(api, "session_share") >= before + 2
    # a refusal for want of room is not a policy denial
    assert not [e for e in res["events"] if e.get("type") == "network_denied"], res["events"]
    api.delete("/v1/sessions/" + sid)


# --- name lookups -----------------------------------------------------------------

BLACKHOLE_ADDR = "127.0.0.3"


@pytest.fixture
def blackhole_dns(shares):
    """resolv.conf pointing at a name server that never answers (a socket that reads
    nothing): each lookup of a name not in /etc/hosts waits its full timeout."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((BLACKHOLE_ADDR, 53))
    path = "/etc/resolv.conf"
    link = os.readlink(path) if os.path.islink(path) else None
    old = None if link else open(path).read()
    os.unlink(path)
    with open(path, "w") as f:
        f.write("nameserver %s\noptions timeout:30 attempts:1\n" % BLACKHOLE_ADDR)
    yield
    os.unlink(path)
    if link:
        os.symlink(link, path)
    else:
        with open(path, "w") as f:
            f.write(old)
    sock.close()


@pytest.mark.time_limit(240)
def test_lookups_that_never_end_fill_only_their_session_s_slots(api, blackhole_dns):
    """A session asks for 12 names whose server never answers, more than the proxy's
    ProxyMaxLookups=: 3 lookups run (its share), the 9 others are refused at once with
    429, and another session's lookups still get slots."""
    a, b = new_session(api, "lookups-a"), new_session(api, "lookups-b")
    try:
        names = ["n%d.blackhole.sbx.test" % i for i in range(12)]
        rid = start_command(api, a, {"argv": ["/usr/bin/python3", "-c", LOOKUPS_SCRIPT] + names})["request_id"]

        def refused():
            return [l for l in stdout_of(api, a, rid).splitlines() if " 429 " in l]
        wait_for(lambda: len(refused()) == len(names) - LOOKUP_SHARE, timeout=60, what="the lookups over the share refused")
        for line in refused():
            assert "ProxyMaxLookupsPerSession=" in line, line
        # the session's own lookups still run (no answer yet: the server never answers)
        assert len(stdout_of(api, a, rid).splitlines()) == len(names) - LOOKUP_SHARE, stdout_of(api, a, rid)

        # another session's name lookup (from /etc/hosts) gets a slot and goes through
        code, took, res = curl_allowed(api, b)
        assert code == "200", res["stderr"]
        print("the other session's request while the lookups hang: %.2f s (the whole command)" % took)
        # ... while the first session's lookups are still hanging
        assert not snapshot(api, a, rid)["terminal"]
        assert len(stdout_of(api, a, rid).splitlines()) == len(names) - LOOKUP_SHARE
    finally:
        for sid in (a, b):
            api.delete("/v1/sessions/" + sid)
