# SPDX-License-Identifier: LGPL-2.1-or-later
"""Who may do what over D-Bus, decided by the real polkitd and dbus-daemon: root
everything; a member of group sandboxd its own sessions (the shipped rules file);
others nothing without an administrator's password; no polkit, no access."""

import re
import secrets
import xml.etree.ElementTree as ET

import pytest

import sbxbus as B
from conftest import is_active, sh, units, wait_for, workspace_for

POLICY = "/usr/share/polkit-1/actions/io.sandboxd.sandbox1.policy"
RULES = "/usr/share/polkit-1/rules.d/io.sandboxd.sandbox1.rules"
BUS_POLICY = "/usr/share/dbus-1/system.d/io.sandboxd.sandbox1.conf"


def make_user(groups=()):
    name = "sbxd" + secrets.token_hex(4)
    args = ["useradd", "-M", "-N", "-s", "/usr/sbin/nologin"]
    if groups:
        args += ["-G", ",".join(groups)]
    sh(*args, name)
    return name


@pytest.fixture
def member():
    name = make_user(["sandboxd"])
    yield name
    sh("userdel", name, check=False)


@pytest.fixture
def outsider():
    name = make_user()
    yield name
    sh("userdel", name, check=False)


@pytest.fixture
def others_session(api, request):
    """A session of another user, made by root; closed after the test, so that its commands
    (test_member_is_denied_other_users_sessions leaves a sleep 60 running) do not end
    during a later test that compares the units before and after (test_quotas)."""
    user = "sbxo" + secrets.token_hex(4)
    sid, path = B.manager("CreateSession", "ssa{sv}", user, workspace_for(request.node.name), {})
    yield sid, path
    try:
        B.manager("CloseSession", "s", sid)
    except B.BusError:
        pass  # a test closed it already


def session_state(sid):
    return B.get_property("%s/session/%s" % (B.PATH, sid), B.SESSION, "State")


# --------------------------------------------------------------------------
# shipped files

def test_polkit_policy_is_valid_and_loaded():
    sh("xmllint", "--noout", "--valid", POLICY)
    for action, implicit in (("io.sandboxd.sandbox1.manage-sessions", "auth_admin_keep"),
                             ("io.sandboxd.sandbox1.manage-all", "auth_admin")):
        out = sh("pkaction", "--verbose", "--action-id", action).stdout
        for kind in ("any", "inactive", "active"):
            assert re.search(r"implicit %s:\s+%s\n" % (kind, implicit), out), out
    out = sh("pkaction", "--verbose", "--action-id", "io.sandboxd.sandbox1.manage-all").stdout
    assert "org.freedesktop.policykit.imply" in out and "io.sandboxd.sandbox1.manage-sessions" in out, out
    rules = open(RULES).read()
    assert 'isInGroup("sandboxd")' in rules and "io.sandboxd.sandbox1.manage-sessions" in rules


def introspected_methods():
    """(interface, member) of every method of our three interfaces."""
    sid, path = B.manager("CreateSession", "ssa{sv}", "policyprobe", "ws", {})
    rid, cpath = B.manager("Exec", "sasa{sv}", sid, ["true"], {})
    found = set()
    for p in (B.PATH, path, cpath):
        xml = B.busctl("introspect", "--xml-interface", B.NAME, p).stdout
        for iface in ET.fromstring(xml).findall("interface"):
            if iface.get("name").startswith("io.sandboxd.sandbox1."):
                found |= {(iface.get("name"), m.get("name")) for m in iface.findall("method")}
    return found


def test_bus_policy_allows_exactly_the_methods():
    root = ET.parse(BUS_POLICY).getroot()
    policies = {(p.get("context"), p.get("user")): p for p in root.findall("policy")}
    owners = {(k, a.get("own")) for k, p in policies.items() for a in p.findall("allow") if a.get("own")}
    assert owners == {((None, "root"), "io.sandboxd.sandbox1")}, owners

    default = policies[("default", None)]
    allowed = set()
    for a in default.findall("allow"):
        if a.get("send_destination") is None:
            continue
        assert a.get("send_destination") == B.NAME
        assert a.get("send_interface") and a.get("send_member"), "a send rule without interface and member"
        allowed.add((a.get("send_interface"), a.get("send_member")))
    standard = {("org.freedesktop.DBus.Properties", "Get"), ("org.freedesktop.DBus.Properties", "GetAll"),
                ("org.freedesktop.DBus.Introspectable", "Introspect"), ("org.freedesktop.DBus.Peer", "Ping"),
                ("org.freedesktop.DBus.Peer", "GetMachineId")}
    assert allowed - standard == introspected_methods()
    assert standard <= allowed


