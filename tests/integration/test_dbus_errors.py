# SPDX-License-Identifier: LGPL-2.1-or-later
"""Bad calls over D-Bus: each gets a named io.sandboxd.sandbox1.Error.* error with a
message, and changes nothing (no session, no command, no unit)."""

import dbus
import pytest

import sbxbus as B
from conftest import units

E = B.ERROR
UNKNOWN_ID = "0123456789abcdef"


@pytest.fixture
def bus_session(api, scope):
    user, ws = scope
    sid, path = B.manager("CreateSession", "ssa{sv}", user, ws, {})
    return sid, path


def sessions(api):
    """Every session sandboxd knows, its state and how many commands it has had."""
    return sorted((s["id"], s["state"], s["commands"]) for s in api.get("/v1/sessions").json["sessions"])


def expect(api, name, fn, *args):
    """fn(*args) fails with NAME, and creates no session, no command, no unit. (Units of
    earlier tests may still go away meanwhile.)"""
    before, before_units = sessions(api), units()
    got = B.error_of(fn, *args)
    assert got == name, "expected %s, got %s" % (name, got)
    assert sessions(api) == before, "the failed call changed a session"
    assert units() - before_units == set(), "the failed call made a unit"


def create(*args):
    return B.manager("CreateSession", *args)


@pytest.mark.parametrize("signature,args", [
    ("ias", (1, ["x"])),
    ("ss", ("alice", "ws")),
    ("ssa{ss}", ("alice", "ws", {"memory_max": "1G"})),
    ("ssa{sv}s", ("alice", "ws", {}, "extra")),
])
def test_wrong_argument_types_create(api, signature, args):
    expect(api, E + "InvalidArguments", create, signature, *args)


def test_wrong_argument_types_other_methods(api, bus_session):
    sid, path = bus_session
    expect(api, E + "InvalidArguments", B.manager, "GetSession", "i", 5)
    expect(api, E + "InvalidArguments", B.manager, "Run", "sas", sid, ["true"])
    expect(api, E + "InvalidArguments", B.manager, "Exec", "ssa{sv}", sid, "true", {})
    expect(api, E + "InvalidArguments", B.call, path, B.SESSION, "Close", "s", "yes")
    expect(api, E + "InvalidArguments", B.call, path, B.SESSION, "Touch", "b", True)


@pytest.mark.parametrize("user,workspace", [
    ("Alice", "ws"), ("", "ws"), ("1abc", "ws"), ("a" * 33, "ws"), ("alice", ""), ("alice", "a/b"),
    ("alice", "../x"), ("alice", "W"), ("alice", "x" * 65), ("al ice", "ws"),
])
def test_invalid_names(api, user, workspace):
    expect(api, E + "InvalidName", create, "ssa{sv}", user, workspace, {})


@pytest.mark.parametrize("sid", ["", "nope", "0123456789ABCDEF", "0123456789abcde", "0123456789abcdef0",
                                 "../../etc/passwd"])
def test_invalid_session_ids(api, sid):
    expect(api, E + "InvalidName", B.manager, "GetSession", "s", sid)
    expect(api, E + "InvalidName", B.manager, "CloseSession", "s", sid)
    expect(api, E + "InvalidName", B.manager, "Run", "sasa{sv}", sid, ["true"], {})


def test_unknown_session(api):
    expect(api, E + "NoSuchSession", B.manager, "GetSession", "s", UNKNOWN_ID)
    expect(api, E + "NoSuchSession", B.manager, "CloseSession", "s", UNKNOWN_ID)
    expect(api, E + "NoSuchSession", B.manager, "Exec", "sasa{sv}", UNKNOWN_ID, ["true"], {})
    expect(api, E + "NoSuchSession", B.manager, "Run", "sasa{sv}", UNKNOWN_ID, ["true"], {})
    path = "%s/session/%s" % (B.PATH, UNKNOWN_ID)
    expect(api, E + "NoSuchSession", B.call, path, B.SESSION, "Touch")
    expect(api, E + "NoSuchSession", B.call, path, B.SESSION, "Exec", "asa{sv}", ["true"], {})
    expect(api, E + "NoSuchSession", B.call, path + "/command/1", B.COMMAND, "Signal", "s", "SIGTERM")


def test_unknown_command(api, bus_session):
    sid, path = bus_session
    expect(api, E + "NoSuchCommand", B.call, path + "/command/1", B.COMMAND, "Signal", "s", "SIGTERM")
    expect(api, E + "NoSuchCommand", B.call, path + "/command/0", B.COMMAND, "Signal", "s", "SIGTERM")


