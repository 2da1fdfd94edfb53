# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxctl over D-Bus alone: a user outside group sandboxd, who cannot open the HTTP
socket, but whom a polkit rule authorizes for its own sessions, uses every verb."""

import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import NEW_SESSION_ID_RE, UNIX_SOCKET, gauge, memory_cgroup_v2, restart_daemon, sh, wait_for

SANDBOXCTL = os.environ.get("SANDBOXD_TEST_SANDBOXCTL", "/usr/bin/sandboxctl")
RULES_DIR = "/etc/polkit-1/rules.d"


@pytest.fixture
def polkit_user():
    """A user in no group of sandboxd's, authorized by a rule of its own for its own
    sessions (as the shipped rule does for group sandboxd), with a home to copy from."""
    name = "sbxp" + secrets.token_hex(4)
    sh("useradd", "-M", "-N", "-s", "/usr/sbin/nologin", name)
    rules = os.path.join(RULES_DIR, "49-sandboxd-test-%s.rules" % name)
    os.makedirs(RULES_DIR, exist_ok=True)
    with open(rules, "w") as f:
        f.write('polkit.addRule(function(action, subject) {\n'
                '        if (action.id == "io.sandboxd.sandbox1.manage-sessions" &&\n'
                '            subject.user == "%s" && action.lookup("user") == subject.user)\n'
                '                return polkit.Result.YES;\n'
                '});\n' % name)
    home = tempfile.mkdtemp(prefix="sbxp-home-")
    sh("chown", name, home)
    try:
        yield name, home
    finally:
        os.unlink(rules)
        shutil.rmtree(home, ignore_errors=True)
        sh("userdel", name, check=False)


def as_user(user, home, *args, input=None, check=None, timeout=120):
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"}
    p = subprocess.run(["runuser", "-u", user, "--", "env", "-i"] + ["%s=%s" % kv for kv in env.items()] +
                       list(args), capture_output=True, input=input, cwd=home, timeout=timeout)
    if check is not None:
        assert p.returncode == check, "%s exited %d, not %d\nstdout: %r\nstderr: %r" % (
            " ".join(args), p.returncode, check, p.stdout[-2000:], p.stderr[-2000:])
    return p


def test_every_verb_over_dbus_without_the_socket(api, polkit_user):
    user, home = polkit_user

    def ctl(*args, **kw):
        return as_user(user, home, SANDBOXCTL, *args, **kw)

    # the user really cannot reach the HTTP socket
    p = as_user(user, home, "python3", "-c",
                "import socket; socket.socket(socket.AF_UNIX).connect(%r)" % UNIX_SOCKET)
    assert p.returncode != 0 and b"PermissionError" in p.stderr, p
    p = ctl("--transport=http", "health")
    assert p.returncode != 0, p

    # polkit reads new rules on its own, a moment later
    wait_for(lambda: ctl("create", user, "ws").returncode == 0, timeout=30, what="polkit to load the rule")
    sid = ctl("create", user, "ws", check=0).stdout.decode().strip()
    assert NEW_SESSION_ID_RE.fullmatch(sid), sid
    try:
        assert sid in ctl("ls", check=0).stdout.decode()
        shown = json.loads(ctl("show", "--json", sid, check=0).stdout)["session"]
        assert shown["id"] == sid and shown["user"] == user and shown["state"] == "active", shown

        # exec: plain, with stdin, as events
        p = ctl("exec", "--request-id=plain", sid, "sh", "-c", "echo out; echo err >&2; exit 3", check=3)
        assert p.stdout == b"out\n" and p.stderr == b"err\n", p
        assert ctl("exec", "-i", sid, "tr", "a-z", "A-Z", input=b"hello\n", check=0).stdout == b"HELLO\n"
        events = [json.loads(l) for l in ctl("exec", "--json", "--request-id=ev", sid, "sh", "-c",
                                               "echo one; exit 4", check=4).stdout.splitlines()]
        assert events[0]["type"] == "accepted" and events[0]["request_id"] == "ev", events
        assert {"type": "stdout", "data": "one\n"}.items() <= events[1].items(), events
        assert events[-1]["type"] == "exit" and events[-1]["exit_code"] == 4, events

        # the snapshot and the list of commands, with kept output
        res = json.loads(ctl("show", "--json", sid, "ev", check=0).stdout)
        res = res.get("command", res)
        assert res["exit_code"] == 4 and res["stdout"] == "one\n", res
        listed = ctl("show", sid, check=0).stdout.decode()
        assert "plain" in listed and "ev" in listed, listed

        # attach: replay from the start, and from an offset
        p = ctl("attach", sid, "ev", check=4)
        assert p.stdout == b"one\n", p
        skip = len(json.dumps(events[0], separators=(",", ":"))) + 1
        rest = [json.loads(l) for l in ctl("attach", "--json", "--offset=%d" % skip, sid, "ev",
                                            check=4).stdout.splitlines()]
        assert rest[0]["type"] == "stdout" and rest[-1]["type"] == "exit", rest

        # signal a running command, started by another sandboxctl of the same user
        runner = subprocess.Popen(["runuser", "-u", user, "--", SANDBOXCTL, "exec", "--request-id=sleeper", sid,
                                   "sleep", "60"], cwd=home, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            wait_for(lambda: b"running" in ctl("show", sid, "sleeper").stdout, timeout=30,
                     what="the command to run")
            ctl("signal", sid, "sleeper", "KILL", check=0)
            assert runner.wait(timeout=30) == 128 + 9
        finally:
            runner.kill()
            runner.wait()

        # freeze and thaw
        p = ctl("freeze", sid)
        if memory_cgroup_v2():
            assert p.returncode == 0, p
            ctl("thaw", sid, check=0)
        else:
            assert p.returncode == 1 and b"cgroup v2" in p.stderr, p

        # cp both ways, with directories (stat, list, mkdir, upload, download)
        src = os.path.join(home, "src")
        as_user(user, home, "mkdir", "-p", src + "/sub", check=0)
        as_user(user, home, "sh", "-c", "printf 'hello\\n' > src/a.txt; head -c 100000 /dev/urandom > src/sub/b.bin",
                check=0)
        ctl("cp", "-r", src, sid + ":dir/", check=0)
        p = ctl("exec", sid, "sh", "-c", "cat dir/src/a.txt; wc -c < dir/src/sub/b.bin", check=0)
        assert p.stdout == b"hello\n100000\n", p
        ctl("cp", "-r", sid + ":dir/src", os.path.join(home, "back"), check=0)
        assert open(os.path.join(home, "back/a.txt"), "rb").read() == b"hello\n"
        assert open(os.path.join(home, "back/sub/b.bin"), "rb").read() == open(src + "/sub/b.bin", "rb").read()
        assert ctl("cp", sid + ":dir/src/a.txt", "-", check=0).stdout == b"hello\n"
        p = ctl("cp", sid + ":nothing-here", os.path.join(home, "x"))
        assert p.returncode == 1 and b"nothing-here" in p.stderr, p

        # health for anyone; drain is for administrators, and says so
        h = json.loads(ctl("health", "--json", check=0).stdout)
        assert h["status"] == "ok" and h["version"] and "pool" in h, h
        http = api.get("/v1/health").json
        assert set(h) == set(http) and set(h["pool"]) == set(http["pool"]), (h, http)
        p = ctl("drain", "--status")
        assert p.returncode == 1 and b"Only root and members of AdminGroup=" in p.stderr, p
        p = ctl("drain")
        assert p.returncode == 1 and b"Only root and members of AdminGroup=" in p.stderr, p
        assert api.get("/v1/drain").json["draining"] is False

        # one tool of the MCP server over D-Bus: a file written and read back
        reqs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                            "clientInfo": {"name": "test", "version": "0"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "sandbox_write_file",
                            "arguments": {"session_id": sid, "path": "mcp/note.txt", "content": "via mcp\n",
                                          "make_parents": True}}},
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                 "params": {"name": "sandbox_read_file", "arguments": {"session_id": sid, "path": "mcp/note.txt"}}}]
        # one call at a time: the read must come after the write (calls run at once otherwise)
        p = ctl("mcp", "--jobs=1", input="".join(json.dumps(r) + "\n" for r in reqs).encode(), check=0)
        answers = {a["id"]: a for a in map(json.loads, p.stdout.splitlines()) if "id" in a}
        assert answers[2]["result"]["isError"] is False, answers[2]
        read = answers[3]["result"]
        assert read["isError"] is False and read["structuredContent"]["data"]["content"] == "via mcp\n", read
    finally:
        ctl("rm", sid, check=0)
    assert api.get("/v1/sessions/" + sid).json["state"] == "closed"

    # run: a session of its own scope made for the command, and closed after it with --rm
    p = ctl("run", "--workspace=once", "--rm", "--", "sh", "-c", "echo ran > f; cat f; exit 5", check=5)
    assert p.stdout == b"ran\n", p
    once = [s for s in api.get("/v1/sessions?user=" + user).json["sessions"] if s["workspace"] == "once"]
    assert once and all(s["state"] in ("closing", "closed") for s in once), once

    # rm --purge: the workspace is emptied as the session closes
    sid = ctl("create", user, "purged", check=0).stdout.decode().strip()
    ctl("exec", sid, "sh", "-c", "echo keep > kept.txt", check=0)
    ctl("rm", "--purge", sid, check=0)
    assert api.get("/v1/sessions/" + sid).json["state"] == "closed"
    sid = ctl("create", user, "purged", check=0).stdout.decode().strip()
    try:
        p = ctl("exec", sid, "ls", "-A", check=0)
        assert b"kept.txt" not in p.stdout, p
    finally:
        ctl("rm", sid, check=0)


@pytest.mark.restarts_daemon
def test_stop_while_polkit_is_asked(api, polkit_user):
    """A D-Bus call whose question to polkit is still unanswered when sandboxd stops (polkitd
    is paused) is answered Stopping at once, not left to the caller's timeout; the metrics
    count it while it waits."""
    user, home = polkit_user
    wait_for(lambda: as_user(user, home, SANDBOXCTL, "create", user, "ws").returncode == 0, timeout=30,
             what="polkit to load the rule")
    polkitd = int(subprocess.run(["pidof", "-s", "polkitd"], capture_output=True, text=True, check=True).stdout)
    os.kill(polkitd, signal.SIGSTOP)
    try:
        call = subprocess.Popen(["runuser", "-u", user, "--", "busctl", "call", "--timeout=60", "io.sandboxd.sandbox1",
                                 "/io/sandboxd/sandbox1", "io.sandboxd.sandbox1.Manager", "CreateSession", "ssa{sv}",
                                 user, "held", "0"], cwd=home, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: gauge(api, 'sandboxd_dbus_calls_waiting{on="polkit"}') == 1, timeout=30,
                     what="the call to wait for polkit")
            t0 = time.monotonic()
            restart_daemon()
            out, err = call.communicate(timeout=30)
            assert call.returncode != 0 and "sandboxd is stopping" in err, (out, err)
            assert time.monotonic() - t0 < 25  # not the caller's timeout
        finally:
            call.kill()
            call.wait()
    finally:
        os.kill(polkitd, signal.SIGCONT)
    assert gauge(api, 'sandboxd_dbus_calls_waiting{on="polkit"}') == 0
