# SPDX-License-Identifier: LGPL-2.1-or-later
"""Three sandboxd nodes behind HAProxy (contrib/haproxy/haproxy.cfg), for tests/cluster.

Runs on the host as root (tools/dev test, lane "cluster"), not inside a testbed: it
boots three testbeds (tools/testbed --netns), each in a network namespace of its own
wired to a bridge in a fourth namespace, the hub, where HAProxy runs and where the
tests' clients open their sockets. Nothing of the host's network is touched: the
bridge (sbxcbr0), the veths (sbxc1..3 on the hub's side, eth0 in each node) and the
addresses (10.231.9.0/24) live in those namespaces only, which the tests make and
remove.

    hub namespace (NS-hub)                      node namespaces (NS-n1, NS-n2, NS-n3)
    sbxcbr0 10.231.9.1, HAProxy on :8421   <-- sbxc1..3 == eth0 10.231.9.11..13,
    the tests' sockets (setns per thread)      a testbed each, sandboxd.socket on :8421

Environment:
  SANDBOXD_BUILDDIR                   the build to install (default build/ of the tree)
  SANDBOXD_CLUSTER_TESTBED_PREFIX     the testbeds' directories are PREFIX-n1.. (default
                                      /run/sbx-cluster)
  SANDBOXD_CLUSTER_NETNS_PREFIX       the namespaces are PREFIX-hub, PREFIX-n1.. (default
                                      sbxc): two runs at once need different prefixes
"""

import contextlib
import csv
import ctypes
import http.client
import io
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("SANDBOXD_BUILDDIR") or TOP / "build").resolve()
TESTBED = TOP / "tools" / "testbed"
HAPROXY_CFG = TOP / "contrib" / "haproxy" / "haproxy.cfg"
SANDBOXCTL = BUILD / "src" / "sandboxctl" / "sandboxctl"
WORK = BUILD / "cluster"  # HAProxy's log and admin socket, the load run's numbers

TB_PREFIX = os.environ.get("SANDBOXD_CLUSTER_TESTBED_PREFIX") or "/run/sbx-cluster"
NS_PREFIX = os.environ.get("SANDBOXD_CLUSTER_NETNS_PREFIX") or "sbxc"

NET = "10.231.9"
LB_ADDR = NET + ".1"
PORT = 8421
NODES = ("n1", "n2", "n3")
TENANT = "tenant1"  # the sessions' tenant
TENANT2 = "tenant2"  # another, who must see none of them
OPS = "ops"  # AdminTenants=: drain and metrics through the balancer
TIMEOUT = 60.0

SESSION_ID_RE = re.compile(r"(n[1-3])_[0-9a-f]{16}")
# a request in HAProxy's httplog format: "... sandboxd BACKEND/SERVER T/T/T/T/T STATUS ... "METHOD URI HTTP/1.1""
LOG_RE = re.compile(r' sandboxd (\S+)/(\S+) [-0-9/+]+ (\d{3}) .*"([A-Z]+) ([^ "?]+)[^ "]* HTTP/')


def prefix_error():
    """What is wrong with the prefixes of the environment, or None."""
    if not re.fullmatch(r"/run/sbx-cluster[A-Za-z0-9_.-]{0,32}", TB_PREFIX):
        return "SANDBOXD_CLUSTER_TESTBED_PREFIX=%s: expected /run/sbx-cluster and at most 32 of [A-Za-z0-9_.-]" % TB_PREFIX
    if not re.fullmatch(r"sbxc[a-z0-9]{0,12}", NS_PREFIX):
        return "SANDBOXD_CLUSTER_NETNS_PREFIX=%s: expected sbxc and at most 12 of [a-z0-9]" % NS_PREFIX
    return None


def sh(*args, check=True, timeout=120, input=None, env=None):
    r = subprocess.run([str(a) for a in args], input=input, capture_output=True, text=True, timeout=timeout,
                       env=env)
    if check and r.returncode != 0:
        raise AssertionError("%s exited %d:\n%s%s" % (" ".join(map(str, args)), r.returncode, r.stdout[-3000:],
                                                      r.stderr[-3000:]))
    return r


