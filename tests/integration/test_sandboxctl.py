# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxctl against the running sandboxd, as an operator or a script uses it."""

import json
import os
import select
import signal
import subprocess
import time

import pytest

from conftest import NEW_SESSION_ID_RE, TCP_HOST, TCP_PORT, UNIX_SOCKET, memory_cgroup_v2, run, sh, unique_user, units, wait_for

SANDBOXCTL = os.environ.get("SANDBOXD_TEST_SANDBOXCTL", "/usr/bin/sandboxctl")

# The local transport the tests of both run with (see the transport fixture); None: the
# default, D-Bus.
TRANSPORT = None
both_transports = pytest.mark.parametrize("transport", ["dbus", "http"], indirect=True)


@pytest.fixture
def transport(request):
    global TRANSPORT
    TRANSPORT = getattr(request, "param", None)
    yield TRANSPORT
    TRANSPORT = None


def ctl_env(env=None):
    e = dict(os.environ)
    e.pop("SANDBOXD_URL", None)
    e.pop("SANDBOXD_KEY", None)
    e.pop("SANDBOXD_TRANSPORT", None)
    if TRANSPORT:
        e["SANDBOXD_TRANSPORT"] = TRANSPORT
    e.update(env or {})
    return e


def ctl(*args, input=None, env=None, timeout=60, check=None):
    """Runs sandboxctl; check=N asserts the exit status."""
    e = ctl_env(env)
    p = subprocess.run([SANDBOXCTL] + list(args), capture_output=True, input=input, env=e, timeout=timeout)
    if check is not None:
        assert p.returncode == check, "sandboxctl %s exited %d, not %d\nstdout: %r\nstderr: %r" % (
            " ".join(args), p.returncode, check, p.stdout[-2000:], p.stderr[-2000:])
    return p


@pytest.fixture
def sid(transport, scope):
    user, ws = scope
    p = ctl("create", user, ws, check=0)
    sid = p.stdout.decode().strip()
    assert NEW_SESSION_ID_RE.fullmatch(sid), p
    yield sid
    ctl("rm", sid)


# --------------------------------------------------------------------------- sessions

@both_transports
def test_create_show_ls_rm(transport, api, scope):
    user, ws = scope
    p = ctl("create", "--memory-max=256M", "--tasks-max=50", "--ttl=10min", user, ws, check=0)
    sid = p.stdout.decode().strip()
    s = api.get_session(sid)
    assert (s["user"], s["workspace"], s["state"]) == (user, ws, "active")
    assert s["limits"]["memory_max"] == 256 << 20 and s["limits"]["tasks_max"] == 50 and s["ttl_s"] == 600, s

    # the same scope again: the same session
    assert ctl("create", user, ws, check=0).stdout.decode().strip() == sid

    js = json.loads(ctl("create", "--json", user, ws, check=0).stdout)
    assert js["id"] == sid and js["state"] == "active"

    out = ctl("ls", check=0).stdout.decode()
    assert sid in out and user in out
    listed = json.loads(ctl("ls", "--json", "--user=" + user, check=0).stdout)
    assert [x["id"] for x in listed["sessions"]] == [sid]

    shown = ctl("show", sid, check=0).stdout.decode()
    assert sid in shown and "%s/%s" % (user, ws) in shown and "active" in shown
    assert json.loads(ctl("show", "--json", sid, check=0).stdout)["session"]["id"] == sid

    ctl("rm", sid, check=0)
    assert api.get_session(sid)["state"] == "closed"
    # the slice's stop is under way (in exec mode session it stops the executor first)
    wait_for(lambda: "sandboxd-%s.slice" % sid not in units(), timeout=10, what="the slice to go")


@both_transports
def test_show_and_ls_say_what_http_says(transport, api, scope):
    """show and ls over D-Bus (the default) counted no command and said no network for a
    session in mode proxy: the session object is the HTTP API's, over either transport."""
    user, ws = scope
    s = api.create_session(user, ws, network={"mode": "proxy", "deny": ["deny.sbx.test"], "allow": ["ok.sbx.test"]},
                           exec_mode="session")
    sid = s["id"]
    try:
        for argv in (["true"], ["sh", "-c", "exit 2"]):
            run(api, sid, argv)
        shown = ctl("show", sid, check=0).stdout.decode()
        assert "Commands: 2 (0 running)" in shown, shown
        volatile = ("last_activity_usec", "expires_at_usec", "disk_bytes")
        http = {k: v for k, v in api.get_session(sid).items() if k not in volatile}
        got = json.loads(ctl("show", "--json", sid, check=0).stdout)["session"]
        assert {k: v for k, v in got.items() if k not in volatile} == http
        assert set(got) == set(http) | set(volatile)
        listed = json.loads(ctl("ls", "--json", "--user=" + user, check=0).stdout)["sessions"]
        assert [{k: v for k, v in x.items() if k not in volatile} for x in listed] == [http]
    finally:
        api.delete("/v1/sessions/" + sid)


