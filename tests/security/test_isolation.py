# SPDX-License-Identifier: LGPL-2.1-or-later
"""Nothing of one session visible to another, and what systemd keeps of a command
kept from every command: unit files, environments, cgroups, users, the journal,
io_uring, the caller's terminal, names a client could take, purges a command
could defeat, and the tenants' scopes. Each case is an attempt from inside a
sandboxed command (or a client) that must fail, checked from the host too."""

import json
import os
import pty
import re
import secrets
import stat
import subprocess
import sys
import time

import dbus
import pytest

from conftest import (DEFAULT_IMAGE, HIDDEN, LOCAL_TENANT, WORKSPACE_HOST_ROOT, WORKSPACE_ROOT, Api, assert_error, command_unit,
                      command_unit_name, journal_cursor, py, run, scope_dir, sh, sh_in, start_command, systemctl_show,
                      wait_command_running, wait_for, wait_terminal)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import sbxbus as B  # noqa: E402


@pytest.fixture
def pair(api, scope, secnet):
    """Two sessions of different scopes: A runs a command with a secret in its environment
    and its command line, B looks for it."""
    user, ws = scope
    a = api.create_session(user, ws)
    b = api.create_session(user + "b", ws + "-b")
    token = "tok-" + secrets.token_hex(12)
    # the token as an argument of a shell that stays (sleep would refuse it as a second
    # interval, exit 1 at once, and its unit be collected before the checks)
    start_command(api, a["id"], {"argv": ["sh", "-c", "sleep 60; :", "sh", token], "env": {"API_TOKEN": token},
                                 "request_id": "holder", "timeout_ms": 60000})
    # its own unit, or the session's exec unit
    unit = command_unit(wait_command_running(api, a["id"], "holder"))
    yield a, b, token, unit
    api.post("/v1/sessions/%s/commands/holder/signal" % a["id"], {"signal": "SIGKILL"})


def test_secrets_are_not_in_world_readable_unit_files(pair):
    a, b, token, unit = pair
    # on the host: not in any file PID 1 keeps of units, not in what it tells anyone on the bus
    for root, _, files in os.walk("/run/systemd"):
        for name in files:
            p = os.path.join(root, name)
            if not stat.S_ISREG(os.lstat(p).st_mode):
                continue  # FIFOs (inhibitors, sessions) would block
            with open(p, "rb") as f:
                assert token.encode() not in f.read(), p
    props = systemctl_show(unit, "Environment", "ExecStart", "EnvironmentFiles")
    assert token not in json.dumps(props), props


@pytest.mark.unit_mode_only  # in session mode the environment goes to the executor in a memfd
def test_command_environment_file_is_roots(pair):
    a, b, token, unit = pair
    props = systemctl_show(unit, "ExecStart", "EnvironmentFiles")
    assert "sandboxd-exec" in props["ExecStart"], props
    # the file it came from is root's alone, and gone once the command ends
    path = props["EnvironmentFiles"].split()[0]
    st = os.stat(path)
    assert st.st_uid == 0 and st.st_mode & 0o077 == 0, oct(st.st_mode)


def test_other_session_cannot_read_unit_files_or_environments(api, pair):
    a, b, token, unit = pair
    res = sh_in(api, b["id"], "grep -rs %s /run/systemd /proc/*/environ /proc/*/cmdline 2>/dev/null; "
                              "ls /run/systemd/transient /run/systemd/units 2>&1; echo end" % token)
    assert token not in res["stdout"], res
    assert res["stdout"].count(HIDDEN) == 2, res["stdout"]


