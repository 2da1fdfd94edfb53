# SPDX-License-Identifier: LGPL-2.1-or-later
"""Bad input gets a clear 4xx with the JSON error envelope, and changes
nothing: no unit is started (checked in systemd), no command is counted."""

import json
import os
import secrets

import pytest

from conftest import MAX_TIMEOUT_MS, WORKSPACE_HOST_ROOT, assert_error, run, scope_dir, units

# --------------------------------------------------------------------------
# sessions

OK = {"user": "alice", "workspace": "proj"}


def with_(**kw):
    d = dict(OK)
    d.update(kw)
    return d


def without(key):
    return {k: v for k, v in OK.items() if k != key}


SESSION_CASES = [
    # id, body (bytes/str sent as is, anything else as JSON), status, code
    ("malformed-json", '{"user": "alice", "workspace": ', 400, "invalid_json"),
    ("not-json", "user=alice&workspace=proj", 400, "invalid_json"),
    ("empty-body", b"", 400, "invalid_json"),
    ("trailing-garbage", json.dumps(OK) + " {}", 400, "invalid_json"),
    ("invalid-utf8", b'{"user": "al\xffice", "workspace": "proj"}', 400, "invalid_json"),
    ("nul-byte", b'{"user": "alice", "workspace": "proj"}\x00', 400, "invalid_json"),
    ("array-body", [OK], 400, "invalid_type"),
    ("string-body", '"alice"', 400, "invalid_type"),
    ("null-body", "null", 400, "invalid_type"),
    ("user-number", with_(user=1), 400, "invalid_type"),
    ("user-null", with_(user=None), 400, "invalid_type"),
    ("workspace-list", with_(workspace=["proj"]), 400, "invalid_type"),
    ("limits-string", with_(limits="64M"), 400, "invalid_type"),
    ("tasks_max-string", with_(limits={"tasks_max": "32"}), 400, "invalid_type"),
    ("cpu_quota-float", with_(limits={"cpu_quota": 1.5}), 400, "invalid_type"),
    ("tasks_max-bool", with_(limits={"tasks_max": True}), 400, "invalid_type"),
    ("tasks_max-zero", with_(limits={"tasks_max": 0}), 400, "invalid_value"),
    ("tasks_max-negative", with_(limits={"tasks_max": -1}), 400, "invalid_value"),
    ("memory_max-words", with_(limits={"memory_max": "lots"}), 400, "invalid_value"),
    ("memory_max-too-small", with_(limits={"memory_max": "1M"}), 400, "invalid_value"),
    ("network-string", with_(network="none"), 400, "invalid_type"),
    ("network-mode-bogus", with_(network={"mode": "bogus"}), 400, "invalid_value"),
    ("network-mode-host", with_(network={"mode": "host"}), 403, "forbidden"),
    ("network-deny-string", with_(network={"deny": "evil.test"}), 400, "invalid_type"),
    ("network-deny-bad-name", with_(network={"deny": ["evil test"]}), 400, "invalid_value"),
    ("network-deny-none-mode", with_(network={"mode": "none", "deny": ["evil.test"]}), 400, "invalid_value"),
    ("exec_mode-bogus", with_(exec_mode="thread"), 400, "invalid_value"),
    ("exec_mode-case", with_(exec_mode="Session"), 400, "invalid_value"),
    ("exec_mode-empty", with_(exec_mode=""), 400, "invalid_value"),
    ("exec_mode-nul", with_(exec_mode="unit\u0000"), 400, "invalid_value"),
    ("exec_mode-number", with_(exec_mode=1), 400, "invalid_type"),
    ("exec_mode-null", with_(exec_mode=None), 400, "invalid_type"),
    ("exec_mode-object", with_(exec_mode={"mode": "unit"}), 400, "invalid_type"),
    ("unknown-field", with_(extra=1), 400, "unknown_field"),
    ("unknown-limit", with_(limits={"swap_max": 1}), 400, "unknown_field"),
    ("unknown-network-field", with_(network={"mode": "none", "dns": "x"}), 400, "unknown_field"),
    ("missing-user", without("user"), 400, "missing_field"),
    ("missing-workspace", without("workspace"), 400, "missing_field"),
    ("empty-object", {}, 400, "missing_field"),
]
for name in ["Root", "1abc", "a/b", "a" * 33, "", "-abc", "a.b", "al ice", "\u00e9", "alice\n", "../x"]:
    SESSION_CASES.append(("user-%r" % name[:12], with_(user=name), 400, "invalid_name"))
for name in ["..", ".", "A", "a b", "a" * 65, "", "a/b", "proj.", "proj\x01", "\u00e9"]:
    SESSION_CASES.append(("workspace-%r" % name[:12], with_(workspace=name), 400, "invalid_name"))


