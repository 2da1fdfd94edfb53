# SPDX-License-Identifier: LGPL-2.1-or-later
"""The D-Bus API is complete: every route of the HTTP API (`sandboxd --list-routes`)
has its D-Bus method on the live objects, and every D-Bus method has its route or is
D-Bus-only for a stated reason; then each new method against the live sandboxd, its
answers compared with the HTTP API's, and its errors with the same row of the error
table as the HTTP answer."""

import os
import re
import xml.etree.ElementTree as ET

import dbus
import pytest

import sbxbus as B
from conftest import SANDBOXD_BIN, start_command, sh, wait_for, wait_terminal

FILES = "io.sandboxd.sandbox1.Files"

# route (method, pattern) -> the D-Bus methods (interface, member) that do what it does
S = "/v1/sessions/{sid}"
C = S + "/commands/{rid}"
ROUTES = {
    ("GET", "/healthz"): [(B.MANAGER, "Health")],
    ("GET", "/readyz"): [(B.MANAGER, "Health")],
    ("GET", "/metrics"): [(B.MANAGER, "Metrics")],
    ("GET", "/v1/health"): [(B.MANAGER, "Health")],
    ("GET", "/v1/pool"): [(B.MANAGER, "GetPool")],
    ("GET", "/v1/drain"): [(B.MANAGER, "GetDraining")],
    ("POST", "/v1/drain"): [(B.MANAGER, "SetDraining")],
    ("DELETE", "/v1/drain"): [(B.MANAGER, "SetDraining")],
    ("GET", "/v1/sessions"): [(B.MANAGER, "ListSessions")],
    ("POST", "/v1/sessions"): [(B.MANAGER, "CreateSession")],
    ("GET", S): [(B.MANAGER, "GetSession")],
    ("DELETE", S): [(B.SESSION, "Close")],
    ("POST", S + "/activity"): [(B.SESSION, "Touch")],
    ("POST", S + "/freeze"): [(B.SESSION, "Freeze")],
    ("POST", S + "/thaw"): [(B.SESSION, "Thaw")],
    ("GET", S + "/commands"): [(B.SESSION, "ListCommands")],
    ("POST", S + "/commands"): [(B.SESSION, "Exec"), (B.SESSION, "Run")],
    ("GET", C): [(B.SESSION, "GetCommand"), (B.COMMAND, "Snapshot")],
    ("GET", C + "/events"): [(B.COMMAND, "Attach")],
    ("POST", C + "/signal"): [(B.COMMAND, "Signal")],
    ("POST", C + "/stdin"): [(B.COMMAND, "WriteStdin")],
    ("POST", C + "/resize"): [(B.COMMAND, "Resize")],
    ("GET", C + "/tty"): [(B.COMMAND, "OpenTerminal")],
    ("GET", S + "/ports"): [(B.SESSION, "ListPorts")],
    ("POST", S + "/ports"): [(B.SESSION, "ExposePort")],
    ("GET", S + "/ports/{port}"): [(B.SESSION, "ListPorts")],
    ("DELETE", S + "/ports/{port}"): [(B.SESSION, "UnexposePort")],
    ("GET", "/v1/images"): [(B.MANAGER, "ListImages")],
    ("GET", "/v1/images/{image}"): [(B.MANAGER, "GetImage")],
    ("PUT", "/v1/images/{image}"): [(B.MANAGER, "ImportImage")],
    ("DELETE", "/v1/images/{image}"): [(B.MANAGER, "RemoveImage")],
}
# HTTP only, and why: the relay at S/ports/{port}/{path} passes HTTP on to what a port
# serves; a D-Bus caller is local, and connects to the port's unix socket itself
# (ExposePort() names it)
RELAY_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
for _files in (S + "/files", S + "/files/{path}"):
    ROUTES[("GET", _files)] = [(FILES, "Stat"), (FILES, "List"), (FILES, "Read")]
    ROUTES[("PUT", _files)] = [(FILES, "Write"), (FILES, "Mkdir"), (FILES, "Move")]
    ROUTES[("POST", _files)] = [(FILES, "Mkdir"), (FILES, "Move")]
    ROUTES[("DELETE", _files)] = [(FILES, "Remove")]

