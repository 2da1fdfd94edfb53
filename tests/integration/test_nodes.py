# SPDX-License-Identifier: LGPL-2.1-or-later
"""Nodes (issue 18): a node's name in what sandboxd says of itself and of its sessions,
session ids NODE_HEX, 421 wrong_node for another node's id (HTTP and D-Bus), the
X-Sandboxd-Scope header checked against the body, [Node] Name= from a drop-in (new ids
take it, sessions from before keep working across restarts), and a bad name refused."""

import asyncio
import http.server
import io
import json
import os
import re
import secrets
import subprocess
import sys
import threading

import pytest

import sbxbus as B
from conftest import (SANDBOXD_BIN, TCP_HOST, TCP_PORT, assert_error, commands_path, exec_result, is_active,
                      journal_cursor, journal_since, restart_daemon, sh, start_command, unique_user, units, wait_for,
                      wait_terminal)

pytestmark = pytest.mark.restarts_daemon

NODE_RE = re.compile(r"[a-z][a-z0-9]{0,31}")
ID_RE = re.compile(r"([a-z][a-z0-9]{0,31})_[0-9a-f]{16}")
DROPIN = "/etc/sandboxd/sandboxd.conf.d/60-test-nodes.conf"


def other_sid():
    return "zz_" + secrets.token_hex(8)


def node_of(api):
    r = api.get("/v1/health")
    assert r.status == 200, r
    return r.json["node"]


def assert_wrong_node(r, node="zz"):
    """421 wrong_node, with the node named in the error and its message."""
    assert r.status == 421, r
    assert r.headers.get("Content-Type", "").split(";")[0] == "application/json", r.headers
    err = r.json["error"]
    assert set(err) == {"code", "message", "node"}, err
    assert err["code"] == "wrong_node" and err["node"] == node, err
    assert node in err["message"], err
    return err


def all_sessions(api):
    return sorted(s["id"] for s in api.get("/v1/sessions").json["sessions"])


# --------------------------------------------------------------------------
# the name

def test_node_name_everywhere(api, session):
    node = node_of(api)
    assert NODE_RE.fullmatch(node), node
    m = ID_RE.fullmatch(session["id"])
    assert m and m.group(1) == node, (session["id"], node)
    assert session["node"] == node, session
    assert session["unit"] == "sandboxd-%s.slice" % session["id"], session
    assert session["unit"] in units()
    assert api.get_session(session["id"])["node"] == node
    listed = [s for s in api.get("/v1/sessions").json["sessions"] if s["id"] == session["id"]]
    assert listed and listed[0]["node"] == node, listed

    # a command's unit and a result: the unit names take the id with its '_'
    res = exec_result(api, session["id"], {"argv": ["sh", "-c", "echo hi"]})
    assert res["status"] == "succeeded", res
    assert res["unit"] in ("sandboxd-%s-1.service" % session["id"], "sandboxd-%s-exec.service" % session["id"]), res

    text = api.get("/metrics").body.decode()
    assert 'sandboxd_node_info{node="%s"} 1\n' % node in text
    assert re.search(r'^sandboxd_sessions\{node="%s",state="active"\} [1-9]' % node, text, re.M), text[:400]
    assert re.search(r'^sandboxd_commands_running\{node="%s"\} \d+$' % node, text, re.M)

    # D-Bus: Health() and the session's Node
    health, _ = B.manager("Health")
    assert health["node"] == node
    path = B.manager("GetSession", "s", session["id"])[0]
    assert B.get_property(path, B.SESSION, "Node") == node
    assert B.get_property(path, B.SESSION, "Id") == session["id"]


def test_node_name_logged_at_start(api):
    cursor = journal_cursor()
    restart_daemon()
    node = node_of(api)
    log = wait_for(lambda: (lambda l: l if "Node %s:" % node in l else None)(journal_since(cursor, "sandboxd.service")),
                   timeout=10, what="the node's name in the journal")
    assert "new sessions get ids %s_" % node in log


def test_node_name_stable_across_restarts(api):
    before = node_of(api)
    restart_daemon()
    assert node_of(api) == before


