# SPDX-License-Identifier: LGPL-2.1-or-later
"""An exposed port reaches its own session's loopback and nothing else: not a server on
the host's 127.0.0.1 on the same port number (through the socket, the host port or the
HTTP relay), and a flood of connections to it is held by the relay's --connections-max
while sandboxd and other sessions go on."""

import os
import socket
import subprocess
import time

import pytest

from conftest import LOOPBACK_BODY, assert_error, start_command, wait_for

PORTS_DIR = "/run/sandboxd/ports"

# A server that accepts connections and never answers; it writes how many it holds.
HOLDER = ("import socket, sys, time\n"
          "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(1024); open('ready', 'w').close()\n"
          "held = []\n"
          "while True:\n"
          "    c, _ = s.accept(); held.append(c)\n"
          "    with open('held.tmp', 'w') as f: f.write(str(len(held)))\n"
          "    import os; os.replace('held.tmp', 'held')\n")


def expose(api, sid, port, host=False):
    r = api.post("/v1/sessions/%s/ports" % sid, {"port": port, "host": host})
    assert r.status == 201, r
    return r.json


def curl(*args, timeout=5):
    r = subprocess.run(["curl", "-sS", "--max-time", str(timeout)] + list(args), capture_output=True, text=True)
    return r.returncode, r.stdout


def test_exposed_port_does_not_reach_the_hosts_loopback(api, scope, secnet):
    """The host serves a secret on 127.0.0.1:P; the session exposes its own P: nothing
    listens there, and the host's server is never what answers."""
    port = secnet["loop_port"]
    assert curl("http://127.0.0.1:%d/" % port)[1] == LOOPBACK_BODY  # it is there
    s = api.create_session(*scope)
    try:
        e = expose(api, s["id"], port, host=True)
        for args in (("--unix-socket", e["socket"], "http://x/"), ("http://127.0.0.1:%d/" % e["host_port"],)):
            rc, out = curl(*args)
            assert LOOPBACK_BODY not in out and rc != 0, (args, rc, out)
        r = api.get("/v1/sessions/%s/ports/%d/" % (s["id"], port))
        assert_error(r, 502, "upstream_unavailable")
        assert LOOPBACK_BODY not in r.body.decode(errors="replace")
    finally:
        api.delete("/v1/sessions/" + s["id"])


@pytest.mark.time_limit(300)
def test_connection_flood_is_bounded(api, scope, secnet):
    s = api.create_session(*scope)
    sid = s["id"]
    clients = []
    try:
        start_command(api, sid, {"argv": ["python3", "-c", HOLDER, "8500"], "timeout_ms": 600000})
        e = expose(api, sid, 8500)
        wait_for(lambda: api.get("/v1/sessions/%s/files/ready" % sid).status == 200, timeout=60,
                 what="the holding server to listen")
        limit = 64  # [Ports] MaxConnections= by default: the relay's --connections-max

        # 200 connections, each held open: the relay passes on at most `limit` of them
        for _ in range(200):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.settimeout(10)
            c.connect(e["socket"])
            clients.append(c)

        def held():
            r = api.get("/v1/sessions/%s/files/held" % sid)
            return int(r.body) if r.status == 200 and r.body.strip() else 0

        # systemd-socket-proxyd takes one past --connections-max (its check is "more than")
        # and closes every other connection at once
        wait_for(lambda: held() >= limit, timeout=60, what="the relay to pass on its share of the flood")

        def closed(c):
            c.setblocking(False)  # with a timeout, recv() would wait for one first
            try:
                return c.recv(1) == b""
            except BlockingIOError:
                return False
            except OSError:
                return True
        wait_for(lambda: sum(closed(c) for c in clients) >= len(clients) - limit - 1, timeout=60,
                 what="the relay to close the connections past its limit")
        time.sleep(2)
        assert limit <= held() <= limit + 1, "the relay passed on %d connections, not at most %d" % (held(), limit + 1)

        # sandboxd and another session's exposed port go on meanwhile
        assert api.get("/healthz").status == 200
        other = api.create_session(scope[0], scope[1] + "-other")
        try:
            start_command(api, other["id"], {"argv": ["sh", "-c", "echo hi > m.txt; exec python3 -m http.server 8500 "
                                                      "--bind 127.0.0.1"], "timeout_ms": 600000})
            oe = expose(api, other["id"], 8500)
            wait_for(lambda: "m.txt" in curl("--unix-socket", oe["socket"], "http://x/")[1], timeout=60,
                     what="the other session's server through its port")
        finally:
            api.delete("/v1/sessions/" + other["id"])
    finally:
        for c in clients:
            c.close()
        api.delete("/v1/sessions/" + sid)
    wait_for(lambda: not os.path.exists(os.path.join(PORTS_DIR, sid)), timeout=30,
             what="the session's port sockets to go with it")
