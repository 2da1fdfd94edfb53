# SPDX-License-Identifier: LGPL-2.1-or-later
"""The authorization model (sandboxd(8), AUTHORIZATION) as a table, on the running
sandboxd: every caller (root, a member of AdminGroup=, members A and B of group
sandboxd, a non-member, tenants 1 and 2, an admin tenant) x every operation (create,
list, get, exec, files, signal, stdin, freeze, close, drain, metrics, ports: expose, list
and unexpose one) x every transport (HTTP on the unix socket, HTTP on TCP, D-Bus). Each
cell asserts what the caller gets on its own session (where it has one) and on another
caller's, and that a refusal changed nothing. The expected answers are written out below, not computed."""

import contextlib
import json
import secrets

import pytest

import sbxbus as B
from conftest import (API_KEYS_FILE, UNIX_SOCKET, Api, commands_path, config_dropin, hash_key, sh, snapshot,
                      start_command, wait_for)

DROPIN = "/etc/sandboxd/sandboxd.conf.d/50-authz-table.conf"
ADMIN_TENANT = "opsadmin"
AUTHZ_PORT = 9000  # the port the "ports" cells expose (in [Ports] Range=, nothing listens)
OPS = ["create", "list", "get", "exec", "files", "signal", "stdin", "freeze", "close", "drain", "metrics", "ports"]
CALLERS = ["root", "admin group", "member A", "member B", "non-member", "tenant 1", "tenant 2", "admin tenant"]
TRANSPORTS = ["http-unix", "http-tcp", "dbus"]
OTHER = {"root": "member A", "admin group": "tenant 1", "member A": "member B", "member B": "member A",
         "non-member": "member A", "tenant 1": "tenant 2", "tenant 2": "tenant 1", "admin tenant": "tenant 1"}

# own/other per operation, in OPS order. ok: done; 404, 403, 401: that HTTP status (and
# nothing changed); absent: not in the list; refused: the socket's mode refuses the
# connection; denied: org.freedesktop.DBus.Error.AccessDenied; n/a: D-Bus has no such
# method; -: the caller has no session of its own to try.
ALL_OK = "ok/ok " * 12
EXPECTED = {
    ("root", "http-unix"): ALL_OK,
    ("admin group", "http-unix"): ALL_OK,
    ("member A", "http-unix"): ("ok/403 ok/absent ok/404 ok/404 ok/404 ok/404 ok/404 ok/404 ok/404 403/403 403/403 "
                                "ok/404"),
    ("member B", "http-unix"): ("ok/403 ok/absent ok/404 ok/404 ok/404 ok/404 ok/404 ok/404 ok/404 403/403 403/403 "
                                "ok/404"),
    ("non-member", "http-unix"): "refused/refused " * 12,
    ("tenant 1", "http-unix"): "403/403 " * 12,
    ("tenant 2", "http-unix"): "403/403 " * 12,
    ("admin tenant", "http-unix"): "403/403 " * 12,

    ("root", "http-tcp"): "401/401 " * 12,
    ("admin group", "http-tcp"): "401/401 " * 12,
    ("member A", "http-tcp"): "401/401 " * 12,
    ("member B", "http-tcp"): "401/401 " * 12,
    ("non-member", "http-tcp"): "401/401 " * 12,
    ("tenant 1", "http-tcp"): "ok/ok ok/absent ok/404 ok/404 ok/404 ok/404 ok/404 ok/404 ok/404 403/403 403/403 ok/404",
    ("tenant 2", "http-tcp"): "ok/ok ok/absent ok/404 ok/404 ok/404 ok/404 ok/404 ok/404 ok/404 403/403 403/403 ok/404",
    ("admin tenant", "http-tcp"): "ok/ok ok/absent ok/404 ok/404 ok/404 ok/404 ok/404 ok/404 ok/404 ok/ok ok/ok ok/404",

    ("root", "dbus"): "ok/ok ok/ok ok/ok ok/ok n/a ok/ok n/a ok/ok ok/ok n/a n/a ok/ok",
    ("admin group", "dbus"): "ok/ok ok/ok ok/ok ok/ok n/a ok/ok n/a ok/ok ok/ok n/a n/a ok/ok",
    ("member A", "dbus"): ("ok/denied ok/absent ok/denied ok/denied n/a ok/denied n/a ok/denied ok/denied n/a n/a "
                           "ok/denied"),
    ("member B", "dbus"): ("ok/denied ok/absent ok/denied ok/denied n/a ok/denied n/a ok/denied ok/denied n/a n/a "
                           "ok/denied"),
    ("non-member", "dbus"): ("denied/denied denied/denied -/denied -/denied n/a -/denied n/a -/denied -/denied n/a n/a "
                             "-/denied"),
    # D-Bus knows no API keys: a tenant there is whatever uid it runs as (here nobody)
    ("tenant 1", "dbus"): ("denied/denied denied/denied -/denied -/denied n/a -/denied n/a -/denied -/denied n/a n/a "
                           "-/denied"),
    ("tenant 2", "dbus"): ("denied/denied denied/denied -/denied -/denied n/a -/denied n/a -/denied -/denied n/a n/a "
                           "-/denied"),
    ("admin tenant", "dbus"): ("denied/denied denied/denied -/denied -/denied n/a -/denied n/a -/denied -/denied n/a "
                               "n/a -/denied"),
}


