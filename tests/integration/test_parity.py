# SPDX-License-Identifier: LGPL-2.1-or-later
"""The D-Bus properties of sessions and commands are the fields of the HTTP API's objects.

For sessions in every network mode, active and closed, and commands running, succeeded,
failed, signaled and cut at OutputMax=, every field of GET /v1/sessions/ID and
GET .../commands/RID is compared with its property (GetAll, as root), through the mapping
of PROPERTIES AND THE HTTP API in sandboxd-dbus(5). A JSON field without a mapping fails,
and so does a property no JSON field maps to: a field cannot be added to one transport only.

Host mode needs HostModeTenants=: the module restarts sandboxd once with a drop-in that
names unix:0 (root on the unix socket). Freezing needs cgroup v2 (tests/cgroup-v2)."""

import time

import pytest

import sbxbus as B
from conftest import config_dropin, snapshot, start_command, unique_user, wait_for, wait_terminal

pytestmark = pytest.mark.restarts_daemon

DROPIN = "/etc/sandboxd/sandboxd.conf.d/50-test-parity.conf"
ABSENT = object()


def same(j, p):
    return j == p


def nullable(default):
    """A JSON null (or an absent field) is DEFAULT on the bus."""
    return lambda j, p: p == (default if j is None or j is ABSENT else j)