@both_transports
def test_exec_mode(transport, api, scope):
    user, ws = scope
    sid = ctl("create", "--exec-mode=session", user, ws, check=0).stdout.decode().strip()
    unit = ctl("create", "--exec-mode=unit", user, ws + "-u", check=0).stdout.decode().strip()
    try:
        assert api.get_session(sid)["exec_mode"] == "session"
        assert api.get_session(unit)["exec_mode"] == "unit"
        assert "   Exec: session\n" in ctl("show", sid, check=0).stdout.decode()
        assert "   Exec: unit\n" in ctl("show", unit, check=0).stdout.decode()
        # the scope's session as it is, whatever the option says
        js = json.loads(ctl("create", "--json", "--exec-mode=unit", user, ws, check=0).stdout)
        assert js["id"] == sid and js["exec_mode"] == "session", js
        # refused before asking: nothing created
        p = ctl("create", "--exec-mode=threads", user, ws + "-x", check=1)
        assert b"--exec-mode= takes unit or session, not 'threads'" in p.stderr, p.stderr
        assert sorted(s["workspace"] for s in api.get("/v1/sessions?user=" + user).json["sessions"]) == [ws, ws + "-u"]
    finally:
        api.delete("/v1/sessions/" + sid)
        api.delete("/v1/sessions/" + unit)

    # run creates its session in the mode asked for
    p = ctl("run", "--json", "--exec-mode=session", "--user=" + user, "--workspace=" + ws + "-run", "echo", "hi",
            check=0)
    res = json.loads(p.stdout)
    assert res["stdout"] == "hi\n", res
    assert api.get_session(res["session"])["exec_mode"] == "session"
    ctl("rm", res["session"], check=0)
    p = ctl("run", "--exec-mode=fast", "--user=" + user, "--workspace=" + ws + "-run2", "true", check=125)
    assert b"takes unit or session" in p.stderr
    assert not [s for s in api.get("/v1/sessions?user=" + user).json["sessions"] if s["workspace"] == ws + "-run2"]


def test_bad_names_are_refused_before_asking(scope):
    p = ctl("create", "Bad User", "ws", check=1)
    assert b"Invalid user name" in p.stderr
    p = ctl("show", "not-a-session", check=1)
    assert b"not a session id" in p.stderr


@both_transports
def test_unknown_session_is_reported(transport, api):
    p = ctl("show", "0123456789abcdef", check=1)
    assert b"No such session" in p.stderr, p.stderr


# --------------------------------------------------------------------------- exec

@both_transports
def test_exec_output_and_exit_code(sid):
    p = ctl("exec", sid, "sh", "-c", "echo out; echo err >&2; exit 3", check=3)
    assert p.stdout == b"out\n"
    assert p.stderr == b"err\n"


@both_transports
def test_exec_options(sid):
    ctl("exec", sid, "mkdir", "-p", "sub", check=0)
    p = ctl("exec", "--cwd=sub", "-e", "GREETING=hi there", "--env=X=$HOME", sid,
            "sh", "-c", 'pwd; echo "$GREETING"; echo "$X"', check=0)
    lines = p.stdout.decode().splitlines()
    assert lines[0].endswith("/sub") and lines[1:] == ["hi there", "$HOME"], lines


@both_transports
def test_exec_stdin(sid):
    p = ctl("exec", "-i", sid, "wc", "-c", input=b"x" * 1000 + b"\xff", check=0)
    assert p.stdout.strip() == b"1001"


@both_transports
def test_exec_exit_statuses(sid):
    # signaled: 128+N, like a shell
    p = ctl("exec", sid, "sh", "-c", "kill -9 $$", check=137)
    assert b"killed by SIGKILL" in p.stderr
    # timed out: 124, like timeout(1)
    t0 = time.monotonic()
    p = ctl("exec", "--timeout=1s", sid, "sleep", "30", check=124)
    assert time.monotonic() - t0 < 20
    assert b"timed out" in p.stderr
    # could not start: 1
    p = ctl("exec", sid, "/nonexistent/program", check=1)
    assert b"could not be started (setup-" in p.stderr


