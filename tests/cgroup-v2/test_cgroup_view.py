# SPDX-License-Identifier: LGPL-2.1-or-later
"""What a command sees of /sys/fs/cgroup on a unified hierarchy: its own session's
cgroups (its limits, its usage), nothing of another session's. (The hybrid layout
of the CI machines: tests/security/test_isolation.py.)"""

from conftest import run, start_command, wait_for, systemctl_show


def test_own_session_only(api, scope):
    user, ws = scope
    a = api.create_session(user, ws)
    b = api.create_session(user + "b", ws + "-b", limits={"memory_max": 300 << 20})
    start_command(api, a["id"], {"argv": ["sleep", "60"], "request_id": "a", "timeout_ms": 60000})
    wait_for(lambda: systemctl_show("sandboxd-%s-1.service" % a["id"], "ActiveState")["ActiveState"] == "active",
             timeout=30, what="A's command")
    res = run(api, b["id"], ["sh", "-c", "find /sys/fs/cgroup -name 'sandboxd-*'; "
                                         "cat /sys/fs/cgroup$(dirname $(cut -d: -f3 /proc/self/cgroup))/memory.max"])
    assert res["exit"]["status"] == "succeeded", res
    lines = res["stdout"].split()
    assert not [p for p in lines if a["id"] in p], lines
    assert [p for p in lines if p.endswith("/sandboxd-%s.slice" % b["id"])], lines
    assert lines[-1] == str(300 << 20), lines
    api.post("/v1/sessions/%s/commands/a/signal" % a["id"], {"signal": "SIGKILL"})
