# SPDX-License-Identifier: LGPL-2.1-or-later
"""Escape cases of exec mode "session": the executor runs with its commands' uid, so a
command can attack it: kill it, ptrace or read it, dial its socket and speak for it, flood
that socket, or move itself between the cgroups of the delegated subtree. Each attack may
only hurt the attacker's own session."""

import re
import time

import pytest

from conftest import (exec_result, exec_session, exec_unit, snapshot, start_command, systemctl_show, unique_user,
                      wait_for, wait_terminal)

pytestmark = pytest.mark.session_mode_only

CGROUP_RE = re.compile(r"c(\d+)-[0-9a-f]{16}")


@pytest.fixture
def scope2():
    return unique_user(), "other"


def wait_stdout(api, sid, rid, text, timeout=20):
    wait_for(lambda: text in (snapshot(api, sid, rid)["stdout"] or ""), timeout=timeout,
             what="%r in the output of %s" % (text, rid))


def test_executor_is_not_dumpable(api, scope):
    """A command cannot read the executor's memory, fds or environment, nor ptrace it."""
    s = exec_session(api, scope)
    script = ("for f in environ mem fd/0; do if cat /proc/$PPID/$f >/dev/null 2>&1; then echo $f readable; "
              "else echo $f denied; fi; done; "
              "python3 -c 'import ctypes,os; l=ctypes.CDLL(None,use_errno=True); "
              "r=l.ptrace(16, os.getppid(), 0, 0); print(\"ptrace\", r, ctypes.get_errno())'")
    res = exec_result(api, s["id"], {"argv": ["sh", "-c", script]})
    assert res["status"] == "succeeded", res
    out = res["stdout"]
    assert "environ denied" in out and "mem denied" in out and "fd/0 denied" in out, out
    assert re.search(r"^ptrace -1 1$", out, re.M), out  # EPERM

@pytest.mark.time_limit(90)
def test_killed_executor_loses_only_its_session(api, scope, scope2):
    s = exec_session(api, scope)
    other = exec_session(api, scope2)
    start_command(api, s["id"], {"argv": ["sh", "-c", "echo up; exec sleep 300"], "request_id": "victim"})
    start_command(api, other["id"], {"argv": ["sh", "-c", "echo up; sleep 3; echo done"], "request_id": "bystander"})
    wait_stdout(api, s["id"], "victim", "up\n")
    pid = systemctl_show(exec_unit(s["id"]), "MainPID")["MainPID"]
    # the command kills its parent: it can, it is the same uid
    res = exec_result(api, s["id"], {"argv": ["sh", "-c", "kill -KILL $PPID; sleep 5"]})
    assert res["status"] == "lost" and res["reason"] == "executor-died", res
    victim = wait_terminal(api, s["id"], "victim", timeout=20)
    assert victim["status"] == "lost" and victim["reason"] == "executor-died", victim
    # a new executor: the next command runs
    t0 = time.monotonic()
    res = exec_result(api, s["id"], {"argv": ["echo", "again"]})
    assert res["status"] == "succeeded" and res["stdout"] == "again\n", res
    assert time.monotonic() - t0 < 10
    assert systemctl_show(exec_unit(s["id"]), "MainPID")["MainPID"] != pid
    # the other session never noticed
    b = wait_terminal(api, other["id"], "bystander", timeout=20)
    assert b["status"] == "succeeded" and b["stdout"] == "up\ndone\n", b

FORGE = r"""
import os, socket, struct, sys, time
MAGIC = 0x45584253
def msg(t, n, body=b""):
    return struct.pack("=IHHII", MAGIC, 1, t, n, 16 + len(body)) + body
hello = msg(1, 0, struct.pack("=II", 1, 0))
exited = msg(3, int(sys.argv[1]), struct.pack("=iiQQQQ", 1, 0, 0, 0, 0, 0))
results = {}
for i in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(5)
    try:
        s.connect("/run/sandboxd-executor/sock")
        s.send(hello); s.send(exited)
        r = s.recv(256)
        results["eof" if r == b"" else "data"] = results.get("eof" if r == b"" else "data", 0) + 1
    except OSError as e:
        results[e.__class__.__name__] = results.get(e.__class__.__name__, 0) + 1
    finally:
        s.close()
print(sorted(results.items()))
"""

