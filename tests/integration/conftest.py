# SPDX-License-Identifier: LGPL-2.1-or-later
"""Fixtures and helpers of the integration tests.

The tests run on a real systemd (PID 1) with sandboxd installed: on CI and with
`tools/dev test` inside the testbed that tools/testbed boots. They talk to
sandboxd as its users do, over /run/sandboxd/http.sock and 127.0.0.1:8421, and
look at systemd with systemctl to see what sandboxd really did.

Only the standard library and pytest are used.
"""

import base64
import contextlib
import http.client
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import threading
import time

import pytest

UNIX_SOCKET = os.environ.get("SANDBOXD_TEST_SOCKET", "/run/sandboxd/http.sock")
TCP_HOST = os.environ.get("SANDBOXD_TEST_TCP_HOST", "127.0.0.1")
TCP_PORT = int(os.environ.get("SANDBOXD_TEST_TCP_PORT", "8421"))
SANDBOXD_BIN = os.environ.get("SANDBOXD_TEST_BIN", "/usr/libexec/sandboxd")
API_KEYS_FILE = "/etc/sandboxd/api-keys"
TENANT = "tenant1"
TENANT2 = "tenant2"  # another tenant: sees none of tenant1's sessions

# The exec mode of this run's lane (tools/dev runs the suite once per mode): "unit", every
# command a transient unit of its own (sandboxd's default), or "session", every command a
# child of its session's executor unit, in a cgroup of its own below that unit's. In
# session mode the api_keys fixture writes EXEC_MODE_DROPIN, so every test runs in that
# mode unedited; tests that are about per-command units only are marked unit_mode_only.
EXEC_MODES = ("unit", "session")
EXEC_MODE = os.environ.get("SANDBOXD_TEST_EXEC_MODE", "") or "unit"
# early, so that the drop-ins of the tests themselves (50-*, 90-*) come later and win
EXEC_MODE_DROPIN = "/etc/sandboxd/sandboxd.conf.d/05-test-exec-mode.conf"
# SANDBOXD_TEST_DEFAULT_IMAGE=NAME (an image of SANDBOXD_TEST_IMAGES, such as py): every
# session that asks for no image runs in that one ([Images] Default=), to run a suite (the
# escape suite) in image sessions; unset, the host's root as usual
DEFAULT_IMAGE = os.environ.get("SANDBOXD_TEST_DEFAULT_IMAGE", "")
DEFAULT_IMAGE_DROPIN = "/etc/sandboxd/sandboxd.conf.d/06-test-default-image.conf"
# where a command's / is on the host: the image's tree in sandboxd's images directory, or /
COMMAND_ROOT = os.path.join("/var/lib/sandboxd/images", DEFAULT_IMAGE) if DEFAULT_IMAGE else "/"
# what a command gets for a path of the host that sandboxd hides: an image does not have it
HIDDEN = "No such file or directory" if DEFAULT_IMAGE else "Permission denied"

# Every socket operation gives up after this long: a stream that stalls fails
# the test instead of hanging the run.
SOCKET_TIMEOUT = 60.0
# Each test as a whole (SIGALRM), unless marked @pytest.mark.time_limit(S).
TEST_TIME_LIMIT = 120

# Defaults of sandboxd.conf(5) / sandboxd(8), which the installed
# /etc/sandboxd/sandboxd.conf leaves commented out.
DEFAULT_MEMORY_MAX = 1 << 30  # MemoryMax=1G
DEFAULT_CPU_QUOTA = 100  # CPUQuota=100%
DEFAULT_TASKS_MAX = 256  # TasksMax=256
MAX_MEMORY_MAX = 8 << 30  # MaxMemoryMax=8G
MAX_CPU_QUOTA = 400  # MaxCPUQuota=400%
MAX_TASKS_MAX = 4096  # MaxTasksMax=4096
MAX_BODY_SIZE = 1 << 20  # MaxBodySize=1M
MAX_TIMEOUT_MS = 24 * 3600 * 1000  # MaxTimeoutSec=1d

WORKSPACE_ROOT = "/var/lib/sandboxd/ws"
WORKSPACE_HOST_ROOT = "/var/lib/private/sandboxd/ws"
# every local caller (unix socket, D-Bus) has the scopes of this tenant; API tenants their own
LOCAL_TENANT = "local"


def scope_dir(session, root=WORKSPACE_ROOT):
    """<root>/<tenant>/<user>/<workspace> of a session, as its workspace_path says (the
    same scope below another root: WORKSPACE_HOST_ROOT, or the homes and tmp dirs)."""
    path = session["workspace_path"]
    assert path.startswith(WORKSPACE_ROOT + "/"), path
    return root + path[len(WORKSPACE_ROOT):]


# --------------------------------------------------------------------------
# pytest plumbing: a time limit for every test, the journal on failures

def pytest_configure(config):
    config.addinivalue_line("markers", "time_limit(seconds): time limit of one test (default %d s)" % TEST_TIME_LIMIT)
    config.addinivalue_line("markers", "load: the load test (about 70 s; select it alone with -m load)")
    config.addinivalue_line("markers", "restarts_daemon: the test stops or restarts sandboxd.service itself "
                            "(sandboxd must still exit cleanly each time)")
    config.addinivalue_line("markers", "kills_daemon(n=1): the test kills sandboxd with SIGKILL n times on purpose; "
                            "the crash check tolerates what systemd logs for exactly those kills")
    config.addinivalue_line("markers", "unit_mode_only: about per-command units (their properties, "
                            "collection, exposure); skipped in the session lane")
    config.addinivalue_line("markers", "session_mode_only: about the session executor; skipped in the unit lane")
    config.addinivalue_line("markers", "one_exec_mode: the same in both exec modes (the HTTP surface as clients "
                            "see it); run in the unit lane only, to keep CI short")
    if EXEC_MODE not in EXEC_MODES:
        raise pytest.UsageError("SANDBOXD_TEST_EXEC_MODE=%s: expected one of %s" % (EXEC_MODE, ", ".join(EXEC_MODES)))


