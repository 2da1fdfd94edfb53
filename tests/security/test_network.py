# SPDX-License-Identifier: LGPL-2.1-or-later
"""Network escapes: from inside a command, reach what the policy refuses. Each must
fail, be reported (network_denied event, journal, /metrics) where the proxy refused
it, and leave the allowed path working."""

import base64
import json
import os
import re
import signal
import socket
import struct
import threading

import pytest

from conftest import (HOST_ADDR, PROXY_PORT, SELF_ADDR, SERVER_ADDR, SERVER_BODY, SERVER_PORT, LOOPBACK_BODY, TENANT, Api,
                      _serve, assert_error, daemon_pid, denials, journal_cursor, journal_text_since, metric, py, run,
                      sh, sh_in, snapshot, start_command, wait_daemon_running, wait_for, wait_terminal)

CURL = ["curl", "-sS", "-m", "10", "-o", "/dev/null", "-w", "%{http_code}"]


@pytest.fixture
def psession(api, scope, secnet):
    """A session in network mode proxy (the default)."""
    user, ws = scope
    s = api.create_session(user, ws)
    assert s["network"]["mode"] == "proxy", s
    return s


def curl(api, sid, *args):
    """curl inside the sandbox: (HTTP code as curl saw it, run)."""
    res = sh_in(api, sid, " ".join(CURL + ["'%s'" % a for a in args]) + "; echo")
    return res["stdout"].strip().splitlines()[-1] if res["stdout"].strip() else "", res


# --- what works ---------------------------------------------------------------

def test_allowed_server_through_http_proxy(api, psession):
    res = sh_in(api, psession["id"], "curl -sS -m 10 http://allowed.sbx.test:%d/" % SERVER_PORT)
    assert res["exit"]["status"] == "succeeded", res["stderr"]
    assert res["stdout"] == SERVER_BODY
    assert not denials(res)


@pytest.mark.parametrize("how", ["connect", "socks5"])
def test_allowed_server_through_connect_and_socks(api, psession, how):
    opt = "--proxytunnel" if how == "connect" else "-x socks5h://127.0.0.1:%d" % PROXY_PORT
    res = sh_in(api, psession["id"], "curl -sS -m 10 %s http://allowed.sbx.test:%d/" % (opt, SERVER_PORT))
    assert res["exit"]["status"] == "succeeded", res["stderr"]
    assert res["stdout"] == SERVER_BODY


def test_python_urllib_uses_the_proxy(api, psession):
    v, res = py(api, psession["id"], "import urllib.request, json\n"
                "print(json.dumps(urllib.request.urlopen('http://allowed.sbx.test:%d/', timeout=10).read().decode()))"
                % SERVER_PORT)
    assert v == SERVER_BODY


def test_no_direct_route_and_no_dns(api, psession):
    """Without the proxy nothing leaves the namespace: not the allowed server's address,
    not the host's, and no name server answers."""
    code = r"""
import json, socket
out = {}
for name, addr in (("server", (%r, %d)), ("host", (%r, %d)), ("api", ("127.0.0.1", 8421))):
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect(addr); out[name] = "connected"
    except OSError as e:
        out[name] = type(e).__name__ + ":" + str(e.errno)
    s.close()
try:
    socket.getaddrinfo("name-only-in-dns.sbx.test", 80); out["dns"] = "resolved"
except OSError as e:
    out["dns"] = "failed"
# (no AF_NETLINK in the sandbox: the namespace's interfaces as /proc tells them)
out["ifaces"] = sorted(l.split(":")[0].strip() for l in open("/proc/self/net/dev").readlines()[2:])
print(json.dumps(out))
""" % (SERVER_ADDR, SERVER_PORT, HOST_ADDR, SERVER_PORT)
    v, _ = py(api, psession["id"], code)
    assert v["server"] != "connected" and v["host"] != "connected" and v["api"] != "connected", v
    assert v["dns"] == "failed", v
    assert v["ifaces"] == ["lo"], v


# --- what is refused ------------------------------------------------------------