def test_other_sessions_cgroups_are_hidden(api, pair):
    a, b, token, unit = pair
    res = sh_in(api, b["id"], "find /sys/fs/cgroup -name 'sandboxd-*' 2>/dev/null")
    found = res["stdout"].split()
    # its own session's cgroups are there, none of A's: not its slice, its command, its proxy socket
    assert [p for p in found if p.endswith("/sandboxd-%s.slice" % b["id"])], found
    assert not [p for p in found if a["id"] in p], [p for p in found if a["id"] in p]
    # from the host, A's are there to be found
    assert a["id"] in sh("find", "/sys/fs/cgroup", "-name", "sandboxd-%s*" % a["id"]).stdout
    # and what it needs of its own: the memory limit
    value, _ = py(api, b["id"], r"""
import json, os, re
cg = [l.split(":", 2) for l in open("/proc/self/cgroup").read().splitlines()]
path = None
for _, ctl, p in cg:
    if ctl in ("memory", ""):
        base = "/sys/fs/cgroup/memory" if ctl == "memory" else "/sys/fs/cgroup"
        # the session's slice (the command's unit in it, or the exec unit and its cgroups)
        parent = base + re.match(r"(.*/sandboxd-[^/]*\.slice)(/|$)", p).group(1)
        for f in ("memory.limit_in_bytes", "memory.max"):
            if os.path.exists(parent + "/" + f):
                path = parent + "/" + f
print(json.dumps(open(path).read().strip() if path else None))
""")
    assert value and int(value) == b["limits"]["memory_max"], value


def test_other_scopes_users_are_hidden(api, pair):
    a, b, token, unit = pair
    res = sh_in(api, b["id"], "getent passwd | grep '^sbx-'; ls /run/systemd/dynamic-uid /run/systemd/userdb 2>&1; "
                              "id -un")
    users = [l.split(":")[0] for l in res["stdout"].splitlines() if l.startswith("sbx-") and ":" in l]
    assert users == [b["dynamic_user"]], res["stdout"]
    assert a["dynamic_user"] not in res["stdout"], res["stdout"]
    assert HIDDEN in res["stdout"], res["stdout"]
    # its own name still resolves, with the scope's home
    assert res["stdout"].splitlines()[-1] == b["dynamic_user"], res["stdout"]
    value, _ = py(api, b["id"], "import json, os, pwd; p = pwd.getpwuid(os.getuid()); "
                                "print(json.dumps([p.pw_name, p.pw_dir]))")
    assert value == [b["dynamic_user"], scope_dir(b, "/var/lib/sandboxd/home")], value


def test_workspaces_of_others_cannot_be_listed(api, pair):
    a, b, token, unit = pair
    res = sh_in(api, b["id"], "for d in ws home tmp; do ls /var/lib/sandboxd/$d /var/lib/sandboxd/$d/%s; done 2>&1; "
                              "ls %s 2>&1" % (LOCAL_TENANT, os.path.dirname(a["workspace_path"])))
    lines = res["stdout"].splitlines()
    if not DEFAULT_IMAGE:
        assert len(lines) == 7 and all(l.endswith("Permission denied") for l in lines), lines
    else:
        # in an image /var/lib/sandboxd is a tmpfs with the mount points of B's own scope
        # only: nothing of A's, and A's workspace is not there at all
        assert lines[-1].endswith("No such file or directory"), lines
        names = set(re.split(r"[\s/:]+", "\n".join(lines[:-1])))  # (the last names A's path)
        assert a["user"] not in names and a["workspace"] not in names, (a["user"], a["workspace"], lines)


def test_the_journal_cannot_be_forged(api, scope, secnet):
    s = api.create_session(*scope)
    mark = "forged-" + secrets.token_hex(6)
    cursor = journal_cursor()
    res = py(api, s["id"], r"""
import json, socket
out = {}
for path, kind in (("/run/systemd/journal/socket", socket.SOCK_DGRAM), ("/dev/log", socket.SOCK_DGRAM),
                   ("/run/systemd/journal/stdout", socket.SOCK_STREAM)):
    try:
        so = socket.socket(socket.AF_UNIX, kind)
        so.connect(path)
        so.send(b"SYSLOG_IDENTIFIER=sandboxd\nMESSAGE=%s\n" if kind == socket.SOCK_DGRAM else b"sandboxd\n\n6\n0\n0\n0\n0\n%s\n")
        out[path] = "sent"
    except OSError as e:
        out[path] = e.errno
print(json.dumps(out))
""".replace("%s", mark))[0]
    assert "sent" not in res.values(), res
    # (--socket-errors=on: without, logger keeps quiet about a missing socket on a system
    # without /run/systemd/system, as an image session's empty /run is)
    res2 = sh_in(api, s["id"], "logger --socket-errors=on -t sandboxd %s; echo $?" % mark)
    assert res2["stdout"].strip().splitlines()[-1] != "0", res2
    time.sleep(0.5)
    assert mark not in sh("journalctl", "--no-pager", "--after-cursor", cursor, "-t", "sandboxd").stdout
    # what a command writes to stdout and stderr is still its own output
    assert run(api, s["id"], ["sh", "-c", "echo to-out; echo to-err >&2"])["stderr"] == "to-err\n"