# --------------------------------------------------------------------------
# misdirected requests

def test_wrong_node_http_routes(api, session):
    sid = other_sid()
    before, before_units = all_sessions(api), units()
    routes = [
        ("GET", "/v1/sessions/" + sid, None, {}),
        ("DELETE", "/v1/sessions/" + sid, None, {}),
        ("DELETE", "/v1/sessions/%s?purge=true" % sid, None, {}),
        ("POST", "/v1/sessions/%s/activity" % sid, None, {}),
        ("POST", "/v1/sessions/%s/freeze" % sid, None, {}),
        ("POST", commands_path(sid), {"argv": ["true"]}, {}),
        ("POST", commands_path(sid) + "?wait=false", {"argv": ["true"], "request_id": "x"}, {}),
        ("GET", commands_path(sid), None, {}),
        ("GET", commands_path(sid, "job-1"), None, {}),
        ("GET", commands_path(sid, "job-1", "/events?offset=0"), None, {}),
        ("POST", commands_path(sid, "job-1", "/signal"), {"signal": "SIGTERM"}, {}),
        ("POST", commands_path(sid, "job-1", "/stdin"), b"input", {"Content-Type": "application/octet-stream"}),
        ("GET", "/v1/sessions/%s/files?path=a.txt" % sid, None, {}),
        ("GET", "/v1/sessions/%s/files/src/a.txt" % sid, None, {}),
        ("PUT", "/v1/sessions/%s/files/a.txt" % sid, b"content", {"Content-Type": "application/octet-stream"}),
        ("DELETE", "/v1/sessions/%s/files/a.txt" % sid, None, {}),
        ("GET", "/v1/sessions/%s/ports" % sid, None, {}),
        ("GET", "/v1/sessions/%s/ports/8000/" % sid, None, {}),
        # the WebSocket of a terminal: refused before the upgrade
        ("GET", commands_path(sid, "job-1", "/tty"), None,
         {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
          "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}),
    ]
    for method, path, body, headers in routes:
        r = api.request(method, path, body=body, headers=headers)
        assert_wrong_node(r), (method, path)
        assert "Upgrade" not in r.headers.get("Connection", ""), (method, path, r.headers)
    assert all_sessions(api) == before, "a misdirected request changed the sessions"
    assert not {u for u in units() - before_units if sid in u}, "a misdirected request made a unit"

    # this node's own form and the old form: not another node's, so 404
    node = node_of(api)
    assert_error(api.get("/v1/sessions/%s_%s" % (node, secrets.token_hex(8))), 404, "not_found")
    assert_error(api.get("/v1/sessions/" + secrets.token_hex(8)), 404, "not_found")
    # not an id at all: 404 too, never 421
    for bad in ("ZZ_" + secrets.token_hex(8), "zz-" + secrets.token_hex(8), "zz_" + secrets.token_hex(9),
                "a" * 33 + "_" + secrets.token_hex(8), "_" + secrets.token_hex(8)):
        assert_error(api.get("/v1/sessions/" + bad), 404, "not_found")
    # the session that is here answers as ever
    assert api.get("/v1/sessions/" + session["id"]).status == 200


def test_wrong_node_over_tcp(tcp):
    assert_wrong_node(tcp.get("/v1/sessions/%s" % other_sid()))
    assert_wrong_node(tcp.post(commands_path(other_sid()), {"argv": ["true"]}))


def test_wrong_node_dbus(api, session):
    sid = other_sid()
    before = all_sessions(api)
    for fn, args in [
        (B.manager, ("GetSession", "s", sid)),
        (B.manager, ("CloseSession", "s", sid)),
        (B.manager, ("Exec", "sasa{sv}", sid, ["true"], {})),
        (B.manager, ("Run", "sasa{sv}", sid, ["true"], {})),
        # calls on the object path of another node's session
        (B.call, ("/io/sandboxd/sandbox1/session/" + sid, B.SESSION, "Touch")),
        (B.call, ("/io/sandboxd/sandbox1/session/" + sid, B.SESSION, "Run", "asa{sv}", ["true"], {})),
    ]:
        with pytest.raises(B.BusError) as e:
            fn(*args)
        assert e.value.name == B.ERROR + "WrongNode", (args, e.value)
        assert "zz" in e.value.message and sid in e.value.message, e.value.message
    assert all_sessions(api) == before
    # this node's unknown ids are unknown sessions, as before
    node = node_of(api)
    with pytest.raises(B.BusError) as e:
        B.manager("GetSession", "s", "%s_%s" % (node, secrets.token_hex(8)))
    assert e.value.name == B.ERROR + "NoSuchSession", e.value
    with pytest.raises(B.BusError) as e:
        B.manager("GetSession", "s", secrets.token_hex(8))
    assert e.value.name == B.ERROR + "NoSuchSession", e.value


def test_wrong_node_busctl(api):
    sid = other_sid()
    p = subprocess.run(["busctl", "call", B.NAME, B.PATH, B.MANAGER, "GetSession", "s", sid],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0
    assert "zz" in p.stderr, p.stderr


# --------------------------------------------------------------------------
# the placement header

def test_scope_header(api):
    user, ws = unique_user(), "placed"
    body = {"user": user, "workspace": ws}

    def mine():
        return [s for s in api.get("/v1/sessions?user=" + user).json["sessions"]]

    for value in ("%s/other" % user, "someone/%s" % ws, user, "%s/%s/x" % (user, ws), "%s%%2F%s" % (user, ws),
                  "%s/%s%%" % (user, ws), "%s/%s%%zz" % (user, ws), ""):
        err = assert_error(api.post("/v1/sessions", body, headers={"X-Sandboxd-Scope": value}), 400, "invalid_value")
        assert "X-Sandboxd-Scope" in err["message"], err
        assert mine() == [], "a refused create made a session"
    # twice, even the same
    conn = api.connection()
    try:
        raw = ('{"user":"%s","workspace":"%s"}' % (user, ws)).encode()
        conn.putrequest("POST", "/v1/sessions")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(len(raw)))
        conn.putheader("X-Sandboxd-Scope", "%s/%s" % (user, ws))
        conn.putheader("X-Sandboxd-Scope", "%s/%s" % (user, ws))
        conn.endheaders(raw)
        resp = conn.getresponse()
        assert resp.status == 400 and b"invalid_value" in resp.read()
    finally:
        conn.close()
    assert mine() == []

    r = api.post("/v1/sessions", body, headers={"X-Sandboxd-Scope": "%s/%s" % (user, ws)})
    assert r.status == 201, r
    # percent-encoded bytes are the same scope; the header's name is case-insensitive
    enc = "".join("%%%02X" % ord(c) for c in user) + "/" + ws
    r2 = api.post("/v1/sessions", body, headers={"x-sandboxd-scope": enc})
    assert r2.status == 200 and r2.json["id"] == r.json["id"], r2
    # absent is fine
    r3 = api.post("/v1/sessions", body)
    assert r3.status == 200 and r3.json["id"] == r.json["id"], r3
    assert api.delete("/v1/sessions/" + r.json["id"]).status == 200


# --------------------------------------------------------------------------
# [Node] Name=

def write_dropin(text):
    os.makedirs(os.path.dirname(DROPIN), exist_ok=True)
    with open(DROPIN, "w") as f:
        f.write(text)


def remove_dropin():
    if os.path.exists(DROPIN):
        os.unlink(DROPIN)
        restart_daemon()


def test_name_from_dropin_and_sessions_from_before(api):
    default = node_of(api)
    user = unique_user()
    old = api.create_session(user, "before")
    assert old["id"].startswith(default + "_")
    acc = start_command(api, old["id"], {"argv": ["sh", "-c", "sleep 3; echo done"], "request_id": "long"})
    assert acc["status"] == "running", acc
    name = "t" + secrets.token_hex(4)
    try:
        write_dropin("[Node]\nName=%s\n" % name)
        restart_daemon()
        assert node_of(api) == name
        # the pool's slices from before (the former name in their ids) were stopped, not
        # adopted: a new session's id names this node
        def prepared():
            owned = {s["id"] for s in api.get("/v1/sessions").json["sessions"]}  # any state: not the pool's
            return {u[len("sandboxd-"):-len(".slice")] for u in units()
                    if u.startswith("sandboxd-") and u.endswith(".slice") and u.count("-") == 1
                    and is_active(u) == "active"} - owned
        # (whether the pool makes new ones depends on how many sessions took one: PoolSize=)
        def pool_renamed():
            return not any(p.startswith(default + "_") for p in prepared()) or None
        try:
            wait_for(pool_renamed, timeout=30, what="the pool to hold no slice of the former name")
        except AssertionError as e:
            raise AssertionError("%s: %r" % (e, sorted(prepared()))) from None
        # a new session takes the new name
        new = api.create_session(user, "after")
        assert new["id"].startswith(name + "_") and new["node"] == name, new
        # the session from before: still here, served (its id names the former name), its
        # command running across the restart finished with its output
        got = api.get_session(old["id"])
        assert got["state"] == "active" and got["node"] == name, got
        snap = wait_terminal(api, old["id"], "long")
        assert snap["status"] == "succeeded", snap
        res = exec_result(api, old["id"], {"argv": ["sh", "-c", "echo again"]})
        assert res["status"] == "succeeded", res
        # an id of the former name that this node does not have is another node's now
        assert_wrong_node(api.get("/v1/sessions/%s_%s" % (default, secrets.token_hex(8))), default)

        # both forms through another restart
        restart_daemon()
        for s in (old, new):
            got = api.get_session(s["id"])
            assert got["state"] == "active", got
            res = exec_result(api, s["id"], {"argv": ["true"]})
            assert res["status"] == "succeeded", res
        path = B.manager("GetSession", "s", old["id"])[0]
        assert B.get_property(path, B.SESSION, "Node") == name
    finally:
        remove_dropin()
    assert node_of(api) == default
    for s in (old, new):
        assert api.get_session(s["id"])["state"] == "active"
        assert api.delete("/v1/sessions/" + s["id"]).status == 200


@pytest.mark.parametrize("value", ["Bad_Name", "1abc", "a" * 33, "", "n-1", "n\u00e9"])
def test_invalid_name_refused(api, value, tmp_path):
    """sandboxd itself, with a drop-in of a configuration of its own (not the service: it
    would fail, which the suite takes for a crash): it stops at once, naming the setting."""
    conf = tmp_path / "sandboxd.conf"
    conf.write_text("[Daemon]\nIdleExitSec=60s\n")
    (tmp_path / "sandboxd.conf.d").mkdir()
    (tmp_path / "sandboxd.conf.d" / "50-node.conf").write_text("[Node]\nName=%s\n" % value)
    p = subprocess.Popen([SANDBOXD_BIN, "--config=%s" % conf], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        out, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise AssertionError("sandboxd started with [Node] Name=%r" % value)
    assert p.returncode != 0, (out, err)
    assert "Invalid configuration" in err and "[Node] Name=%s: expected a node name" % value in err, err
    assert "50-node.conf" in err, err
    # the running sandboxd is untouched
    assert NODE_RE.fullmatch(node_of(api))


# --------------------------------------------------------------------------
# clients follow a 421: the Python client against a stand-in "node" that answers every
# request 421 wrong_node naming n2, with SANDBOXD_NODES pointing n2 at the real sandboxd

class _Misdirect(threading.Thread):
    """A tiny HTTP server on 127.0.0.1: every request is answered 421 wrong_node, node n2;
    what it was asked is kept (method, path, headers)."""

    def __init__(self, node="n2"):
        super().__init__(daemon=True)
        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                seen.append((self.command, self.path, dict(self.headers), body))
                out = json.dumps({"error": {"code": "wrong_node", "message": "Session is on node %s." % node,
                                            "node": node}}).encode()
                self.send_response(421)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = do_PUT = do_DELETE = answer

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]

    def run(self):
        self.server.serve_forever()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def misdirect():
    m = _Misdirect()
    m.start()
    yield m
    m.stop()


def _python_client():
    sys.path.insert(0, os.path.join(os.environ.get("SANDBOXD_SRCDIR") or
                                    os.path.join(os.path.dirname(__file__), "..", ".."), "clients", "python"))
    import sandboxd
    import sandboxd.aio
    return sandboxd


def test_python_client_follows_421(tcp, api_key, misdirect, monkeypatch):
    sandboxd = _python_client()
    real = "http://%s:%d" % (TCP_HOST, TCP_PORT)
    monkeypatch.setenv("SANDBOXD_NODES", "n1=http://127.0.0.1:9,n2=%s/" % real)
    c = sandboxd.Client(misdirect.url, key=api_key, timeout=30)
    user = unique_user()
    s = c.create_session(user, "followed")
    assert s.created and ID_RE.fullmatch(s.id), s
    # the stand-in was asked first, with the placement header
    method, path, headers, body = misdirect.seen[-1]
    assert (method, path) == ("POST", "/v1/sessions")
    assert headers.get("X-Sandboxd-Scope") == "%s/followed" % user, headers
    assert json.loads(body) == {"user": user, "workspace": "followed"}
    # and the session is the real sandboxd's
    assert tcp.get_session(s.id)["user"] == user
    n = len(misdirect.seen)
    r = c.run(s.id, ["sh", "-c", "echo followed"])
    assert r.status == "succeeded" and r.stdout == b"followed\n", r
    assert len(misdirect.seen) == n + 1 and misdirect.seen[-1][1].startswith("/v1/sessions/%s/commands" % s.id)
    c.upload(s.id, "f.txt", b"bytes replayed")
    assert c.read_file(s.id, "f.txt") == b"bytes replayed"

    # a body that cannot be sent twice: not sent again, and the error says so
    with pytest.raises(sandboxd.WrongNode) as e:
        c.upload(s.id, "g.txt", io.BytesIO(b"a stream"))
    assert e.value.status == 421 and e.value.node == "n2" and "cannot be sent twice" in e.value.message, e.value
    assert tcp.get("/v1/sessions/%s/files?path=g.txt" % s.id).status == 404

    # the async client follows the same way
    async def go():
        ac = sandboxd.aio.AsyncClient(misdirect.url, key=api_key, timeout=30)
        got = await ac.get_session(s.id)
        return got.id
    assert asyncio.run(go()) == s.id

    # a node SANDBOXD_NODES does not name: the error names the node, nothing is sent elsewhere
    monkeypatch.setenv("SANDBOXD_NODES", "n1=%s" % real)
    n = len(misdirect.seen)
    with pytest.raises(sandboxd.WrongNode) as e:
        c.get_session(s.id)
    assert e.value.node == "n2" and "n2" in e.value.message and "SANDBOXD_NODES does not name it" in e.value.message
    assert len(misdirect.seen) == n + 1
    monkeypatch.delenv("SANDBOXD_NODES")
    with pytest.raises(sandboxd.WrongNode) as e:
        c.get_session(s.id)
    assert "SANDBOXD_NODES does not name it" in e.value.message
    # malformed: said so
    monkeypatch.setenv("SANDBOXD_NODES", "n2")
    with pytest.raises(sandboxd.WrongNode) as e:
        c.get_session(s.id)
    assert "not NAME=URL" in e.value.message, e.value.message
    assert tcp.delete("/v1/sessions/" + s.id).status == 200


def test_python_client_real_421(tcp, api_key, monkeypatch):
    """The real sandboxd's 421 for a node SANDBOXD_NODES names: sent there once; when that
    node answers 421 again (it is this one), the error stands, not a loop."""
    sandboxd = _python_client()
    real = "http://%s:%d" % (TCP_HOST, TCP_PORT)
    monkeypatch.setenv("SANDBOXD_NODES", "zz=%s" % real)
    c = sandboxd.Client(real, key=api_key, timeout=30)
    with pytest.raises(sandboxd.WrongNode) as e:
        c.get_session(other_sid())
    assert e.value.status == 421 and e.value.code == "wrong_node" and e.value.node == "zz", e.value


def test_python_client_balancer_node_unavailable():
    """HAProxy's own 503 and 504 (contrib/haproxy/haproxy.cfg), {"error":{"code":
    "node_unavailable","node":...}}: Unavailable in both clients, naming the node."""
    sandboxd = _python_client()
    statuses = [503, 504, 503, 504]

    class Balancer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"error": {"code": "node_unavailable", "node": "n3",
                                         "message": "No sandboxd node is available."}}).encode()
            self.send_response(statuses.pop(0))
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Balancer)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        url = "http://127.0.0.1:%d" % srv.server_address[1]
        c = sandboxd.Client(url, key="k", timeout=30)
        for status in (503, 504):
            with pytest.raises(sandboxd.Unavailable) as e:
                c.get_session(other_sid())
            assert (e.value.status, e.value.code, e.value.node) == (status, "node_unavailable", "n3"), e.value

        async def aio():
            a = sandboxd.aio.AsyncClient(url, key="k", timeout=30)
            for status in (503, 504):
                with pytest.raises(sandboxd.Unavailable) as e:
                    await a.get_session(other_sid())
                assert (e.value.status, e.value.code, e.value.node) == (status, "node_unavailable", "n3"), e.value
        asyncio.run(aio())
    finally:
        srv.shutdown()
        srv.server_close()


