# SPDX-License-Identifier: LGPL-2.1-or-later
"""Tenants over TCP: a key sees and touches only its own tenant's sessions. Every
request on another tenant's session, read or write, answers exactly what the same
request on a session that does not exist answers (404, never 403: ids do not leak),
and changes nothing. Also: 401 against 403, and keys given as a systemd credential."""

import os
import secrets

import pytest

from conftest import (WORKSPACE_HOST_ROOT, Api, assert_error, commands_path, config_dropin, hash_key, is_active,
                      journal_cursor, journal_since, run, scope_dir, sh, start_command, units, wait_command_running,
                      wait_terminal)

OCTET = {"Content-Type": "application/octet-stream"}
NO_SUCH_SID = "0123456789abcdef"


@pytest.fixture
def victim(tcp, scope):
    """tenant1's session with: a file, a directory, a finished command "done", and a
    running command "cat" that reads a streamed stdin."""
    s = tcp.create_session(*scope)
    sid = s["id"]
    assert tcp.request("PUT", "/v1/sessions/%s/files/secret.txt" % sid, body=b"tenant1's data",
                       headers=OCTET).status == 201
    assert tcp.request("PUT", "/v1/sessions/%s/files/dir?mkdir" % sid).status == 201
    res = run(tcp, sid, {"argv": ["echo", "hello"], "request_id": "done"})
    assert res["exit"]["status"] == "succeeded", res
    start_command(tcp, sid, {"argv": ["cat"], "stdin": "stream", "request_id": "cat", "timeout_ms": 60000})
    # running, not merely accepted: in session mode its "cgroup" comes once the executor
    # forked it, which would otherwise land between two state() snapshots
    wait_command_running(tcp, sid, "cat")
    s["host_dir"] = scope_dir(s, WORKSPACE_HOST_ROOT)
    yield s
    tcp.post(commands_path(sid, "cat", "/signal"), {"signal": "SIGKILL"})


def state(api, s):
    """What another tenant must not be able to change: the session, its commands, its
    workspace, the units systemd has."""
    sid = s["id"]
    sess = api.get_session(sid)
    for k in ("expires_at_usec", "disk_bytes"):
        sess.pop(k, None)
    cmds = api.get(commands_path(sid)).json["commands"]
    for c in cmds:
        for k in list(c):
            if k in ("usage", "duration_ms"):
                c.pop(k)
    files = {}
    for root, dirs, names in os.walk(s["host_dir"]):
        for n in dirs + names:
            p = os.path.join(root, n)
            files[os.path.relpath(p, s["host_dir"])] = open(p, "rb").read() if os.path.isfile(p) else None
    return {"session": sess, "commands": cmds, "files": files, "units": units()}


# (method, path below /v1/sessions/{sid}, body, headers): every route that names a session
REQUESTS = [
    ("GET", "", None, None),
    ("HEAD", "", None, None),
    ("DELETE", "", None, None),
    ("DELETE", "?purge=true", None, None),
    ("PUT", "", {}, None),
    ("POST", "/activity", None, None),
    ("POST", "/freeze", None, None),
    ("POST", "/thaw", None, None),
    ("GET", "/commands", None, None),
    ("POST", "/commands", {"argv": ["touch", "pwned"]}, None),
    ("POST", "/commands?wait=false", {"argv": ["touch", "pwned"]}, None),
    ("POST", "/commands", {"argv": ["true"], "request_id": "done"}, None),
    ("GET", "/commands/done", None, None),
    ("GET", "/commands/cat", None, None),
    ("GET", "/commands/done/events", None, None),
    ("GET", "/commands/done/events?offset=0", None, None),
    ("GET", "/commands/cat/events", None, None),
    ("POST", "/commands/cat/signal", {"signal": "SIGKILL"}, None),
    ("POST", "/commands/cat/stdin", b"injected\n", OCTET),
    ("POST", "/commands/cat/stdin?eof=1", b"", OCTET),
    ("GET", "/commands/nope", None, None),
    ("GET", "/files", None, None),
    ("GET", "/files/", None, None),
    ("GET", "/files/secret.txt", None, None),
    ("GET", "/files/secret.txt?stat", None, None),
    ("GET", "/files/dir", None, None),
    ("PUT", "/files/secret.txt", b"overwritten", OCTET),
    ("PUT", "/files/new.txt", b"planted", OCTET),
    ("PUT", "/files/new.txt", b"planted", dict(OCTET, Expect="100-continue")),
    ("PUT", "/files/dir2?mkdir", None, None),
    ("POST", "/files/dir3?mkdir", None, None),
    ("POST", "/files/secret.txt?move_to=moved.txt", None, None),
    ("DELETE", "/files/secret.txt", None, None),
    ("DELETE", "/files/dir?recursive=true", None, None),
    ("PATCH", "/files/secret.txt", None, None),
]