DBUS_ONLY = {
    (B.MANAGER, "CloseSession"): "the session's Close(false), by session id, without its object",
    (B.MANAGER, "Exec"): "the session's Exec(), by session id",
    (B.MANAGER, "Run"): "the session's Run(), by session id",
}

STANDARD = ("org.freedesktop.DBus.",)


def served_routes():
    out = sh(SANDBOXD_BIN, "--list-routes").stdout
    routes = {tuple(line.split(" ")) for line in out.splitlines() if line}
    assert len(routes) > 20, out
    return routes


def introspect_methods(path):
    xml = B.busctl("introspect", "--xml-interface", B.NAME, path).stdout
    found = set()
    for iface in ET.fromstring(xml).iter("interface"):
        name = iface.get("name")
        if name.startswith(STANDARD):
            continue
        for m in iface.iter("method"):
            found.add((name, m.get("name")))
    return found


def run_http(api, sid, argv, **extra):
    body = {"argv": argv}
    body.update(extra)
    r = api.post("/v1/sessions/%s/commands" % sid, body)
    assert r.status == 200, r
    return body


def command_object(sid, rid):
    return B.call("%s/session/%s" % (B.PATH, sid), B.SESSION, "GetCommand", "s", rid)[0]


def read_fd(fd):
    f = os.fdopen(fd.take(), "rb")
    try:
        return f.read()
    finally:
        f.close()


# --------------------------------------------------------------------------
# the table, both ways

def test_every_route_has_its_method_and_back(api, session):
    sid = session["id"]
    start_command(api, sid, {"argv": ["true"], "request_id": "probe"})
    wait_terminal(api, sid, "probe")
    live = introspect_methods(B.PATH)
    live |= introspect_methods("%s/session/%s" % (B.PATH, sid))
    live |= introspect_methods(command_object(sid, "probe"))

    routes = served_routes()
    relayed = {(m, S + "/ports/{port}/{path}") for m in RELAY_METHODS}
    assert relayed <= routes, "the relay serves %r" % sorted(relayed - routes)
    routes -= relayed
    assert routes == set(ROUTES), ("routes without a mapping: %r; mappings of no route: %r"
                                   % (routes - set(ROUTES), set(ROUTES) - routes))
    for route, methods in ROUTES.items():
        for m in methods:
            assert m in live, "%s %s: %s.%s is not on the live objects" % (route + m)

    mapped = {m for methods in ROUTES.values() for m in methods}
    for m in live:
        assert m in mapped or m in DBUS_ONLY, "%s.%s has no route and is not listed as D-Bus-only" % m
    for m in DBUS_ONLY:
        assert m in live and DBUS_ONLY[m], m


# --------------------------------------------------------------------------
# Manager

def test_health_and_pool(api):
    health, pool = B.manager("Health")
    h = api.get("/v1/health").json
    assert health["status"] == h["status"] == "ok"
    assert health["version"] == h["version"] == B.get_property(B.PATH, B.MANAGER, "Version")
    assert set(health) == set(h) - {"pool"}, (health, h)
    assert abs(health["timestamp"] / 1e6 - __import__("time").time()) < 60
    assert health["uptime"] > 0
    assert set(pool) == set(h["pool"]) and pool["profile"] == h["pool"]["profile"]
    assert pool["size"] == h["pool"]["size"] and pool["min_ready"] == h["pool"]["min_ready"]
    assert B.manager("GetPool")[0] == pool or B.manager("GetPool")[0]["size"] == pool["size"]


def metric_names(text):
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


def test_metrics_text_is_the_http_one(api):
    text = B.manager("Metrics")[0]
    r = api.get("/metrics")
    assert r.status == 200
    assert text.startswith("# HELP sandboxd_sessions ")
    assert metric_names(text) == metric_names(r.body.decode())
    assert 'sandboxd_build_info{version="%s"} 1' % B.get_property(B.PATH, B.MANAGER, "Version") in text


def test_drain_on_and_off(api, scope):
    user, ws = scope
    assert B.manager("GetDraining")[0] is False
    try:
        draining, _ = B.manager("SetDraining", "b", True)
        assert draining is True
        assert api.get("/v1/drain").json["draining"] is True
        assert B.manager("Health")[0]["status"] == "draining"
        r = api.post("/v1/sessions", {"user": user, "workspace": ws})
        assert r.status == 503 and r.json["error"]["code"] == "draining"
        assert B.error_of(B.manager, "CreateSession", "ssa{sv}", user, ws, {}) == B.ERROR + "Draining"
    finally:
        draining, _ = B.manager("SetDraining", "b", False)
    assert draining is False
    assert api.get("/v1/drain").json["draining"] is False
    assert B.manager("GetDraining")[0] is False


