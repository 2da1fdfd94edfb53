# SPDX-License-Identifier: LGPL-2.1-or-later
"""Commands: streamed output, results, the dynamic user, the workspace, argv."""

import time

import pytest

from conftest import (WORKSPACE_HOST_ROOT, assert_error, command_cgroup, command_unit, command_unit_name, restart_daemon,
                      run, scope_dir, snapshot, units, wait_command_ended, wait_for)


def test_echo_stdout_and_stderr_apart(api, session):
    sid = session["id"]
    res = run(api, sid, ["sh", "-c", "echo to-out; echo to-err >&2; echo more-out"])
    assert res["stdout"] == "to-out\nmore-out\n"
    assert res["stderr"] == "to-err\n"

    acc = res["accepted"]
    assert acc["session"] == sid
    command_unit(acc)
    assert acc["request_id"]
    ex = res["exit"]
    assert ex["status"] == "succeeded", ex
    assert ex["exit_code"] == 0 and ex["signal"] is None and ex["reason"] == "success", ex
    assert isinstance(ex["duration_ms"], int) and 0 <= ex["duration_ms"] < 30000, ex
    for k in ("cpu_usec", "memory_bytes", "tasks"):
        assert isinstance(ex["usage"][k], int) and ex["usage"][k] >= 0, ex
    # the session counts it
    assert api.get_session(sid)["commands"] == 1


def test_request_id_and_unit_numbering(api, session):
    sid = session["id"]
    a = run(api, sid, {"argv": ["true"], "request_id": "my-Req.1_x"})
    b = run(api, sid, ["true"])
    assert a["accepted"]["request_id"] == "my-Req.1_x"
    assert a["accepted"]["unit"] == command_unit_name(sid, 1)
    assert b["accepted"]["unit"] == command_unit_name(sid, 2)
    assert b["accepted"]["request_id"] != a["accepted"]["request_id"]


def test_shared_request_id_finds_the_newest(api, session):
    """A client may pick "10" as a request id, which is also the id generated for the
    session's command 10: the API then finds the newer of the two, also after a restart
    (records are read back in the order of their file names, 10.json before 2.json)."""
    sid = session["id"]
    run(api, sid, ["true"])
    first = run(api, sid, {"argv": ["sh", "-c", "echo chosen"], "request_id": "10"})
    assert first["accepted"]["unit"] == command_unit_name(sid, 2)
    assert snapshot(api, sid, "10")["stdout"] == "chosen\n"
    for i in range(3, 10):
        run(api, sid, ["true"])
    newer = run(api, sid, ["sh", "-c", "echo generated"])
    assert newer["accepted"]["request_id"] == "10"
    assert newer["accepted"]["unit"] == command_unit_name(sid, 10)
    assert snapshot(api, sid, "10")["stdout"] == "generated\n"
    # asking again with that id is the newer command, nothing runs again
    again = run(api, sid, {"argv": ["sh", "-c", "echo other"], "request_id": "10"})
    assert again["accepted"]["unit"] == command_unit_name(sid, 10)
    assert again["stdout"] == "generated\n"
    restart_daemon()
    assert snapshot(api, sid, "10")["stdout"] == "generated\n"
    assert api.get_session(sid)["commands"] == 10


def test_nonzero_exit_code(api, session):
    res = run(api, session["id"], ["sh", "-c", "echo before; exit 3"])
    ex = res["exit"]
    assert ex["status"] == "failed", ex
    assert ex["exit_code"] == 3, ex
    assert ex["reason"] == "exit-code", ex
    assert ex["signal"] is None, ex
    assert res["stdout"] == "before\n"


def test_runs_as_dynamic_user_in_workspace(api, session):
    res = run(api, session["id"], ["sh", "-c", "id -u; id -un; id -g; pwd -P"])
    assert res["exit"]["status"] == "succeeded", res
    uid, name, gid, cwd = res["stdout"].splitlines()
    assert int(uid) != 0
    # systemd's range for dynamic users
    assert 61184 <= int(uid) <= 65519, uid
    assert name == session["dynamic_user"] and name.startswith("sbx-"), name
    assert cwd == scope_dir(session, WORKSPACE_HOST_ROOT)
    # the workspace path that sandboxd shows is that directory
    res = run(api, session["id"], ["sh", "-c", 'cd "$1" && pwd -P', "sh", session["workspace_path"]])
    assert res["stdout"].strip() == cwd, res