@pytest.mark.parametrize("options,name", [
    ({"bogus": dbus.String("x")}, "UnknownOption"),
    ({"tasks_max": dbus.String("12")}, "InvalidType"),
    ({"cpu_quota": dbus.Int32(50)}, "InvalidType"),
    ({"memory_max": dbus.Boolean(True)}, "InvalidType"),
    ({"memory_max": dbus.String("lots")}, "InvalidValue"),
    ({"memory_max": dbus.UInt64(1 << 20)}, "InvalidValue"),  # below 4M
    ({"tasks_max": dbus.UInt64(0)}, "InvalidValue"),
    ({"ttl_s": dbus.UInt64(0)}, "InvalidValue"),
    ({"memory_max": dbus.String("1T")}, "LimitExceeded"),
    ({"cpu_quota": dbus.UInt64(10000)}, "LimitExceeded"),
    ({"tasks_max": dbus.UInt64(100000)}, "LimitExceeded"),
    ({"ttl_s": dbus.UInt64(30 * 86400)}, "LimitExceeded"),
    ({"network_deny": dbus.Array(["no way"], signature="s")}, "InvalidValue"),
    ({"network": dbus.String("mars")}, "InvalidValue"),
    ({"exec_mode": dbus.String("thread")}, "InvalidValue"),
    ({"exec_mode": dbus.String("")}, "InvalidValue"),
    ({"exec_mode": dbus.UInt64(1)}, "InvalidType"),
    ({"exec_mode": dbus.Array(["session"], signature="s")}, "InvalidType"),
])
def test_bad_session_options(api, scope, options, name):
    user, ws = scope
    expect(api, E + name, create, "ssa{sv}", user, ws, options)


@pytest.mark.parametrize("argv,options,name", [
    ([], {}, "InvalidValue"),
    ([""], {}, "InvalidValue"),
    (["no-such-program-anywhere"], {}, "ExecutableNotFound"),
    (["bin/true"], {}, "ExecutableNotFound"),
    (["true"], {"bogus": dbus.String("x")}, "UnknownOption"),
    (["true"], {"timeout_ms": dbus.String("100")}, "InvalidType"),
    (["true"], {"env": dbus.String("A=b")}, "InvalidType"),
    (["true"], {"stdout": dbus.String("/tmp/x")}, "InvalidType"),
    (["true"], {"timeout_ms": dbus.UInt64(0)}, "InvalidValue"),
    (["true"], {"timeout_ms": dbus.UInt64(10 * 86400 * 1000)}, "LimitExceeded"),
    (["true"], {"request_id": dbus.String("bad id")}, "InvalidName"),
    (["true"], {"request_id": dbus.String("")}, "InvalidName"),
    (["true"], {"cwd": dbus.String("../..")}, "InvalidPath"),
    (["true"], {"cwd": dbus.String("/etc")}, "InvalidPath"),
    (["true"], {"cwd": dbus.String("missing-dir")}, "InvalidPath"),
    (["true"], {"env": dbus.Array(["HOME=/root"], signature="s")}, "ReservedEnvironment"),
    (["true"], {"env": dbus.Array(["LD_PRELOAD=/x.so"], signature="s")}, "ReservedEnvironment"),
    (["true"], {"env": dbus.Array(["1X=y"], signature="s")}, "InvalidValue"),
    (["true"], {"env": dbus.Array(["NOEQUALS"], signature="s")}, "InvalidValue"),
    (["true"], {"stdin_data": dbus.ByteArray(b"a"), "stdin": dbus.types.UnixFd(0)}, "InvalidValue"),
])
def test_bad_command_requests(api, bus_session, argv, options, name):
    sid, path = bus_session
    expect(api, E + name, B.manager, "Exec", "sasa{sv}", sid, dbus.Array(argv, signature="s"), options)
    expect(api, E + name, B.call, path, B.SESSION, "Run", "asa{sv}", dbus.Array(argv, signature="s"), options)


def test_bad_signal(api, bus_session):
    sid, path = bus_session
    rid, cpath = B.manager("Exec", "sasa{sv}", sid, ["sleep", "30"], {})
    try:
        for sig in ("SIGSTOP", "KILL", "9", ""):
            expect(api, E + "InvalidValue", B.call, cpath, B.COMMAND, "Signal", "s", sig)
        assert B.get_property(cpath, B.COMMAND, "Status") == "running"
    finally:
        B.call(cpath, B.COMMAND, "Signal", "s", "SIGKILL")


def test_closed_session_runs_nothing(api, bus_session):
    sid, path = bus_session
    B.manager("CloseSession", "s", sid)
    expect(api, E + "SessionNotActive", B.manager, "Run", "sasa{sv}", sid, ["true"], {})
    expect(api, E + "SessionNotActive", B.call, path, B.SESSION, "Touch")
    expect(api, E + "SessionNotActive", B.call, path, B.SESSION, "Freeze")