@pytest.mark.parametrize("body,status,code", [c[1:] for c in SESSION_CASES], ids=[c[0] for c in SESSION_CASES])
def test_bad_session_request(api, body, status, code):
    before = units()
    n_sessions = len(api.get("/v1/sessions").json["sessions"])
    assert_error(api.post("/v1/sessions", body), status, code)
    assert units() == before, "a unit was started"
    assert len(api.get("/v1/sessions").json["sessions"]) == n_sessions, "a session was kept"


def test_bad_session_request_not_json_content_type(api):
    before = units()
    r = api.post("/v1/sessions", OK, headers={"Content-Type": "text/plain"})
    assert_error(r, 415, "unsupported_media_type")
    assert units() == before


def test_valid_names_at_the_limits_are_accepted(api):
    # the other side of the cases above: the longest names the rules allow
    user = "_" + secrets.token_hex(4) + "-" + "z" * 22  # 32 characters
    ws = "0-_" + secrets.token_hex(4) + "a" * 53  # 64 characters
    assert len(user) == 32 and len(ws) == 64
    r = api.post("/v1/sessions", {"user": user, "workspace": ws})
    assert r.status == 201, r


# --------------------------------------------------------------------------
# commands

COMMAND_CASES = [
    ("malformed-json", '{"argv": ["echo"', 400, "invalid_json"),
    ("empty-body", b"", 400, "invalid_json"),
    ("array-body", [["echo", "hi"]], 400, "invalid_type"),
    ("argv-missing", {"cwd": "."}, 400, "missing_field"),
    ("argv-empty", {"argv": []}, 400, "invalid_value"),
    ("argv-string", {"argv": "echo hi"}, 400, "invalid_type"),
    ("argv-object", {"argv": {"0": "echo"}}, 400, "invalid_type"),
    ("argv-number-element", {"argv": ["echo", 1]}, 400, "invalid_type"),
    ("argv-null-element", {"argv": ["echo", None]}, 400, "invalid_type"),
    ("argv-nested", {"argv": ["echo", ["hi"]]}, 400, "invalid_type"),
    ("argv0-empty", {"argv": ["", "hi"]}, 400, "invalid_value"),
    ("argv-nul", {"argv": ["echo", "a\u0000b"]}, 400, "invalid_value"),
    ("unknown-field", {"argv": ["echo"], "shell": True}, 400, "unknown_field"),
    ("env-HOME", {"argv": ["env"], "env": {"HOME": "/root"}}, 400, "reserved_env"),
    ("env-TMPDIR", {"argv": ["env"], "env": {"TMPDIR": "/tmp"}}, 400, "reserved_env"),
    ("env-XDG_CONFIG_HOME", {"argv": ["env"], "env": {"XDG_CONFIG_HOME": "/etc"}}, 400, "reserved_env"),
    ("env-LD_PRELOAD", {"argv": ["env"], "env": {"LD_PRELOAD": "/x.so"}}, 400, "reserved_env"),
    ("env-not-object", {"argv": ["env"], "env": ["A=B"]}, 400, "invalid_type"),
    ("env-value-number", {"argv": ["env"], "env": {"A": 1}}, 400, "invalid_type"),
    ("env-bad-name", {"argv": ["env"], "env": {"A=B": "c"}}, 400, "invalid_value"),
    ("env-empty-name", {"argv": ["env"], "env": {"": "c"}}, 400, "invalid_value"),
    ("cwd-number", {"argv": ["pwd"], "cwd": 1}, 400, "invalid_type"),
    ("cwd-empty", {"argv": ["pwd"], "cwd": ""}, 400, "invalid_path"),
    ("cwd-dotdot", {"argv": ["pwd"], "cwd": "../x"}, 400, "invalid_path"),
    ("cwd-dotdot-deep", {"argv": ["pwd"], "cwd": "a/../../x"}, 400, "invalid_path"),
    ("cwd-dotdot-only", {"argv": ["pwd"], "cwd": ".."}, 400, "invalid_path"),
    ("cwd-etc", {"argv": ["pwd"], "cwd": "/etc"}, 400, "invalid_path"),
    ("cwd-root", {"argv": ["pwd"], "cwd": "/"}, 400, "invalid_path"),
    ("timeout-zero", {"argv": ["true"], "timeout_ms": 0}, 400, "invalid_value"),
    ("timeout-negative", {"argv": ["true"], "timeout_ms": -1000}, 400, "invalid_value"),
    ("timeout-string", {"argv": ["true"], "timeout_ms": "1000"}, 400, "invalid_type"),
    ("timeout-float", {"argv": ["true"], "timeout_ms": 1.5}, 400, "invalid_type"),
    ("timeout-above-max", {"argv": ["true"], "timeout_ms": MAX_TIMEOUT_MS + 1}, 400, "limit_exceeded"),
    ("request_id-invalid", {"argv": ["true"], "request_id": "a b"}, 400, "invalid_name"),
    ("request_id-number", {"argv": ["true"], "request_id": 7}, 400, "invalid_type"),
]