def test_scope_gets_the_same_user_name_each_time(api, session):
    a = run(api, session["id"], ["id", "-un"])["stdout"]
    b = run(api, session["id"], ["id", "-un"])["stdout"]
    assert a == b == session["dynamic_user"] + "\n"


def test_home_and_tmpdir(api, session):
    res = run(api, session["id"], [
        "sh", "-c", 'printf "%s\\n" "$HOME" "$TMPDIR" "$XDG_CONFIG_HOME"; '
                    'touch "$HOME/h" "$TMPDIR/t" && echo writable'])
    assert res["exit"]["status"] == "succeeded", res
    home, tmp, xdg, ok = res["stdout"].splitlines()
    assert home == scope_dir(session, "/var/lib/sandboxd/home")
    assert tmp == scope_dir(session, "/var/lib/sandboxd/tmp")
    assert xdg.startswith(home + "/"), xdg
    assert ok == "writable"


def test_argv_is_literal(api, session):
    argv = ["/bin/echo", "$HOME", "*", "a b", "`id`"]
    res = run(api, session["id"], argv)
    assert res["stdout"] == "$HOME * a b `id`\n"

    # one argument stays one argument, whatever is in it
    words = ["$HOME", "${PATH}", "*", "a b", "`id`", "$(id)", ";", "|", "'q'", '"dq"', "\\x", "%n", "%h", "%%", "~"]
    res = run(api, session["id"], ["/usr/bin/printf", "[%s]\\n"] + words)
    assert res["stdout"] == "".join("[%s]\n" % w for w in words), res["stdout"]


def test_env_value_not_expanded(api, session):
    res = run(api, session["id"], {"argv": ["printenv", "FOO", "BAR"],
                                   "env": {"FOO": "$HOME", "BAR": "${PATH} $(id) %h"}})
    assert res["stdout"] == "$HOME\n${PATH} $(id) %h\n"


def test_bare_name_resolved_via_path(api, session):
    res = run(api, session["id"], ["echo", "via", "PATH"])
    assert res["exit"]["status"] == "succeeded", res
    assert res["stdout"] == "via PATH\n"


@pytest.mark.parametrize("argv0", ["no-such-command-sbx", "./relative", "bin/sh"])
def test_unknown_executable(api, session, argv0):
    before = units()
    r = api.post("/v1/sessions/%s/commands" % session["id"], {"argv": [argv0]})
    assert_error(r, 400, "executable_not_found")
    assert units() == before
    assert api.get_session(session["id"])["commands"] == 0


def test_missing_absolute_executable(api, session):
    # An absolute argv[0] goes to systemd as it is; systemd cannot exec it
    # and sandboxd reports its setup failure (sandboxd(8): reason setup-exec).
    res = run(api, session["id"], ["/usr/bin/no-such-command-sbx"])
    ex = res["exit"]
    assert ex["status"] == "failed", ex
    assert ex["reason"] == "setup-exec", ex


def test_workspace_persists_between_commands(api, session):
    sid = session["id"]
    a = run(api, sid, ["sh", "-c", "echo kept > file.txt"])
    assert a["exit"]["status"] == "succeeded", a
    b = run(api, sid, ["cat", "file.txt"])
    assert b["exit"]["status"] == "succeeded", b
    assert b["stdout"] == "kept\n"
    # and the same scope asked again gets the same session and files
    again = api.create_session(session["user"], session["workspace"])
    assert again["id"] == sid
    assert run(api, sid, ["cat", "file.txt"])["stdout"] == "kept\n"


def test_cwd_subdirectory(api, session):
    sid = session["id"]
    assert run(api, sid, ["mkdir", "-p", "sub/deeper"])["exit"]["status"] == "succeeded"
    host = scope_dir(session, WORKSPACE_HOST_ROOT)
    for cwd, expect in [("sub", host + "/sub"), ("sub/deeper", host + "/sub/deeper"),
                        ("./sub/deeper/..", host + "/sub"),
                        (session["workspace_path"] + "/sub/deeper", host + "/sub/deeper"),
                        (session["workspace_path"], host)]:
        res = run(api, sid, {"argv": ["pwd", "-P"], "cwd": cwd})
        assert res["exit"]["status"] == "succeeded", (cwd, res)
        assert res["stdout"] == expect + "\n", cwd