def expected(caller, transport):
    cells = EXPECTED[(caller, transport)].split()
    assert len(cells) == len(OPS), (caller, transport)
    return {op: tuple(c.split("/")) if c != "n/a" else ("n/a", "n/a") for op, c in zip(OPS, cells)}


# --------------------------------------------------------------------------
# the world: users, groups, keys, sessions

CURL = ["curl", "-sS", "--max-time", "30", "--unix-socket", UNIX_SOCKET, "-o", "-", "-w", "\n%{http_code}"]


class Caller:
    def __init__(self, label, user=None, tenant=None, key=None):
        self.label, self.user, self.tenant, self.key = label, user, tenant, key

    # --- HTTP
    def http(self, transport, method, path, body=None):
        """(status, parsed JSON or text); status "refused" when the socket refuses us."""
        if transport == "http-tcp":
            r = Api("tcp", key=self.key).request(method, path, body=body,
                                                 headers={"Content-Type": "application/octet-stream"}
                                                 if isinstance(body, bytes) else None)
            return r.status, _parse(r.body.decode(errors="replace"))
        if self.user == "root":
            r = Api("unix").request(method, path, body=body,
                                    headers={"Content-Type": "application/octet-stream"}
                                    if isinstance(body, bytes) else None)
            return r.status, _parse(r.body.decode(errors="replace"))
        if self.tenant:
            # a key means nothing on the socket: the process that carries it is nobody,
            # with group sandboxd on to get through the socket's mode
            who = ["--reuid=nobody", "--regid=nogroup", "--groups=sandboxd"]
        else:
            who = ["--reuid=" + self.user, "--regid=users", "--init-groups"]
        args = ["setpriv"] + who + ["--"] + CURL + ["-X", method]
        if self.key:
            args += ["-H", "Authorization: Bearer " + self.key]
        if isinstance(body, bytes):
            args += ["-H", "Content-Type: application/octet-stream", "--data-binary", body.decode()]
        elif body is not None:
            args += ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
        p = sh(*args, "http://localhost" + path, check=False)
        out = p.stdout.rsplit("\n", 1)
        if p.returncode == 7 or (len(out) == 2 and out[1] == "000"):
            return "refused", None
        assert p.returncode == 0 and len(out) == 2, (args, p.returncode, p.stdout, p.stderr)
        return int(out[1]), _parse(out[0])

    # --- D-Bus
    def dbus(self, path, interface, method, signature="", *args):
        """("ok", results) or (error name, message)."""
        try:
            if self.user == "root":
                return "ok", B.call(path, interface, method, signature, *args)
            return "ok", B.call_as(self.user or "nobody", path, interface, method, signature, *args)
        except B.BusError as e:
            return e.name, e.message


