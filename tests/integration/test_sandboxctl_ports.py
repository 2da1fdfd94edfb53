# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxctl port expose|ls|rm against the running sandboxd, over D-Bus and HTTP: what it
prints reaches the server in the session, and it says what HTTP says."""

import json
import re

from conftest import wait_for
from test_ports import PORT, PORTS_DIR, curl_tcp, curl_unix, listing_via, ports_path, serve
from test_sandboxctl import both_transports, ctl, sid, transport  # noqa: F401 (fixtures)


@both_transports
def test_port_expose_ls_rm(api, sid):  # noqa: F811
    serve(api, sid)
    out = ctl("port", "expose", "--host", sid, str(PORT), check=0).stdout.decode()
    sock = "%s/%s/%d.sock" % (PORTS_DIR, sid, PORT)
    m = re.search(r"^Socket: (\S+)\n\s*URL: http://127\.0\.0\.1:(\d+)/\n$", out, re.M)
    assert m and m.group(1) == sock, out
    host_port = int(m.group(2))
    # what it printed reaches the server, both ways
    listing_via(lambda: curl_unix(sock))
    assert "marker.txt" in listing_via(lambda: curl_tcp(host_port))

    # the same again prints the same; with the other --host it is refused, nothing changed
    assert ctl("port", "expose", "--host", sid, str(PORT), check=0).stdout.decode() == out
    p = ctl("port", "expose", sid, str(PORT), check=1)
    assert b"Failed to expose port 8000" in p.stderr and p.stdout == b"", p.stderr

    # --quiet: the socket's path alone, for scripts
    p = ctl("port", "expose", "--quiet", sid, "9001", check=0)
    assert p.stdout.decode() == "%s/%s/9001.sock\n" % (PORTS_DIR, sid), p.stdout

    # ls: a table; --json: HTTP's list
    table = ctl("port", "ls", sid, check=0).stdout.decode().splitlines()
    assert table[0].split() == ["PORT", "URL", "SOCKET"], table
    assert table[1].split() == [str(PORT), "http://127.0.0.1:%d/" % host_port, sock], table
    assert table[2].split() == ["9001", "-", "%s/%s/9001.sock" % (PORTS_DIR, sid)], table
    assert json.loads(ctl("port", "ls", "--json", sid, check=0).stdout) == api.get(ports_path(sid)).json

    # rm: gone at once; again: not exposed
    ctl("port", "rm", sid, str(PORT), check=0)
    assert [p["port"] for p in api.get(ports_path(sid)).json["ports"]] == [9001]
    wait_for(lambda: curl_tcp(host_port, timeout=3) is None, timeout=30, what="host port %d to close" % host_port)
    p = ctl("port", "rm", sid, str(PORT), check=1)
    assert b"not exposed" in p.stderr, p.stderr
    ctl("port", "rm", sid, "9001", check=0)
    assert ctl("port", "ls", sid, check=0).stdout == b"No exposed ports.\n"
    assert json.loads(ctl("port", "ls", "--json", sid, check=0).stdout) == {"ports": []}


@both_transports
def test_port_refusals(api, sid):  # noqa: F811
    # outside [Ports] Range=, the egress proxy's own port: refused by sandboxd, nothing exposed
    for port in ("80", "3128"):
        p = ctl("port", "expose", sid, port, check=1)
        assert b"Failed to expose port %s" % port.encode() in p.stderr and p.stdout == b"", p.stderr
    assert api.get(ports_path(sid)).json == {"ports": []}
    # a session that does not exist
    p = ctl("port", "ls", "0123456789abcdef", check=1)
    assert b"0123456789abcdef" in p.stderr, p.stderr
    # a closed one
    ctl("rm", sid, check=0)
    p = ctl("port", "expose", sid, str(PORT), check=1)
    assert p.stderr and p.stdout == b"", p.stderr