def test_metrics_and_drain_refused_to_others():
    for method, sig, args in (("Metrics", "", ()), ("GetDraining", "", ()), ("SetDraining", "b", (True,))):
        with pytest.raises(B.BusError) as e:
            B.call_as("nobody", B.PATH, B.MANAGER, method, sig, *args)
        # sandboxd's refusal (authz_decide()), not the bus policy's
        assert e.value.name == B.ACCESS_DENIED and "AdminGroup=" in e.value.message, e.value
    assert B.manager("GetDraining")[0] is False


# --------------------------------------------------------------------------
# Session and Command

def test_list_commands_and_snapshot(api, session):
    sid = session["id"]
    run_http(api, sid, ["sh", "-c", "printf 'out\\001'; printf err >&2; exit 3"], request_id="snap")
    run_http(api, sid, ["true"], request_id="second")
    listed = B.call("%s/session/%s" % (B.PATH, sid), B.SESSION, "ListCommands")[0]
    assert [(rid, status) for rid, status, _ in listed] == [("snap", "failed"), ("second", "succeeded")]
    path = command_object(sid, "snap")
    assert listed[0][2] == path

    js, out, err = B.call(path, B.COMMAND, "Snapshot")
    import json
    snap = json.loads(js)
    h = api.get("/v1/sessions/%s/commands/snap" % sid).json
    assert h.pop("found") is True
    assert out == b"out\x01" and err == b"err"
    assert h.pop("stdout") == "out\x01" and h.pop("stderr") == "err"
    assert snap == h
    assert snap["exit_code"] == 3

    assert B.error_of(B.call, "%s/session/%s" % (B.PATH, sid), B.SESSION, "GetCommand", "s", "nope") == \
        B.ERROR + "NoSuchCommand"
    assert api.get("/v1/sessions/%s/commands/nope" % sid).json["error"]["code"] == "not_found"