def _parse(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def make_user(groups=()):
    name = "sbxz" + secrets.token_hex(4)
    args = ["useradd", "-M", "-N", "-s", "/usr/sbin/nologin"]
    if groups:
        args += ["-G", ",".join(groups)]
    sh(*args, name)
    return name


class World:
    """The callers, and a session of each that may have one, each with two running
    commands: "long" (ignores SIGUSR1, so signalling it changes nothing for the next
    cell) and "cat" (stdin streamed)."""

    def __init__(self, api_keys):
        self.group = "sbxadm" + secrets.token_hex(3)
        sh("groupadd", self.group)
        self.users = [make_user(["sandboxd"]), make_user(["sandboxd"]), make_user(),
                      make_user(["sandboxd", self.group])]  # the socket is group sandboxd's, mode 0660
        a, b, outsider, admin = self.users
        self.admin_key = secrets.token_urlsafe(32)
        with open(API_KEYS_FILE) as f:
            self.old_keys = f.read()
        with open(API_KEYS_FILE, "a") as f:
            f.write(hash_key(ADMIN_TENANT, self.admin_key) + "\n")
        # removed (and sandboxd restarted without it) by close()
        self.dropin = contextlib.ExitStack()
        write = self.dropin.enter_context(config_dropin(DROPIN, reload=True))
        write("[Daemon]\nAdminGroup=%s\n[HTTP]\nAdminTenants=%s\n" % (self.group, ADMIN_TENANT))

        self.callers = {
            "root": Caller("root", user="root"),
            "admin group": Caller("admin group", user=admin),
            "member A": Caller("member A", user=a),
            "member B": Caller("member B", user=b),
            "non-member": Caller("non-member", user=outsider),
            "tenant 1": Caller("tenant 1", tenant="tenant1", key=api_keys["tenant1"]),
            "tenant 2": Caller("tenant 2", tenant="tenant2", key=api_keys["tenant2"]),
            "admin tenant": Caller("admin tenant", tenant=ADMIN_TENANT, key=self.admin_key),
        }
        self.sessions = {}
        self.extra = []  # sessions cells created in other callers' names, closed at the end
        for label, c in self.callers.items():
            if label == "non-member":
                continue
            if label == "member B":
                # created over D-Bus: the same uid owns it over the unix socket too
                sid, _ = B.call_as(c.user, B.PATH, B.MANAGER, "CreateSession", "ssa{sv}", c.user, "authz", {})
            else:
                sid = self.create(c, "authz")
            self.sessions[label] = sid
            for body in ({"argv": ["sh", "-c", "trap '' USR1; echo ready; while :; do sleep 1; done"],
                          "request_id": "long"},
                         {"argv": ["cat"], "stdin": "stream", "request_id": "cat"}):
                start_command(Api("unix"), sid, dict(body, timeout_ms=600000))
            # a SIGUSR1 before the trap (sandboxd-exec waits for its user record first) would
            # end it: the walk signals it only once it ignores the signal
            wait_for(lambda: snapshot(Api("unix"), sid, "long")["stdout"] == "ready\n", timeout=30,
                     what="the long command of %s to ignore SIGUSR1" % label)

    def scope_user(self, c):
        # tenants all use the same names: their scopes must not meet
        return "shared" if c.tenant else ("sbxroot" if c.user == "root" else c.user)

    def create(self, c, workspace):
        transport = "http-tcp" if c.tenant else "http-unix"
        status, body = c.http(transport, "POST", "/v1/sessions", {"user": self.scope_user(c), "workspace": workspace})
        assert status in (200, 201), (c.label, status, body)
        return body["id"]

    def check_created(self, c, owner, sid, got):
        """A create in the owner's scope returned got: the owner's session when the caller
        has the same scopes (tenant local, or the same tenant), else one of its own."""
        if (c.tenant or "local") == (owner.tenant or "local"):
            assert got == sid, (c.label, owner.label, got, sid)
        else:
            # its own session of those names (the tenants all use the same), or a new one
            others = [v for k, v in self.sessions.items() if k != c.label]
            assert got != sid and got not in others, (c.label, owner.label, got, sid)
            if got not in self.extra and got not in self.sessions.values():
                self.extra.append(got)

    def command_path(self, sid, rid):
        # (the command's number is in no name in session mode: its unit is the session's)
        return B.call("%s/session/%s" % (B.PATH, sid), B.SESSION, "GetCommand", "s", rid)[0]

    def close(self):
        for sid in list(self.sessions.values()) + self.extra:
            Api("unix").delete("/v1/sessions/%s?purge=true" % sid)
        with open(API_KEYS_FILE, "w") as f:
            f.write(self.old_keys)
        self.dropin.close()  # the drop-in removed, sandboxd restarted with the old keys
        for u in self.users:
            sh("userdel", u, check=False)
        sh("groupdel", self.group, check=False)


@pytest.fixture(scope="module")
def world(api_keys, api, tcp):
    w = World(api_keys)
    yield w
    w.close()


def session_state(sid):
    return Api("unix").get("/v1/sessions/" + sid).json


def exposed_ports(sid):
    return [p["port"] for p in Api("unix").get("/v1/sessions/%s/ports" % sid).json["ports"]]


def draining():
    return Api("unix").get("/v1/drain").json["draining"]


# --------------------------------------------------------------------------
# one cell: an operation by a caller on a transport, on a session (or a scope)

def http_op(w, c, transport, op, sid, owner):
    """What the HTTP request of op answers, as a token of the table."""
    if op == "create":
        # the owner's scope: the caller's own, or the other's user and workspace
        status, body = c.http(transport, "POST", "/v1/sessions", {"user": w.scope_user(owner), "workspace": "authz"})
        if status in (200, 201):
            w.check_created(c, owner, sid, body["id"])
            return "ok"
        return str(status) if status != "refused" else status
    if op == "list":
        status, body = c.http(transport, "GET", "/v1/sessions")
        if status != 200:
            return str(status) if status != "refused" else status
        return "ok" if sid in [x["id"] for x in body["sessions"]] else "absent"
    if op in ("drain", "metrics"):
        if op == "metrics":
            status, body = c.http(transport, "GET", "/metrics")
            if status == 200:
                assert "sandboxd_sessions" in body, body[:200]
        else:
            status, body = c.http(transport, "POST", "/v1/drain")
            if status == 200:
                assert draining()
                status2, _ = c.http(transport, "DELETE", "/v1/drain")
                assert status2 == 200 and not draining(), status2
            else:
                assert not draining()
        return "ok" if status == 200 else (str(status) if status != "refused" else status)
    if op == "ports":
        ports = "/v1/sessions/%s/ports" % sid
        status, body = c.http(transport, "POST", ports, {"port": AUTHZ_PORT})
        if status in (200, 201):
            assert body["port"] == AUTHZ_PORT, body
            status, body = c.http(transport, "GET", ports)
            assert status == 200 and [p["port"] for p in body["ports"]] == [AUTHZ_PORT], (status, body)
            status, body = c.http(transport, "DELETE", "%s/%d" % (ports, AUTHZ_PORT))
            assert status == 200 and exposed_ports(sid) == [], (status, body)
            return "ok"
        if status == 404:
            assert body["error"]["code"] == "not_found", body
        return str(status) if status != "refused" else status
    req = {
        "get": ("GET", "/v1/sessions/%s" % sid, None, (200,)),
        "exec": ("POST", commands_path(sid) + "?wait=false", {"argv": ["true"]}, (202,)),
        "files": ("GET", "/v1/sessions/%s/files/" % sid, None, (200,)),
        "signal": ("POST", commands_path(sid, "long", "/signal"), {"signal": "SIGUSR1"}, (200,)),
        "stdin": ("POST", commands_path(sid, "cat", "/stdin"), b"hello\n", (200, 204)),
        "freeze": ("POST", "/v1/sessions/%s/freeze" % sid, None, (200, 501)),  # 501: no cgroup v2 here
        "close": ("DELETE", "/v1/sessions/%s" % sid, None, (200,)),
    }[op]
    status, body = c.http(transport, req[0], req[1], req[2])
    if status in req[3]:
        if op == "freeze" and status == 200:
            assert c.http(transport, "POST", "/v1/sessions/%s/thaw" % sid)[0] == 200
        return "ok"
    if status == 404:
        assert body["error"]["code"] == "not_found", body
    return str(status) if status != "refused" else status


def dbus_op(w, c, op, sid, owner):
    path = "%s/session/%s" % (B.PATH, sid)
    if op in ("files", "stdin", "drain", "metrics"):
        # no such method on any of the three interfaces
        return "n/a"
    if op == "create":
        res, out = c.dbus(B.PATH, B.MANAGER, "CreateSession", "ssa{sv}", w.scope_user(owner), "authz", {})
        if res == "ok":
            w.check_created(c, owner, sid, out[0])
    elif op == "list":
        res, out = c.dbus(B.PATH, B.MANAGER, "ListSessions")
        if res == "ok":
            return "ok" if sid in [x[0] for x in out[0]] else "absent"
    elif op == "get":
        res, out = c.dbus(B.PATH, B.MANAGER, "GetSession", "s", sid)
        if res == "ok":
            assert out == [path], out
            # the object's properties: readable to the same callers, without polkit
            res2, out2 = c.dbus(path, B.PROPERTIES, "Get", "ss", B.SESSION, "Id")
            assert (res2, out2) == ("ok", [sid]), (res2, out2)
        else:
            res2, _ = c.dbus(path, B.PROPERTIES, "Get", "ss", B.SESSION, "Id")
            assert res2 == B.ACCESS_DENIED, res2
    elif op == "exec":
        res, out = c.dbus(B.PATH, B.MANAGER, "Exec", "sasa{sv}", sid, ["true"], {})
    elif op == "signal":
        res, out = c.dbus(w.command_path(sid, "long"), B.COMMAND, "Signal", "s", "SIGUSR1")
    elif op == "freeze":
        res, out = c.dbus(path, B.SESSION, "Freeze")
        if res == B.ERROR + "NotSupported":
            res = "ok"  # authorized; no cgroup v2 here
        elif res == "ok":
            assert c.dbus(path, B.SESSION, "Thaw")[0] == "ok"
    elif op == "close":
        res, out = c.dbus(B.PATH, B.MANAGER, "CloseSession", "s", sid)
    elif op == "ports":
        res, out = c.dbus(path, B.SESSION, "ExposePort", "qa{sv}", AUTHZ_PORT, {})
        if res == "ok":
            assert out[0] == AUTHZ_PORT, out
            assert c.dbus(path, B.SESSION, "ListPorts")[1][0][0][0] == AUTHZ_PORT
            assert c.dbus(path, B.SESSION, "UnexposePort", "q", AUTHZ_PORT)[0] == "ok"
            assert exposed_ports(sid) == []
        else:
            # ListPorts and UnexposePort are refused alike
            for m, sig, args in (("ListPorts", "", ()), ("UnexposePort", "q", (AUTHZ_PORT,))):
                assert c.dbus(path, B.SESSION, m, sig, *args)[0] == B.ACCESS_DENIED, (c.label, m)
    if res == "ok":
        return "ok"
    assert res == B.ACCESS_DENIED, (c.label, op, res, out)
    return "denied"


def target(w, c, which, op, want):
    """The session a cell acts on: the caller's own or the other's; a fresh one of the
    same owner when the cell expects a close to succeed (or, on D-Bus, a create by root
    in another's scope: it returns that session, which must stay)."""
    owner = c if which == "own" else w.callers[OTHER[c.label]]
    if owner.label not in w.sessions:
        return None, owner
    if op == "close" and want == "ok":
        if owner.label == "member B":
            sid, _ = B.call_as(owner.user, B.PATH, B.MANAGER, "CreateSession", "ssa{sv}", owner.user,
                               "c" + secrets.token_hex(3), {})
            return sid, owner
        return w.create(owner, "c" + secrets.token_hex(3)), owner
    return w.sessions[owner.label], owner


# 576 cells, each a process of its own (runuser, curl) or a D-Bus call: past the default
# 120 s on a loaded machine
@pytest.mark.time_limit(360)
@pytest.mark.restarts_daemon
def test_authz_table(world):
    w = world
    cells = 0
    failures = []
    for transport in TRANSPORTS:
        for label in CALLERS:
            c = w.callers[label]
            want = expected(label, transport)
            for op in OPS:
                for i, which in enumerate(("own", "other")):
                    exp = want[op][i]
                    if exp == "-":
                        continue
                    sid, owner = target(w, c, which, op, exp)
                    if sid is None:
                        # a caller without a session of its own (the non-member): create is
                        # in its own name; other requests name member A's session, which
                        # must come out unchanged
                        assert label == "non-member" and (op in ("create", "list") or exp != "ok"), (label, op)
                        sid = w.sessions["member A"]
                    before = session_state(sid)
                    if transport == "dbus":
                        got = dbus_op(w, c, op, sid, owner)
                    else:
                        got = http_op(w, c, transport, op, sid, owner)
                    if got != exp:
                        failures.append("%s, %s, %s (%s session): got %s, expected %s" % (
                            label, transport, op, which, got, exp))
                    if got != "ok" and op != "list":
                        # a refusal changed nothing
                        after = session_state(sid)
                        assert after["state"] == before["state"] == "active", (label, transport, op, after)
                        assert after.get("frozen") == before.get("frozen")
                        assert exposed_ports(sid) == [], (label, transport, op)
                cells += 1
    for sid in w.sessions.values():
        assert session_state(sid)["state"] == "active", sid
        for rid in ("long", "cat"):
            assert Api("unix").get(commands_path(sid, rid)).json["status"] == "running", (sid, rid)
    print("authorization table: %d callers x %d operations x %d transports = %d cells"
          % (len(CALLERS), len(OPS), len(TRANSPORTS), cells))
    assert cells == len(CALLERS) * len(OPS) * len(TRANSPORTS)
    assert not failures, "\n".join(failures)
