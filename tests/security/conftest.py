# SPDX-License-Identifier: LGPL-2.1-or-later
"""Fixtures of the escape suite: the integration tests' own (api, session, ...),
plus a test network and a config drop-in that the whole package shares.

Everything the tests reach lives inside the testbed: a server on the testbed's
127.0.0.1 (which no command may reach), and an "allowed" server in a network
namespace of our own made here, behind a veth pair on a private /24 that the
drop-in lets the proxy connect to. Names come from /etc/hosts entries the
fixture adds: the proxy resolves them like any other (getaddrinfo), and a test
never sends a packet anywhere else.
"""

import http.server
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("sandboxd_integration_conftest",
                                               os.path.join(_HERE, "..", "integration", "conftest.py"))
_it = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _it
_spec.loader.exec_module(_it)
# the fixtures, hooks and helpers of the integration tests, for this package too
globals().update({k: v for k, v in vars(_it).items() if not k.startswith("__")})

sh = _it.sh
Api = _it.Api

NETNS = "sbxsec"
VETH_HOST, VETH_NS = "sbxsec0", "sbxsec1"
HOST_ADDR, SERVER_ADDR = "10.231.7.1", "10.231.7.2"
SERVER_PORT = 8080
SERVER_BODY = "hello from the allowed test server\n"
LOOPBACK_BODY = "secret of the host's loopback\n"
DROPIN = "/etc/sandboxd/sandboxd.conf.d/90-security-tests.conf"
TOOLS_DIR = "/opt/sbx-sec-tools"
SHARED_DIR = "/srv/sbx-sec-shared"     # AllowWrite=
SECRET_DIR = "/srv/sbx-sec-secret"     # DenyRead=
LIMIT_FSIZE = 1 << 20

HOSTS = {
    "allowed.sbx.test": SERVER_ADDR,
    "denied.sbx.test": SERVER_ADDR,       # DefaultDeniedDomains=
    "a.wild.sbx.test": SERVER_ADDR,       # DefaultDeniedDomains=*.wild.sbx.test
    "session-denied.sbx.test": SERVER_ADDR,  # a session's own network.deny
    "loop.sbx.test": "127.0.0.1",
    "meta.sbx.test": "169.254.169.254",
    "gateway.sbx.test": HOST_ADDR,        # private, and this host's own address
    "self.sbx.test": "198.51.100.77",     # this host's own address, not a private one
}
# a public-looking address of this host (TEST-NET-2, on a veth inside the testbed)
SELF_VETH, SELF_ADDR = "sbxsecpub0", "198.51.100.77"
HOSTS_MARK = "# sandboxd security tests"

PROXY_PORT = 3128


class _Handler(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *a):
        pass


