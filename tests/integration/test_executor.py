# SPDX-License-Identifier: LGPL-2.1-or-later
"""Exec mode "session": one executor unit per session runs every command of the session as its
child, in a cgroup of its own, with the results unit mode gives. (Attacks on the executor:
tests/security/test_executor_escape.py.)"""

import re

import pytest

from conftest import exec_result, exec_session, exec_unit, sh, systemctl_show, wait_for

pytestmark = pytest.mark.session_mode_only

CGROUP_RE = re.compile(r"c(\d+)-[0-9a-f]{16}")


def test_commands_are_children_of_the_executor(api, scope):
    s = exec_session(api, scope)
    sid = s["id"]
    res = exec_result(api, sid, {"argv": ["sh", "-c", "cat /proc/self/cgroup; echo ppid=$PPID; id -u"]})
    assert res["status"] == "succeeded", res
    assert res["unit"] == exec_unit(sid), res
    props = systemctl_show(exec_unit(sid), "ActiveState", "Delegate", "MainPID", "ControlGroup", "KillMode",
                           "OOMPolicy", "User", "DynamicUser")
    assert props["ActiveState"] == "active" and props["Delegate"] == "yes", props
    assert props["KillMode"] == "control-group" and props["OOMPolicy"] == "continue", props
    assert props["DynamicUser"] == "yes", props
    out = res["stdout"]
    # its own cgroup below the exec unit's, and the executor (the unit's main process) its parent
    m = re.search(r"^0::(\S+)$", out, re.M)
    assert m and m.group(1).startswith(props["ControlGroup"] + "/"), (out, props)
    name = m.group(1).rsplit("/", 1)[1]
    assert CGROUP_RE.fullmatch(name), name
    assert res.get("cgroup") == name, res
    assert "ppid=%s\n" % props["MainPID"] in out, (out, props)
    # the session's dynamic uid, as a command unit of the session would have
    uid = int(out.strip().splitlines()[-1])
    assert uid == int(sh("stat", "-c", "%u", "/proc/%s" % props["MainPID"]).stdout), out
    # every command in a cgroup of its own, the later ones too (the executor's seccomp refuses
    # clone3: each child moves itself)
    for n in (2, 3):
        res = exec_result(api, sid, {"argv": ["sed", "-n", "s/^0:://p", "/proc/self/cgroup"]})
        assert res["status"] == "succeeded" and res["cgroup"].startswith("c%d-" % n), res
        assert res["stdout"] == "%s/%s\n" % (props["ControlGroup"], res["cgroup"]), res


def test_results_are_the_same_as_in_unit_mode(api, scope):
    """The same commands, one session of each mode in turn for one scope: the same statuses,
    reasons, exit codes, output and environment (but the per-unit variables)."""
    cases = [
        {"argv": ["true"]},
        {"argv": ["sh", "-c", "echo out; echo err >&2; exit 3"]},
        {"argv": ["sh", "-c", "kill -TERM $$"]},
        {"argv": ["sh", "-c", "cd /nonexistent-dir-xyz"]},
        {"argv": ["sh", "-c", "env | grep -v -e ^INVOCATION_ID= -e ^SYSTEMD_EXEC_PID= -e ^_= | sort; id -un; pwd; "
                  "ls -d /.tools /run/userdb; umask"]},
        {"argv": ["cat"], "stdin": {"text": "piped in"}},
        # the signal dispositions PID 1 gives a unit's process (SIGPIPE ignored) and no mask
        {"argv": ["grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"]},
        {"argv": ["sh", "-c", "sleep 5"], "timeout_ms": 500},
    ]
    results = {}
    user, ws = scope
    for mode in ("unit", "session"):
        s = api.create_session(user, ws, exec_mode=mode)
        assert s["exec_mode"] == mode, s
        results[mode] = [exec_result(api, s["id"], dict(c)) for c in cases]
        r = api.delete("/v1/sessions/" + s["id"])
        assert r.status == 200, r
        wait_for(lambda: api.get_session(s["id"])["state"] == "closed", what="the close")
    for u, e, case in zip(results["unit"], results["session"], cases):
        for k in ("status", "reason", "exit_code", "signal", "stdout", "stderr"):
            assert u[k] == e[k], (case, k, u, e)