def same_answer(r, ref):
    """R answers exactly as REF, the same request on a session that does not exist."""
    assert r.status == ref.status, (r, ref)
    assert r.body == ref.body, (r, ref)
    assert r.headers.get("Content-Type") == ref.headers.get("Content-Type")
    assert r.headers.get("Allow") == ref.headers.get("Allow")


@pytest.mark.time_limit(180)
def test_other_tenant_sees_and_touches_nothing(tcp, tcp2, api, victim):
    sid = victim["id"]
    before = state(api, victim)
    for method, tail, body, headers in REQUESTS:
        r = tcp2.request(method, "/v1/sessions/" + sid + tail, body=body, headers=headers)
        ref = tcp2.request(method, "/v1/sessions/" + NO_SUCH_SID + tail, body=body, headers=headers)
        same_answer(r, ref)
        if method != "HEAD":
            assert_error(r, 404, "not_found")  # the session first, then the method
        assert state(api, victim) == before, "%s %s changed something" % (method, tail)

    # the owner still has it all: the running command took no input and no signal
    assert is_active("sandboxd-%s.slice" % sid) == "active"
    snap = tcp.get(commands_path(sid, "cat")).json
    assert snap["terminal"] is False, snap
    r = tcp.post(commands_path(sid, "cat", "/stdin?eof=1"), b"mine\n", headers=OCTET)
    assert r.status == 200, r
    snap = wait_terminal(tcp, sid, "cat")
    assert snap["stdout"] == "mine\n", snap
    assert tcp.get("/v1/sessions/%s/files/secret.txt" % sid).body == b"tenant1's data"


def test_other_tenant_lists_nothing(tcp, tcp2, api, victim):
    ids = [s["id"] for s in tcp2.get("/v1/sessions").json["sessions"]]
    assert victim["id"] not in ids
    r = tcp2.get("/v1/sessions?user=" + victim["user"])
    assert r.status == 200 and r.json == {"sessions": []}, r
    # the owner and local callers do see it
    assert victim["id"] in [s["id"] for s in tcp.get("/v1/sessions?user=" + victim["user"]).json["sessions"]]
    assert victim["id"] in [s["id"] for s in api.get("/v1/sessions").json["sessions"]]


def test_other_tenant_gets_a_scope_of_its_own(tcp2, api, victim):
    # the same names are another scope for another tenant: a session of its own, not tenant1's
    r = tcp2.post("/v1/sessions", {"user": victim["user"], "workspace": victim["workspace"]})
    assert r.status == 201 and r.json["id"] != victim["id"], r
    assert victim["id"] not in r.body.decode()
    assert r.json["workspace_path"] != victim["workspace_path"], r
    assert r.json["dynamic_user"] != victim["dynamic_user"], r
    assert api.get_session(victim["id"])["state"] == "active"


def test_other_tenant_sessions_are_its_own(tcp, tcp2, scope):
    s2 = tcp2.create_session(*scope)
    assert_error(tcp.get("/v1/sessions/" + s2["id"]), 404, "not_found")
    res = run(tcp2, s2["id"], ["echo", "two"])
    assert res["stdout"] == "two\n"


# --------------------------------------------------------------------------
# 401 against 403

def assert_401(r):
    assert_error(r, 401, "unauthorized")
    assert r.headers.get("WWW-Authenticate") == "Bearer", r.headers


@pytest.mark.parametrize("method,path", [
    ("GET", "/v1/health"), ("GET", "/metrics"), ("GET", "/v1/pool"), ("GET", "/v1/sessions"),
    ("POST", "/v1/sessions"), ("GET", "/v1/sessions/" + NO_SUCH_SID), ("GET", "/v1/drain"),
    ("POST", "/v1/drain"), ("DELETE", "/v1/drain"), ("GET", "/nope"), ("PATCH", "/v1/health"),
    ("PUT", "/v1/sessions/%s/files/x" % NO_SUCH_SID),
])
def test_no_key_is_always_401(tcp, method, path):
    """Without a valid key, every route but the probes answers 401 (whether it exists or
    not, whatever the method): nothing about the API shows before the key."""
    anon = Api("tcp")
    assert_401(anon.request(method, path, body=b"x" if method in ("POST", "PUT") else None))
    assert_401(anon.request(method, path, headers={"Authorization": "Bearer " + secrets.token_urlsafe(32)}))


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
def test_key_without_the_right_is_403(tcp, method):
    """A valid key that may not drain: 403, not 401 (the key is fine, the right is missing)."""
    r = tcp.request(method, "/v1/drain")
    assert_error(r, 403, "forbidden")
    assert "WWW-Authenticate" not in r.headers
    assert Api("unix").get("/v1/drain").json["draining"] is False