def _serve(addr, port, body):
    handler = type("H", (_Handler,), {"body": body.encode()})
    srv = http.server.ThreadingHTTPServer((addr, port), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


_SERVER_SCRIPT = r"""
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = sys.argv[3].encode()
        self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()
"""


def _netns_up():
    sh("ip", "netns", "delete", NETNS, check=False)
    sh("ip", "link", "delete", VETH_HOST, check=False)
    sh("ip", "netns", "add", NETNS)
    sh("ip", "link", "add", VETH_HOST, "type", "veth", "peer", "name", VETH_NS)
    sh("ip", "link", "set", VETH_NS, "netns", NETNS)
    sh("ip", "addr", "add", HOST_ADDR + "/24", "dev", VETH_HOST)
    sh("ip", "link", "set", VETH_HOST, "up")
    sh("ip", "netns", "exec", NETNS, "ip", "addr", "add", SERVER_ADDR + "/24", "dev", VETH_NS)
    sh("ip", "netns", "exec", NETNS, "ip", "link", "set", VETH_NS, "up")
    sh("ip", "netns", "exec", NETNS, "ip", "link", "set", "lo", "up")


    sh("ip", "link", "delete", SELF_VETH, check=False)
    sh("ip", "link", "add", SELF_VETH, "type", "veth", "peer", "name", SELF_VETH[:-1] + "1")
    sh("ip", "addr", "add", SELF_ADDR + "/32", "dev", SELF_VETH)
    sh("ip", "link", "set", SELF_VETH, "up")


def _netns_down():
    sh("ip", "netns", "delete", NETNS, check=False)
    sh("ip", "link", "delete", VETH_HOST, check=False)
    sh("ip", "link", "delete", SELF_VETH, check=False)


def _hosts(add):
    with open("/etc/hosts") as f:
        lines = [l for l in f.read().splitlines() if not l.endswith(HOSTS_MARK)]
    if add:
        lines += ["%s %s %s" % (a, n, HOSTS_MARK) for n, a in HOSTS.items()]
    with open("/etc/hosts", "w") as f:
        f.write("\n".join(lines) + "\n")


@pytest.fixture(scope="package")
def secnet(api_key):
    """The test network, the servers, /etc/hosts, the tools and paths of the drop-in,
    and sandboxd restarted with the drop-in. Undone at the end of the package."""
    _netns_up()
    server = subprocess.Popen(["ip", "netns", "exec", NETNS, sys.executable, "-c", _SERVER_SCRIPT, SERVER_ADDR,
                               str(SERVER_PORT), SERVER_BODY], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    loop = _serve("127.0.0.1", 0, LOOPBACK_BODY)
    _hosts(True)

    os.makedirs(TOOLS_DIR, exist_ok=True)
    with open(TOOLS_DIR + "/README", "w") as f:
        f.write("tools for the sandbox\n")
    with open(TOOLS_DIR + "/hello-tool", "w") as f:
        f.write("#!/bin/sh\necho tool ran as $(id -u)\n")
    os.chmod(TOOLS_DIR + "/hello-tool", 0o755)
    os.chmod(TOOLS_DIR + "/README", 0o644)
    os.makedirs(SHARED_DIR + "/ro", exist_ok=True)
    os.chmod(SHARED_DIR, 0o1777)
    os.chmod(SHARED_DIR + "/ro", 0o1777)
    os.makedirs(SECRET_DIR, exist_ok=True)
    os.chmod(SECRET_DIR, 0o755)
    with open(SECRET_DIR + "/data", "w") as f:
        f.write("denied by DenyRead=\n")
    os.chmod(SECRET_DIR + "/data", 0o644)

    with _it.config_dropin(DROPIN) as write:
        write("[Network]\n"
              "DefaultDeniedDomains=denied.sbx.test *.wild.sbx.test\n"
              "ProxyAllowedAddresses=%s\n"
              "HostModeTenants=%s\n"
              "[Sandbox]\n"
              "ToolsDirectory=%s\n"
              "LimitFSIZE=%d\n"
              "AllowWrite=%s\n"
              "DenyWrite=%s/ro\n"
              "DenyRead=%s\n" % (SERVER_ADDR, _it.TENANT, TOOLS_DIR, LIMIT_FSIZE, SHARED_DIR, SHARED_DIR, SECRET_DIR))
        # the allowed server answers (from the host's side of the veth)
        _it.wait_for(lambda: sh("curl", "-s", "-m", "2", "http://%s:%d/" % (SERVER_ADDR, SERVER_PORT),
                                check=False).stdout == SERVER_BODY, timeout=10, what="the test server")
        yield {"loop_port": loop.server_address[1]}
    # (the drop-in is removed, sandboxd restarted without it)
    _hosts(False)
    loop.shutdown()
    server.terminate()
    server.wait(timeout=10)
    _netns_down()
    for d in (TOOLS_DIR, SHARED_DIR, SECRET_DIR):
        shutil.rmtree(d, ignore_errors=True)


def py(api, sid, code, timeout=60, **extra):
    """Runs Python CODE in the session; it prints one JSON value last. Returns (value, run)."""
    body = {"argv": ["/usr/bin/python3", "-c", code]}
    body.update(extra)
    res = _it.run(api, sid, body, timeout=timeout)
    lines = res["stdout"].strip().splitlines()
    assert lines, "no output: %r" % res
    return json.loads(lines[-1]), res


def sh_in(api, sid, script, **extra):
    body = {"argv": ["/bin/sh", "-c", script]}
    body.update(extra)
    return _it.run(api, sid, body)


def denials(res):
    return [e for e in res["events"] if e.get("type") == "network_denied"]


def metric(api, name):
    for line in api.get("/metrics").body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError("no metric %s" % name)


def journal_text_since(cursor):
    """Everything the journal got after CURSOR, as text. (Not filtered with -u: on this
    systemd, a match combined with --after-cursor has been seen to skip entries.)"""
    return sh("journalctl", "--no-pager", "-o", "cat", "--after-cursor", cursor).stdout


def wait_unit_running(unit, timeout=20):
    return _it.wait_for(lambda: _it.systemctl_show(unit, "ActiveState", "MainPID")["MainPID"] not in ("", "0")
                        and _it.systemctl_show(unit, "MainPID")["MainPID"], timeout=timeout,
                        what="%s to run" % unit)
