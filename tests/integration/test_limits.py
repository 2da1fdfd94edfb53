# SPDX-License-Identifier: LGPL-2.1-or-later
"""The session's limits hold: memory, tasks (a fork bomb), CPU."""

import re
import time

import pytest

from conftest import executor_tasks, is_active, memory_cgroup_v2, run, snapshot, systemctl_show, wait_command_ended, wait_for

# Allocates 512 MiB in 16 MiB steps, touching every page, and says how far it got.
ALLOC_512M = r"""
import time
chunks = []
for i in range(32):
    b = bytearray(16 << 20)
    for j in range(0, len(b), 4096):
        b[j] = 1
    chunks.append(b)
    print((i + 1) * 16, flush=True)
time.sleep(0.6)  # hold it: sandboxd samples usage every 200 ms
print("done", flush=True)
"""


@pytest.mark.time_limit(90)
def test_memory_max_kills_the_command(api, scope):
    user, ws = scope
    s = api.create_session(user, ws, limits={"memory_max": "64M"})
    assert s["limits"]["memory_max"] == 64 << 20
    res = run(api, s["id"], ["python3", "-c", ALLOC_512M])
    ex = res["exit"]
    assert ex["status"] == "signaled", ex
    assert ex["signal"] == "SIGKILL", ex
    assert ex["exit_code"] is None, ex
    # sandboxd(8): on cgroup v2 systemd reports Result=oom-kill itself. With
    # the memory controller on cgroup v1 (or hybrid, as on the machines these
    # tests run on) systemd sees only the SIGKILL (its journal says "Failed
    # with result 'signal'"), and sandboxd tells the OOM kill from the slice's
    # memory.failcnt rising while the command ran.
    assert ex["reason"] == "oom-kill", (ex, "cgroup v2" if memory_cgroup_v2() else "cgroup v1 memory")
    assert "done" not in res["stdout"]
    got = [int(l) for l in res["stdout"].split()]
    assert not got or got[-1] <= 64, "allocated %d MiB under a 64 MiB limit" % got[-1]

    # the session survives: its next command runs
    res = run(api, s["id"], ["echo", "still here"])
    assert res["exit"]["status"] == "succeeded", res["exit"]
    assert res["stdout"] == "still here\n"
    assert is_active("sandboxd-%s.slice" % s["id"]) == "active"


def test_sigkill_without_memory_pressure_is_not_oom(api, scope):
    # the other side: a SIGKILL in a memory-limited session that stayed far
    # below its limit is a plain signal
    s = api.create_session(scope[0], scope[1], limits={"memory_max": "64M"})
    res = run(api, s["id"], ["sh", "-c", "echo bye; kill -KILL $$"])
    ex = res["exit"]
    assert ex["status"] == "signaled", ex
    assert ex["signal"] == "SIGKILL", ex
    assert ex["reason"] == "signal", ex
    assert res["stdout"] == "bye\n"
    # and right after an OOM kill in the same session, too
    res = run(api, s["id"], ["python3", "-c", ALLOC_512M])
    assert res["exit"]["reason"] == "oom-kill", res["exit"]
    res = run(api, s["id"], ["sh", "-c", "kill -KILL $$"])
    assert (res["exit"]["status"], res["exit"]["reason"]) == ("signaled", "signal"), res["exit"]


@pytest.mark.time_limit(90)
def test_same_allocation_fits_under_a_larger_limit(api, scope):
    # the control for the test above: the limit, not the script, kills it
    s = api.create_session(scope[0], scope[1], limits={"memory_max": "1G"})
    res = run(api, s["id"], ["python3", "-c", ALLOC_512M])
    assert res["exit"]["status"] == "succeeded", (res["exit"], res["stderr"][-2000:])
    assert res["stdout"].endswith("512\ndone\n")
    # sandboxd(8): usage.memory_bytes is the highest memory use seen
    assert res["exit"]["usage"]["memory_bytes"] >= 512 << 20, res["exit"]
    assert res["exit"]["usage"]["memory_bytes"] < 1 << 30, res["exit"]


FORK_FAILURE = re.compile(r"Resource temporarily unavailable|Cannot fork")