def test_bus_policy_refuses_other_calls(member):
    # Set is no method of ours to offer; an unknown member is refused by the bus itself
    with pytest.raises(B.BusError) as e:
        B.call_as(member, B.PATH, B.PROPERTIES, "Set", "ssv", B.MANAGER, "Version", "x")
    assert e.value.name == B.ACCESS_DENIED and "rejected" in e.value.message.lower(), e.value
    with pytest.raises(B.BusError) as e:
        B.call_as(member, B.PATH, B.MANAGER, "Bogus")
    assert e.value.name == B.ACCESS_DENIED and "rejected" in e.value.message.lower(), e.value


# --------------------------------------------------------------------------
# a member of group sandboxd

def test_member_manages_own_sessions(api, member):
    sid, path = B.call_as(member, B.PATH, B.MANAGER, "CreateSession", "ssa{sv}", member, "ws", {})
    assert B.get_property(path, B.SESSION, "User") == member
    assert B.call_as(member, B.PATH, B.MANAGER, "GetSession", "s", sid) == [path]
    st, code, out, err = B.call_as(member, B.PATH, B.MANAGER, "Run", "sasa{sv}", sid, ["echo", "mine"], {})
    assert (st, code, bytes(out)) == ("succeeded", 0, b"mine\n")
    rid, cpath = B.call_as(member, path, B.SESSION, "Exec", "asa{sv}", ["sleep", "30"], {})
    B.call_as(member, cpath, B.COMMAND, "Signal", "s", "SIGKILL")
    B.call_as(member, path, B.SESSION, "Touch")
    # reads of one's own objects
    assert B.call_as(member, path, B.PROPERTIES, "Get", "ss", B.SESSION, "Workspace") == ["ws"]
    assert B.call_as(member, cpath, B.PROPERTIES, "Get", "ss", B.COMMAND, "RequestId") == [rid]
    tree = sh("runuser", "-u", member, "--", "busctl", "tree", "--list", B.NAME).stdout.split()
    assert path in tree and cpath in tree, tree
    B.call_as(member, path, B.SESSION, "Close", "b", True)
    assert session_state(sid) == "closed"


def test_member_lists_only_own_sessions(api, member, others_session):
    sid, path = B.call_as(member, B.PATH, B.MANAGER, "CreateSession", "ssa{sv}", member, "ws", {})
    listed = B.call_as(member, B.PATH, B.MANAGER, "ListSessions")[0]
    assert [x[0] for x in listed] == [sid], listed
    assert listed[0][1:] == [member, "ws", "active", path]
    # while root sees both
    ids = {x[0] for x in B.manager("ListSessions")[0]}
    assert {sid, others_session[0]} <= ids
    tree = sh("runuser", "-u", member, "--", "busctl", "tree", "--list", B.NAME).stdout.split()
    assert path in tree and others_session[1] not in tree, tree


def test_member_is_denied_other_users_sessions(api, member, others_session):
    sid, path = others_session
    rid, cpath = B.manager("Exec", "sasa{sv}", sid, ["sleep", "60"], {})
    before = units()
    calls = [
        (B.PATH, B.MANAGER, "CreateSession", "ssa{sv}", "someoneelse", "ws", {}),
        (B.PATH, B.MANAGER, "GetSession", "s", sid),
        (B.PATH, B.MANAGER, "CloseSession", "s", sid),
        (B.PATH, B.MANAGER, "Exec", "sasa{sv}", sid, ["true"], {}),
        (B.PATH, B.MANAGER, "Run", "sasa{sv}", sid, ["true"], {}),
        (path, B.SESSION, "Exec", "asa{sv}", ["true"], {}),
        (path, B.SESSION, "Close", "b", True),
        (path, B.SESSION, "Touch"),
        (path, B.SESSION, "Freeze"),
        (cpath, B.COMMAND, "Signal", "s", "SIGKILL"),
        (path, B.PROPERTIES, "Get", "ss", B.SESSION, "State"),
        (path, B.PROPERTIES, "GetAll", "s", B.SESSION),
        (cpath, B.PROPERTIES, "GetAll", "s", B.COMMAND),
    ]
    for c in calls:
        with pytest.raises(B.BusError) as e:
            B.call_as(member, *c)
        assert e.value.name == B.ACCESS_DENIED, (c, e.value)
    # and nothing changed
    assert session_state(sid) == "active"
    assert B.get_property(cpath, B.COMMAND, "Status") == "running"
    assert B.get_property(path, B.SESSION, "Frozen") is False
    assert units() - before == set()
    assert "someoneelse" not in {x[1] for x in B.manager("ListSessions")[0]}