def test_cwd_through_a_symlink_inside_the_workspace(api, session):
    sid = session["id"]
    res = run(api, sid, ["sh", "-c", "mkdir -p real/dir && ln -s real/dir inlink"])
    assert res["exit"]["status"] == "succeeded", res
    host = scope_dir(session, WORKSPACE_HOST_ROOT)
    res = run(api, sid, {"argv": ["pwd", "-P"], "cwd": "inlink"})
    assert res["exit"]["status"] == "succeeded", res
    assert res["stdout"] == host + "/real/dir\n"


def test_cwd_missing_directory(api, session):
    before = units()
    r = api.post("/v1/sessions/%s/commands" % session["id"], {"argv": ["pwd"], "cwd": "does-not-exist"})
    assert_error(r, 400, "invalid_path")
    assert units() == before


@pytest.mark.time_limit(60)
def test_timeout(api, session):
    t0 = time.monotonic()
    res = run(api, session["id"], {"argv": ["sleep", "30"], "timeout_ms": 1000})
    elapsed = time.monotonic() - t0
    ex = res["exit"]
    assert ex["status"] == "timed_out", ex
    assert ex["reason"] == "timeout", ex
    assert ex["exit_code"] is None, ex
    assert 0.9 <= elapsed < 8, elapsed
    # no process of it is left
    wait_command_ended(snapshot(api, session["id"], res["accepted"]["request_id"]))


def test_non_utf8_output_as_base64(api, session):
    res = run(api, session["id"], ["printf", "\\377\\376abc\\n"])
    assert res["stdout_bytes"] == b"\xff\xfeabc\n"
    out = [e for e in res["events"] if e["type"] == "stdout"]
    assert any("data_b64" in e for e in out), out


def test_utf8_output_as_text(api, session):
    text = "h\u00e9llo \u2713 \U0001F600\n"
    res = run(api, session["id"], ["printf", "%s", text])
    assert res["stdout"] == text
    out = [e for e in res["events"] if e["type"] == "stdout"]
    assert all("data" in e and "data_b64" not in e for e in out), out


@pytest.mark.time_limit(60)
def test_large_output_complete_and_in_order(api, session):
    n = 40000  # ~229 KB
    res = run(api, session["id"], ["seq", "1", str(n)])
    assert res["exit"]["status"] == "succeeded", res["exit"]
    expected = "".join("%d\n" % i for i in range(1, n + 1))
    assert len(res["stdout"]) == len(expected) > 200 * 1024
    assert res["stdout"] == expected


@pytest.mark.time_limit(60)
def test_large_output_on_both_streams(api, session):
    script = "for i in $(seq 1 20000); do echo out$i; echo err$i >&2; done"
    res = run(api, session["id"], ["sh", "-c", script])
    assert res["exit"]["status"] == "succeeded", res["exit"]
    assert res["stdout"] == "".join("out%d\n" % i for i in range(1, 20001))
    assert res["stderr"] == "".join("err%d\n" % i for i in range(1, 20001))


@pytest.mark.time_limit(60)
def test_streaming_is_live(api, session):
    events = []
    for ev in api.stream(session["id"], {"argv": ["sh", "-c", "echo one; sleep 2; echo two"]}):
        events.append(ev)
    outs = [e for e in events if e["type"] == "stdout"]
    ex = [e for e in events if e["type"] == "exit"]
    assert outs and ex, events
    assert outs[0]["data"] == "one\n"
    assert "".join(e["data"] for e in outs) == "one\ntwo\n"
    assert ex[0]["_t"] - outs[0]["_t"] >= 1.5, "'one' came only %.2f s before the exit" % (
        ex[0]["_t"] - outs[0]["_t"])
    # and "two" arrived separately, after the sleep
    two = [e for e in outs if "two" in e["data"]][0]
    assert two["_t"] - outs[0]["_t"] >= 1.5


@pytest.mark.unit_mode_only
def test_command_unit_is_collected(api, session):
    res = run(api, session["id"], ["true"])
    unit = res["accepted"]["unit"]
    wait_for(lambda: unit not in units(), timeout=10, what="%s to be collected" % unit)


def test_command_runs_in_the_session_slice(api, session):
    res = run(api, session["id"], {"argv": ["cat", "/proc/self/cgroup"], "request_id": "where"})
    path = command_cgroup(snapshot(api, session["id"], "where"))
    assert path.startswith("/sandboxd.slice/sandboxd-%s.slice/" % session["id"]), path
    # (a suffix: in the testbed, the paths start with its own cgroup)
    assert path + "\n" in res["stdout"], res["stdout"]