def test_attach_is_the_http_event_stream(api, session):
    sid = session["id"]
    run_http(api, sid, ["sh", "-c", "for i in 1 2 3; do echo line$i; sleep 0.2; echo e$i >&2; sleep 0.2; done"],
             request_id="ev")
    path = command_object(sid, "ev")
    whole = api.get("/v1/sessions/%s/commands/ev/events" % sid).body
    assert whole.count(b"\n") >= 5, whole
    first = len(whole.split(b"\n", 1)[0]) + 1
    middle = whole.rindex(b"\n", 0, len(whole) // 2) + 1  # a line's start
    for offset in (0, first, middle, len(whole)):
        http = api.get("/v1/sessions/%s/commands/ev/events?offset=%d" % (sid, offset)).body
        assert read_fd(B.call(path, B.COMMAND, "Attach", "t", B.t(offset))[0]) == http, offset
    assert http == b""
    # inside a line: refused both ways
    r = api.get("/v1/sessions/%s/commands/ev/events?offset=%d" % (sid, first + 1))
    assert r.status == 416 and r.json["error"]["code"] == "invalid_offset"
    assert B.error_of(B.call, path, B.COMMAND, "Attach", "t", B.t(first + 1)) == B.ERROR + "InvalidOffset"
    r = api.get("/v1/sessions/%s/commands/ev/events?offset=%d" % (sid, len(whole) + 1))
    assert r.status == 416 and r.json["error"]["code"] == "invalid_offset"
    assert B.error_of(B.call, path, B.COMMAND, "Attach", "t", B.t(len(whole) + 1)) == B.ERROR + "InvalidOffset"


def test_attach_follows_a_running_command(api, session):
    sid = session["id"]
    start_command(api, sid, {"argv": ["sh", "-c", "echo early; sleep 1; echo late"], "request_id": "live"})
    fd = B.call(command_object(sid, "live"), B.COMMAND, "Attach", "t", B.t(0))[0]
    got = read_fd(fd)  # until the command ends and sandboxd closes the pipe
    assert b'"early\\n"' in got and b'"late\\n"' in got and b'"exit"' in got, got
    assert got == api.get("/v1/sessions/%s/commands/live/events" % sid).body


def test_attach_pipe_closed_by_the_reader(api, session):
    sid = session["id"]
    start_command(api, sid, {"argv": ["sh", "-c", "yes | head -c 3000000; sleep 2"], "request_id": "big"})
    path = command_object(sid, "big")
    fd = B.call(path, B.COMMAND, "Attach", "t", B.t(0))[0]
    f = os.fdopen(fd.take(), "rb")
    assert f.read(1000)
    f.close()  # sandboxd stops writing; it goes on serving
    wait_terminal(api, sid, "big")
    assert B.manager("Health")[0]["status"] == "ok"
    m = api.get("/metrics").body.decode()
    assert "sandboxd_commands_running" in m


def test_write_stdin(api, session):
    sid = session["id"]
    start_command(api, sid, {"argv": ["cat"], "stdin": "stream", "request_id": "feed"})
    path = command_object(sid, "feed")
    assert B.call(path, B.COMMAND, "WriteStdin", "ayb", b"hello\n", False) == [6]
    assert B.call(path, B.COMMAND, "WriteStdin", "ayb", b"bye", True) == [3]
    wait_terminal(api, sid, "feed")
    assert B.call(path, B.COMMAND, "Snapshot")[1] == b"hello\nbye"
    assert B.error_of(B.call, path, B.COMMAND, "WriteStdin", "ayb", b"x", False) == B.ERROR + "StdinClosed"
    r = api.post("/v1/sessions/%s/commands/feed/stdin" % sid, "x")
    assert r.status == 409 and r.json["error"]["code"] == "stdin_closed"

    run_http(api, sid, ["true"], request_id="nostream")
    assert B.error_of(B.call, command_object(sid, "nostream"), B.COMMAND, "WriteStdin", "ayb", b"x", False) == \
        B.ERROR + "StdinNotStreamed"
    r = api.post("/v1/sessions/%s/commands/nostream/stdin" % sid, "x")
    assert r.json["error"]["code"] == "stdin_not_streamed"


# --------------------------------------------------------------------------
# Files

def files(sid, method, sig="", *args):
    return B.call("%s/session/%s" % (B.PATH, sid), FILES, method, sig, *args)


def write(sid, path, data, options=None):
    """Write() from a memfd holding data (a regular file)."""
    fd = os.memfd_create("data")
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
        return files(sid, "Write", "sha{sv}", path, dbus.types.UnixFd(fd), dbus.Dictionary(options or {}, signature="sv"))
    finally:
        os.close(fd)


def furl(sid, path, query=""):
    return "/v1/sessions/%s/files/%s" % (sid, path) + ("?" + query if query else "")


def test_file_methods_answer_as_http(api, session):
    import json
    sid = session["id"]
    entry, created = files(sid, "Mkdir", "s", "d")
    assert created is True and json.loads(entry)["type"] == "dir"
    assert files(sid, "Mkdir", "s", "d")[1] is False

    data = bytes(range(256)) * 10
    entry, created = write(sid, "d/f.bin", data, {"mode": dbus.UInt32(0o640)})
    assert created is True
    e = json.loads(entry)
    assert e["path"] == "d/f.bin" and e["size"] == len(data) and e["mode"] == "0640", e
    assert json.loads(files(sid, "Stat", "s", "d/f.bin")[0]) == api.get(furl(sid, "d/f.bin", "stat")).json == e

    assert json.loads(files(sid, "List", "s", "d")[0]) == api.get(furl(sid, "d")).json
    assert json.loads(files(sid, "List", "s", "")[0])["entries"][0]["name"] == "d"

    fd, size = files(sid, "Read", "s", "d/f.bin")
    assert size == len(data) and read_fd(fd) == data == api.get(furl(sid, "d/f.bin")).body

    moved = json.loads(files(sid, "Move", "ssb", "d/f.bin", "d/g.bin", False)[0])
    assert moved["path"] == "d/g.bin" and moved["size"] == len(data)
    assert api.get(furl(sid, "d/f.bin", "stat")).status == 404
    write(sid, "d/h", b"h")
    assert B.error_of(files, sid, "Move", "ssb", "d/h", "d/g.bin", False) == B.ERROR + "Exists"
    assert api.request("PUT", furl(sid, "d/h", "move_to=d/g.bin")).json["error"]["code"] == "exists"

    assert B.error_of(files, sid, "Remove", "sb", "d", False) == B.ERROR + "NotEmpty"
    assert api.delete(furl(sid, "d")).json["error"]["code"] == "not_empty"
    assert files(sid, "Remove", "sb", "d", True) == []
    assert api.get(furl(sid, "d", "stat")).status == 404


# (D-Bus error, the HTTP code of the same row of the error table)
BAD = [
    (("Stat", "s", "/etc/passwd"), "InvalidPath", "invalid_path", "%2Fetc/passwd"),
    (("Stat", "s", "../../x"), "InvalidPath", "invalid_path", None),
    (("Stat", "s", "nope"), "NoSuchFile", "not_found", "nope"),
    (("Read", "s", "dir"), "IsADirectory", None, None),
    (("List", "s", "file"), "NotADirectory", None, None),
    (("Stat", "s", "file/x"), "NotADirectory", "not_a_directory", "file/x"),
]


def test_file_methods_bad_input(api, session):
    sid = session["id"]
    files(sid, "Mkdir", "s", "dir")
    write(sid, "file", b"x")
    for (method, sig, arg), name, code, http_path in BAD:
        assert B.error_of(files, sid, method, sig, arg) == B.ERROR + name, (method, arg)
        if http_path:
            r = api.get(furl(sid, http_path, "stat"))
            assert r.json["error"]["code"] == code, (http_path, r)
    assert B.error_of(write, sid, "dir", b"x") in (
        B.ERROR + "IsADirectory", B.ERROR + "Exists")
    assert B.error_of(write, sid, "f2", b"x", {"mode": dbus.UInt32(0o1777)}) == B.ERROR + "InvalidValue"
    assert B.error_of(write, sid, "f2", b"x", {"owner": "root"}) == B.ERROR + "UnknownOption"
    # nothing of it was written
    assert api.get(furl(sid, "f2", "stat")).status == 404


def test_missing_and_closed_and_others_sessions(api, session):
    sid = session["id"]
    missing = "0123456789abcdef"
    assert B.error_of(files, missing, "Stat", "s", "x") == B.ERROR + "NoSuchSession"
    assert api.get(furl(missing, "x", "stat")).json["error"]["code"] == "not_found"

    with pytest.raises(B.BusError) as e:
        B.call_as("nobody", "%s/session/%s" % (B.PATH, sid), FILES, "Stat", "s", "x", interactive=False)
    assert e.value.name in (B.ACCESS_DENIED, B.INTERACTIVE_REQUIRED), e.value

    assert api.delete("/v1/sessions/" + sid).status == 200
    assert B.error_of(files, sid, "Stat", "s", "x") == B.ERROR + "SessionNotActive"
    assert api.get(furl(sid, "x", "stat")).json["error"]["code"] == "session_not_active"


def test_exec_stdin_stream(api, session):
    """Exec's stdin "stream": the command is fed by WriteStdin(), as "stdin":"stream" over HTTP."""
    sid = session["id"]
    spath = "%s/session/%s" % (B.PATH, sid)
    rid, path = B.call(spath, B.SESSION, "Exec", "asa{sv}", ["cat"], {"stdin": "stream", "request_id": "busfeed"})
    assert rid == "busfeed" and B.get_property(path, B.COMMAND, "Stdin") == "stream"
    assert B.call(path, B.COMMAND, "WriteStdin", "ayb", b"fed over D-Bus", True) == [14]
    wait_terminal(api, sid, "busfeed")
    assert B.call(path, B.COMMAND, "Snapshot")[1] == b"fed over D-Bus"
    assert api.get("/v1/sessions/%s/commands/busfeed" % sid).json["stdin"] == "stream"

    # any other string is refused, and starts nothing
    before = B.get_property(spath, B.SESSION, "Commands")
    assert B.error_of(B.call, spath, B.SESSION, "Exec", "asa{sv}", ["cat"], {"stdin": "pipe"}) == \
        B.ERROR + "InvalidValue"
    assert B.get_property(spath, B.SESSION, "Commands") == before