IO_URING = r"""
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
fd = libc.syscall(425, 8, params)   # io_uring_setup(8, &params)
err = ctypes.get_errno()
enter = libc.syscall(426, 0, 0, 0, 0, 0, 0)   # io_uring_enter on fd 0
err2 = ctypes.get_errno()
print(json.dumps([fd, errno.errorcode.get(err, err), errno.errorcode.get(err2, err2)]))
"""


@pytest.mark.parametrize("mode", ["none", "proxy"])
def test_io_uring_is_denied(api, scope, secnet, mode):
    s = api.create_session(scope[0], scope[1] + "-" + mode, network={"mode": mode})
    value, _ = py(api, s["id"], IO_URING)
    # no ring, so no IORING_OP_SOCKET (AF_NETLINK, AF_VSOCK) nor IORING_OP_OPENAT (mode 6700)
    assert value == [-1, "EPERM", "EPERM"], value


def test_io_uring_is_denied_to_the_proxy_relay_and_the_daemon(api, scope, secnet):
    s = api.create_session(*scope)
    assert run(api, s["id"], ["true"])["exit"]["status"] == "succeeded"
    relay = "sandboxd-%s-proxy.service" % s["id"]
    for unit in (relay, "sandboxd.service"):
        filt = sh("systemctl", "show", "-p", "SystemCallFilter", unit).stdout
        assert filt.startswith("SystemCallFilter=") and "io_uring_setup" not in filt, (unit, filt[:200])


RELOAD_PROPS = ["RestrictNamespaces", "SystemCallFilter", "SystemCallArchitectures", "RestrictAddressFamilies",
                "PrivateNetwork", "PrivateTmp", "PrivateDevices", "PrivateIPC", "ProtectSystem", "ProtectHome",
                "ProtectProc", "ProcSubset", "ProtectControlGroups", "ProtectKernelTunables", "ProtectKernelModules",
                "ProtectKernelLogs", "ProtectClock", "ProtectHostname", "NoNewPrivileges", "CapabilityBoundingSet",
                "RestrictSUIDSGID", "RestrictRealtime", "LockPersonality", "DynamicUser", "User", "IPAddressDeny",
                "IPAddressAllow", "InaccessiblePaths", "TemporaryFileSystem", "BindReadOnlyPaths", "BindPaths",
                "EnvironmentFiles", "WorkingDirectory", "StateDirectory", "Slice", "LoadState", "UMask",
                "MemoryDenyWriteExecute", "DevicePolicy", "KeyringMode", "RemoveIPC", "JoinsNamespaceOf"]


def _props(unit):
    out = sh("systemctl", "show", unit, *("-p" + p for p in RELOAD_PROPS)).stdout
    props = dict(l.split("=", 1) for l in out.splitlines() if "=" in l)
    # ExecStart= without its run-time part (pid, times)
    exe = sh("systemctl", "show", "-p", "ExecStart", unit).stdout
    props["ExecStart"] = re.sub(r" ; (start_time|stop_time|pid|code|status)=[^;}]*", "", exe)
    return props


# address lists are sets: systemd may list them in another order after a reload
UNORDERED_PROPERTIES = {"IPAddressAllow", "IPAddressDeny"}


def _same_value(key, a, b):
    if key in UNORDERED_PROPERTIES and a is not None and b is not None:
        return sorted(a.split()) == sorted(b.split())
    return a == b