@pytest.fixture
def checked_session(api, session):
    """The session, and a check that a request changed nothing."""
    sid = session["id"]

    class Check:
        def __init__(self):
            self.units = units()
            self.commands = api.get_session(sid)["commands"]

        def unchanged(self):
            new = units() - self.units
            assert not new, "units were started: %s" % sorted(new)
            assert api.get_session(sid)["commands"] == self.commands, "a command was counted"

    session["check"] = Check
    return session


def post_command(api, sid, body, **kw):
    return api.post("/v1/sessions/%s/commands" % sid, body, **kw)


@pytest.mark.parametrize("body,status,code", [c[1:] for c in COMMAND_CASES], ids=[c[0] for c in COMMAND_CASES])
def test_bad_command_request(api, checked_session, body, status, code):
    check = checked_session["check"]()
    assert_error(post_command(api, checked_session["id"], body), status, code)
    check.unchanged()


def test_bad_command_not_json_content_type(api, checked_session):
    check = checked_session["check"]()
    r = post_command(api, checked_session["id"], {"argv": ["true"]}, headers={"Content-Type": "text/plain"})
    assert_error(r, 415, "unsupported_media_type")
    check.unchanged()


@pytest.mark.parametrize("where", ["other-workspace", "prefix-sibling", "other-user", "via-dotdot",
                                   "host-path"])
def test_cwd_in_another_workspace(api, checked_session, where):
    s = checked_session
    user, ws = s["user"], s["workspace"]
    # the neighbour exists and has a directory, so only the rule can refuse it
    other = api.create_session(user, ws + "x")
    assert run(api, other["id"], ["mkdir", "-p", "d"])["exit"]["status"] == "succeeded"
    cwd = {
        "other-workspace": other["workspace_path"],
        "prefix-sibling": other["workspace_path"] + "/d",
        "other-user": os.path.dirname(s["workspace_path"]),
        "via-dotdot": "%s/../%sx" % (s["workspace_path"], ws),
        "host-path": scope_dir(other, WORKSPACE_HOST_ROOT),
    }[where]
    check = s["check"]()
    assert_error(post_command(api, s["id"], {"argv": ["pwd"], "cwd": cwd}), 400, "invalid_path")
    check.unchanged()


@pytest.mark.parametrize("cwd", ["link", "link/", "./link", "link/systemd", "dirlink/../link"])
def test_cwd_symlink_out_of_the_workspace(api, checked_session, cwd):
    sid = checked_session["id"]
    res = run(api, sid, ["sh", "-c", "ln -s /etc link && ln -s . dirlink && test -d link/systemd"])
    assert res["exit"]["status"] == "succeeded", res
    check = checked_session["check"]()
    assert_error(post_command(api, sid, {"argv": ["pwd"], "cwd": cwd}), 400, "invalid_path")
    check.unchanged()


def two_mib_json():
    return json.dumps({"argv": ["echo", "x" * (2 << 20)]}).encode()


def test_oversized_session_body(api):
    before = units()
    body = json.dumps({"user": "alice", "workspace": "proj", "pad": "x" * (2 << 20)}).encode()
    assert_error(api.post("/v1/sessions", body), 413, "payload_too_large")
    assert units() == before


def test_oversized_command_body(api, checked_session):
    check = checked_session["check"]()
    assert_error(post_command(api, checked_session["id"], two_mib_json()), 413, "payload_too_large")
    check.unchanged()


def test_oversized_chunked_command_body(api, checked_session):
    # no Content-Length to refuse it early: the daemon must count as it reads
    check = checked_session["check"]()
    data = two_mib_json()
    chunks = (data[i:i + 65536] for i in range(0, len(data), 65536))
    r = api.post("/v1/sessions/%s/commands" % checked_session["id"], chunks, encode_chunked=True,
                 headers={"Content-Type": "application/json"})
    assert_error(r, 413, "payload_too_large")
    check.unchanged()


def test_body_just_under_the_limit_is_read(api, checked_session):
    # a large but allowed body reaches the parser (here: refused for its field)
    check = checked_session["check"]()
    body = json.dumps({"argv": ["true"], "pad": "x" * (1000 * 1000)}).encode()
    assert len(body) < (1 << 20)
    assert_error(post_command(api, checked_session["id"], body), 400, "unknown_field")
    check.unchanged()


@pytest.mark.parametrize("sid", ["0123456789abcdef", "zzzz", "0123456789ABCDEF"])
def test_command_for_unknown_session(api, sid):
    before = units()
    assert_error(post_command(api, sid, {"argv": ["true"]}), 404, "not_found")
    assert units() == before