@pytest.mark.time_limit(120)
def test_forged_executor_messages_are_refused(api, scope, scope2):
    """A command dials the executor's socket (it is in its namespace) and says what the
    executor would: that its sibling exited. sandboxd hangs up on it; the sibling's result is
    its own; another session's commands keep their pace."""
    s = exec_session(api, scope)
    other = exec_session(api, scope2)
    sib = start_command(api, s["id"], {"argv": ["sh", "-c", "echo up; exec sleep 300"], "request_id": "sibling"})
    wait_stdout(api, s["id"], "sibling", "up\n")
    n = int(CGROUP_RE.fullmatch(snapshot(api, s["id"], "sibling")["cgroup"]).group(1))
    assert sib["request_id"] == "sibling"
    res = exec_result(api, s["id"], {"argv": ["python3", "-c", FORGE, str(n), "300"]}, timeout=90)
    assert res["status"] == "succeeded", res
    assert "data" not in res["stdout"], res  # nothing ever answered a forger
    assert snapshot(api, s["id"], "sibling")["status"] == "running"
    # meanwhile, and after: another session's commands are as fast as ever
    t0 = time.monotonic()
    for _ in range(5):
        assert exec_result(api, other["id"], {"argv": ["true"]})["status"] == "succeeded"
    assert time.monotonic() - t0 < 10
    r = api.post("/v1/sessions/%s/commands/sibling/signal" % s["id"], {"signal": "SIGTERM"})
    assert r.status == 200, r
    snap = wait_terminal(api, s["id"], "sibling", timeout=20)
    assert snap["status"] == "signaled" and snap["signal"] == "SIGTERM" and snap["reason"] == "signal", snap

# In a command: the unified hierarchy's mount, its own cgroup there, and the exec unit's
CGROUP_SH = ("m=/sys/fs/cgroup; [ -e $m/unified/cgroup.procs ] && m=$m/unified; "
             "own=$m$(sed -n 's/^0:://p' /proc/self/cgroup); unit=${own%/*}; slice=${unit%/*}; parent=${slice%/*}; ")

def test_commands_cannot_leave_the_executor_unit(api, scope):
    """The delegated subtree is the session's own: a command can move within it, but not out
    of the exec unit's cgroup (into the slice, sandboxd.slice or the root), nor see other
    sessions'."""
    s = exec_session(api, scope)
    script = CGROUP_SH + ("for d in $slice $parent $m; do if echo $$ > $d/cgroup.procs 2>/dev/null; "
                          "then echo moved $d; else echo refused $d; fi; done; "
                          "mkdir $unit/c999-0000000000000000 && echo $$ > $unit/c999-0000000000000000/cgroup.procs "
                          "&& echo moved within; ls $parent")
    res = exec_result(api, s["id"], {"argv": ["sh", "-c", script]})
    assert res["status"] == "succeeded", res
    out = res["stdout"]
    assert out.count("refused ") == 3 and "moved /" not in out, out
    assert "moved within" in out, out
    listed = [l for l in out.splitlines() if l.startswith("sandboxd-") and l.endswith(".slice")]
    assert listed == ["sandboxd-%s.slice" % s["id"]], out

@pytest.mark.time_limit(60)
def test_timeout_reaches_a_command_that_moved_its_cgroup(api, scope):
    """A command that leaves its own cgroup (for the executor's) is still timed out: sandboxd
    signals its process too, not only its cgroup."""
    s = exec_session(api, scope)
    script = CGROUP_SH + "echo $$ > $unit/supervisor/cgroup.procs && echo moved; exec sleep 60"
    res = exec_result(api, s["id"], {"argv": ["sh", "-c", script], "timeout_ms": 1000}, timeout=30)
    assert res["stdout"] == "moved\n", res
    assert res["status"] == "timed_out" and res["reason"] == "timeout", res


@pytest.mark.time_limit(90)
def test_stopped_executor_is_replaced(api, scope):
    """A command stops its executor (SIGSTOP) and ends: the executor cannot report it, sandboxd
    sees the end through the command's pidfd, gives up on the executor after its deadline
    and runs the next command with a new one."""
    s = exec_session(api, scope)
    pid = systemctl_show(exec_unit(s["id"]), "MainPID")["MainPID"]
    res = exec_result(api, s["id"], {"argv": ["sh", "-c", "kill -STOP $PPID; exit 3"]}, timeout=60)
    assert res["status"] == "lost" and res["reason"] == "executor-failed", res
    res = exec_result(api, s["id"], {"argv": ["echo", "again"]}, timeout=60)
    assert res["status"] == "succeeded" and res["stdout"] == "again\n", res
    assert systemctl_show(exec_unit(s["id"]), "MainPID")["MainPID"] != pid