# --------------------------------------------------------------------------
# sandboxctl (libsandboxd's HTTP transport): X-Sandboxd-Scope, following a 421, ls of every node

SANDBOXCTL = os.environ.get("SANDBOXD_TEST_SANDBOXCTL", "/usr/bin/sandboxctl")


def ctl(*args, env=None, timeout=60, input=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOXD_")}
    e.update(env or {})
    return subprocess.run([SANDBOXCTL] + list(args), capture_output=True, text=True, env=e, timeout=timeout,
                          input=input)


def test_sandboxctl_follows_421(tcp, api_key, misdirect):
    real = "http://%s:%d" % (TCP_HOST, TCP_PORT)
    env = {"SANDBOXD_URL": misdirect.url, "SANDBOXD_KEY": api_key, "SANDBOXD_NODES": "n2=%s" % real}
    user = unique_user()
    p = ctl("create", user, "ctl", env=env)
    assert p.returncode == 0, p
    sid = p.stdout.strip()
    assert ID_RE.fullmatch(sid), p
    method, path, headers, _ = misdirect.seen[-1]
    assert (method, path) == ("POST", "/v1/sessions") and headers.get("X-Sandboxd-Scope") == "%s/ctl" % user, headers
    assert tcp.get_session(sid)["user"] == user

    p = ctl("exec", sid, "sh", "-c", "echo via n2", env=env)
    assert p.returncode == 0 and p.stdout == "via n2\n", p
    p = ctl("show", sid, env=env)
    assert p.returncode == 0 and sid in p.stdout and "Node:" in p.stdout, p

    # a node SANDBOXD_NODES does not name: the error names it
    p = ctl("show", sid, env=dict(env, SANDBOXD_NODES="n1=%s" % real))
    assert p.returncode != 0 and "node n2" in p.stderr and "SANDBOXD_NODES does not name it" in p.stderr, p
    p = ctl("show", sid, env=dict(env, SANDBOXD_NODES="n2"))
    assert p.returncode != 0 and "node n2" in p.stderr and "NAME=URL" in p.stderr, p
    # the real sandboxd's own 421, followed once to the node named (itself): the error stands
    p = ctl("show", other_sid(), env={"SANDBOXD_URL": real, "SANDBOXD_KEY": api_key, "SANDBOXD_NODES": "zz=%s" % real})
    assert p.returncode != 0 and "zz" in p.stderr, p
    assert tcp.delete("/v1/sessions/" + sid).status == 200


def test_sandboxctl_upload_follows_421(tcp, api_key, misdirect, tmp_path):
    """An upload from a regular file is read again from where it started and sent to the node
    SANDBOXD_NODES names; one from a pipe cannot be, and the error says where to send it."""
    real = "http://%s:%d" % (TCP_HOST, TCP_PORT)
    env = {"SANDBOXD_URL": misdirect.url, "SANDBOXD_KEY": api_key, "SANDBOXD_NODES": "n2=%s" % real}
    sid = tcp.post("/v1/sessions", {"user": unique_user(), "workspace": "up"}).json["id"]
    try:
        data = secrets.token_hex(150 * 1024)  # 300 KiB: more than one read of the file
        src = tmp_path / "up.txt"
        src.write_text(data)
        p = ctl("cp", str(src), sid + ":up.txt", env=env)
        assert p.returncode == 0, p
        assert ("PUT", "/v1/sessions/%s/files/up.txt" % sid) in [(m, path) for m, path, _, _ in misdirect.seen]
        got = tcp.get("/v1/sessions/%s/files/up.txt" % sid)
        assert got.status == 200 and got.body == data.encode(), (got.status, len(got.body))
        # stdin from a pipe
        p = ctl("cp", "-", sid + ":pipe.txt", env=env, input="from a pipe\n")
        assert p.returncode != 0 and "node n2" in p.stderr and "cannot be sent twice" in p.stderr, p
        assert tcp.get("/v1/sessions/%s/files/pipe.txt" % sid).status == 404
    finally:
        tcp.delete("/v1/sessions/" + sid)


def test_sandboxctl_terminal_follows_421(tcp, api_key, misdirect):
    """A terminal (the WebSocket of GET .../tty) follows a 421 as other requests do: exec -t
    and attach -t through the stand-in, their upgrade sent again to n2's URL."""
    real = "http://%s:%d" % (TCP_HOST, TCP_PORT)
    env = {"SANDBOXD_URL": misdirect.url, "SANDBOXD_KEY": api_key, "SANDBOXD_NODES": "n2=%s" % real}
    sid = tcp.post("/v1/sessions", {"user": unique_user(), "workspace": "tty"}).json["id"]
    try:
        p = ctl("exec", "-t", "--request-id=tty421", sid, "sh", "-c", "echo on-a-tty; test -t 1", env=env)
        assert p.returncode == 0 and "on-a-tty" in p.stdout, p
        asked = [(m, path.split("?")[0]) for m, path, _, _ in misdirect.seen]
        assert ("GET", "/v1/sessions/%s/commands/tty421/tty" % sid) in asked, asked
        assert tcp.get("/v1/sessions/%s/commands/tty421" % sid).json["terminal"] is True
        # attach -t to it again: its output replayed through the followed upgrade
        p = ctl("attach", "-t", sid, "tty421", env=env)
        assert p.returncode == 0 and "on-a-tty" in p.stdout, p
        # a node SANDBOXD_NODES does not name: not followed, and the error says so
        p = ctl("attach", "-t", sid, "tty421", env=dict(env, SANDBOXD_NODES="n1=%s" % real))
        assert p.returncode != 0 and "node n2" in p.stderr and "SANDBOXD_NODES does not name it" in p.stderr, p
    finally:
        tcp.delete("/v1/sessions/" + sid)


def test_sandboxctl_ls_every_node(tcp, api_key):
    real = "http://%s:%d" % (TCP_HOST, TCP_PORT)
    user = unique_user()
    sids = sorted(tcp.post("/v1/sessions", {"user": user, "workspace": w}).json["id"] for w in ("a", "b", "c"))
    base = {"SANDBOXD_URL": real, "SANDBOXD_KEY": api_key}
    try:
        one = ctl("--json", "ls", "--user", user, env=base)
        assert one.returncode == 0, one
        assert sorted(s["id"] for s in json.loads(one.stdout)["sessions"]) == sids

        # two names for the one sandboxd: each node's list, merged and sorted
        p = ctl("--json", "ls", "--user", user, env=dict(base, SANDBOXD_NODES="n1=%s n2=%s/" % (real, real)))
        assert p.returncode == 0, p
        got = [s["id"] for s in json.loads(p.stdout)["sessions"]]
        assert got == sorted(sids + sids), got
        p = ctl("ls", "--user", user, env=dict(base, SANDBOXD_NODES="n1=%s,n2=%s" % (real, real)))
        assert p.returncode == 0, p
        lines = p.stdout.splitlines()
        assert lines[0].startswith("ID ") and [l.split()[0] for l in lines[1:]] == sorted(sids + sids), p.stdout

        # a node that does not answer: named, the others listed, a failure status
        p = ctl("--json", "ls", "--user", user, env=dict(base, SANDBOXD_NODES="n1=%s,dead=http://127.0.0.1:9" % real))
        assert p.returncode != 0 and "node dead" in p.stderr, p
        assert sorted(s["id"] for s in json.loads(p.stdout)["sessions"]) == sids
        # malformed: refused, nothing listed
        p = ctl("ls", env=dict(base, SANDBOXD_NODES="n1=%s,N2=%s" % (real, real)))
        assert p.returncode != 0 and "SANDBOXD_NODES" in p.stderr and "node name" in p.stderr, p
        assert p.stdout == ""
    finally:
        for sid in sids:
            tcp.delete("/v1/sessions/" + sid)


# --------------------------------------------------------------------------
# a session of the old form (16 hex digits, from before nodes had names) across restarts

SESSIONS_DIR = "/var/lib/sandboxd/sessions"


@pytest.mark.unit_mode_only
def test_old_form_session_survives_restarts(api):
    """A session record of the old form (as an earlier sandboxd wrote it: the id 16 hex digits
    alone, its slice sandboxd-HEX.slice) is recovered, served, runs commands and closes, across
    restarts; new sessions meanwhile get NODE_HEX ids."""
    user = unique_user()
    src = api.create_session(user, "legacy-src")
    rec = os.path.join(SESSIONS_DIR, src["id"], "session.json")
    wait_for(lambda: os.path.exists(rec), timeout=10, what="the record to be written (by the writer thread)")
    with open(rec) as f:
        record = json.load(f)
    assert api.delete("/v1/sessions/" + src["id"]).status == 200
    old = secrets.token_hex(8)
    record.update(id=old, workspace="legacy", state="active", n_commands=0, frozen=False, from_pool=False)
    for k in ("close_reason", "closed_usec", "ports", "purged"):
        record.pop(k, None)
    slice_ = "sandboxd-%s.slice" % old
    holder = "nodes-legacy-%s.service" % old

    sh("systemctl", "stop", "sandboxd.service")
    try:
        os.makedirs(os.path.join(SESSIONS_DIR, old), mode=0o700)
        with open(os.path.join(SESSIONS_DIR, old, "session.json"), "w") as f:
            json.dump(record, f)
        # its slice, as the earlier sandboxd left it (a process in it keeps it there)
        sh("systemd-run", "--unit=" + holder, "--slice=" + slice_, "sleep", "600")
        restart_daemon()
        node = node_of(api)
        got = api.get_session(old)
        assert got["state"] == "active" and got["id"] == old and got["node"] == node, got
        assert got["unit"] == slice_, got
        res = exec_result(api, old, {"argv": ["sh", "-c", "echo legacy"]})
        assert res["status"] == "succeeded" and res["stdout"] == "legacy\n", res
        assert res["unit"] == "sandboxd-%s-1.service" % old, res
        path = B.manager("GetSession", "s", old)[0]
        assert B.get_property(path, B.SESSION, "Id") == old

        # across another restart, with a session of the new form beside it
        new = api.create_session(user, "legacy-new")
        assert ID_RE.fullmatch(new["id"]), new
        acc = start_command(api, old, {"argv": ["sh", "-c", "sleep 2; echo after"], "request_id": "across"})
        assert acc["status"] == "running", acc
        restart_daemon()
        assert api.get_session(old)["state"] == "active"
        assert api.get_session(new["id"])["state"] == "active"
        snap = wait_terminal(api, old, "across")
        assert snap["status"] == "succeeded", snap
        listed = {s["id"] for s in api.get("/v1/sessions?user=" + user).json["sessions"]}
        assert {old, new["id"]} <= listed, listed
        for sid in (old, new["id"]):
            assert api.delete("/v1/sessions/" + sid).status == 200
        wait_for(lambda: slice_ not in units(), timeout=30, what="the old session's slice to stop")
    finally:
        subprocess.run(["systemctl", "stop", holder], capture_output=True)
        if api.get("/v1/sessions/" + old).status == 200:
            api.delete("/v1/sessions/" + old)