def pytest_collection_modifyitems(config, items):
    """Skips, with the reason, the tests that are for the other exec mode. (The escape suite
    and the cgroup-v2 lane load this module again: each item is marked once.)"""
    other = "session_mode_only" if EXEC_MODE == "unit" else "unit_mode_only"
    why = pytest.mark.skip(reason="%s: this lane runs exec mode %s (SANDBOXD_TEST_EXEC_MODE)" % (other, EXEC_MODE))
    once = pytest.mark.skip(reason="one_exec_mode: runs in the unit lane only")
    for item in items:
        if getattr(item, "_sandboxd_exec_mode_skip", False):
            continue
        if item.get_closest_marker(other):
            item._sandboxd_exec_mode_skip = True
            item.add_marker(why)
        elif EXEC_MODE != "unit" and item.get_closest_marker("one_exec_mode"):
            item._sandboxd_exec_mode_skip = True
            item.add_marker(once)


class TimeLimitExceeded(Exception):
    pass


@pytest.fixture(autouse=True)
def _time_limit(request):
    marker = request.node.get_closest_marker("time_limit")
    limit = int(marker.args[0]) if marker else TEST_TIME_LIMIT

    def expired(signum, frame):
        raise TimeLimitExceeded("test still running after %d s" % limit)

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(limit)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def journal_cursor():
    out = subprocess.run(["journalctl", "-n", "0", "--show-cursor", "--no-pager"], capture_output=True,
                         text=True, timeout=20).stdout
    m = re.search(r"^-- cursor: (\S+)", out, re.M)
    return m.group(1) if m else None


def journal_since(cursor, *units, lines=150):
    """Journal lines of UNITS (default: sandboxd and its units) after CURSOR."""
    args = ["journalctl", "--no-pager", "-o", "short-precise"]
    for u in units or ("sandboxd.service", "sandboxd-*"):
        args += ["-u", u]
    args += ["--after-cursor", cursor] if cursor else ["-n", str(lines)]
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=20).stdout
    except Exception as e:  # noqa: BLE001 - only diagnostics
        return "(journalctl failed: %s)" % e
    return "\n".join(l for l in out.splitlines()[-lines:] if not l.startswith("-- "))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        cursor = getattr(item, "_sandboxd_cursor", None)
        rep.sections.append(("journal of sandboxd during the test", journal_since(cursor)))


# --------------------------------------------------------------------------
# running things on the host (the testbed)