# A fork bomb: every process forks on and on (parents and children alike), and
# says once that a fork failed. Only the timeout ends it.
FORK_BOMB = r"""
import os, sys, time
told = False
while True:
    try:
        if os.fork() == 0:
            told = False
    except OSError as e:
        if not told:
            print("fork: %s" % e.strerror, file=sys.stderr, flush=True)
            told = True
        time.sleep(0.01)
"""


@pytest.mark.time_limit(120)
def test_fork_bomb_is_held_by_tasks_max(api, scope):
    s = api.create_session(scope[0], scope[1], limits={"tasks_max": 32})
    sid = s["id"]
    slice_ = "sandboxd-%s.slice" % sid
    assert systemctl_show(slice_, "TasksMax")["TasksMax"] == "32"

    # 15 s: under TCG (the cgroup-v2 guest) with load beside it, python3 alone
    # may take seconds to start, and 5 s once ended the bomb before its first
    # refused fork
    body = {"argv": ["python3", "-c", FORK_BOMB], "timeout_ms": 15000}
    events, rid, seen_tasks = [], None, []
    t0 = time.monotonic()
    for ev in api.stream(sid, body):
        events.append(ev)
        if ev["type"] == "accepted":
            rid = ev["request_id"]
        elif ev["type"] == "stderr" and len(seen_tasks) < 5 and FORK_FAILURE.search(ev.get("data", "")):
            # while the bomb runs: systemd counts no more than the limit
            n = systemctl_show(slice_, "TasksCurrent")["TasksCurrent"]
            if n.isdigit():
                seen_tasks.append(int(n))
    elapsed = time.monotonic() - t0

    ex = events[-1]
    assert ex["type"] == "exit", events[-3:]
    assert ex["status"] == "timed_out", ex
    stderr = "".join(e.get("data", "") for e in events if e["type"] == "stderr")
    assert FORK_FAILURE.search(stderr), stderr[-2000:]
    assert ex["usage"]["tasks"] <= 32, ex
    assert seen_tasks and max(seen_tasks) <= 32, seen_tasks
    # ended by the timeout (and the stop that follows it), not left running
    assert elapsed < 45, elapsed

    # sandboxd still answers, nothing of the bomb is left, the session works
    r = api.get("/v1/health")
    assert r.status == 200 and r.json["status"] == "ok", r
    wait_command_ended(snapshot(api, sid, rid), timeout=15)
    # none but the executor's, in session mode
    idle = executor_tasks(sid)
    wait_for(lambda: systemctl_show(slice_, "TasksCurrent")["TasksCurrent"] in (str(idle), "[not set]"), timeout=15,
             what="no task left in %s but %d" % (slice_, idle))
    res = run(api, sid, ["echo", "after the bomb"])
    assert res["exit"]["status"] == "succeeded" and res["stdout"] == "after the bomb\n", res


# Spins for 2 s of wall time, then prints the CPU time it got.
SPIN_2S = r"""
import time
end = time.monotonic() + 2
while time.monotonic() < end:
    pass
print("%.3f" % time.process_time())
"""


# Spins until it has used 1 s of CPU time, then prints the CPU time it got.
SPIN_1S_CPU = r"""
import time
while time.process_time() < 1.0:
    pass
print("%.3f" % time.process_time())
"""


@pytest.mark.time_limit(60)
def test_usage_counts_cpu_time(api, session):
    res = run(api, session["id"], ["python3", "-c", SPIN_1S_CPU])
    assert res["exit"]["status"] == "succeeded", res
    own = float(res["stdout"])
    cpu = res["exit"]["usage"]["cpu_usec"] / 1e6
    # what the process measured itself, give or take sandboxd's 200 ms sampling
    assert own * 0.7 <= cpu <= own + 1.0, (own, cpu, res["exit"])


@pytest.mark.time_limit(60)
def test_cpu_quota_is_enforced(api, scope):
    s = api.create_session(scope[0], scope[1], limits={"cpu_quota": 20})
    res = run(api, s["id"], ["python3", "-c", SPIN_2S])
    assert res["exit"]["status"] == "succeeded", res
    cpu = float(res["stdout"])
    # 20% of one CPU for 2 s is 0.4 s; without the quota it would be ~2 s
    assert cpu < 1.0, "got %.3f s of CPU in 2 s at CPUQuota=20%%" % cpu
