# SPDX-License-Identifier: LGPL-2.1-or-later
"""Commands belong to PID 1: they go on when sandboxd crashes, restarts or stops, and
their results (and, unless sandboxd was stopped, all their output) are still there
when it is back. Streams can be re-attached where they broke off."""

import os
import signal
import threading

import pytest

from conftest import (EXEC_MODE, WORKSPACE_HOST_ROOT, assert_well_formed, command_running, commands_path, daemon_pid,
                      open_events, replay, scope_dir, sh, snapshot, start_command, stream_output, systemctl_show,
                      wait_command_running, wait_daemon_running, wait_for, wait_terminal)

pytestmark = pytest.mark.restarts_daemon

N = 20
LINES = 60  # one every 0.2 s: about 12 s, long enough to outlast the kill on a loaded machine
READERS = (0, 7, 19)  # commands with a client attached when sandboxd goes away


def script(k):
    return ('for i in $(seq 1 %d); do echo "c%d line $i"; sleep 0.2; done; '
            'echo "c%d done"; echo "c%d err" >&2; exit %d' % (LINES, k, k, k, k))


def expected_stdout(k):
    return "".join("c%d line %d\n" % (k, i) for i in range(1, LINES + 1)) + "c%d done\n" % k


def start_all(api, sid):
    for k in range(N):
        acc = start_command(api, sid, {"argv": ["sh", "-c", script(k)], "request_id": "r%d" % k})
        assert acc["status"] == "running", acc
    listed = api.get(commands_path(sid)).json["commands"]
    running = [c["request_id"] for c in listed if not c["terminal"]]
    assert len(running) == N, "not all %d commands still running before the restart: %r" % (N, listed)


class Reader(threading.Thread):
    """A client following a command's events until the connection breaks or the end."""

    def __init__(self, api, sid, rid):
        super().__init__(daemon=True)
        self.stream = open_events(api, sid, rid, 0, timeout=30)
        self.error = None

    def run(self):
        try:
            self.stream.read_all()
        except Exception as e:  # noqa: BLE001 - a broken connection is expected here
            self.error = e
        finally:
            self.stream.close()


def attach_readers(api, sid):
    readers = {k: Reader(api, sid, "r%d" % k) for k in READERS}
    for r in readers.values():
        r.start()
    # let them catch up with the first lines: a command's first line comes once PID 1 has
    # started its unit, and on a loaded machine PID 1 takes seconds for the last of 20
    wait_for(lambda: all(len(r.stream.events) >= 2 for r in readers.values()), timeout=20,
             what="the readers to get output")
    return readers


def check_reattach(api, sid, readers):
    """Each broken stream, re-attached at the offset it got to, continues without gap or
    duplicate."""
    for k, r in readers.items():
        r.join(15)
        assert not r.is_alive(), "reader of r%d still reading after sandboxd went away" % k
        st = r.stream
        assert "exit" not in [e["type"] for e in st.events], (
            "r%d's stream reached its end before sandboxd went away: the test is too slow" % k)
        events, tail = replay(api, sid, "r%d" % k, st.offset)
        _, full = replay(api, sid, "r%d" % k, 0)
        assert st.kept_raw + tail == full, "r%d: re-attached at %d, the parts do not make up the log" % (k, st.offset)


def check_all(api, sid, lost_output_allowed=False):
    for k in range(N):
        rid = "r%d" % k
        snap = wait_terminal(api, sid, rid, timeout=30)
        if k == 0:
            assert snap["status"] == "succeeded" and snap["exit_code"] == 0, snap
        else:
            assert snap["status"] == "failed" and snap["exit_code"] == k and snap["reason"] == "exit-code", snap
        assert snap["stdout"] == expected_stdout(k), "%s: output lost or mangled:\n%r" % (rid, snap["stdout"])
        assert snap["stderr"] == "c%d err\n" % k, snap["stderr"]
        assert snap["duration_ms"] >= LINES * 200 - 100, snap

        events, raw = replay(api, sid, rid, 0)
        assert_well_formed(events, "events of %s" % rid)
        types = [e["type"] for e in events]
        assert "notice" not in types, "%s: %r" % (rid, [e for e in events if e["type"] == "notice"])
        assert stream_output(events).decode() == expected_stdout(k), rid
        ex = events[-1]
        assert (ex["status"], ex["exit_code"]) == (snap["status"], snap["exit_code"]), (ex, snap)
        assert len(raw) == snap["events_bytes"], rid


