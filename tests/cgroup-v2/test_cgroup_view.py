# SPDX-License-Identifier: LGPL-2.1-or-later
"""What a command sees of /sys/fs/cgroup on a unified hierarchy: its own session's
cgroups (its limits, its usage), nothing of another session's. (The hybrid layout
of the CI machines: tests/security/test_isolation.py.)"""

from conftest import run, start_command, wait_command_running


def test_own_session_only(api, scope):
    user, ws = scope
    a = api.create_session(user, ws)
    b = api.create_session(user + "b", ws + "-b", limits={"memory_max": 300 << 20})
    start_command(api, a["id"], {"argv": ["sleep", "60"], "request_id": "a", "timeout_ms": 60000})
    wait_command_running(api, a["id"], "a", timeout=30)
    # the slice's memory.max: the cgroup of the command's unit is in it, or in session mode
    # the command's own below the exec unit's
    res = run(api, b["id"], ["sh", "-c", "find /sys/fs/cgroup -name 'sandboxd-*'; cat /sys/fs/cgroup$(cut -d: -f3 "
                                         "/proc/self/cgroup | sed 's|\\(/sandboxd-[^/]*\\.slice\\)/.*|\\1|')/memory.max"])
    assert res["exit"]["status"] == "succeeded", res
    lines = res["stdout"].split()
    assert not [p for p in lines if a["id"] in p], lines
    assert [p for p in lines if p.endswith("/sandboxd-%s.slice" % b["id"])], lines
    assert lines[-1] == str(300 << 20), lines
    api.post("/v1/sessions/%s/commands/a/signal" % a["id"], {"signal": "SIGKILL"})