def sh(*args, check=True, timeout=60, input=None):
    """Runs a command, returns CompletedProcess with text output."""
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, input=input)
    if check and p.returncode != 0:
        raise AssertionError("%s exited %d\nstdout: %s\nstderr: %s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p


def systemctl_show(unit, *props):
    """{prop: value} from systemctl show -p ... UNIT."""
    args = ["systemctl", "show", unit]
    for p in props:
        args += ["-p", p]
    out = sh(*args).stdout
    result = {}
    for line in out.splitlines():
        k, _, v = line.partition("=")
        result[k] = v
    return result


def is_active(unit):
    return sh("systemctl", "is-active", unit, check=False).stdout.strip()


def units():
    """The set of sandboxd-* units systemd knows (loaded, any state), once the warm pool is
    settled (when sandboxd runs): a refill that an earlier test caused (sandboxd defers it
    250 ms) must not show up as units started by this one."""
    if is_active("sandboxd.service") == "active":
        try:
            settle_pool(Api("unix"), timeout=10.0)
        except (AssertionError, OSError):
            pass  # best effort: the caller looks at the units as they are
    out = sh("systemctl", "list-units", "--all", "--plain", "--no-legend", "sandboxd-*").stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def wait_for(predicate, timeout=10.0, interval=0.1, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def memory_cgroup_v2():
    """True if the memory controller is on the unified (v2) hierarchy."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, _ = line.rstrip("\n").split(":", 2)
                if "memory" in controllers.split(","):
                    return False  # a v1 hierarchy has it
    except OSError:
        pass
    return sh("stat", "-fc", "%T", "/sys/fs/cgroup", check=False).stdout.strip() == "cgroup2fs"


# --------------------------------------------------------------------------
# HTTP

class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=SOCKET_TIMEOUT):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.unix_path)
        except BaseException:
            s.close()
            raise
        self.sock = s


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # http.client.HTTPMessage: case-insensitive get()
        self.body = body

    def __iter__(self):  # status, headers, body = api.get(...)
        return iter((self.status, self.headers, self.body))

    @property
    def json(self):
        try:
            return json.loads(self.body)
        except ValueError as e:
            raise AssertionError("not JSON (%s): %r" % (e, self.body[:500])) from None

    def __repr__(self):
        return "<Response %d %r>" % (self.status, self.body[:300])


class Api:
    """sandboxd's HTTP API over the unix socket or TCP."""

    def __init__(self, transport="unix", key=None, path=UNIX_SOCKET, host=TCP_HOST, port=TCP_PORT,
                 timeout=SOCKET_TIMEOUT):
        self.transport = transport
        self.timeout = timeout
        self.key = key
        self.path = path
        self.host = host
        self.port = port

    def __repr__(self):
        return "Api(%s)" % self.transport

    def connection(self, timeout=SOCKET_TIMEOUT):
        if self.transport == "unix":
            return UnixHTTPConnection(self.path, timeout=timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _headers(self, headers, body):
        h = {}
        if self.key is not None:
            h["Authorization"] = "Bearer " + self.key
        if body is not None:
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        return {k: v for k, v in h.items() if v is not None}

    @staticmethod
    def _encode(body):
        if body is None or isinstance(body, (bytes, bytearray)):
            return body
        if isinstance(body, str):
            return body.encode()
        return json.dumps(body).encode()

    def request(self, method, path, body=None, headers=None, encode_chunked=False):
        """One request on a fresh connection: returns Response(status, headers, body bytes).

        body: dict/list (sent as JSON), str or bytes (sent as is), or an
        iterable of bytes with encode_chunked=True."""
        data = body if encode_chunked else self._encode(body)
        conn = self.connection(timeout=self.timeout)
        try:
            conn.request(method, path, body=data, headers=self._headers(headers, body),
                         encode_chunked=encode_chunked)
            resp = conn.getresponse()
            return Response(resp.status, resp.headers, resp.read())
        finally:
            conn.close()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    # --- sessions

    def create_session(self, user, workspace, **extra):
        body = {"user": user, "workspace": workspace}
        body.update(extra)
        r = self.post("/v1/sessions", body)
        assert r.status in (200, 201), "creating session %s/%s: %r" % (user, workspace, r)
        return r.json

    def get_session(self, sid):
        r = self.get("/v1/sessions/" + sid)
        assert r.status == 200, r
        return r.json

    # --- commands

    def stream(self, sid, body, timeout=SOCKET_TIMEOUT):
        """POSTs a command and yields its NDJSON events as they arrive.

        Each event is a dict; the receive time (time.monotonic()) is in
        event["_t"]. Raises AssertionError if the command is refused."""
        conn = self.connection(timeout=timeout)
        try:
            conn.request("POST", "/v1/sessions/%s/commands" % sid, body=self._encode(body),
                         headers=self._headers(None, body))
            resp = conn.getresponse()
            if resp.status != 200:
                raise AssertionError("command refused: %d %r" % (resp.status, resp.read()[:1000]))
            ctype = resp.getheader("Content-Type", "")
            assert ctype.startswith("application/x-ndjson"), "Content-Type %r" % ctype
            buf = b""
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if not line.strip():
                        continue
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        raise AssertionError("not an NDJSON line: %r" % line[:500]) from None
                    assert isinstance(ev, dict), line
                    ev["_t"] = time.monotonic()
                    yield ev
            assert not buf.strip(), "stream ended inside a line: %r" % buf[:500]
        finally:
            conn.close()


def event_bytes(ev):
    if "data_b64" in ev:
        return base64.b64decode(ev["data_b64"], validate=True)
    return ev["data"].encode("utf-8")


def run(api, sid, body, timeout=SOCKET_TIMEOUT):
    """Runs a command to its end. Returns {"events", "stdout", "stderr",
    "stdout_bytes", "stderr_bytes", "exit", "accepted"}; checks that the
    stream is well formed (accepted first, exactly one exit, last)."""
    if isinstance(body, (list, tuple)):
        body = {"argv": list(body)}
    t0 = time.monotonic()
    events = list(api.stream(sid, body, timeout=timeout))
    out = {"stdout": b"", "stderr": b""}
    for ev in events:
        if ev.get("type") in ("stdout", "stderr"):
            out[ev["type"]] += event_bytes(ev)
    assert events, "no event at all"
    assert events[0].get("type") == "accepted", "first event is not 'accepted': %r" % events[:3]
    exits = [e for e in events if e.get("type") == "exit"]
    assert len(exits) == 1, "expected exactly one exit event, got %d: %r" % (len(exits), events[-3:])
    assert events[-1] is exits[0], "the exit event is not the last one: %r" % events[-3:]
    for e in events[1:-1]:
        # output, and the kept marks of the output cap and of lost output
        assert e.get("type") in ("stdout", "stderr", "truncated", "notice", "network_denied"), \
            "unexpected event in the middle: %r" % e
    return {
        "events": events,
        "accepted": events[0],
        "exit": exits[0],
        "stdout_bytes": out["stdout"],
        "stderr_bytes": out["stderr"],
        "stdout": out["stdout"].decode("utf-8", errors="replace"),
        "stderr": out["stderr"].decode("utf-8", errors="replace"),
        "elapsed": time.monotonic() - t0,
    }


def raw_connect(timeout=30):
    """A socket connected to sandboxd's unix socket, for requests written by hand."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(UNIX_SOCKET)
    return s


def assert_error(resp, status, code):
    """A 4xx answer with the JSON error envelope and the expected code."""
    assert resp.status == status, "expected %d %s, got %r" % (status, code, resp)
    ctype = resp.headers.get("Content-Type", "")
    assert ctype.split(";")[0].strip() == "application/json", "Content-Type %r" % ctype
    body = resp.json
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"].strip(), body
    return body["error"]


# --------------------------------------------------------------------------
# commands: snapshots, background starts, raw event streams with byte offsets

def commands_path(sid, rid=None, tail=""):
    p = "/v1/sessions/%s/commands" % sid
    if rid is not None:
        p += "/" + rid
    return p + tail


def snapshot(api, sid, rid):
    """GET .../commands/{rid}: the command's snapshot (asserts 200)."""
    r = api.get(commands_path(sid, rid))
    assert r.status == 200, "snapshot of %s: %r" % (rid, r)
    return r.json


def start_command(api, sid, body):
    """POST .../commands?wait=false: returns the 202 answer's JSON."""
    if isinstance(body, (list, tuple)):
        body = {"argv": list(body)}
    r = api.post(commands_path(sid) + "?wait=false", body)
    assert r.status == 202, "starting %r: %r" % (body, r)
    return r.json


def wait_terminal(api, sid, rid, timeout=30.0):
    """Polls the snapshot until the command is terminal; returns it."""
    last = {}

    def done():
        last["s"] = snapshot(api, sid, rid)
        return last["s"]["terminal"]

    try:
        wait_for(done, timeout=timeout, interval=0.1, what="command %s to end" % rid)
    except AssertionError as e:
        raise AssertionError("%s; last snapshot: %r" % (e, {k: v for k, v in last.get("s", {}).items()
                                                             if k not in ("stdout", "stderr")})) from None
    return last["s"]


# --------------------------------------------------------------------------
# what systemd and the kernel show of a command, in either exec mode. CMD is a command's
# JSON as the API gives it (an accepted event, a 202 answer, a snapshot, an item of the
# list): it names its "session" and its "unit", which in session mode is the session's
# exec unit; there its "cgroup" (set once the command runs) names its own cgroup below
# that unit's.

_COMMAND_CGROUP_RE = re.compile(r"c(\d+)-[0-9a-f]{16}")
# session ids (sandboxd-api(7), NODES): NODE_HEX, or 16 hex digits alone (before nodes had names)
SESSION_ID_RE = re.compile(r"(?:[a-z][a-z0-9]{0,31}_)?[0-9a-f]{16}")
NEW_SESSION_ID_RE = re.compile(r"[a-z][a-z0-9]{0,31}_[0-9a-f]{16}")


def exec_unit(sid):
    """The unit that runs every command of session SID in session mode."""
    return "sandboxd-%s-exec.service" % sid


def command_unit_name(sid, n):
    """The unit command N of session SID runs in: its own, or the session's exec unit."""
    return exec_unit(sid) if EXEC_MODE == "session" else "sandboxd-%s-%d.service" % (sid, n)


def command_unit(cmd):
    """CMD's "unit", checked to be what this lane's mode makes."""
    sid, unit = cmd["session"], cmd["unit"]
    if EXEC_MODE == "session":
        assert unit == exec_unit(sid), "not the exec unit of %s: %r" % (sid, cmd)
    else:
        assert re.fullmatch(r"sandboxd-%s-\d+\.service" % re.escape(sid), unit), "no command unit: %r" % cmd
    return unit


def cgroup_root():
    """The directory of PID 1's root cgroup, below which the paths that systemd and
    /proc/PID/cgroup give are: in the unified hierarchy, mounted on /sys/fs/cgroup (cgroup
    v2) or /sys/fs/cgroup/unified (a hybrid host, the only hierarchy with per-command
    cgroups there), else in systemd's own. In the testbed, which has no cgroup namespace,
    that root is the testbed's cgroup, not the mount's."""
    if sh("stat", "-fc", "%T", "/sys/fs/cgroup", check=False).stdout.strip() == "cgroup2fs":
        mount, hierarchy = "/sys/fs/cgroup", ""
    elif os.path.exists("/sys/fs/cgroup/unified/cgroup.procs"):
        mount, hierarchy = "/sys/fs/cgroup/unified", ""
    else:
        mount, hierarchy = "/sys/fs/cgroup/systemd", "name=systemd"
    with open("/proc/1/cgroup") as f:
        lines = [l.rstrip("\n").split(":", 2) for l in f]
    path = next(p for _, h, p in lines if h == hierarchy)
    return mount + re.sub(r"/init\.scope$", "", path).rstrip("/")


def command_cgroup(cmd):
    """The cgroup of CMD's processes, as /proc/PID/cgroup names it: its unit's in unit mode,
    in session mode its own below the exec unit's (the command must have started)."""
    unit = command_unit(cmd)
    base = "/sandboxd.slice/sandboxd-%s.slice/%s" % (cmd["session"], unit)
    if EXEC_MODE == "unit":
        return base
    cg = cmd.get("cgroup")
    assert cg, "no cgroup in %r: the command has not started (yet)" % cmd
    if cg.startswith("/"):
        assert cg.startswith(base + "/"), "a cgroup outside %s: %r" % (base, cmd)
        return cg
    assert _COMMAND_CGROUP_RE.fullmatch(cg), "not a command's cgroup: %r" % cmd
    return base + "/" + cg


def cgroup_pids(path):
    """The processes in cgroup PATH (below cgroup_root()), none if it does not exist."""
    try:
        with open(cgroup_root() + path + "/cgroup.procs") as f:
            return [int(l) for l in f.read().split()]
    except FileNotFoundError:
        return []


def command_running(cmd):
    """A process of CMD runs: its unit is active (unit mode), its cgroup holds a process."""
    if EXEC_MODE == "unit":
        return is_active(command_unit(cmd)) == "active"
    # "running" comes when the executor is handed the command, "cgroup" when it forked it
    return bool(cmd.get("cgroup")) and bool(cgroup_pids(command_cgroup(cmd)))


def command_main_pid(cmd):
    """The pid of CMD's main process (0 if there is none): its unit's MainPID, or in session
    mode the process of its cgroup whose parent (the executor) is not in it."""
    if EXEC_MODE == "unit":
        return int(systemctl_show(command_unit(cmd), "MainPID")["MainPID"] or 0)
    pids = cgroup_pids(command_cgroup(cmd))
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue
        if ppid not in pids:
            return pid
    return 0


def exec_session(api, scope, **extra):
    """A new session of SCOPE in exec mode session, whatever the lane."""
    user, ws = scope
    s = api.create_session(user, ws, exec_mode="session", **extra)
    assert s["state"] == "active" and s["exec_mode"] == "session", s
    return s


def exec_result(api, sid, body, timeout=60):
    """run() to the end, as one dict: the exit event's fields, the output, "unit" from the
    accepted event and "cgroup" from the command's snapshot."""
    r = run(api, sid, body, timeout=timeout)
    out = dict(r["exit"])
    out.update(stdout=r["stdout"], stderr=r["stderr"], unit=r["accepted"]["unit"])
    out["cgroup"] = snapshot(api, sid, r["accepted"]["request_id"]).get("cgroup")
    return out


def wait_command_running(api, sid, rid, timeout=20.0):
    """Waits until command RID of SID runs (its process exists, not merely accepted);
    returns its snapshot."""
    last = {}

    def running():
        last["s"] = snapshot(api, sid, rid)
        return last["s"]["status"] == "running" and command_running(last["s"]) and command_main_pid(last["s"])

    wait_for(running, timeout=timeout, what="command %s of %s to run" % (rid, sid))
    return last["s"]


def wait_command_ended(cmd, timeout=10.0, collected=False):
    """Nothing of CMD runs any more: in unit mode its unit is no longer active and has no main
    process (with COLLECTED: PID 1 has forgotten it); its cgroup holds no process."""
    if EXEC_MODE == "unit":
        unit = command_unit(cmd)
        if collected:
            wait_for(lambda: unit not in units(), timeout=timeout, what="%s to be gone from systemd" % unit)
        else:
            wait_for(lambda: is_active(unit) not in ("active", "activating", "deactivating"), timeout=timeout,
                     what="%s to stop" % unit)
            assert systemctl_show(unit, "MainPID")["MainPID"] in ("0", "")
    path = command_cgroup(cmd)
    wait_for(lambda: not cgroup_pids(path), timeout=timeout, what="no process left in %s" % path)


def session_commands_seen(sid):
    """{n: name} of session SID's commands as the system shows them: the command units PID 1
    knows (any state; unit mode), or the cgroups below its exec unit (session mode)."""
    if EXEC_MODE == "unit":
        found = (re.fullmatch(r"sandboxd-%s-(\d+)\.service" % re.escape(sid), u) for u in units())
        return {int(m.group(1)): m.group(0) for m in found if m}
    try:
        names = os.listdir(cgroup_root() + "/sandboxd.slice/sandboxd-%s.slice/%s" % (sid, exec_unit(sid)))
    except FileNotFoundError:
        return {}
    found = (_COMMAND_CGROUP_RE.fullmatch(n) for n in names)
    return {int(m.group(1)): m.group(0) for m in found if m}


def executor_tasks(sid):
    """The processes a session's slice holds when no command runs: none in unit mode; in
    session mode its executor's (those of the exec unit's cgroup outside the commands')."""
    if EXEC_MODE == "unit":
        return 0
    base = "/sandboxd.slice/sandboxd-%s.slice/%s" % (sid, exec_unit(sid))
    return len(cgroup_pids(base)) + len(cgroup_pids(base + "/supervisor"))


def snapshot_bytes(snap, stream):
    """A stream's kept bytes from a snapshot (text or *_b64)."""
    if snap.get(stream) is not None:
        return snap[stream].encode("utf-8")
    return base64.b64decode(snap[stream + "_b64"], validate=True)


class EventStream:
    """An NDJSON event stream of a command (POST .../commands or GET .../events), read
    line by line. Keeps the raw bytes of the kept lines: their length is the byte
    offset to re-attach at; lines marked "live":true do not count in offsets."""

    def __init__(self, api, method, path, body=None, timeout=SOCKET_TIMEOUT, offset=0):
        self.conn = api.connection(timeout=timeout)
        self.conn.request(method, path, body=api._encode(body), headers=api._headers(None, body))
        self.sock = self.conn.sock
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = self.resp.headers
        self.error_body = None
        if self.status != 200:
            self.error_body = self.resp.read()
        self.buf = b""
        self.start_offset = offset
        self.kept_raw = b""  # kept lines, as received
        self.live_raw = b""  # live lines, as received
        self.events = []
        self.eof = False

    @property
    def offset(self):
        """The byte offset of the kept event log after the last complete line received."""
        return self.start_offset + len(self.kept_raw)

    def __iter__(self):
        return self

    def __next__(self):
        assert self.status == 200, "stream refused: %d %r" % (self.status, (self.error_body or b"")[:500])
        while b"\n" not in self.buf:
            if self.eof:
                assert not self.buf.strip(), "stream ended inside a line: %r" % self.buf[:500]
                raise StopIteration
            chunk = self.resp.read1(65536)
            if not chunk:
                self.eof = True
                continue
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        raw = line + b"\n"
        try:
            ev = json.loads(line)
        except ValueError:
            raise AssertionError("not an NDJSON line: %r" % line[:500]) from None
        assert isinstance(ev, dict), line
        if ev.get("live") is True:
            self.live_raw += raw
        else:
            self.kept_raw += raw
        ev["_t"] = time.monotonic()
        self.events.append(ev)
        return ev

    def read_all(self):
        for _ in self:
            pass
        return self.events

    def close(self):
        """Hangs up, as a client that goes away does."""
        try:
            if self.sock is not None:
                self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.resp.close()
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_events(api, sid, rid, offset=None, timeout=SOCKET_TIMEOUT):
    """GET .../commands/{rid}/events[?offset=N] as an EventStream."""
    path = commands_path(sid, rid, "/events")
    if offset is not None:
        path += "?offset=%d" % offset
    return EventStream(api, "GET", path, timeout=timeout, offset=offset or 0)


def replay(api, sid, rid, offset=0, timeout=SOCKET_TIMEOUT):
    """The whole event stream from OFFSET to its end: (events, kept raw bytes)."""
    with open_events(api, sid, rid, offset, timeout=timeout) as st:
        st.read_all()
        return st.events, st.kept_raw


def stream_output(events, stream="stdout", live=None):
    """The bytes of a stream in EVENTS (live=None: all, True/False: only those)."""
    out = b""
    for ev in events:
        if ev.get("type") != stream:
            continue
        if live is not None and bool(ev.get("live")) != live:
            continue
        out += event_bytes(ev)
    return out


def assert_well_formed(events, what="stream"):
    """Exactly one accepted (first) and one exit (last), output in between."""
    types = [e.get("type") for e in events]
    assert types.count("accepted") == 1, "%s: %d accepted events: %r" % (what, types.count("accepted"), types[:5])
    assert types.count("exit") == 1, "%s: %d exit events: %r" % (what, types.count("exit"), types[-5:])
    assert types[0] == "accepted", "%s starts with %r" % (what, types[:3])
    assert types[-1] == "exit", "%s ends with %r" % (what, types[-3:])


# --------------------------------------------------------------------------
# the daemon itself

def daemon_pid():
    """sandboxd.service's MainPID (0 when it is not running)."""
    return int(systemctl_show("sandboxd.service", "MainPID")["MainPID"] or 0)


def wait_daemon_running(not_pid=None, timeout=20.0):
    """Waits until sandboxd.service is active with a main process (other than NOT_PID) and
    answers; returns its pid."""
    def up():
        pid = daemon_pid()
        return pid if pid and pid != not_pid and is_active("sandboxd.service") == "active" else None

    pid = wait_for(up, timeout=timeout, interval=0.1, what="sandboxd.service to run again")
    r = Api("unix").get("/v1/health")
    assert r.status == 200, r
    return pid


def restart_daemon(reload=False, timeout=20.0):
    """Restarts sandboxd.service, after a daemon-reload if RELOAD (a unit drop-in changed),
    and waits until it answers; returns its pid. reset-failed first: tests that restart it
    many times in a row must not run into the unit's start rate limit (StartLimitBurst=)."""
    if reload:
        sh("systemctl", "daemon-reload")
    sh("systemctl", "reset-failed", "sandboxd.service", check=False)
    sh("systemctl", "restart", "sandboxd.service")
    return wait_daemon_running(timeout=timeout)


@contextlib.contextmanager
def config_dropin(path, reload=False, timeout=20.0):
    """A drop-in at PATH (of sandboxd.conf, or of the unit with RELOAD): yields write(text),
    which writes it and restarts sandboxd with it (restart_daemon(RELOAD, TIMEOUT)). On
    exit the drop-in, if written, is removed and sandboxd restarted without it."""
    def write(text):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        restart_daemon(reload, timeout)

    try:
        yield write
    finally:
        if os.path.exists(path):
            os.unlink(path)
            restart_daemon(reload, timeout)


# --------------------------------------------------------------------------
# requests that wait on PID 1: the system bus paused (SIGSTOP to dbus-daemon), every call
# of sandboxd to PID 1 waits; systemctl talks to PID 1 over its private socket and keeps
# working (test_stop_inflight.py, tests/cgroup-v2)

def dbus_daemon_pid():
    """The system bus (dbus-daemon): SIGSTOP to it holds every call of sandboxd to PID 1.
    Always SIGCONT it in a finally."""
    pid = int(systemctl_show("dbus.service", "MainPID")["MainPID"] or 0)
    assert pid > 0, "no dbus-daemon"
    return pid


def gauge(api, name):
    """The value of a gauge of /metrics, its labels summed (sandboxd_http_requests_waiting:
    the requests suspended, waiting on PID 1, stdin, a freeze or a file operation)."""
    n = 0
    for line in api.get("/metrics").body.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            n += int(float(line.split()[-1]))
    return n


class Client(threading.Thread):
    """One request over the unix socket in a thread of its own: .answer, or .error."""

    def __init__(self, method, path, body=None, headers=None):
        super().__init__(daemon=True)
        self.method, self.path, self.body, self.headers = method, path, body, headers
        self.answer = self.error = None

    def run(self):
        try:
            self.answer = Api("unix").request(self.method, self.path, self.body, headers=self.headers)
        except Exception as e:  # noqa: BLE001 - a dropped connection is a failure here
            self.error = e


def pid1_quiet(api):
    """Before the bus is paused: PID 1 has no job of sandboxd's units under way and the
    warm pool makes no slice. A unit PID 1 is starting when the bus stops can make PID 1 itself wait on the
    bus, and with it systemctl and the reaping of sandboxd's exit (seen once in about ten
    runs, under load: PID 1 logged the start of a command sandboxd had just started, and
    sandboxd's end, only once the bus went on, 20 s later)."""
    settle_pool(api)
    # sandboxd's units only: a system may have jobs of its own that last (in the VM lane
    # there is always one)
    wait_for(lambda: not sh("systemctl", "list-jobs", "--no-legend", "sandboxd*").stdout.strip(), timeout=30,
             what="PID 1 to have no job of sandboxd's units under way")


@contextlib.contextmanager
def bus_paused(api):
    """Pauses the system bus (SIGSTOP to dbus-daemon) for the block, once PID 1 is quiet
    (pid1_quiet()): every call of sandboxd to PID 1 waits meanwhile. systemctl talks to
    PID 1 over its private socket and keeps working."""
    pid1_quiet(api)
    bus = dbus_daemon_pid()
    os.kill(bus, signal.SIGSTOP)
    try:
        yield bus
    finally:
        os.kill(bus, signal.SIGCONT)


def start_waiting(api, clients, timeout=15, what="the requests to wait", waiting=None):
    """Starts the Client threads and returns once sandboxd counts WAITING requests waiting
    (default: as many as CLIENTS; more where some already wait)."""
    for c in clients:
        c.start()
    want = len(clients) if waiting is None else waiting
    try:
        wait_for(lambda: gauge(api, "sandboxd_http_requests_waiting") >= want, timeout=timeout, what=what)
    except AssertionError:
        raise AssertionError("not all requests wait: %r" % [(c.path, c.answer, c.error) for c in clients]) from None


def gone(pid):
    """PID has exited (a zombie not yet reaped by PID 1 counts)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True


def exited_cleanly(old_pid):
    """sandboxd's main process OLD_PID is gone, and systemd saw it exit 0: no abort, no
    core, no SIGKILL after TimeoutStopSec=."""
    wait_for(lambda: daemon_pid() != old_pid, timeout=30, what="sandboxd to exit")
    show = systemctl_show("sandboxd.service", "Result", "ExecMainCode", "ExecMainStatus")
    assert show["Result"] == "success", show
    assert show["ExecMainCode"] == "1" and show["ExecMainStatus"] == "0", show  # CLD_EXITED, 0


def assert_stopping(c):
    """Client C was answered 503 stopping, with Retry-After."""
    assert not c.is_alive(), "%s %s still waiting after the stop" % (c.method, c.path)
    assert c.error is None, "%s %s: no answer, %r" % (c.method, c.path, c.error)
    assert c.answer.status == 503, (c.method, c.path, c.answer)
    assert c.answer.json["error"]["code"] == "stopping", c.answer
    assert c.answer.headers.get("Retry-After"), c.answer.headers


# --------------------------------------------------------------------------
# names

_NAME_RE = re.compile(r"[^a-z0-9_-]+")


def unique_user():
    return "u" + secrets.token_hex(5)


def workspace_for(nodename):
    w = _NAME_RE.sub("-", nodename.lower()).strip("-")
    return (w[:50] or "ws") + "-" + secrets.token_hex(3)


# --------------------------------------------------------------------------
# fixtures

def hash_key(tenant, key):
    """The keys file's line for KEY, from sandboxd --hash-key."""
    line = sh(SANDBOXD_BIN, "--hash-key=" + tenant, input=key + "\n").stdout.strip()
    assert re.fullmatch(tenant + r" sha256:[0-9a-f]{64}", line), line
    return line


@pytest.fixture(scope="session")
def api_keys():
    """sandboxd.socket enabled and listening, and API keys for tenant1 and tenant2
    in /etc/sandboxd/api-keys. Returns {tenant: key}.

    sandboxd reads the keys when it starts: if it is already running it is
    stopped, and the next request starts it again through the socket (so the
    activation test still sees a daemon started by its own request)."""
    sh("systemctl", "enable", "--now", "sandboxd.socket")
    keys = {TENANT: secrets.token_urlsafe(32), TENANT2: secrets.token_urlsafe(32)}
    lines = [hash_key(t, k) for t, k in keys.items()]

    try:
        with open(API_KEYS_FILE) as f:
            old = f.read()
    except FileNotFoundError:
        old = None
    kept = [l for l in (old or "").splitlines() if l.split(" ")[0] not in keys]
    os.makedirs(os.path.dirname(API_KEYS_FILE), exist_ok=True)
    with open(API_KEYS_FILE, "w") as f:
        f.write("".join(l + "\n" for l in kept + lines))
    os.chmod(API_KEYS_FILE, 0o600)

    write_exec_mode_dropin()
    write_default_image_dropin()
    _daemon_starts["cursor"] = journal_cursor()  # whatever starts it next reads the drop-in

    if is_active("sandboxd.service") in ("active", "activating", "reloading"):
        sh("systemctl", "stop", "sandboxd.service")
    sh("systemctl", "reset-failed", "sandboxd.service", check=False)
    yield keys

    if old is None:
        os.unlink(API_KEYS_FILE)
    else:
        with open(API_KEYS_FILE, "w") as f:
            f.write(old)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(EXEC_MODE_DROPIN)


_daemon_starts = {}  # "cursor": the journal from before the run's first start of sandboxd


def write_default_image_dropin():
    """With SANDBOXD_TEST_DEFAULT_IMAGE: that image bound into sandboxd's images directory
    (before sandboxd starts: a mount made later does not reach its mount namespace) and
    [Images] Default= naming it; without, no such drop-in."""
    if not DEFAULT_IMAGE:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(DEFAULT_IMAGE_DROPIN)
        return
    src = os.path.join(os.environ.get("SANDBOXD_TEST_IMAGES", ""), DEFAULT_IMAGE)
    dst = os.path.join("/var/lib/sandboxd/images", DEFAULT_IMAGE)
    assert os.path.isdir(src), "SANDBOXD_TEST_DEFAULT_IMAGE=%s: no %s" % (DEFAULT_IMAGE, src)
    os.makedirs(dst, exist_ok=True)
    with open("/proc/self/mountinfo") as f:
        if not any(line.split()[4] == dst for line in f):
            sh("mount", "--bind", src, dst)
    os.makedirs(os.path.dirname(DEFAULT_IMAGE_DROPIN), exist_ok=True)
    with open(DEFAULT_IMAGE_DROPIN, "w") as f:
        f.write("# written by the integration tests (SANDBOXD_TEST_DEFAULT_IMAGE)\n[Images]\nDefault=%s\n"
                % DEFAULT_IMAGE)


def write_exec_mode_dropin():
    """The lane's exec mode for the daemon under test, read when it starts next: in session
    mode EXEC_MODE_DROPIN says [Session] ExecMode=session; in unit mode there is none (one
    left behind by an interrupted session run would turn this lane into that one)."""
    if EXEC_MODE == "unit":
        with contextlib.suppress(FileNotFoundError):
            os.unlink(EXEC_MODE_DROPIN)
        return
    os.makedirs(os.path.dirname(EXEC_MODE_DROPIN), exist_ok=True)
    with open(EXEC_MODE_DROPIN, "w") as f:
        f.write("# written by the integration tests (SANDBOXD_TEST_EXEC_MODE=%s)\n"
                "[Session]\nExecMode=%s\n" % (EXEC_MODE, EXEC_MODE))


@pytest.fixture(scope="session")
def exec_mode():
    """The exec mode this lane runs every session in: "unit" or "session"."""
    return EXEC_MODE


@pytest.fixture(scope="session")
def api_key(api_keys):
    """tenant1's key."""
    return api_keys[TENANT]


# what systemd logs when sandboxd dies rather than exits cleanly
_CRASH_RE = re.compile(r"sandboxd\.service: (Main process exited, code=(killed|dumped|exited, status=[1-9])"
                       r"|Failed with result|Watchdog timeout|Scheduled restart job)")
_KILLED_RES = [re.compile(r"sandboxd\.service: Main process exited, code=killed, status=9/KILL"),
               re.compile(r"sandboxd\.service: Failed with result 'signal'"),
               re.compile(r"sandboxd\.service: Scheduled restart job")]


@pytest.fixture(autouse=True)
def _daemon_survives(request, api_key):
    """Fails the test if sandboxd.service crashed (or failed to exit cleanly)
    during it: Restart=on-failure would otherwise hide a crash."""
    cursor = journal_cursor()
    request.node._sandboxd_cursor = cursor
    yield
    if cursor is None:
        return
    time.sleep(0.05)  # let PID 1's last messages reach the journal
    log = journal_since(cursor, "sandboxd.service", lines=400)
    bad = [l for l in log.splitlines() if _CRASH_RE.search(l)]
    marker = request.node.get_closest_marker("kills_daemon")
    if marker:
        # What systemd logs for each SIGKILL the test sent: tolerated that many times, nothing else.
        allowed = int(marker.args[0]) if marker.args else 1
        for pattern in _KILLED_RES:
            hits = [l for l in bad if pattern.search(l)]
            for l in hits[:allowed]:
                bad.remove(l)
    assert not bad, "sandboxd.service crashed or failed during the test:\n" + "\n".join(bad)


def settle_pool(api, timeout=60.0):
    """Waits until the warm pool has no slice being started and no refill due: a daemon
    that has just started fills it, and a session that takes a slice has it refilled, which
    tests comparing the units before and after must not see."""
    def settled():
        r = api.get("/v1/pool")
        return r.status == 200 and r.json["starting"] == 0 and not r.json["refill_due"]
    wait_for(settled, timeout=timeout, interval=0.1, what="the warm pool to be filled")


def check_exec_mode_known(cursor):
    """In the session lane, the daemon must know ExecMode=: if it ignored the setting (an
    older sandboxd), every test would run in unit mode and the lane would prove nothing. Ends
    the run with the reason. CURSOR: the journal from before sandboxd read the drop-in."""
    if EXEC_MODE == "unit":
        return
    time.sleep(0.2)  # its start's lines to reach the journal
    log = journal_since(cursor, "sandboxd.service", lines=100000)
    if re.search(r"unknown setting \[Session\] ExecMode=", log):
        pytest.exit("exec mode %s: sandboxd ignores [Session] ExecMode= of %s (\"unknown setting\"), so this "
                    "lane would run in unit mode" % (EXEC_MODE, EXEC_MODE_DROPIN), returncode=3)


@pytest.fixture(scope="session")
def api(api_key):
    """The API over the unix socket (as root), with sandboxd started and its pool filled."""
    a = Api("unix")
    settle_pool(a)
    check_exec_mode_known(_daemon_starts.get("cursor"))
    return a


@pytest.fixture(scope="session")
def tcp(api_key, api):
    """The API over TCP with tenant1's key, checked to be the daemon of this
    system (another system's sandboxd could hold the port on a shared network
    namespace): a session created over TCP must be visible over the unix socket."""
    t = Api("tcp", key=api_key)
    user, ws = unique_user(), "tcp-probe"
    r = t.post("/v1/sessions", {"user": user, "workspace": ws})
    assert r.status == 201, "creating a session over TCP %s:%d: %r" % (TCP_HOST, TCP_PORT, r)
    sid = r.json["id"]
    r2 = api.get("/v1/sessions/" + sid)
    assert r2.status == 200 and r2.json["user"] == user, (
        "the session created over TCP is unknown on %s: is %s:%d served by another sandboxd? (%r)"
        % (UNIX_SOCKET, TCP_HOST, TCP_PORT, r2))
    assert "sandboxd-%s.slice" % sid in units(), "the TCP daemon's slice is not in this systemd"
    return t


@pytest.fixture(scope="session")
def tcp2(api_keys, tcp):
    """The API over TCP with tenant2's key."""
    return Api("tcp", key=api_keys[TENANT2])


@pytest.fixture
def scope(request):
    """A fresh (user, workspace) pair for this test."""
    return unique_user(), workspace_for(request.node.name)


@pytest.fixture
def session(api, scope):
    """A new active session of a scope of its own (default limits)."""
    user, ws = scope
    s = api.create_session(user, ws)
    assert s["state"] == "active", s
    assert s.get("exec_mode", EXEC_MODE) == EXEC_MODE, s
    return s