@pytest.mark.kills_daemon(1)
@pytest.mark.time_limit(90)
def test_sigkill_of_the_daemon_loses_nothing(api, session):
    sid = session["id"]
    start_all(api, sid)
    readers = attach_readers(api, sid)

    old = daemon_pid()
    assert old > 0
    os.kill(old, signal.SIGKILL)  # kill -9 $(systemctl show -p MainPID --value sandboxd)
    # Restart=on-failure brings it back (no request is made until it runs)
    new = wait_daemon_running(not_pid=old, timeout=20)
    assert new != old

    check_reattach(api, sid, readers)
    check_all(api, sid)
    assert api.get_session(sid)["state"] == "active"


@pytest.mark.time_limit(90)
def test_restart_of_the_daemon_loses_nothing(api, session):
    sid = session["id"]
    start_all(api, sid)
    readers = attach_readers(api, sid)

    old = daemon_pid()
    sh("systemctl", "reset-failed", "sandboxd.service", check=False)  # not the start rate limit
    sh("systemctl", "restart", "sandboxd.service")
    new = wait_daemon_running(not_pid=old, timeout=20)
    assert new != old

    check_reattach(api, sid, readers)
    check_all(api, sid)
    assert api.get_session(sid)["state"] == "active"


@pytest.mark.time_limit(60)
def test_command_ending_while_the_daemon_is_stopped(api, session):
    sid = session["id"]
    # Each command waits for a file the test creates in the workspace, not for a time:
    # under load a "sleep 1" once ended before sandboxd had stopped.
    ws = scope_dir(session, WORKSPACE_HOST_ROOT)
    def until(name):
        return "while [ ! -e %s ]; do sleep 0.05; done" % name

    # ends while sandboxd is stopped (writing on the way)
    a = start_command(api, sid, {"argv": ["sh", "-c", "echo before; %s; echo during; exit 7" % until("go-a")],
                                 "request_id": "ends-while-down"})
    # still runs when sandboxd is back, and ends later
    b = start_command(api, sid, {"argv": ["sh", "-c", "echo before; %s; exit 9" % until("go-b")],
                                 "request_id": "ends-after"})
    wait_for(lambda: snapshot(api, sid, "ends-while-down")["stdout"] == "before\n"
             and snapshot(api, sid, "ends-after")["stdout"] == "before\n", timeout=10,
             what="the first output")
    a = wait_command_running(api, sid, "ends-while-down")
    b = wait_command_running(api, sid, "ends-after")

    sh("systemctl", "stop", "sandboxd.service")
    assert daemon_pid() == 0
    # the first ends while sandboxd is away, the second still runs
    open(os.path.join(ws, "go-a"), "w").close()
    wait_for(lambda: not command_running(a), timeout=10, what="%s to end" % a["request_id"])
    assert command_running(b)
    if EXEC_MODE == "unit":
        # PID 1 keeps its result (RemainAfterExit=yes); in session mode the executor does
        st = systemctl_show(a["unit"], "ActiveState", "ExecMainStatus")
        assert st["ExecMainStatus"] == "7", st
    sh("systemctl", "start", "sandboxd.service")
    wait_daemon_running(timeout=20)
    assert snapshot(api, sid, "ends-after")["status"] == "running"
    open(os.path.join(ws, "go-b"), "w").close()

    for rid, code in (("ends-while-down", 7), ("ends-after", 9)):
        snap = wait_terminal(api, sid, rid, timeout=20)
        assert snap["status"] == "failed" and snap["exit_code"] == code and snap["reason"] == "exit-code", snap
        assert snap["stdout"].startswith("before\n"), snap["stdout"]
        events, _ = replay(api, sid, rid, 0)
        assert_well_formed(events, "events of %s" % rid)
        types = [e["type"] for e in events]
        assert types.count("notice") == 1, "%s: no notice that output was lost: %r" % (rid, types)
        notice = events[types.index("notice")]
        assert "lost" in notice.get("message", ""), notice
        assert types.index("notice") < types.index("exit")
        assert events[-1]["exit_code"] == code, events[-1]
    assert api.get_session(sid)["state"] == "active"