def wait_for(predicate, timeout=30.0, interval=0.2, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(interval)


# --------------------------------------------------------------------------
# network namespaces: a thread's sockets are made in the hub's

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def ns_path(name):
    return "/run/netns/" + name


@contextlib.contextmanager
def in_netns(name):
    """The calling thread in network namespace NAME (setns(2) is per thread): sockets
    made meanwhile stay in it."""
    with open(ns_path(name)) as target, open("/proc/thread-self/ns/net") as own:
        if _libc.setns(target.fileno(), CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "setns(%s): %s" % (name, os.strerror(e)))
        try:
            yield
        finally:
            if _libc.setns(own.fileno(), CLONE_NEWNET) != 0:
                e = ctypes.get_errno()
                raise OSError(e, "setns back: %s" % os.strerror(e))


class NsConnection(http.client.HTTPConnection):
    def __init__(self, netns, host, port, timeout=TIMEOUT):
        super().__init__(host, port, timeout=timeout)
        self.netns = netns

    def connect(self):
        with in_netns(self.netns):
            self.sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def json(self):
        try:
            return json.loads(self.body)
        except ValueError as e:
            raise AssertionError("not JSON (%s): %r" % (e, self.body[:500])) from None

    def __repr__(self):
        return "<Response %d %r>" % (self.status, self.body[:300])


def scope_header(user, workspace):
    return {"X-Sandboxd-Scope": "%s/%s" % (user, workspace)}


class Api:
    """sandboxd's HTTP API at HOST:PORT, reached from the hub's network namespace."""

    def __init__(self, netns, host, port, key, name):
        self.netns, self.host, self.port, self.key, self.name = netns, host, port, key, name

    def __repr__(self):
        return "Api(%s %s:%d)" % (self.name, self.host, self.port)

    @property
    def url(self):
        return "http://%s:%d" % (self.host, self.port)

    def connection(self, timeout=TIMEOUT):
        return NsConnection(self.netns, self.host, self.port, timeout=timeout)

    def headers(self, headers=None, body=None):
        h = {"Authorization": "Bearer " + self.key} if self.key else {}
        if body is not None:
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        return h

    def request(self, method, path, body=None, headers=None, conn=None, timeout=TIMEOUT):
        """One request (on CONN, kept open, or a fresh connection): a Response."""
        data = json.dumps(body).encode() if body is not None else None
        c = conn or self.connection(timeout=timeout)
        try:
            c.request(method, path, body=data, headers=self.headers(headers, body))
            r = c.getresponse()
            return Response(r.status, r.headers, r.read())
        finally:
            if conn is None:
                c.close()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def create(self, user, workspace, **extra):
        body = {"user": user, "workspace": workspace, "network": {"mode": "none"}}
        body.update(extra)
        return self.post("/v1/sessions", body, headers=scope_header(user, workspace))

    def stream(self, path, body, timeout=TIMEOUT):
        """POST PATH with BODY and yield its NDJSON events as they arrive, each with its
        arrival time (time.monotonic()) in "_t"."""
        c = self.connection(timeout=timeout)
        try:
            c.request("POST", path, body=json.dumps(body).encode(), headers=self.headers(None, body))
            r = c.getresponse()
            if r.status != 200:
                raise AssertionError("POST %s: %d %r" % (path, r.status, r.read()[:1000]))
            assert r.getheader("Content-Type", "").startswith("application/x-ndjson"), r.headers
            buf = b""
            while True:
                chunk = r.read1(65536)
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        ev = json.loads(line)
                        ev["_t"] = time.monotonic()
                        yield ev
            assert not buf.strip(), "the stream ended inside a line: %r" % buf[:300]
        finally:
            c.close()

    def run(self, sid, argv, **extra):
        """A command to its end: (events, stdout, exit event)."""
        body = {"argv": argv}
        body.update(extra)
        events = list(self.stream("/v1/sessions/%s/commands" % sid, body))
        assert events and events[0]["type"] == "accepted", events[:3]
        assert events[-1]["type"] == "exit", events[-3:]
        out = "".join(e.get("data", "") for e in events if e["type"] == "stdout")
        return events, out, events[-1]


def assert_error(r, status, code):
    assert r.status == status, r
    body = r.json
    assert body["error"]["code"] == code, body
    return body["error"]


# --------------------------------------------------------------------------
# the nodes

class Node:
    def __init__(self, i, name):
        self.i = i
        self.name = name
        self.dir = "%s-%s" % (TB_PREFIX, name)
        self.netns = "%s-%s" % (NS_PREFIX, name)
        self.addr = "%s.%d" % (NET, 10 + i)
        self.veth = "sbxc%d" % i

    def __repr__(self):
        return "Node(%s %s)" % (self.name, self.addr)

    def exec(self, *args, check=True, timeout=120, input=None):
        return sh(TESTBED, "exec", self.dir, *args, check=check, timeout=timeout, input=input)

    def root(self, path):
        """A path inside the node, from the host (its overlay; not /run or /tmp)."""
        return Path(self.dir) / "root" / str(path).lstrip("/")

    def write(self, path, text, mode=0o644):
        p = self.root(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        os.chmod(p, mode)

    def main_pid(self):
        return int(self.exec("systemctl", "show", "-P", "MainPID", "sandboxd.service").stdout.strip() or 0)

    def journal(self, unit="sandboxd.service", lines=40):
        return self.exec("journalctl", "-u", unit, "-n", str(lines), "--no-pager", check=False).stdout


def metric_sum(text, name, **labels):
    """The sum of the samples of NAME whose labels include LABELS."""
    total = 0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        head, _, value = line.rpartition(" ")
        if all('%s="%s"' % (k, v) in head for k, v in labels.items()):
            total += float(value)
    return total


class Cluster:
    def __init__(self):
        self.hub = NS_PREFIX + "-hub"
        self.nodes = {name: Node(i, name) for i, name in enumerate(NODES, 1)}
        self.keys = {TENANT: secrets.token_urlsafe(32), TENANT2: secrets.token_urlsafe(32),
                     OPS: secrets.token_urlsafe(32)}
        self.haproxy = None
        self.stats_socket = WORK / ("haproxy-%s.sock" % NS_PREFIX)
        self.haproxy_log = WORK / ("haproxy-%s.log" % NS_PREFIX)
        self.haproxy_pidfile = WORK / ("haproxy-%s.pid" % NS_PREFIX)

    # --- clients
    def lb(self, tenant=TENANT):
        """The balancer, with TENANT's key (None: no key)."""
        return Api(self.hub, LB_ADDR, PORT, self.keys[tenant] if tenant else None, "haproxy")

    def direct(self, node, tenant=TENANT):
        n = self.nodes[node]
        return Api(self.hub, n.addr, PORT, self.keys[tenant], n.name)

    def haproxy_env(self):
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SANDBOXD_LB_BIND": "%s:%d" % (LB_ADDR, PORT),
               "SANDBOXD_LB_STATS": str(self.stats_socket), "SANDBOXD_LB_LOG": "stdout"}
        for n in self.nodes.values():
            env["SANDBOXD_NODE_" + n.name.upper()] = "%s:%d" % (n.addr, PORT)
        return env

    # --- HAProxy's view: its admin socket
    def lb_stat(self):
        """{(proxy, server): row} of HAProxy's "show stat"."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        try:
            s.connect(str(self.stats_socket))
            s.sendall(b"show stat\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        finally:
            s.close()
        text = data.decode().lstrip("# ")
        return {(row["pxname"], row["svname"]): row for row in csv.DictReader(io.StringIO(text))}

    def lb_log(self):
        """HAProxy's log of requests (option httplog, on its stdout): a list of
        (backend, server, status, method, path)."""
        out = []
        for line in self.haproxy_log.read_text(errors="replace").splitlines():
            m = LOG_RE.search(line)
            if m:
                out.append((m.group(1), m.group(2), int(m.group(3)), m.group(4), m.group(5)))
        return out

    def server_status(self, backend, server):
        """UP, DOWN, or a transition: "UP 1/2" is going down (or, before the first
        check, not yet checked), "DOWN 1/2" going up."""
        return self.lb_stat()[(backend, server)]["status"]

    def wait_server(self, backend, server, status, timeout=30):
        wait_for(lambda: self.server_status(backend, server) == status, timeout=timeout,
                 what="HAProxy to see %s/%s %s" % (backend, server, status))

    # --- set-up and tear-down
    def cleanup(self):
        """What a run with these prefixes left (this one's, or one killed before)."""
        self.stop_haproxy()
        for n in self.nodes.values():
            if os.path.exists(n.dir):
                sh(TESTBED, "stop", n.dir, check=False)
        for name in [self.hub] + [n.netns for n in self.nodes.values()]:
            if os.path.exists(ns_path(name)):
                sh("ip", "netns", "delete", name, check=False)

    def stop_haproxy(self):
        if self.haproxy and self.haproxy.poll() is None:
            self.haproxy.terminate()
            try:
                self.haproxy.wait(10)
            except subprocess.TimeoutExpired:
                self.haproxy.kill()
                self.haproxy.wait(10)
        self.haproxy = None
        # one a run killed before its clean-up left: by its pid file, if that pid is still
        # an HAProxy of this configuration in this run's hub
        with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError, PermissionError):
            pid = int(self.haproxy_pidfile.read_text())
            cmdline = Path("/proc/%d/cmdline" % pid).read_bytes().split(b"\0")
            if (b"haproxy" in cmdline[0] and str(HAPROXY_CFG).encode() in cmdline
                    and os.stat("/proc/%d/ns/net" % pid).st_ino == os.stat(ns_path(self.hub)).st_ino):
                os.kill(pid, 9)
        for f in (self.haproxy_pidfile, self.stats_socket):
            with contextlib.suppress(FileNotFoundError):
                f.unlink()

    def make_network(self):
        sh("ip", "netns", "add", self.hub)
        sh("ip", "-n", self.hub, "link", "set", "lo", "up")
        sh("ip", "-n", self.hub, "link", "add", "sbxcbr0", "type", "bridge")
        sh("ip", "-n", self.hub, "addr", "add", LB_ADDR + "/24", "dev", "sbxcbr0")
        sh("ip", "-n", self.hub, "link", "set", "sbxcbr0", "up")
        for n in self.nodes.values():
            sh("ip", "netns", "add", n.netns)
            sh("ip", "-n", self.hub, "link", "add", n.veth, "type", "veth", "peer", "name", "eth0", "netns", n.netns)
            sh("ip", "-n", self.hub, "link", "set", n.veth, "master", "sbxcbr0", "up")
            sh("ip", "-n", n.netns, "addr", "add", n.addr + "/24", "dev", "eth0")
            sh("ip", "-n", n.netns, "link", "set", "eth0", "up")
            sh("ip", "-n", n.netns, "link", "set", "lo", "up")

    def boot(self, n, install_lock):
        sh(TESTBED, "start", n.dir, "--netns", n.netns, "--bind", TOP, timeout=180)
        with install_lock:  # one meson install from the build directory at a time
            sh(TESTBED, "install", n.dir, BUILD, timeout=300)
        keys = "".join(n.exec("/usr/libexec/sandboxd", "--hash-key=" + t, input=k + "\n").stdout
                       for t, k in self.keys.items())
        n.write("/etc/sandboxd/api-keys", keys, 0o600)
        n.write("/etc/sandboxd/sandboxd.conf.d/50-cluster.conf",
                "[Node]\nName=%s\n\n[HTTP]\nAdminTenants=%s\n\n[Session]\nMaxSessionsPerTenant=256\n" % (n.name, OPS))
        n.write("/etc/systemd/system/sandboxd.socket.d/50-cluster.conf",
                "[Socket]\nListenStream=%s:%d\n" % (n.addr, PORT))
        n.exec("systemctl", "daemon-reload")
        n.exec("systemctl", "enable", "--now", "sandboxd.socket")

    def start_haproxy(self):
        WORK.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.stats_socket.unlink()
        sh("haproxy", "-c", "-q", "-f", HAPROXY_CFG, env=self.haproxy_env())
        log = open(self.haproxy_log, "w")
        self.haproxy = subprocess.Popen(["nsenter", "--net=" + ns_path(self.hub), "haproxy", "-db", "-f",
                                         str(HAPROXY_CFG)], env=self.haproxy_env(), stdin=subprocess.DEVNULL,
                                        stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.haproxy_pidfile.write_text("%d\n" % self.haproxy.pid)  # nsenter execs haproxy
        wait_for(lambda: self.haproxy.poll() is not None or self.stats_socket.exists(), timeout=20,
                 what="HAProxy's admin socket")
        assert self.haproxy.poll() is None, "HAProxy exited: " + self.haproxy_log.read_text()[-2000:]

    def wait_all_up(self, timeout=60):
        for name in NODES:
            for backend in ("creates", "node_" + name, "any"):
                self.wait_server(backend, name, "UP", timeout=timeout)

    def setup(self):
        for tool in ("haproxy", "nsenter", "ip"):
            if not shutil.which(tool):
                raise AssertionError("%s is not installed (tools/test-deps.txt)" % tool)
        if not (BUILD / "build.ninja").exists():
            raise AssertionError("%s is not a meson build directory" % BUILD)
        self.cleanup()
        self.make_network()
        t0 = time.monotonic()
        errors = []
        lock = threading.Lock()

        def boot(n):
            try:
                self.boot(n, lock)
            except BaseException as e:  # reported below
                errors.append("%s: %s" % (n.name, e))

        threads = [threading.Thread(target=boot, args=(n,)) for n in self.nodes.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, "\n".join(errors)
        print("three nodes booted and installed in %.1f s" % (time.monotonic() - t0))
        self.start_haproxy()
        self.wait_all_up()


@pytest.fixture(scope="session")
def cluster():
    if prefix_error():
        pytest.fail(prefix_error(), pytrace=False)
    if os.geteuid() != 0:
        pytest.fail("tests/cluster boots testbeds: run as root (tools/dev test)")
    c = Cluster()
    try:
        c.setup()
        yield c
    finally:
        c.cleanup()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test shows each node's sandboxd journal and HAProxy's output."""
    outcome = yield
    rep = outcome.get_result()
    c = item.funcargs.get("cluster") if hasattr(item, "funcargs") else None
    if rep.failed and c is not None:
        for n in c.nodes.values():
            with contextlib.suppress(Exception):
                rep.sections.append(("journal of %s" % n.name, n.journal()))
        with contextlib.suppress(Exception):
            rep.sections.append(("haproxy", c.haproxy_log.read_text()[-3000:]))


if __name__ == "__main__":
    # tools/dev: remove what a lane killed by its time limit left
    import sys
    if sys.argv[1:] != ["cleanup"]:
        sys.exit("usage: %s cleanup" % sys.argv[0])
    if prefix_error():
        sys.exit(prefix_error())
    Cluster().cleanup()