@pytest.mark.parametrize("target,reason", [
    ("http://denied.sbx.test:%d/" % SERVER_PORT, "denied_domain"),
    ("http://a.wild.sbx.test:%d/" % SERVER_PORT, "denied_domain"),
    ("http://loop.sbx.test:{loop}/", "loopback"),
    ("http://127.0.0.1:{loop}/", "loopback"),
    ("http://[::1]:{loop}/", "loopback"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://meta.sbx.test/", "link-local"),
    ("http://gateway.sbx.test:%d/" % SERVER_PORT, "private"),
    ("http://10.231.7.3:%d/" % SERVER_PORT, "private"),
    ("http://self.sbx.test:%d/" % SERVER_PORT, "host_address"),
])
@pytest.mark.parametrize("how", ["http", "connect", "socks5"])
def test_refused_through_the_proxy(api, psession, secnet, target, reason, how):
    target = target.format(loop=secnet["loop_port"])
    host = target.split("/")[2].rsplit(":", 1)[0] if not target.startswith("http://[") else "::1"
    if how == "http":
        # --noproxy '': even loopback names go to the proxy, as a hostile command would send them
        args = ["--noproxy", "", "-x", "http://127.0.0.1:%d" % PROXY_PORT, target]
    elif how == "connect":
        args = ["--noproxy", "", "--proxytunnel", "-x", "http://127.0.0.1:%d" % PROXY_PORT, target]
    else:
        args = ["--noproxy", "", "-x", "socks5h://127.0.0.1:%d" % PROXY_PORT, target]
    before = metric(api, "sandboxd_network_denials_total")
    cursor = journal_cursor()
    code, res = curl(api, psession["id"], *args)
    assert LOOPBACK_BODY not in res["stdout"] and SERVER_BODY not in res["stdout"]
    if how == "socks5":
        assert code == "000", res  # SOCKS refused: no HTTP answer at all
    elif how == "http":
        assert code == "403", res
    else:
        assert code in ("403", "000"), res  # curl reports the CONNECT's 403 as a failure
    d = denials(res)
    assert len(d) == 1, res["events"]
    assert d[0]["host"] == host and d[0]["reason"] == reason, d
    assert metric(api, "sandboxd_network_denials_total") == before + 1
    log = journal_text_since(cursor)
    assert "refused %s:" % host in log and reason in log, log


def test_loopback_server_directly(api, psession, secnet):
    """The host's loopback is not the command's: the same address and port reach nothing."""
    res = sh_in(api, psession["id"], "curl -sS -m 5 --noproxy '*' http://127.0.0.1:%d/" % secnet["loop_port"])
    assert res["exit"]["status"] == "failed", res
    assert LOOPBACK_BODY not in res["stdout"]


def test_metadata_address_directly(api, psession):
    res = sh_in(api, psession["id"], "curl -sS -m 5 --noproxy '*' http://169.254.169.254/")
    assert res["exit"]["status"] == "failed", res


def test_session_adds_denials_and_cannot_remove_the_baseline(api, scope, secnet):
    user, ws = scope
    s = api.create_session(user, ws, network={"mode": "proxy", "deny": ["session-denied.sbx.test"],
                                              "allow": ["denied.sbx.test", "allowed.sbx.test", "*.sbx.test"]})
    assert s["network"] == {"mode": "proxy", "deny": ["session-denied.sbx.test"],
                            "allow": ["denied.sbx.test", "allowed.sbx.test", "*.sbx.test"]}, s
    for name, expected, reason in (("session-denied.sbx.test", "403", "denied_domain"),
                                   ("denied.sbx.test", "403", "denied_domain"),  # allowing it changes nothing
                                   ("allowed.sbx.test", "200", None)):
        code, res = curl(api, s["id"], "http://%s:%d/" % (name, SERVER_PORT))
        assert code == expected, (name, res)
        assert [d["reason"] for d in denials(res)] == ([reason] if reason else []), res["events"]
    # another session of another scope does not inherit the first one's list
    other = api.create_session(user + "x", ws)
    code, _ = curl(api, other["id"], "http://session-denied.sbx.test:%d/" % SERVER_PORT)
    assert code == "200"


def test_session_allow_list(api, scope, secnet):
    user, ws = scope
    s = api.create_session(user, ws, network={"allow": ["allowed.sbx.test"]})
    code, _ = curl(api, s["id"], "http://allowed.sbx.test:%d/" % SERVER_PORT)
    assert code == "200"
    code, res = curl(api, s["id"], "http://%s:%d/" % (SERVER_ADDR, SERVER_PORT))  # by address: not in the list
    assert code == "403" and denials(res)[0]["reason"] == "not_allowed", res


def test_denial_goes_to_the_command_that_asked(api, psession):
    """Two commands of one session: the refusal is in the log of the one that asked."""
    from conftest import start_command, wait_terminal, replay
    sid = psession["id"]
    quiet = start_command(api, sid, ["sleep", "3"])
    code, res = curl(api, sid, "http://denied.sbx.test:%d/" % SERVER_PORT)
    assert code == "403" and len(denials(res)) == 1
    wait_terminal(api, sid, quiet["request_id"])
    events, _ = replay(api, sid, quiet["request_id"])
    assert not denials({"events": events}), events


def test_mode_none_has_no_network(api, scope, secnet):
    user, ws = scope
    s = api.create_session(user, ws, network={"mode": "none"})
    assert s["network"] == {"mode": "none"}
    v, _ = py(api, s["id"], "import os, json\n"
              "print(json.dumps([sorted(l.split(':')[0].strip() for l in open('/proc/self/net/dev').readlines()[2:]), "
              "sorted(k for k in os.environ if 'proxy' in k.lower())]))")
    assert v == [["lo"], []], v
    code, _ = curl(api, s["id"], "-x", "http://127.0.0.1:%d" % PROXY_PORT, "http://allowed.sbx.test:%d/" % SERVER_PORT)
    assert code == "000"


def test_mode_host_only_for_the_config_s_tenants(api, tcp, scope, secnet):
    user, ws = scope
    r = api.post("/v1/sessions", {"user": user, "workspace": ws, "network": {"mode": "host"}})
    assert_error(r, 403, "forbidden")
    # HostModeTenants=tenant1 in the drop-in
    r = tcp.post("/v1/sessions", {"user": user, "workspace": ws, "network": {"mode": "host"}})
    assert r.status == 201, r
    sid = r.json["id"]
    assert r.json["network"] == {"mode": "host"}
    # the host's network, minus IPAddressDeny= (default: localhost link-local multicast)
    code, _ = curl(tcp, sid, "--noproxy", "*", "http://%s:%d/" % (SERVER_ADDR, SERVER_PORT))
    assert code == "200"
    code, _ = curl(tcp, sid, "--noproxy", "*", "-m", "3", "http://127.0.0.1:%d/" % secnet["loop_port"])
    assert code == "000"


def test_mode_host_cannot_reach_the_host_s_own_addresses(api, tcp, scope, secnet):
    """A server of the host listening on every address is as far from mode host as on
    loopback: the host's own addresses (the kernel's local table) are denied too."""
    user, ws = scope
    srv = _serve("0.0.0.0", 0, "a host service\n")
    port = srv.server_address[1]
    try:
        r = tcp.post("/v1/sessions", {"user": user, "workspace": ws, "network": {"mode": "host"}})
        assert r.status == 201, r
        sid = r.json["id"]
        for addr in (HOST_ADDR, SELF_ADDR, "127.0.0.1"):
            code, res = curl(tcp, sid, "--noproxy", "*", "-m", "3", "http://%s:%d/" % (addr, port))
            assert code == "000", (addr, res)
        # while a host that is not this one answers
        code, _ = curl(tcp, sid, "--noproxy", "*", "http://%s:%d/" % (SERVER_ADDR, SERVER_PORT))
        assert code == "200"
        # the addresses are in the unit's IPAddressDeny=
        c = start_command(tcp, sid, {"argv": ["sleep", "30"], "request_id": "deny"})
        deny = wait_for(lambda: sh("systemctl", "show", "-p", "IPAddressDeny", c["unit"]).stdout.split("=", 1)[1].strip(),
                        what="the unit's IPAddressDeny=")
        assert HOST_ADDR in deny and SELF_ADDR in deny, deny
        tcp.post("/v1/sessions/%s/commands/deny/signal" % sid, {"signal": "SIGKILL"})
    finally:
        srv.shutdown()


# --- one canonical address policy (issue 10's bypasses) ---------------------------

SEND = r"""
import base64, socket, sys
out = []
for data in sys.argv[1:]:
    s = socket.create_connection(("127.0.0.1", %d), timeout=15)
    s.sendall(base64.b64decode(data))
    got = b""
    while True:
        try:
            b = s.recv(65536)
        except OSError:
            break
        if not b:
            break
        got += b
    s.close()
    out.append(base64.b64encode(got).decode())
print(" ".join(out))
""" % PROXY_PORT


def send_raw(api, sid, *requests):
    """From inside the session, each request (bytes) on a connection of its own to the
    proxy, read until the proxy closes: (the answers, the run)."""
    res = run(api, sid, {"argv": ["/usr/bin/python3", "-c", SEND] + [base64.b64encode(r).decode() for r in requests]})
    assert res["exit"]["status"] == "succeeded", res["stderr"]
    return [base64.b64decode(a) for a in res["stdout"].split()], res


def http_status(answer):
    line = answer.split(b"\r\n", 1)[0].decode("latin-1")
    return int(line.split()[1]) if line.startswith("HTTP/1.") else None


def denied_header(answer):
    m = re.search(rb"\r\nX-Sandboxd-Denied: ([^\r]*)\r\n", answer.split(b"\r\n\r\n", 1)[0] + b"\r\n")
    return m.group(1).decode() if m else None


def socks5_request(host, port, atyp=3):
    """A SOCKS5 greeting (no authentication) and CONNECT, in one write."""
    if atyp == 1:
        addr = socket.inet_pton(socket.AF_INET, host)
    elif atyp == 4:
        addr = socket.inet_pton(socket.AF_INET6, host)
    else:
        addr = bytes([len(host)]) + host.encode()
    return b"\x05\x01\x00" + bytes([5, 1, 0, atyp]) + addr + struct.pack(">H", port)


def proxy_requests(how, authority, port):
    """What a client sends for AUTHORITY (host as in a URL, port apart) spoken as HOW."""
    host = authority[1:-1] if authority.startswith("[") else authority
    if how == "http":
        return b"GET http://%s:%d/ HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (authority.encode(), port, authority.encode(), port)
    if how == "connect":
        return b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (authority.encode(), port, authority.encode(), port)
    return socks5_request(host, port)


def assert_refused(how, answer, res, host, reason):
    """The request was refused by the policy for REASON, reported for HOST, and nothing
    of a server came back."""
    assert SERVER_BODY.encode() not in answer and LOOPBACK_BODY.encode() not in answer, answer
    if how == "socks5":
        assert answer[:2] == b"\x05\x00" and answer[2:4] == b"\x05\x02", answer  # not allowed by ruleset
    else:
        assert http_status(answer) == 403 and denied_header(answer) == reason, answer
    d = denials(res)
    assert [(x["host"], x["reason"]) for x in d] == [(host, reason)], res["events"]


# 10.231.7.2, the allowed test server (ProxyAllowedAddresses=), in the notations inet_aton()
# and inet_pton() take for it
SERVER_NOTATIONS = {
    "hex": "0x0ae70702",
    "hex-dotted": "0xa.0xe7.0x7.0x2",
    "decimal": "182912770",
    "octal": "012.0347.07.02",
    "short": "10.231.1794",
    "trailing-dot": "10.231.7.2.",
    "mapped": "[::ffff:10.231.7.2]",
    "mapped-hex": "[::ffff:ae7:702]",
    "compatible": "[::10.231.7.2]",
}


@pytest.mark.parametrize("how", ["http", "connect", "socks5"])
@pytest.mark.parametrize("notation", list(SERVER_NOTATIONS))
def test_denied_literal_in_another_notation(api, scope, secnet, notation, how):
    """A session denies the allowed server by its address: no other way to write that
    address reaches it (before, the name check compared the text as sent)."""
    user, ws = scope
    s = api.create_session(user, ws, network={"deny": [SERVER_ADDR]})
    (answer,), res = send_raw(api, s["id"], proxy_requests(how, SERVER_NOTATIONS[notation], SERVER_PORT))
    assert_refused(how, answer, res, SERVER_ADDR, "denied_domain")


def test_literal_notations_are_that_address(api, psession):
    """The other side of the test above: without the denial each notation reaches the
    server, so what refused them there was the policy, not the notation."""
    requests = [proxy_requests("http", n, SERVER_PORT) for n in SERVER_NOTATIONS.values()]
    answers, res = send_raw(api, psession["id"], *requests)
    for n, a in zip(SERVER_NOTATIONS, answers):
        assert http_status(a) == 200 and a.endswith(SERVER_BODY.encode()), (n, a)
    assert not denials(res)


@pytest.mark.parametrize("notation", ["0x7f000001", "0x7f.1", "2130706433", "0177.0.0.1", "127.1", "127.0.0.1.",
                                      "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::127.0.0.1]", "[::7f00:1]"])
def test_loopback_in_every_notation(api, psession, secnet, notation):
    """The host's loopback server, written some other way, over each protocol (and SOCKS5
    with the IPv6 forms as addresses): refused as loopback, reported as 127.0.0.1."""
    port = secnet["loop_port"]
    hows = ["http", "connect", "socks5"]
    requests = [proxy_requests(h, notation, port) for h in hows]
    if notation.startswith("["):
        hows.append("socks5")
        requests.append(socks5_request(notation[1:-1], port, atyp=4))
    for how, request in zip(hows, requests):
        (answer,), res = send_raw(api, psession["id"], request)
        assert_refused(how, answer, res, "127.0.0.1", "loopback")


def test_zone_ids_are_refused(api, psession):
    answers, res = send_raw(api, psession["id"], b"GET http://[fe80::1%25lo]:80/ HTTP/1.1\r\n\r\n",
                            b"CONNECT [fe80::1%lo]:80 HTTP/1.1\r\n\r\n", socks5_request("fe80::1%lo", 80))
    assert http_status(answers[0]) == 400 and http_status(answers[1]) == 400, answers
    assert answers[2][2:4] == b"\x05\x01", answers[2]  # general failure: no such host


# A name server of our own on the testbed's loopback, for names under dns.sbx.test, and
# resolv.conf with search domains: what the resolver would expand a short name to.
DNS_ADDR = "127.0.0.2"
DNS_ZONE = {"open.dns.sbx.test": SERVER_ADDR, "secret.dns.sbx.test": SERVER_ADDR}


class _NameServer(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((DNS_ADDR, 53))
        self.queries = []

    def run(self):
        while True:
            try:
                q, peer = self.sock.recvfrom(512)
            except OSError:
                return
            a = self.answer(q)
            if a:
                self.sock.sendto(a, peer)

    def answer(self, q):
        if len(q) < 17:
            return None
        labels, i = [], 12
        while i < len(q) and q[i]:
            labels.append(q[i + 1:i + 1 + q[i]].decode("ascii", "replace").lower())
            i += 1 + q[i]
        if i + 5 > len(q):
            return None
        qtype = struct.unpack(">H", q[i + 1:i + 3])[0]
        name = ".".join(labels)
        self.queries.append(name)
        addr = DNS_ZONE.get(name)
        answer = b""
        if addr and qtype == 1:
            answer = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton(addr)
        flags = 0x8580 | (0 if addr else 3)  # an authoritative answer, or NXDOMAIN
        return q[:2] + struct.pack(">HHHHH", flags, 1, 1 if answer else 0, 0, 0) + q[12:i + 5] + answer


@pytest.fixture
def search_domains(secnet):
    ns = _NameServer()
    ns.start()
    path = "/etc/resolv.conf"
    link = os.readlink(path) if os.path.islink(path) else None
    old = None if link else open(path).read()
    os.unlink(path)
    with open(path, "w") as f:
        f.write("nameserver %s\nsearch dns.sbx.test sbx.test\noptions ndots:1 timeout:2 attempts:1\n" % DNS_ADDR)
    yield ns
    os.unlink(path)
    if link:
        os.symlink(link, path)
    else:
        with open(path, "w") as f:
            f.write(old)
    ns.sock.close()


def test_no_search_domains(api, scope, search_domains):
    """A denied name is not reached in a short form the resolver's search list would
    complete: single labels are refused, other names are looked up as they are."""
    user, ws = scope
    s = api.create_session(user, ws, network={"deny": ["secret.dns.sbx.test"]})
    sid = s["id"]
    # the name server works, through the proxy, for a full name
    code, res = curl(api, sid, "http://open.dns.sbx.test:%d/" % SERVER_PORT)
    assert code == "200" and "open.dns.sbx.test" in search_domains.queries, (code, res["stderr"])
    code, res = curl(api, sid, "http://secret.dns.sbx.test:%d/" % SERVER_PORT)
    assert code == "403" and denials(res)[0]["reason"] == "denied_domain", res

    # "secret" would be secret.dns.sbx.test: refused before any lookup
    del search_domains.queries[:]
    for opt in ([], ["-x", "socks5h://127.0.0.1:%d" % PROXY_PORT]):
        code, res = curl(api, sid, *opt, "http://secret:%d/" % SERVER_PORT)
        assert code in ("403", "000") and SERVER_BODY not in res["stdout"], (opt, res)
        assert [(d["host"], d["reason"]) for d in denials(res)] == [("secret", "single_label")], res["events"]
    # "secret.dns" would be secret.dns.sbx.test after its own lookup failed: only itself is asked for
    code, res = curl(api, sid, "http://secret.dns:%d/" % SERVER_PORT)
    assert code == "502", (code, res)
    assert "secret.dns" in search_domains.queries, search_domains.queries
    assert not [q for q in search_domains.queries if q.endswith("sbx.test")], search_domains.queries


LOCAL_PREFIX, LOCAL_ADDR = "203.0.113.0/24", "203.0.113.9"  # TEST-NET-3: public, not any interface's
LOCAL_PREFIX6, LOCAL_ADDR6 = "2001:db8:5b::/64", "2001:db8:5b::9"


@pytest.fixture
def local_route(secnet):
    """'ip route add local' of a public prefix, with a server on one of its addresses, added
    while sandboxd runs (so it must hear of it)."""
    sh("ip", "route", "add", "local", LOCAL_PREFIX, "dev", "lo")
    sh("ip", "-6", "route", "add", "local", LOCAL_PREFIX6, "dev", "lo")
    try:
        srv = _serve(LOCAL_ADDR, 0, LOOPBACK_BODY)  # bind() takes an address of a local route
        yield srv.server_address[1]
        srv.shutdown()
        srv.server_close()
    finally:
        sh("ip", "route", "del", "local", LOCAL_PREFIX, "dev", "lo", check=False)
        sh("ip", "-6", "route", "del", "local", LOCAL_PREFIX6, "dev", "lo", check=False)


@pytest.mark.parametrize("how", ["http", "connect", "socks5"])
def test_local_route_is_this_host(api, psession, local_route, how):
    port = local_route
    # the service answers on this host...
    assert sh("curl", "-sS", "-m", "5", "http://%s:%d/" % (LOCAL_ADDR, port)).stdout == LOOPBACK_BODY
    # ... and not through the proxy, in either family
    for authority, host in ((LOCAL_ADDR, LOCAL_ADDR), ("[::ffff:%s]" % LOCAL_ADDR, LOCAL_ADDR),
                            ("[%s]" % LOCAL_ADDR6, LOCAL_ADDR6)):
        (answer,), res = send_raw(api, psession["id"], proxy_requests(how, authority, port))
        assert_refused(how, answer, res, host, "host_address")


def test_more_addresses_than_64_interfaces(api, psession, secnet):
    """This host's addresses beyond what SIOCGIFCONF with 64 entries saw."""
    addrs = ["198.18.0.%d" % i for i in range(1, 101)]
    sh("ip", "-batch", "-", input="".join("address add %s/32 dev lo\n" % a for a in addrs))
    try:
        (first, last), res = send_raw(api, psession["id"], proxy_requests("http", addrs[0], 80),
                                      proxy_requests("http", addrs[-1], 80))
        assert denied_header(first) == "host_address" and denied_header(last) == "host_address", (first, last)
        assert len(denials(res)) == 2
    finally:
        sh("ip", "-batch", "-", input="".join("address del %s/32 dev lo\n" % a for a in addrs), check=False)


@pytest.mark.parametrize("case", ["other-host", "other-port", "two-hosts", "userinfo", "fragment", "scheme"])
def test_host_header_names_the_target(api, psession, case):
    """The server sees the request's Host header: it must name the host and port that were
    checked, once. (Before, GET http://allowed/ with Host: denied went through as it was.)"""
    target = "http://allowed.sbx.test:%d/" % SERVER_PORT
    host = "allowed.sbx.test:%d" % SERVER_PORT
    head = {
        "other-host": (target, ["Host: denied.sbx.test:%d" % SERVER_PORT]),
        "other-port": (target, ["Host: allowed.sbx.test"]),
        "two-hosts": (target, ["Host: " + host, "Host: " + host]),
        "userinfo": ("http://%s@denied.sbx.test:%d/" % (host, SERVER_PORT), []),
        "fragment": (target + "#@denied.sbx.test", ["Host: " + host]),
        "scheme": ("gopher://allowed.sbx.test:%d/" % SERVER_PORT, ["Host: " + host]),
    }[case]
    request = ("GET %s HTTP/1.1\r\n%s\r\n" % (head[0], "".join(h + "\r\n" for h in head[1]))).encode()
    good = ("GET %s HTTP/1.1\r\nHost: ALLOWED.sbx.test.:%d\r\n\r\n" % (target, SERVER_PORT)).encode()
    (answer, ok), res = send_raw(api, psession["id"], request, good)
    assert http_status(answer) == 400 and SERVER_BODY.encode() not in answer, answer
    # the same host said another way is the same host
    assert http_status(ok) == 200 and ok.endswith(SERVER_BODY.encode()), ok


@pytest.mark.parametrize("length", [254, 255])
def test_socks5_oversize_domain(api, psession, length):
    """A SOCKS5 CONNECT with a domain of 254 or 255 bytes overflowed a 254-byte stack
    buffer. Now: a clean refusal, and the proxy (and sandboxd) go on."""
    name = ("a" * 63 + ".") * 3 + "a" * (length - 192)
    assert len(name) == length
    (answer, after), _ = send_raw(api, psession["id"], socks5_request(name, 80),
                                  proxy_requests("http", "allowed.sbx.test", SERVER_PORT))
    assert answer == b"\x05\x00\x05\x01\x00\x01" + bytes(6), answer  # general failure
    assert http_status(after) == 200 and after.endswith(SERVER_BODY.encode()), after


# --- restarts keep egress ---------------------------------------------------------

FETCH_LOOP = r"""
import sys, time, urllib.request
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    try:
        body = urllib.request.urlopen(sys.argv[2], timeout=30).read().decode()
        print("ok" if body == sys.argv[3] else "wrong " + body[:40], flush=True)
    except Exception as e:
        print("fail %s" % e, flush=True)
    time.sleep(0.2)
"""


@pytest.mark.restarts_daemon
@pytest.mark.kills_daemon(1)
@pytest.mark.time_limit(120)
@pytest.mark.parametrize("how", ["restart", "kill"])
def test_egress_survives_a_restart(api, psession, how):
    """A command fetches through the proxy all the while sandboxd restarts (or is killed
    and brought back): every fetch works, with no gap, and so do new commands after."""
    sid = psession["id"]
    url = "http://allowed.sbx.test:%d/" % SERVER_PORT
    c = start_command(api, sid, {"argv": ["/usr/bin/python3", "-c", FETCH_LOOP, "10", url, SERVER_BODY],
                                 "request_id": "fetch-loop"})
    wait_for(lambda: "ok" in snapshot(api, sid, "fetch-loop")["stdout"], timeout=15, what="the first fetch")
    old = daemon_pid()
    if how == "restart":
        sh("systemctl", "reset-failed", "sandboxd.service", check=False)  # not the start rate limit
        sh("systemctl", "restart", "sandboxd.service")
    else:
        os.kill(old, signal.SIGKILL)
    wait_daemon_running(not_pid=old, timeout=30)

    snap = wait_terminal(api, sid, c["request_id"], timeout=60)
    lines = snap["stdout"].splitlines()
    assert snap["status"] == "succeeded", snap
    # A fetch in flight when sandboxd goes can break (the connection was its); no other.
    assert len([l for l in lines if l != "ok"]) <= 1 and lines[-5:] == ["ok"] * 5, snap["stdout"]
    res = sh_in(api, sid, "curl -sS -m 10 %s" % url)
    assert res["stdout"] == SERVER_BODY, res