@pytest.mark.restarts_daemon
def test_daemon_reload_keeps_every_unit_as_it_was_started(api, scope, secnet):
    s = api.create_session(*scope)
    start_command(api, s["id"], {"argv": ["sh", "-c", "printf '%s\\n' \"$1\"; sleep 30", "sh", "$HOME `x` \"q\" \\b %n"],
                                 "env": {"V": "a$b"}, "request_id": "long", "timeout_ms": 60000})
    cmd = command_unit_name(s["id"], 1)
    wait_command_running(api, s["id"], "long")
    # the relay runs once a connection came through the proxy
    res = sh_in(api, s["id"], "curl -s -m 5 -o /dev/null -w '%{http_code}' http://allowed.sbx.test:8080/")
    assert res["stdout"] == "200", res
    unit_names = [cmd, "sandboxd-%s-proxy.service" % s["id"], "sandboxd-%s-proxy.socket" % s["id"],
                  "sandboxd-%s.slice" % s["id"]]
    before = {u: _props(u) for u in unit_names}
    assert before[cmd]["RestrictNamespaces"] == "yes" and before[cmd]["LoadState"] == "loaded", before[cmd]
    sh("systemctl", "daemon-reload")
    after = {u: _props(u) for u in unit_names}
    for u in unit_names:
        changed = {k: (before[u][k], after[u].get(k)) for k in before[u]
                   if _same_value(k, before[u][k], after[u].get(k)) is False}
        assert not changed, (u, changed)
    # and they still work: egress through the relay, the command's result
    res = sh_in(api, s["id"], "curl -s -m 5 http://allowed.sbx.test:8080/")
    assert res["stdout"].startswith("hello from the allowed"), res
    api.post("/v1/sessions/%s/commands/long/signal" % s["id"], {"signal": "SIGTERM"})
    snap = wait_terminal(api, s["id"], "long")
    assert snap["status"] == "signaled" and snap["stdout"] == "$HOME `x` \"q\" \\b %n\n", snap


# --------------------------------------------------------------------------
# the caller's terminal

def test_dbus_exec_refuses_a_terminal(api, scope, secnet):
    s = api.create_session(*scope)
    master, slave = pty.openpty()
    try:
        for key, fd in (("stdout", slave), ("stderr", slave), ("stdin", slave), ("stdout", master)):
            err = B.error_of(B.manager, "Exec", "sasa{sv}", s["id"], ["true"], {key: dbus.types.UnixFd(fd)})
            assert err == B.ERROR + "InvalidValue", (key, err)
        # nothing was started
        assert api.get("/v1/sessions/%s/commands" % s["id"]).json["commands"] == []
    finally:
        os.close(master)
        os.close(slave)


def test_sandboxctl_never_hands_its_terminal_to_the_command(api, scope, secnet):
    s = api.create_session(*scope)
    # sandboxctl on a terminal (script(1) gives it one), over D-Bus, the default
    script = ("test -t 0 && echo in-tty; test -t 1 && echo out-tty || echo out-pipe; "
              "test -t 2 && echo err-tty >&2 || echo err-pipe >&2; stty -echo 2>&1 | head -c 40; echo")
    out = sh("script", "-qec", "sandboxctl exec %s sh -c '%s'" % (s["id"], script), "/dev/null").stdout
    assert "out-pipe" in out and "err-pipe" in out, out
    assert "tty" not in out.replace("out-pipe", "").replace("err-pipe", "").replace("stty", ""), out


# --------------------------------------------------------------------------
# names a client could take

def test_reserved_request_ids_and_environment(api, scope, secnet):
    s = api.create_session(*scope)
    for rid in ("sandboxd.purge", "sandboxd.x", "SANDBOXD.purge"):
        assert_error(api.post("/v1/sessions/%s/commands" % s["id"], {"argv": ["true"], "request_id": rid}),
                     400, "invalid_name")
    for name in ("SANDBOXD_EXEC_PATH", "SANDBOXD_EXEC_ARGV_0", "sandboxd_x"):
        assert_error(api.post("/v1/sessions/%s/commands" % s["id"], {"argv": ["true"], "env": {name: "/bin/true"}}),
                     400, "reserved_env")
    err = B.error_of(B.manager, "Exec", "sasa{sv}", s["id"], ["true"], {"request_id": "sandboxd.purge"})
    assert err == B.ERROR + "InvalidName", err
    assert api.get("/v1/sessions/%s/commands" % s["id"]).json["commands"] == []


def test_api_tenant_local_is_refused():
    out = subprocess.run(["/usr/libexec/sandboxd", "--hash-key=local"], input="k" * 32 + "\n", text=True,
                         capture_output=True)
    assert out.returncode != 0 and "local" in out.stderr, out


# --------------------------------------------------------------------------
# purge