def test_probes_answer_without_a_key(tcp):
    for path in ("/healthz", "/readyz"):
        r = Api("tcp").get(path, headers={"Authorization": "Bearer wrong-key-0123456789"})
        assert r.status == 200, r


def test_auth_failures_are_counted_and_keys_never_logged(tcp, api):
    def failures():
        for line in api.get("/metrics").body.decode().splitlines():
            if line.startswith("sandboxd_auth_failures_total "):
                return int(float(line.split()[1]))
        raise AssertionError("no sandboxd_auth_failures_total")

    before = failures()
    bad = "not-a-key-" + secrets.token_hex(16)
    for _ in range(3):
        assert_401(Api("tcp", key=bad).get("/v1/health"))
    assert failures() == before + 3
    log = sh("journalctl", "-u", "sandboxd.service", "--no-pager", "-o", "cat", "-n", "2000").stdout
    assert bad not in log
    assert tcp.key not in log


# --------------------------------------------------------------------------
# keys as a systemd credential

DROPIN = "/etc/systemd/system/sandboxd.service.d/50-test-credential.conf"
CRED_FILE = "/etc/sandboxd/test-credential-keys"
CRED_DIR = "/etc/sandboxd/test-credentials"


def systemd_delivers_credentials():
    """Whether PID 1 here hands credentials to services: in the namespace testbed on these
    machines systemd 252 starts the unit but leaves $CREDENTIALS_DIRECTORY empty."""
    p = sh("systemd-run", "-q", "--wait", "--pipe", "-p", "SetCredential=probe:yes", "sh", "-c",
           'cat "$CREDENTIALS_DIRECTORY/probe"', check=False)
    return p.stdout.strip() == "yes"


def with_dropin(text, check):
    """The unit's drop-in TEXT (so with a daemon-reload) for check(cursor)."""
    with config_dropin(DROPIN, reload=True) as write:
        cursor = journal_cursor()
        write(text)
        check(cursor)


def check_credential_key(tcp, key, source, cursor):
    r = Api("tcp", key=key).get("/v1/health")
    assert r.status == 200, r
    assert tcp.get("/v1/health").status == 200  # the file's keys count too
    # the credential's tenant is a tenant like the others
    s = Api("tcp", key=key).create_session("credu" + secrets.token_hex(3), "w")
    assert_error(tcp.get("/v1/sessions/" + s["id"]), 404, "not_found")
    log = journal_since(cursor, "sandboxd.service", lines=100000)
    assert "Loaded 1 API key(s) from %s." % source in log, log[-3000:]
    assert "Loaded 2 API key(s) from /etc/sandboxd/api-keys." in log, log


@pytest.mark.restarts_daemon
def test_keys_from_credentials_directory(tcp):
    """sandboxd reads $CREDENTIALS_DIRECTORY/api-keys, as systemd sets it for LoadCredential=
    (here set by hand: see the next test)."""
    key = secrets.token_urlsafe(32)
    os.makedirs(CRED_DIR, exist_ok=True)
    with open(os.path.join(CRED_DIR, "api-keys"), "w") as f:
        f.write("# given as a credential\n" + hash_key("credtenant", key) + "\n")
    try:
        with_dropin("[Service]\nEnvironment=CREDENTIALS_DIRECTORY=%s\n" % CRED_DIR,
                    lambda cursor: check_credential_key(tcp, key, CRED_DIR + "/api-keys", cursor))
    finally:
        sh("rm", "-rf", CRED_DIR)
    assert_401(Api("tcp", key=key).get("/v1/health"))


@pytest.mark.restarts_daemon
def test_keys_from_load_credential(tcp):
    if not systemd_delivers_credentials():
        pytest.skip("systemd does not deliver credentials in this environment")
    key = secrets.token_urlsafe(32)
    with open(CRED_FILE, "w") as f:
        f.write(hash_key("credtenant", key) + "\n")
    os.chmod(CRED_FILE, 0o600)
    try:
        with_dropin("[Service]\nLoadCredential=api-keys:%s\n" % CRED_FILE,
                    lambda cursor: check_credential_key(tcp, key, "/run/credentials/sandboxd.service/api-keys",
                                                        cursor))
    finally:
        os.unlink(CRED_FILE)
    assert_401(Api("tcp", key=key).get("/v1/health"))