@both_transports
def test_exec_json_events(sid):
    p = ctl("exec", "--json", sid, "printf", "a\\377", check=0)
    events = [json.loads(l) for l in p.stdout.splitlines()]
    assert events[0]["type"] == "accepted" and events[-1]["type"] == "exit"
    assert {"type": "stdout", "data_b64": "Yf8="} in events
    assert events[-1]["status"] == "succeeded"


@both_transports
def test_exec_streams_live(sid):
    """The first line shows before the command ends."""
    proc = subprocess.Popen([SANDBOXCTL, "exec", sid, "sh", "-c", "echo first; sleep 5; echo second"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ctl_env())
    try:
        t0 = time.monotonic()
        r, _, _ = select.select([proc.stdout], [], [], 4)
        assert r, "no output within 4 s"
        assert proc.stdout.readline() == b"first\n"
        assert time.monotonic() - t0 < 4
        assert proc.poll() is None, "sandboxctl ended before the command did"
        out, _ = proc.communicate(timeout=30)
        assert out == b"second\n" and proc.returncode == 0
    finally:
        proc.kill()
        proc.wait()


def start_interruptible(sid, script):
    proc = subprocess.Popen([SANDBOXCTL, "exec", sid, "sh", "-c", script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ctl_env())
    r, _, _ = select.select([proc.stdout], [], [], 20)
    assert r and proc.stdout.readline() == b"ready\n", "the command did not start"
    return proc


@both_transports
def test_ctrl_c_sends_sigint(sid):
    proc = start_interruptible(sid, 'trap "echo got-INT; exit 7" INT; echo ready; sleep 60 & wait')
    try:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert out == b"got-INT\n"
        assert proc.returncode == 7
    finally:
        proc.kill()
        proc.wait()


@both_transports
def test_second_ctrl_c_sends_sigkill(sid):
    proc = start_interruptible(sid, 'trap "echo ignored" INT; echo ready; while :; do sleep 0.1; done')
    try:
        proc.send_signal(signal.SIGINT)
        r, _, _ = select.select([proc.stdout], [], [], 20)
        assert r and proc.stdout.readline() == b"ignored\n"
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
        assert proc.returncode == 128 + 9
    finally:
        proc.kill()
        proc.wait()


def start_detached(api, sid, argv, rid):
    r = api.post("/v1/sessions/%s/commands?wait=false" % sid, {"argv": argv, "request_id": rid})
    assert r.status == 202, r
    return rid


@both_transports
def test_attach_replays_then_follows(api, sid):
    rid = start_detached(api, sid, ["sh", "-c", "echo one; sleep 2; echo two >&2; exit 5"], "att-1")
    p = ctl("attach", sid, rid, check=5)
    assert p.stdout == b"one\n" and p.stderr == b"two\n"

    # from an offset: what came after
    events = ctl("attach", "--json", sid, rid, check=5).stdout.splitlines(keepends=True)
    skip = len(events[0]) + len(events[1])  # accepted and "one"
    rest = [json.loads(l) for l in ctl("attach", "--json", "--offset=%d" % skip, sid, rid, check=5).stdout.splitlines()]
    assert rest[0] == {"type": "stderr", "data": "two\n"} and rest[-1]["type"] == "exit", rest


def test_attach_unknown_command(sid):
    p = ctl("attach", sid, "no-such-request", check=125)
    assert b"No such command" in p.stderr


@both_transports
def test_signal_verb(api, sid):
    rid = start_detached(api, sid, ["sleep", "60"], "sig-1")
    wait_for(lambda: api.get("/v1/sessions/%s/commands/%s" % (sid, rid)).json["status"] == "running",
             timeout=20, what="the command to run")
    ctl("signal", sid, rid, "USR1", check=0)
    snap = wait_for(lambda: (lambda s: s if s["terminal"] else None)(
        api.get("/v1/sessions/%s/commands/%s" % (sid, rid)).json), timeout=20, what="the command to end")
    assert snap["status"] == "signaled" and snap["signal"] == "SIGUSR1", snap
    p = ctl("signal", sid, rid, "BOGUS", check=1)
    assert b"Unknown signal" in p.stderr
    # it has ended: sandboxd says so
    p = ctl("signal", sid, rid, check=1)
    assert b"already finished" in p.stderr


@both_transports
def test_show_command_result(sid):
    p = ctl("exec", "--request-id=res-1", sid, "sh", "-c", "echo kept; exit 4", check=4)
    assert p.stdout == b"kept\n"
    out = ctl("show", sid, "res-1", check=0).stdout.decode()
    assert "failed" in out and "exit code 4" in out
    snap = json.loads(ctl("show", "--json", sid, "res-1", check=0).stdout)
    assert snap["exit_code"] == 4
    if TRANSPORT == "http":
        assert "kept" in out and snap["stdout"] == "kept\n"
    else:
        # over D-Bus the command wrote into sandboxctl's own stdout (an "h" option of
        # Exec): sandboxd kept none of it, which HTTP could not have done
        assert snap["stdout"] == "" and snap["stdout_bytes"] == 0, snap
    listing = ctl("show", sid, check=0).stdout.decode()
    assert "res-1" in listing


# --------------------------------------------------------------------------- run

@both_transports
def test_run_creates_and_removes_its_session(transport, api):
    user = unique_user()
    p = ctl("run", "--user=" + user, "--workspace=w1", "--rm", "sh", "-c", "echo ran", check=0)
    assert p.stdout == b"ran\n"
    sessions = api.get("/v1/sessions?user=" + user).json["sessions"]
    assert [s["state"] for s in sessions] == ["closed"], sessions


@both_transports
def test_run_json_is_one_result(transport, api):
    user = unique_user()
    p = ctl("run", "--json", "--user=" + user, "sh", "-c", "echo a; echo b >&2; exit 2", check=2)
    res = json.loads(p.stdout)
    assert res["stdout"] == "a\n" and res["stderr"] == "b\n" and res["exit_code"] == 2, res
    ctl("rm", res["session"], check=0)


# --------------------------------------------------------------------------- freeze, health, drain

@both_transports
def test_freeze_thaw(sid):
    p = ctl("freeze", sid)
    if memory_cgroup_v2():
        assert p.returncode == 0, p
        ctl("thaw", sid, check=0)
    else:
        # systemd cannot freeze on v1/hybrid hosts: said clearly, not hidden
        assert p.returncode == 1 and b"cgroup v2" in p.stderr, p


def test_health(api):
    out = ctl("health", check=0).stdout.decode()
    assert "Status: ok" in out
    h = json.loads(ctl("health", "--json", check=0).stdout)
    assert h["status"] == "ok" and h["version"]


@pytest.mark.restarts_daemon
def test_drain_and_cancel(api):
    try:
        st = json.loads(ctl("drain", "--json", check=0).stdout)
        assert st["draining"] is True
        assert json.loads(ctl("drain", "--status", "--json", check=0).stdout)["draining"] is True
        assert b"Draining: yes" in ctl("drain", "--status", check=0).stdout
        p = ctl("create", unique_user(), "w", check=1)
        assert b"draining" in p.stderr
    finally:
        api.request("DELETE", "/v1/drain")
    st = json.loads(ctl("drain", "--cancel", "--json", check=0).stdout)
    assert st["draining"] is False


# --------------------------------------------------------------------------- transports

def test_default_transport_is_dbus(scope):
    """Without a system bus the default fails, saying so, and does not fall back to the
    socket; --transport=http does not need the bus."""
    user, ws = scope
    nobus = {"DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/run/no-such-bus-socket"}
    p = ctl("create", user, ws, env=nobus, check=1)
    assert b"system bus" in p.stderr and b"/run/no-such-bus-socket" in p.stderr, p.stderr
    p = ctl("exec", "0123456789abcdef", "true", env=nobus, check=125)
    assert b"system bus" in p.stderr, p.stderr
    sid = ctl("create", user, ws, env=dict(nobus, SANDBOXD_TRANSPORT="http"), check=0).stdout.decode().strip()
    try:
        # and with the bus, the default finds the same session over D-Bus
        assert ctl("create", user, ws, check=0).stdout.decode().strip() == sid
        shown = json.loads(ctl("show", "--json", sid, check=0).stdout)["session"]
        assert shown["id"] == sid and shown["state"] == "active", shown
    finally:
        ctl("rm", sid)


def test_tcp_with_key(tcp, api_key, scope):
    url = "http://%s:%d" % (TCP_HOST, TCP_PORT)
    user, ws = scope
    p = ctl("--url=" + url, "--key=" + api_key, "create", user, ws, check=0)
    sid = p.stdout.decode().strip()
    # the same through the environment
    env = {"SANDBOXD_URL": url, "SANDBOXD_KEY": api_key}
    p = ctl("exec", sid, "echo", "over tcp", env=env, check=0)
    assert p.stdout == b"over tcp\n"
    ctl("rm", sid, env=env, check=0)


def test_tcp_wrong_key(tcp):
    p = ctl("--url=http://%s:%d" % (TCP_HOST, TCP_PORT), "--key=wrong-key-0123456789abcdef", "ls", check=1)
    assert b"--key" in p.stderr, p.stderr


def test_key_file(tcp, api_key, tmp_path):
    f = tmp_path / "key"
    f.write_text(api_key + "\n")
    ctl("--url=http://%s:%d" % (TCP_HOST, TCP_PORT), "--key-file=%s" % f, "health", check=0)


def test_unix_socket_url(api):
    ctl("--url=unix:" + UNIX_SOCKET, "health", check=0)


def test_unreachable_sandboxd():
    p = ctl("--url=unix:/run/no-such-sandboxd.sock", "ls", check=1)
    assert b"cannot reach sandboxd" in p.stderr and b"/run/no-such-sandboxd.sock" in p.stderr, p.stderr
    p = ctl("--url=unix:/run/no-such-sandboxd.sock", "exec", "0123456789abcdef", "true", check=125)


# --------------------------------------------------------------------------- cp

def files_api_exists(api, sid):
    r = api.get("/v1/sessions/%s/files/" % sid)
    return not (r.status == 404 and "route" in r.body.decode(errors="replace"))


@pytest.fixture
def files_sid(api, sid):
    if not files_api_exists(api, sid):
        pytest.skip("the file API (/v1/sessions/{sid}/files/) is not on this branch yet")
    return sid


def test_cp_roundtrip(files_sid, tmp_path):
    sid = files_sid
    src = tmp_path / "in.bin"
    data = os.urandom(3 << 20) + b"\x00end"
    src.write_bytes(data)
    ctl("cp", str(src), "%s:data.bin" % sid, check=0)
    p = ctl("exec", sid, "sha256sum", "data.bin", check=0)
    assert p.stdout.split()[0].decode() == __import__("hashlib").sha256(data).hexdigest()
    out = tmp_path / "out.bin"
    ctl("cp", "%s:data.bin" % sid, str(out), check=0)
    assert out.read_bytes() == data
    # to and from stdio
    ctl("cp", "-", "%s:from-stdin.txt" % sid, input=b"piped\n", check=0)
    assert ctl("cp", "%s:from-stdin.txt" % sid, "-", check=0).stdout == b"piped\n"


def test_cp_recursive(files_sid, tmp_path):
    sid = files_sid
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "top.txt").write_text("top\n")
    (tree / "a" / "b" / "deep.txt").write_text("deep\n")
    p = ctl("cp", str(tree), "%s:tree" % sid, check=1)
    assert b"-r" in p.stderr
    ctl("cp", "-r", str(tree), "%s:tree" % sid, check=0)
    assert ctl("exec", sid, "cat", "tree/a/b/deep.txt", check=0).stdout == b"deep\n"
    back = tmp_path / "back"
    ctl("cp", "-r", "%s:tree" % sid, str(back), check=0)
    assert (back / "top.txt").read_text() == "top\n"
    assert (back / "a" / "b" / "deep.txt").read_text() == "deep\n"


def test_cp_errors(files_sid, tmp_path):
    sid = files_sid
    p = ctl("cp", "%s:missing.txt" % sid, str(tmp_path / "x"), check=1)
    assert not (tmp_path / "x").exists()
    p = ctl("cp", str(tmp_path / "nope"), "%s:x" % sid, check=1)
    assert b"nope" in p.stderr
    p = ctl("cp", "a", "b", check=1)
    assert b"SESSION:PATH" in p.stderr


@pytest.mark.restarts_daemon
@both_transports
def test_exec_survives_a_daemon_restart(sid):
    """The stream breaks when sandboxd restarts; sandboxctl attaches again where it was:
    nothing lost, nothing twice."""
    proc = subprocess.Popen([SANDBOXCTL, "exec", sid, "sh", "-c", "for i in 1 2 3 4 5 6; do echo $i; sleep 0.5; done"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ctl_env())
    try:
        r, _, _ = select.select([proc.stdout], [], [], 20)
        assert r and proc.stdout.readline() == b"1\n"
        sh("systemctl", "reset-failed", "sandboxd.service", check=False)  # not the start rate limit
        sh("systemctl", "restart", "sandboxd.service")
        out, err = proc.communicate(timeout=60)
        assert out == b"2\n3\n4\n5\n6\n", (out, err)
        assert proc.returncode == 0, err
        if TRANSPORT == "http":
            assert b"attaching again" in err, err  # it did lose the connection
    finally:
        proc.kill()
        proc.wait()