DEFEAT = ("mkdir -p a/b c d/e && echo x > a/b/f && echo y > c/g && echo z > d/e/h && ln -s /etc/passwd link && "
          "touch $HOME/h $TMPDIR/t && mkdir $HOME/locked && touch $HOME/locked/f && "
          "chmod 000 a $HOME/locked && chmod 500 c && chmod 100 d && chmod 000 d/e && echo planted")


def test_purge_is_not_defeated_by_what_a_command_leaves(api, scope, secnet):
    s = api.create_session(*scope)
    assert sh_in(api, s["id"], DEFEAT)["stdout"] == "planted\n"
    r = api.delete("/v1/sessions/%s?purge=true" % s["id"])
    assert r.status == 200 and r.json["state"] == "closed", r
    for root in (WORKSPACE_HOST_ROOT, "/var/lib/private/sandboxd/home", "/var/lib/private/sandboxd/tmp"):
        assert os.listdir(scope_dir(s, root)) == [], root
    # and /etc/passwd, which the link pointed to, is untouched
    assert os.path.exists("/etc/passwd")


def test_purge_that_fails_is_reported(api, scope, secnet):
    s = api.create_session(*scope)
    assert sh_in(api, s["id"], "mkdir keep && echo x > keep/f && echo ok")["stdout"] == "ok\n"
    host = scope_dir(s, WORKSPACE_HOST_ROOT)
    # what no command could make: a directory of root's, with a file in it
    os.chown(host + "/keep", 0, 0)
    r = api.delete("/v1/sessions/%s?purge=true" % s["id"])
    assert_error(r, 500, "purge_failed")
    assert "exit code" in r.json["error"]["message"], r
    assert os.path.exists(host + "/keep/f")
    # closed all the same, and a second ask says the same
    assert api.get("/v1/sessions/" + s["id"]).json["state"] == "closed"
    assert_error(api.delete("/v1/sessions/%s?purge=true" % s["id"]), 500, "purge_failed")


def test_purge_of_a_session_closed_without_it_is_refused(api, scope, secnet):
    s = api.create_session(*scope)
    assert sh_in(api, s["id"], "echo x > f && echo ok")["stdout"] == "ok\n"
    assert api.delete("/v1/sessions/" + s["id"]).status == 200
    assert_error(api.delete("/v1/sessions/%s?purge=true" % s["id"]), 409, "not_purged")
    assert os.listdir(scope_dir(s, WORKSPACE_HOST_ROOT)) == ["f"]
    err = B.error_of(B.call, "%s/session/%s" % (B.PATH, s["id"]), B.SESSION, "Close", "b", True)
    assert err == B.ERROR + "NotPurged", err


# --------------------------------------------------------------------------
# tenants

def test_tenants_have_scopes_of_their_own(api, tcp, tcp2, scope, secnet):
    user, ws = scope
    a = tcp.create_session(user, ws)
    b = tcp2.create_session(user, ws)
    local = api.create_session(user, ws)
    assert len({a["id"], b["id"], local["id"]}) == 3, (a, b, local)
    assert len({a["dynamic_user"], b["dynamic_user"], local["dynamic_user"]}) == 3
    assert local["workspace_path"] == "%s/%s/%s/%s" % (WORKSPACE_ROOT, LOCAL_TENANT, user, ws)
    assert sh_in(tcp, a["id"], "echo tenant1 secret > secret; echo ok")["stdout"] == "ok\n"
    # the other tenant and the local scope see nothing of it, and plant nothing in it
    for api_, s in ((tcp2, b), (api, local)):
        assert sh_in(api_, s["id"], "ls -A; echo planted > planted")["stdout"] == "", s
    assert sorted(os.listdir(scope_dir(a, WORKSPACE_HOST_ROOT))) == ["secret"]
    # and after tenant1 closes (no purge), tenant2 still gets its own
    assert tcp.delete("/v1/sessions/" + a["id"]).status == 200
    assert tcp2.delete("/v1/sessions/" + b["id"]).status == 200
    b2 = tcp2.create_session(user, ws)
    assert sh_in(tcp2, b2["id"], "ls -A")["stdout"] == "planted\n"
    a2 = tcp.create_session(user, ws)
    assert sh_in(tcp, a2["id"], "ls -A; cat secret")["stdout"] == "secret\ntenant1 secret\n"