# JSON field (dotted for nested objects) -> (property, how the two compare)
SESSION_MAP = {
    "id": ("Id", same),
    "user": ("User", same),
    "workspace": ("Workspace", same),
    "state": ("State", same),
    "unit": ("Unit", same),
    "dynamic_user": ("DynamicUser", same),
    "node": ("Node", same),
    "workspace_path": ("WorkspacePath", same),
    "created_at_usec": ("CreatedAt", same),
    "last_activity_usec": ("LastActivity", same),
    "ttl_s": ("IdleTimeoutUSec", lambda j, p: j == p // 10**6),
    "expires_at_usec": ("ExpiresAt", same),
    "frozen": ("Frozen", same),
    "limits.memory_max": ("MemoryMax", same),
    "limits.cpu_quota": ("CPUQuota", same),
    "limits.tasks_max": ("TasksMax", same),
    "commands": ("Commands", same),
    "running": ("RunningCommands", same),
    "disk_bytes": ("DiskBytes", same),
    "network.mode": ("Network", same),
    "network.deny": ("NetworkDeny", nullable([])),
    "network.allow": ("NetworkAllow", lambda j, p: p == ((False, []) if j is ABSENT else (True, j))),
    "exec_mode": ("ExecMode", same),
    "image": ("Image", nullable("")),
    "close_reason": ("CloseReason", nullable("")),
}

COMMAND_MAP = {
    "request_id": ("RequestId", same),
    "unit": ("Unit", same),
    "session": ("SessionId", same),
    "terminal": ("Terminal", same),
    "created_at_usec": ("CreatedAt", same),
    "stdin": ("Stdin", same),
    "tty": ("Tty", lambda j, p: tuple(p) == ((0, 0) if j is None else (j["rows"], j["cols"]))),
    "cgroup": ("Cgroup", nullable("")),
    "argv": ("Argv", same),
    "status": ("Status", same),
    "exit_code": ("ExitCode", nullable(-1)),
    "signal": ("Signal", nullable("")),
    "reason": ("Reason", nullable("")),
    "duration_ms": ("DurationMSec", nullable(0)),
    "usage": ("Usage", lambda j, p: p == (j["cpu_usec"], j["memory_bytes"], j["tasks"])),
    "truncated": ("Truncated", same),
    "stdout_truncated": ("StdoutTruncated", same),
    "stderr_truncated": ("StderrTruncated", same),
    "stdout_bytes": ("StdoutBytes", same),
    "stderr_bytes": ("StderrBytes", same),
    "events_bytes": ("EventsBytes", same),
}
# Of the snapshot, not of the command: the envelope, and the kept output, which is Run()'s
# answer and the event stream on the bus (sandboxd-dbus(5)), not a property.
COMMAND_NOT_PROPERTIES = {"found", "stdout", "stderr", "stdout_b64", "stderr_b64"}


def leaves(obj, mapping, prefix=""):
    """The dotted names of OBJ's fields: a nested object is followed unless MAPPING maps
    it whole."""
    out = {}
    for k, v in obj.items():
        name = prefix + k
        if isinstance(v, dict) and name not in mapping:
            out.update(leaves(v, mapping, name + "."))
        else:
            out[name] = v
    return out


def compare(what, obj, props, mapping, not_properties=()):
    fields = leaves(obj, mapping)
    unmapped = sorted(set(fields) - set(mapping) - set(not_properties))
    assert not unmapped, "%s: JSON fields without a D-Bus property: %s" % (what, unmapped)
    unused = sorted(set(props) - {p for p, _ in mapping.values()})
    assert not unused, "%s: D-Bus properties without a JSON field: %s" % (what, unused)
    for field, (prop, eq) in mapping.items():
        j = fields.get(field, ABSENT)
        assert prop in props, "%s: no property %s for %s" % (what, prop, field)
        assert eq(j, props[prop]), "%s: %s is %r over HTTP, %s %r over D-Bus" % (
            what, field, None if j is ABSENT else j, prop, props[prop])


def stable(read_http, read_bus, what):
    """HTTP, D-Bus, HTTP until both HTTP answers are the same (a running command's usage is
    sampled, a disk count may land): then the D-Bus read saw that same state."""
    for _ in range(50):
        a = read_http()
        p = read_bus()
        b = read_http()
        if a == b:
            return a, p
        time.sleep(0.2)
    raise AssertionError("%s never held still long enough to compare" % what)


def session_parity(api, sid):
    path = B.manager("GetSession", "s", sid)[0]
    obj, props = stable(lambda: api.get_session(sid), lambda: B.get_all(path, B.SESSION), "session " + sid)
    compare("session %s (%s, %s)" % (sid, obj["network"]["mode"], obj["state"]), obj, props, SESSION_MAP)
    return obj, props


def command_path(sid, rid):
    """The D-Bus object of command RID (its number is in no name in session mode)."""
    return B.call("%s/session/%s" % (B.PATH, sid), B.SESSION, "GetCommand", "s", rid)[0]


def command_parity(api, sid, rid, path):
    obj, props = stable(lambda: snapshot(api, sid, rid), lambda: B.get_all(path, B.COMMAND), "command " + rid)
    compare("command %s (%s)" % (rid, obj["status"]), obj, props, COMMAND_MAP, COMMAND_NOT_PROPERTIES)
    return obj, props


@pytest.fixture(scope="module")
def host_mode(api):
    with config_dropin(DROPIN) as write:
        write("[Network]\nHostModeTenants=unix:0\n")
        yield


NETWORKS = {
    "none": {"mode": "none"},
    "proxy": {"mode": "proxy"},
    "proxy-lists": {"mode": "proxy", "deny": ["deny.sbx.test"], "allow": ["allowed.sbx.test", "*.sbx.example"]},
    "proxy-allow-nothing": {"mode": "proxy", "allow": []},
    "host": {"mode": "host"},
}


@pytest.mark.time_limit(240)
@pytest.mark.parametrize("network", sorted(NETWORKS))
def test_session_and_commands_match(api, host_mode, network):
    user, ws = unique_user(), "parity"
    s = api.create_session(user, ws, network=NETWORKS[network])
    sid = s["id"]
    obj, props = session_parity(api, sid)
    assert obj["state"] == "active" and props["Network"] == NETWORKS[network]["mode"]
    assert props["Commands"] == 0

    # commands in every state that can be made at will
    runs = {
        "ok": {"argv": ["sh", "-c", "echo out; echo err >&2"]},
        "exit3": {"argv": ["sh", "-c", "cat >/dev/null; exit 3"], "stdin": {"text": "in"}},
        "big": {"argv": ["sh", "-c", "head -c 1200000 /dev/zero | tr '\\0' x"]},  # past OutputMax= (1M)
        "killed": {"argv": ["sleep", "300"]},
        "running": {"argv": ["sleep", "300"], "stdin": "stream"},
    }
    paths = {}
    for rid, body in runs.items():
        start_command(api, sid, dict(body, request_id=rid))
        paths[rid] = command_path(sid, rid)
    for rid in ("ok", "exit3", "big"):
        wait_terminal(api, sid, rid)
    wait_for(lambda: snapshot(api, sid, "killed")["status"] == "running", what="sleep to run")
    wait_for(lambda: snapshot(api, sid, "running")["status"] == "running", what="sleep to run")
    B.call(paths["killed"], B.COMMAND, "Signal", "s", "SIGKILL")
    wait_terminal(api, sid, "killed")

    want = {"ok": "succeeded", "exit3": "failed", "big": "succeeded", "killed": "signaled", "running": "running"}
    for rid, path in paths.items():
        obj, props = command_parity(api, sid, rid, path)
        assert obj["status"] == want[rid], obj
    assert command_parity(api, sid, "big", paths["big"])[1]["StdoutTruncated"] is True
    assert command_parity(api, sid, "killed", paths["killed"])[1]["Signal"] == "SIGKILL"

    obj, props = session_parity(api, sid)
    assert props["Commands"] == len(runs) and props["RunningCommands"] == 1, props

    # closed: the session and what its commands left
    r = api.delete("/v1/sessions/" + sid)
    assert r.status in (200, 204), r
    obj, props = session_parity(api, sid)
    assert obj["state"] == "closed" and props["CloseReason"] == "deleted", obj
    for rid, path in paths.items():
        obj, props = command_parity(api, sid, rid, path)
        assert obj["terminal"], obj


def test_an_unmapped_field_fails():
    """The check itself: a field the mapping does not know, or a property no field maps
    to, is an error, not something skipped."""
    with pytest.raises(AssertionError, match="without a D-Bus property"):
        compare("probe", {"id": "x", "brand_new": 1}, {"Id": "x"}, {"id": ("Id", same)})
    with pytest.raises(AssertionError, match="without a JSON field"):
        compare("probe", {"id": "x"}, {"Id": "x", "BrandNew": 1}, {"id": ("Id", same)})
    with pytest.raises(AssertionError, match="over D-Bus"):
        compare("probe", {"limits": {"a": 1}}, {"A": 2}, {"limits.a": ("A", same)})