def test_member_without_interaction_gets_told(member, others_session):
    # polkit would ask for an administrator's password: the caller did not allow that
    with pytest.raises(B.BusError) as e:
        B.call_as(member, B.PATH, B.MANAGER, "GetSession", "s", others_session[0], interactive=False)
    assert e.value.name == B.INTERACTIVE_REQUIRED, e.value


def test_removed_member_is_denied(member):
    sid, path = B.call_as(member, B.PATH, B.MANAGER, "CreateSession", "ssa{sv}", member, "ws", {})
    sh("gpasswd", "-d", member, "sandboxd")
    with pytest.raises(B.BusError) as e:
        B.call_as(member, path, B.SESSION, "Touch")
    assert e.value.name == B.ACCESS_DENIED, e.value
    # its own objects it may still read: no polkit for that
    assert B.call_as(member, path, B.PROPERTIES, "Get", "ss", B.SESSION, "State") == ["active"]


# --------------------------------------------------------------------------
# a user outside the group

def test_outsider_is_denied(api, outsider):
    before = units()
    for c in [(B.PATH, B.MANAGER, "CreateSession", "ssa{sv}", outsider, "ws", {}),
              (B.PATH, B.MANAGER, "ListSessions")]:
        with pytest.raises(B.BusError) as e:
            B.call_as(outsider, *c)
        assert e.value.name == B.ACCESS_DENIED, (c, e.value)
        with pytest.raises(B.BusError) as e:
            B.call_as(outsider, *c, interactive=False)
        assert e.value.name == B.INTERACTIVE_REQUIRED, (c, e.value)
    assert outsider not in {x[1] for x in B.manager("ListSessions")[0]}
    assert units() - before == set()
    # busctl too (it allows interaction by default: no agent, no)
    p = sh("runuser", "-u", outsider, "--", "busctl", "call", B.NAME, B.PATH, B.MANAGER, "CreateSession",
           "ssa{sv}", outsider, "ws", "0", check=False)
    assert p.returncode != 0 and "Access denied" in p.stderr, (p.stdout, p.stderr)
    # introspection is for everyone
    assert "io.sandboxd.sandbox1.Manager" in sh("runuser", "-u", outsider, "--", "busctl", "introspect",
                                                B.NAME, B.PATH).stdout


# --------------------------------------------------------------------------
# without polkit

@pytest.fixture
def no_polkit():
    sh("systemctl", "stop", "polkit.service")
    sh("systemctl", "mask", "--runtime", "polkit.service")
    try:
        yield
    finally:
        sh("systemctl", "unmask", "--runtime", "polkit.service")
        sh("systemctl", "daemon-reload")


def test_polkit_unreachable_means_deny(api, member, no_polkit):
    assert is_active("polkit.service") != "active"
    with pytest.raises(B.BusError) as e:
        B.call_as(member, B.PATH, B.MANAGER, "CreateSession", "ssa{sv}", member, "ws", {})
    assert e.value.name == B.ACCESS_DENIED and "polkit" in e.value.message, e.value
    assert member not in {x[1] for x in B.manager("ListSessions")[0]}
    # root does not need polkit
    sid, path = B.manager("CreateSession", "ssa{sv}", member, "by-root", {})
    assert B.manager("Run", "sasa{sv}", sid, ["true"], {})[0] == "succeeded"
    # sandboxd is fine, and asks again once polkit is back (for the member's own scope:
    # root's session is not the member's, sandboxd(8) AUTHORIZATION)
    sh("systemctl", "unmask", "--runtime", "polkit.service")
    sh("systemctl", "daemon-reload")

    def allowed():
        try:
            return B.call_as(member, B.PATH, B.MANAGER, "CreateSession", "ssa{sv}", member, "ws", {})[1] != path
        except B.BusError:
            return False

    wait_for(allowed, timeout=30, what="polkit to be back")
