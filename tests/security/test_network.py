# SPDX-License-Identifier: LGPL-2.1-or-later
"""Network escapes: from inside a command, reach what the policy refuses. Each must
fail, be reported (network_denied event, journal, /metrics) where the proxy refused
it, and leave the allowed path working."""

import json

import pytest

from conftest import (HOST_ADDR, PROXY_PORT, SERVER_ADDR, SERVER_BODY, SERVER_PORT, LOOPBACK_BODY, TENANT, Api,
                      assert_error, denials, journal_cursor, journal_text_since, metric, py, sh_in)

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
