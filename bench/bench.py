#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd benchmark: sandboxd over HTTP against systemd-run with the same unit properties.

Runs as root on a machine (or testbed) whose PID 1 is systemd and where sandboxd.socket
is listening; `tools/dev bench` sets that up. Python standard library only.

For `true` and for `echo hello`, under the full default hardening of a command unit:

  (a) systemd-run --wait --pipe with the unit properties sandboxd sets,
  (b) sandboxd: POST /v1/sessions/{sid}/commands over the unix socket, in a warm session,
  (c) sandboxd: POST /v1/sessions (fresh scope) then its first command, against
      systemd-run with fresh state directories,

sequential p50/p95 (a and b alternating, to spread machine noise), throughput with 1, 8
and 32 concurrent clients (with the CPU time per command of PID 1, dbus-daemon,
journald, sandboxd and the clients), and streaming 256 MiB of stdout. It prints a table
with every ratio sandboxd / systemd-run. The exit status is 0 whether or not the targets
are met (a benchmark, not a test), 1 when something failed (a command that did not
succeed, wrong output, an HTTP error, a stream that stalled).

Environment:
  BENCH_N=30            sequential iterations (after BENCH_WARMUP=3 warm-ups)
  BENCH_K=64            commands per throughput run, in BENCH_ROUNDS=2 alternating rounds
  BENCH_CONCURRENCY=1,8,32
  BENCH_STREAM_MIB=256  size of the streaming test; BENCH_STREAM_RUNS=3 (median)
  BENCH_SOCKET=/run/sandboxd/http.sock
  BENCH_TIMEOUT=30      seconds without progress before a request counts as stalled
  BENCH_LIMITS=JSON     "limits" of the warm session, e.g. {"cpu_quota":200} (default: the
                        configured defaults); the systemd-run slice gets the same
  BENCH_JSON=PATH       also write every number as JSON to PATH
  BENCH_SKIP=a,b        skip phases: seq, create, throughput, stream, verify
"""

import base64
import concurrent.futures
import fcntl
import http.client
import json
import os
import re
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

SOCK = os.environ.get("BENCH_SOCKET", "/run/sandboxd/http.sock")
N = int(os.environ.get("BENCH_N", "30"))
WARMUP = int(os.environ.get("BENCH_WARMUP", "3"))
K = int(os.environ.get("BENCH_K", "64"))
ROUNDS = max(1, int(os.environ.get("BENCH_ROUNDS", "2")))
CONCURRENCY = [int(x) for x in os.environ.get("BENCH_CONCURRENCY", "1,8,32").split(",") if x.strip()]
STREAM_BYTES = int(float(os.environ.get("BENCH_STREAM_MIB", "256")) * 1024 * 1024)
STREAM_RUNS = int(os.environ.get("BENCH_STREAM_RUNS", "3"))
SKIP = {x.strip() for x in os.environ.get("BENCH_SKIP", "").split(",") if x.strip()}
TIMEOUT = float(os.environ.get("BENCH_TIMEOUT", "30"))
LIMITS = json.loads(os.environ.get("BENCH_LIMITS") or "null")
RUN_ID = "%x" % (int(time.time()) & 0xFFFFFF)

COMMANDS = {
    "true": (["true"], b""),
    "echo hello": (["echo", "hello"], b"hello\n"),
}
# Text in lines of 64 bytes (63 + "\n"), so that it travels as "data" (not "data_b64"),
# written in 1 MiB blocks by one process straight into the stdout pipe. (`yes | head -c`
# puts a second pipe and process before sandboxd: on a 2-core machine whose pipes carry
# ~250 MiB/s that alone would bound both sides.)
STREAM_ARGV = ["/usr/bin/python3", "-c",
               "import os\n"
               "b = memoryview(b'0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\\n' * 16384)\n"
               "n = %d\n"
               "while n > 0:\n"
               "    n -= os.write(1, b[:n])\n" % STREAM_BYTES]
# The systemd-run side: its own slices (same depth as sandboxd.slice/sandboxd-<sid>.slice),
# its own dynamic user and state directories.
BASE_PARENT_SLICE = "sbxbench.slice"
BASE_SLICE = "sbxbench-run.slice"
BASE_USER = "sbx-bench"
BASE_USERDB = "/run/sbxbench-userdb"

ERRORS = []
LOCK = threading.Lock()


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def error(msg):
    with LOCK:
        ERRORS.append(msg)
    log("ERROR: " + msg)


# ---------------------------------------------------------------------------------------
# The unit properties. This mirrors systemd_start_command_async() (and the slice of
# systemd_start_slice_async()) in src/sandboxd/systemd.c, plus the values that
# src/sandboxd/command.c passes to it: keep the two in step. verify_properties() checks
# the result on live units of both kinds.


def command_properties(user, workspace, home, tmp, statedirs, runtime_max_sec, timeout_stop_sec):
    env = [
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG=C.UTF-8",
        "HOME=" + home,
        "TMPDIR=" + tmp,
        "XDG_CONFIG_HOME=%s/.config" % home,
        "XDG_CACHE_HOME=%s/.cache" % home,
        "XDG_DATA_HOME=%s/.local/share" % home,
        "XDG_STATE_HOME=%s/.local/state" % home,
    ]
    props = [
        ("Type", "exec"),
        # Not set here: RemainAfterExit=yes (sandboxd sets it so that PID 1 keeps the
        # result until sandboxd has read it, then stops the unit): systemd-run --wait
        # waits for the unit to become inactive and would never return. AddRef=yes is
        # set by systemd-run itself with --wait/--pipe, as sandboxd does.
        ("WorkingDirectory", workspace),
        ("DynamicUser", "yes"),
        ("User", user),
        ("StateDirectory", " ".join(statedirs)),
        ("StateDirectoryMode", "0700"),
        ("UMask", "0077"),
        ("RuntimeMaxSec", str(runtime_max_sec)),
        ("TimeoutStopSec", str(timeout_stop_sec)),
        ("KillMode", "control-group"),
        ("CPUAccounting", "yes"),
        ("MemoryAccounting", "yes"),
        ("TasksAccounting", "yes"),
        ("IOAccounting", "yes"),
        # the default hardening
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("PrivateDevices", "yes"),
        ("PrivateIPC", "yes"),
        ("PrivateNetwork", "yes"),
        ("NoNewPrivileges", "yes"),
        ("CapabilityBoundingSet", ""),
        ("AmbientCapabilities", ""),
        ("SystemCallFilter", "@system-service"),
        ("SystemCallFilter", "~@privileged io_uring_setup io_uring_enter io_uring_register"),
        ("SystemCallErrorNumber", "EPERM"),
        ("SystemCallArchitectures", "native"),
        ("RestrictNamespaces", "yes"),
        ("RestrictSUIDSGID", "yes"),
        ("RestrictRealtime", "yes"),
        ("LockPersonality", "yes"),
        ("ProtectKernelTunables", "yes"),
        ("ProtectKernelModules", "yes"),
        ("ProtectKernelLogs", "yes"),
        ("ProtectControlGroups", "yes"),
        ("ProtectClock", "yes"),
        ("ProtectHostname", "yes"),
        ("ProtectProc", "invisible"),
        ("ProcSubset", "pid"),
        ("DevicePolicy", "closed"),
        ("KeyringMode", "private"),
        ("RemoveIPC", "yes"),
        ("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6"),
        ("IPAddressDeny", "any"),
        # config_builtin_inaccessible in src/sandboxd/config.c
        ("InaccessiblePaths", "-/etc/ssh -/etc/sandboxd -/run/dbus -/run/sandboxd -/var/lib/sandboxd/sessions "
                              "-/run/systemd/transient -/run/systemd/units -/run/systemd/dynamic-uid "
                              "-/run/systemd/journal -/run/systemd/io.system.ManagedOOM"),
        ("TemporaryFileSystem", "/dev/shm:mode=1777,nosuid,nodev"),
        ("TemporaryFileSystem", "/run/lock:ro"),
        # the session's user records instead of PID 1's userdb socket
        ("TemporaryFileSystem", "/run/systemd/userdb:ro,mode=0755"),
        ("BindReadOnlyPaths", BASE_USERDB + ":/run/userdb"),
    ]
    # what a command sees of the cgroup file systems: its own slice (cgroup_session_view())
    for tmpfs, bind in cgroup_view(BASE_PARENT_SLICE, BASE_SLICE):
        props.append(("TemporaryFileSystem", tmpfs + ":ro,mode=0755"))
        props.append(("BindReadOnlyPaths", "-%s:%s" % (bind, bind)))
    return props, env


def cgroup_view(parent_slice, slice_name):
    """[(tmpfs, bind)] per cgroup hierarchy, as src/sandboxd/cgroup.c computes them."""
    root = subprocess.run(["busctl", "get-property", "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                           "org.freedesktop.systemd1.Manager", "ControlGroup"], capture_output=True,
                          text=True).stdout.split('"')[1].rstrip("/")
    parent = "%s/%s" % (root, parent_slice)
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        hierarchies = ["/sys/fs/cgroup"]
    else:
        hierarchies = ["/sys/fs/cgroup/" + d for d in sorted(os.listdir("/sys/fs/cgroup"))
                       if os.path.isdir("/sys/fs/cgroup/" + d) and not os.path.islink("/sys/fs/cgroup/" + d)]
    return [(h + parent, "%s%s/%s" % (h, parent, slice_name)) for h in hierarchies if os.path.isdir(h + parent)]


def slice_properties(limits):
    """StartTransientUnit properties of a session slice, as (name, D-Bus type, value)."""
    return [
        ("Description", "s", "sandboxd bench baseline"),
        ("CollectMode", "s", "inactive-or-failed"),
        ("MemoryAccounting", "b", "true"),
        ("CPUAccounting", "b", "true"),
        ("TasksAccounting", "b", "true"),
        ("IOAccounting", "b", "true"),
        ("MemoryMax", "t", str(limits["memory_max"])),
        ("MemorySwapMax", "t", "0"),
        ("CPUQuotaPerSecUSec", "t", str(limits["cpu_quota"] * 1000000 // 100)),
        ("TasksMax", "t", str(limits["tasks_max"])),
    ]


# Compared between a live sandboxd command unit and a live systemd-run unit.
VERIFY_SERVICE = [
    "Type", "DynamicUser", "UMask", "RuntimeMaxUSec", "TimeoutStopUSec", "KillMode", "CPUAccounting",
    "MemoryAccounting", "TasksAccounting", "IOAccounting", "ProtectSystem", "ProtectHome", "PrivateTmp",
    "PrivateDevices", "PrivateIPC", "PrivateNetwork", "NoNewPrivileges", "CapabilityBoundingSet",
    "AmbientCapabilities", "SystemCallFilter", "SystemCallErrorNumber", "SystemCallArchitectures",
    "RestrictNamespaces", "RestrictSUIDSGID", "RestrictRealtime", "LockPersonality", "ProtectKernelTunables",
    "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups", "ProtectClock", "ProtectHostname",
    "ProtectProc", "ProcSubset", "DevicePolicy", "DeviceAllow", "KeyringMode", "RemoveIPC",
    "RestrictAddressFamilies", "IPAddressDeny", "InaccessiblePaths", "StateDirectoryMode", "MemoryDenyWriteExecute",
    "PrivateUsers", "PrivateMounts", "ProtectKernelTunables", "LimitNOFILE", "TasksMax", "MemoryMax",
    "CPUQuotaPerSecUSec", "StandardInput", "StandardOutput", "StandardError", "RemainAfterExit", "AddRef",
]
VERIFY_SLICE = ["MemoryMax", "MemorySwapMax", "CPUQuotaPerSecUSec", "TasksMax", "MemoryAccounting",
                "CPUAccounting", "TasksAccounting", "IOAccounting"]
EXPECTED_DIFF = {"RemainAfterExit": "sandboxd sets RemainAfterExit=yes; systemd-run --wait cannot"}


# ---------------------------------------------------------------------------------------
# systemd-run


class Baseline:
    def __init__(self, limits, runtime_max_sec, timeout_stop_sec):
        self.limits = limits
        self.runtime_max_sec = runtime_max_sec
        self.timeout_stop_sec = timeout_stop_sec
        self.phases = {"runtime": [], "cpu": []}

    def argv(self, cmd, scope="warm", unit=None):
        base = "sbxbench"
        statedirs = ["%s/ws/bench/%s" % (base, scope), "%s/home/bench/%s" % (base, scope),
                     "%s/tmp/bench/%s" % (base, scope)]
        workspace = "/var/lib/" + statedirs[0]
        props, env = command_properties(BASE_USER, workspace, "/var/lib/" + statedirs[1],
                                        "/var/lib/" + statedirs[2], statedirs, self.runtime_max_sec,
                                        self.timeout_stop_sec)
        # not --quiet: its last lines give the unit's runtime and CPU time
        a = ["systemd-run", "--wait", "--pipe", "--collect", "--slice=" + BASE_SLICE]
        if unit:
            a.append("--unit=" + unit)
        for k, v in props:
            a.append("--property=%s=%s" % (k, v))
        for e in env:
            a.append("--setenv=" + e)
        a.append("--")
        a.extend(cmd)
        return a

    def run(self, name, scope="warm", record_phases=False):
        """One command, stdout to a file: done when systemd-run exits. Returns seconds."""
        cmd, expected = COMMANDS[name]
        argv = self.argv(cmd, scope)
        with tempfile.TemporaryFile(dir="/tmp") as out, tempfile.TemporaryFile(dir="/tmp") as err:
            t0 = time.perf_counter()
            p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
            dt = time.perf_counter() - t0
            out.seek(0)
            got = out.read()
            err.seek(0)
            msg = err.read().decode(errors="replace")
            if p.returncode != 0 or got != expected:
                error("systemd-run %s: exit %d, stdout %r, stderr %r" % (name, p.returncode, got[:100], msg[:300]))
        if record_phases:
            m1 = re.search(r"^Service runtime: (.+)$", msg, re.M)
            m2 = re.search(r"^CPU time consumed: (.+)$", msg, re.M)
            with LOCK:
                if m1:
                    self.phases["runtime"].append(parse_timespan(m1.group(1)))
                if m2:
                    self.phases["cpu"].append(parse_timespan(m2.group(1)))
        return dt

    def stream(self):
        """Streams STREAM_BYTES through systemd-run --pipe; returns (seconds total, seconds
        from the first byte), or None."""
        r, w = os.pipe()
        try:
            fcntl.fcntl(r, fcntl.F_SETPIPE_SZ, 1024 * 1024)  # as sandboxd's pipes
        except OSError:
            pass
        argv = self.argv(STREAM_ARGV)
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=w, stderr=subprocess.PIPE)
        os.close(w)
        n = 0
        t_first = t1 = None
        stalled = False
        buf = bytearray(1024 * 1024)
        with open(r, "rb", buffering=0) as f:
            while True:
                if not select.select([f], [], [], TIMEOUT)[0]:
                    stalled = True
                    p.kill()
                    break
                k = f.readinto(buf)
                if not k:
                    break
                if t_first is None:
                    t_first = time.perf_counter()
                n += k
                if n >= STREAM_BYTES and t1 is None:
                    t1 = time.perf_counter()
        _, err = p.communicate()
        if stalled or p.returncode != 0 or n != STREAM_BYTES:
            error("systemd-run stream: %sexit %d, %d of %d bytes, stderr %r" %
                  ("stalled, " if stalled else "", p.returncode, n, STREAM_BYTES, err[:300]))
            return None
        return t1 - t0, t1 - (t_first or t0)

    def start_slices(self):
        os.makedirs(BASE_USERDB, mode=0o755, exist_ok=True)
        busctl_start(BASE_PARENT_SLICE, [("Description", "s", "sandboxd bench baseline"),
                                         ("MemoryAccounting", "b", "true"), ("CPUAccounting", "b", "true"),
                                         ("TasksAccounting", "b", "true"), ("IOAccounting", "b", "true")])
        busctl_start(BASE_SLICE, slice_properties(self.limits))

    def stop_slices(self):
        subprocess.run(["systemctl", "stop", BASE_SLICE, BASE_PARENT_SLICE], stderr=subprocess.DEVNULL)


def parse_timespan(text):
    """systemd's "1min 2.345s", "85ms", "912us" in seconds."""
    units = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}
    total = 0.0
    for num, unit in re.findall(r"([0-9.]+)\s*(us|ms|min|s|h)\b", text):
        total += float(num) * units[unit]
    return total


def busctl_start(unit, props):
    subprocess.run(["systemctl", "stop", unit], stderr=subprocess.DEVNULL)
    argv = ["busctl", "call", "--quiet", "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
            "org.freedesktop.systemd1.Manager", "StartTransientUnit", "ssa(sv)a(sa(sv))", unit, "fail",
            str(len(props))]
    for name, sig, value in props:
        argv += [name, sig, value]
    argv.append("0")
    subprocess.run(argv, check=True)
    for _ in range(100):
        if systemctl_show(unit, ["ActiveState"]).get("ActiveState") == "active":
            return
        time.sleep(0.02)
    raise RuntimeError("%s did not become active" % unit)


def systemctl_show(unit, props):
    p = subprocess.run(["systemctl", "show", unit, "--property=" + ",".join(props)],
                       capture_output=True, text=True)
    out = {}
    for line in p.stdout.splitlines():
        k, _, v = line.partition("=")
        out[k] = v
    return out


# ---------------------------------------------------------------------------------------
# sandboxd over HTTP on the unix socket


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=TIMEOUT):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


class HTTPError(Exception):
    pass


class Client:
    """One keep-alive connection per thread."""

    def __init__(self, path):
        self.path = path
        self.local = threading.local()
        self.reconnects = 0

    def conn(self):
        c = getattr(self.local, "conn", None)
        if c is None:
            c = self.local.conn = UnixHTTPConnection(self.path)
        return c

    def drop(self):
        c = getattr(self.local, "conn", None)
        if c is not None:
            c.close()
            self.local.conn = None

    def request(self, method, url, body=None):
        """Returns the response (headers read). Retries once on a closed keep-alive connection."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        for attempt in (0, 1):
            c = self.conn()
            try:
                c.request(method, url, body=data, headers=headers)
                return c.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError,
                    http.client.CannotSendRequest, http.client.ResponseNotReady):
                self.drop()
                if attempt:
                    raise
                with LOCK:
                    self.reconnects += 1

    def json(self, method, url, body=None, ok=(200, 201, 202, 204)):
        resp = self.request(method, url, body)
        data = resp.read()
        if resp.status not in ok:
            raise HTTPError("%s %s: %d %s" % (method, url, resp.status, data[:300]))
        if resp.will_close:
            self.drop()
        return json.loads(data) if data.strip() else None

    def exec(self, sid, argv, on_line=None, request_id=None):
        """Runs argv; returns (exit event, stdout bytes, t_accepted, t_exit) with times from
        the request's start. on_line, if given, gets every stdout event instead."""
        body = {"argv": argv}
        if request_id:
            body["request_id"] = request_id
        t0 = time.perf_counter()
        resp = self.request("POST", "/v1/sessions/%s/commands" % sid, body)
        if resp.status != 200:
            raise HTTPError("exec %s: %d %s" % (argv, resp.status, resp.read()[:300]))
        out = []
        exit_ev = None
        t_acc = t_exit = None
        pending = b""
        while True:
            chunk = resp.read1(1 << 20)
            if not chunk:
                break
            pending += chunk
            if b"\n" not in chunk:
                continue
            lines = pending.split(b"\n")
            pending = lines.pop()
            for line in lines:
                if not line:
                    continue
                ev = json.loads(line)
                t = ev.get("type")
                if t == "stdout":
                    if on_line:
                        on_line(ev)
                    elif "data" in ev:
                        out.append(ev["data"].encode())
                    else:
                        out.append(base64.b64decode(ev["data_b64"]))
                elif t == "accepted":
                    t_acc = time.perf_counter() - t0
                elif t == "exit":
                    t_exit = time.perf_counter() - t0
                    exit_ev = ev
        if resp.will_close:
            self.drop()
        if exit_ev is None:
            raise HTTPError("exec %s: the stream ended without an exit event" % argv)
        return exit_ev, b"".join(out), t_acc, t_exit


class Sandboxd:
    def __init__(self, client):
        self.c = client
        self.sessions = []
        self.phases = {"accepted": [], "exit_after_accepted": [], "duration_ms": [], "cpu": []}

    def create_session(self, workspace, limits=None):
        body = {"user": "bench", "workspace": workspace}
        if limits:
            body["limits"] = limits
        s = self.c.json("POST", "/v1/sessions", body)
        self.sessions.append(s["id"])
        return s

    def delete_session(self, sid):
        self.c.json("DELETE", "/v1/sessions/%s?purge=true" % sid, ok=(200, 202, 204, 404))
        self.sessions.remove(sid)

    def run(self, sid, name, record_phases=False):
        cmd, expected = COMMANDS[name]
        ev, out, t_acc, t_exit = self.c.exec(sid, cmd)
        if ev.get("status") != "succeeded" or ev.get("exit_code") != 0 or out != expected:
            error("sandboxd %s: exit %s, stdout %r" % (name, json.dumps(ev), out[:100]))
        if record_phases:
            with LOCK:
                self.phases["accepted"].append(t_acc)
                self.phases["exit_after_accepted"].append(t_exit - t_acc)
                self.phases["duration_ms"].append(ev.get("duration_ms", 0) / 1000.0)
                self.phases["cpu"].append((ev.get("usage") or {}).get("cpu_usec", 0) / 1e6)
        return t_exit

    def stream(self, sid, i):
        """Streams STREAM_BYTES of stdout through sandboxd; returns (seconds total, seconds
        from the first byte, stats), or None when the stream stalled or failed."""
        st = {"bytes": 0, "live": 0, "kept": 0, "events": 0, "t_first": None}
        rid = "stream-%s-%d" % (RUN_ID, i)

        def account(n, live):
            if st["t_first"] is None:
                st["t_first"] = time.perf_counter()
            st["bytes"] += n
            st["events"] += 1
            st["live" if live else "kept"] += n

        def on_line(ev):
            n = len(ev["data"].encode()) if "data" in ev else len(base64.b64decode(ev["data_b64"]))
            account(n, ev.get("live"))

        c0 = time.thread_time()
        t0 = time.perf_counter()
        try:
            ev, _, _, t_exit = self.c.exec(sid, STREAM_ARGV, on_line, request_id=rid)
        except (socket.timeout, TimeoutError):
            self.c.drop()
            snap = {}
            try:
                snap = self.c.json("GET", "/v1/sessions/%s/commands/%s" % (sid, rid))
            except Exception as e:
                snap = {"error": repr(e)}
            error("sandboxd stream stalled: no data for %.0f s after %d of %d bytes (%d kept, %d live, %d "
                  "events); the command is %s, sandboxd counted stdout %s" %
                  (TIMEOUT, st["bytes"], STREAM_BYTES, st["kept"], st["live"], st["events"],
                   snap.get("status"), json.dumps({k: v for k, v in snap.items()
                                                   if k in ("truncated", "stdout_total", "usage")})))
            # stop it now, so that it does not load the machine until the session is closed
            try:
                self.c.json("POST", "/v1/sessions/%s/commands/%s/signal" % (sid, rid), {"signal": "SIGKILL"})
            except Exception:
                pass
            return None
        if ev.get("status") != "succeeded" or st["bytes"] != STREAM_BYTES:
            error("sandboxd stream: %d of %d bytes (%d kept, %d live), exit %s" %
                  (st["bytes"], STREAM_BYTES, st["kept"], st["live"], json.dumps(ev)))
            return None
        # the client's own CPU: when it nears the wall time, the client was the bottleneck
        st["client_cpu_s"] = round(time.thread_time() - c0, 3)
        st["wall_s"] = round(t_exit, 3)
        return t_exit, t0 + t_exit - (st["t_first"] or t0), st

    def pool(self):
        try:
            return self.c.json("GET", "/v1/pool")
        except Exception:
            return None

    def wait_pool(self, timeout=3.0):
        """Waits until the pool has a ready slice; returns whether it had one."""
        end = time.monotonic() + timeout
        while True:
            p = self.pool()
            if not p or p.get("profile") != "shared" or p.get("ready", 0) > 0:
                return bool(p and p.get("ready", 0) > 0)
            if time.monotonic() > end:
                return False
            time.sleep(0.01)

    def cleanup(self):
        for sid in self.sessions:
            try:
                self.c.json("DELETE", "/v1/sessions/%s?purge=true" % sid, ok=(200, 202, 204, 404))
            except Exception as e:
                log("could not delete session %s: %s" % (sid, e))


# ---------------------------------------------------------------------------------------
# measurements


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def verify_properties(sbx, sid, base):
    """Starts one long-ish command of each kind and compares their live properties."""
    warnings = []
    resp = sbx.c.json("POST", "/v1/sessions/%s/commands?wait=false" % sid, {"argv": ["sleep", "3"]})
    sunit = resp["unit"]
    bunit = "sbxbench-verify-%s.service" % RUN_ID
    p = subprocess.Popen(base.argv(["sleep", "3"], unit=bunit), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)
    s = systemctl_show(sunit, VERIFY_SERVICE + ["ActiveState", "SubState", "Slice", "StateDirectory",
                                                "WorkingDirectory", "User"])
    b = systemctl_show(bunit, VERIFY_SERVICE + ["ActiveState", "SubState", "Slice", "StateDirectory",
                                                "WorkingDirectory", "User"])
    for k in VERIFY_SERVICE:
        if s.get(k) != b.get(k):
            if k in EXPECTED_DIFF:
                log("expected difference %s: sandboxd %r, systemd-run %r (%s)" %
                    (k, s.get(k), b.get(k), EXPECTED_DIFF[k]))
            else:
                warnings.append("%s: sandboxd %r, systemd-run %r" % (k, s.get(k), b.get(k)))
    for which, props in (("sandboxd", s), ("systemd-run", b)):
        if props.get("SubState") != "running":
            warnings.append("%s unit was not running when compared: %s/%s" %
                            (which, props.get("ActiveState"), props.get("SubState")))
        if len(props.get("StateDirectory", "").split()) != 3:
            warnings.append("%s unit has StateDirectory=%r" % (which, props.get("StateDirectory")))
    ss = systemctl_show(s.get("Slice", ""), VERIFY_SLICE)
    bs = systemctl_show(b.get("Slice", ""), VERIFY_SLICE)
    for k in VERIFY_SLICE:
        if ss.get(k) != bs.get(k):
            warnings.append("slice %s: sandboxd %r, systemd-run %r" % (k, ss.get(k), bs.get(k)))
    p.communicate()
    # let sandboxd record the end of its sleep before the measurements
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        st = sbx.c.json("GET", "/v1/sessions/%s/commands/%s" % (sid, resp["request_id"]))
        if st.get("terminal"):
            break
        time.sleep(0.1)
    for w in warnings:
        log("WARNING: properties differ: " + w)
    if not warnings:
        log("verified: %d service and %d slice properties match (%s vs %s)" %
            (len(VERIFY_SERVICE) - len(EXPECTED_DIFF), len(VERIFY_SLICE), sunit, bunit))
    return warnings


def sequential(sbx, sid, base, name):
    a, b = [], []
    for i in range(WARMUP + N):
        order = ("a", "b") if i % 2 == 0 else ("b", "a")
        for kind in order:
            if kind == "a":
                t = base.run(name, record_phases=i >= WARMUP)
                if i >= WARMUP:
                    a.append(t)
            else:
                t = sbx.run(sid, name, record_phases=i >= WARMUP)
                if i >= WARMUP:
                    b.append(t)
    return a, b


def create_first(sbx, base, name):
    """Fresh scope each iteration: create, first command, two later commands."""
    create, first, later, total, base_fresh = [], [], [], [], []
    misses = 0
    for i in range(WARMUP + N):
        ready = sbx.wait_pool()
        ws = "c%s-%s-%d" % (RUN_ID, name.split()[0], i)
        t0 = time.perf_counter()
        s = sbx.create_session(ws)
        t1 = time.perf_counter()
        t_first = sbx.run(s["id"], name)
        t_later = [sbx.run(s["id"], name) for _ in range(2)]
        tb = base.run(name, scope=ws)
        # PoolSize= counts the pool's sessions in use too: close this one (it waits for the
        # end), so that the next iteration finds the pool as warm as the first did
        sbx.delete_session(s["id"])
        if i < WARMUP:
            continue
        misses += not ready
        create.append(t1 - t0)
        first.append(t_first)
        later.extend(t_later)
        total.append(t1 - t0 + t_first)
        base_fresh.append(tb)
    return {"create": create, "first": first, "later": later, "total": total, "base_fresh": base_fresh,
            "pool_misses": misses}


class CpuProbe:
    """CPU time of the processes on a command's path (PID 1, dbus-daemon, journald, sandboxd,
    this client and its systemd-run children), and of the whole machine, over a span."""

    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self):
        self.pids = {"PID 1": 1}
        for name, unit in (("dbus-daemon", "dbus.service"), ("journald", "systemd-journald.service"),
                           ("sandboxd", "sandboxd.service")):
            pid = systemctl_show(unit, ["MainPID"]).get("MainPID", "0")
            if pid.isdigit() and int(pid) > 0:
                self.pids[name] = int(pid)

    def _proc(self, pid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / self.TICK
        except (OSError, IndexError, ValueError):
            return 0.0

    def _machine(self):
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return (sum(v) - v[3] - v[4]) / self.TICK  # all but idle and iowait

    def snapshot(self):
        t = os.times()
        snap = {name: self._proc(pid) for name, pid in self.pids.items()}
        snap["client"] = t.user + t.system
        snap["systemd-run"] = t.children_user + t.children_system
        snap["machine"] = self._machine()
        return snap

    @staticmethod
    def per_command(a, b, k):
        return {name: (b[name] - a[name]) * 1000.0 / k for name in a}


def throughput(fn, conc, k, probe=None):
    before = probe.snapshot() if probe else None
    with concurrent.futures.ThreadPoolExecutor(max_workers=conc) as ex:
        t0 = time.perf_counter()
        futs = [ex.submit(fn) for _ in range(k)]
        for f in futs:
            try:
                f.result()
            except Exception as e:
                error("throughput: %r" % e)
        dt = time.perf_counter() - t0
    cpu = CpuProbe.per_command(before, probe.snapshot(), k) if probe else None
    return k / dt, cpu


def throughput_pair(s_fn, b_fn, conc, probe):
    """K commands each, in alternating rounds (s b b s ...) to spread the machine's noise;
    returns (sandboxd cmd/s, CPU per command, systemd-run cmd/s, CPU per command)."""
    k = max(conc, K // ROUNDS)
    acc = {"s": [0.0, 0, None], "b": [0.0, 0, None]}
    for r in range(ROUNDS):
        for kind in (("s", "b") if r % 2 == 0 else ("b", "s")):
            rate, cpu = throughput(s_fn if kind == "s" else b_fn, conc, k, probe)
            a = acc[kind]
            a[0] += k / rate
            a[1] += k
            a[2] = cpu if a[2] is None else {n: a[2][n] + cpu[n] for n in cpu}
    out = []
    for kind in ("s", "b"):
        t, n, cpu = acc[kind]
        out += [n / t, {name: v / ROUNDS for name, v in cpu.items()}]
    return tuple(out)


# ---------------------------------------------------------------------------------------
# the table


class Table:
    def __init__(self):
        self.rows = []
        self.data = {}

    def add(self, metric, s, b, unit, target=None, better="lower", key=None):
        """target: ("ratio", x) on sandboxd/systemd-run, or ("abs", x) on the sandboxd value."""
        ratio = s / b if b and s == s and b == b else float("nan")
        verdict = ""
        tdesc = ""
        if target:
            kind, x = target
            v = ratio if kind == "ratio" else s
            if better == "lower":
                ok = v <= x
                tdesc = "<= " + ("%.2fx" % x if kind == "ratio" or unit == "x" else "%g %s" % (x, unit))
            else:
                ok = v >= x
                tdesc = ">= " + ("%.2fx" % x if kind == "ratio" or unit == "x" else "%g %s" % (x, unit))
            verdict = "PASS" if ok else "FAIL"
        self.rows.append((metric, s, b, unit, ratio, tdesc, verdict))
        if key:
            self.data[key] = {"sandboxd": s, "systemd_run": b, "unit": unit, "ratio": ratio,
                              "target": tdesc, "result": verdict}

    def print(self):
        def fmt(v, unit):
            if v is None or v != v:
                return "-"
            if unit == "ms":
                return "%.1f ms" % v
            if unit == "cmd/s":
                return "%.1f/s" % v
            if unit == "MiB/s":
                return "%.0f MiB/s" % v
            if unit == "x":
                return "%.2fx" % v
            return "%.3g %s" % (v, unit)

        hdr = ("metric", "sandboxd", "systemd-run", "ratio", "target", "result")
        lines = []
        for m, s, b, unit, ratio, t, verdict in self.rows:
            lines.append((m, fmt(s, unit), fmt(b, unit) if b is not None else "-",
                          "%.2fx" % ratio if ratio == ratio else "-", t or "-", verdict or "-"))
        w = [max(len(hdr[i]), *(len(l[i]) for l in lines)) for i in range(6)]
        sep = "  "

        def row(cols):
            return sep.join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(cols))

        print(row(hdr))
        print(sep.join("-" * x for x in w))
        for l in lines:
            print(row(l))
        n_pass = sum(1 for r in self.rows if r[6] == "PASS")
        n_fail = sum(1 for r in self.rows if r[6] == "FAIL")
        return n_pass, n_fail


def main():
    if os.geteuid() != 0:
        sys.exit("bench: must run as root")
    if not os.path.exists("/run/systemd/system"):
        sys.exit("bench: PID 1 is not systemd here")
    t_start = time.monotonic()
    load0 = os.getloadavg()[0]
    since = time.strftime("%Y-%m-%d %H:%M:%S")

    client = Client(SOCK)
    sbx = Sandboxd(client)
    health = client.json("GET", "/v1/health")
    log("sandboxd %s, pool %s; N=%d (+%d warm-up), K=%d, concurrency %s, stream %d MiB x %d; %d CPUs, "
        "load %.2f" % (health.get("version"), json.dumps(health.get("pool")), N, WARMUP, K, CONCURRENCY,
                       STREAM_BYTES >> 20, STREAM_RUNS, os.cpu_count(), os.getloadavg()[0]))
    sbx.wait_pool(5.0)

    warm = sbx.create_session("warm-" + RUN_ID, LIMITS)
    sid = warm["id"]
    log("warm session %s, limits %s" % (sid, json.dumps(warm["limits"])))
    # the defaults of sandboxd.conf: DefaultTimeoutSec=10min, TimeoutStopSec=5s (checked below)
    base = Baseline(warm["limits"], 600, 5)
    base.start_slices()
    table = Table()
    results = {"config": {"N": N, "warmup": WARMUP, "K": K, "concurrency": CONCURRENCY,
                          "stream_bytes": STREAM_BYTES, "stream_runs": STREAM_RUNS}}
    warnings = []
    try:
        if "verify" not in SKIP:
            log("comparing the properties of live units")
            warnings = verify_properties(sbx, sid, base)

        # warm both paths (first DynamicUser allocation, state directories, page cache)
        for name in COMMANDS:
            for _ in range(2):
                base.run(name)
                sbx.run(sid, name)

        if "seq" not in SKIP:
            for name in COMMANDS:
                t = time.monotonic()
                a, b = sequential(sbx, sid, base, name)
                log("sequential %-10s: %d+%d runs in %.1f s" % (name, len(a), len(b), time.monotonic() - t))
                ms = lambda xs, p: pct(xs, p) * 1000
                table.add("%s: p50, warm session" % name, ms(b, 50), ms(a, 50), "ms", ("ratio", 1.10),
                          key="seq_p50_" + name)
                table.add("%s: p95, warm session" % name, ms(b, 95), ms(a, 95), "ms", key="seq_p95_" + name)
                results["seq_" + name] = {"sandboxd": b, "systemd_run": a}
            # where the time goes, both commands together
            ph, ms = sbx.phases, lambda xs: pct(xs, 50) * 1000
            table.add("unit ExecMainStart -> exit p50 (both)", ms(ph["duration_ms"]), ms(base.phases["runtime"]),
                      "ms", key="unit_runtime")
            table.add("unit CPU p50 (both; usage.cpu_usec)", ms(ph["cpu"]), ms(base.phases["cpu"]), "ms",
                      key="unit_cpu")

        if "create" not in SKIP:
            for name in COMMANDS:
                t = time.monotonic()
                r = create_first(sbx, base, name)
                log("create+first %-10s: %d sessions in %.1f s (%d created without a ready pool slice)" %
                    (name, len(r["create"]), time.monotonic() - t, r["pool_misses"]))
                ms = lambda xs, p: pct(xs, p) * 1000
                table.add("%s: create + first exec p50" % name, ms(r["total"], 50), ms(r["base_fresh"], 50), "ms",
                          key="create_first_p50_" + name)
                table.add("%s: create + first exec p95" % name, ms(r["total"], 95), ms(r["base_fresh"], 95), "ms",
                          key="create_first_p95_" + name)
                table.add("%s: session create p50" % name, ms(r["create"], 50), None, "ms", ("abs", 5),
                          key="create_p50_" + name)
                table.add("%s: first exec p50" % name, ms(r["first"], 50), None, "ms", key="first_p50_" + name)
                table.add("%s: later exec p50" % name, ms(r["later"], 50), None, "ms", key="later_p50_" + name)
                ratio = pct(r["first"], 50) / pct(r["later"], 50)
                table.add("%s: first / later exec p50" % name, ratio, None, "x", ("abs", 1.20),
                          key="first_over_later_" + name)
                results["create_" + name] = r

        if "throughput" not in SKIP:
            probe = CpuProbe()
            results["cpu_per_command_ms"] = {}
            for name in COMMANDS:
                for conc in CONCURRENCY:
                    t = time.monotonic()
                    s_rate, s_cpu, b_rate, b_cpu = throughput_pair(lambda: sbx.run(sid, name),
                                                                   lambda: base.run(name), conc, probe)
                    log("throughput %-10s x%-2d: %.1f s" % (name, conc, time.monotonic() - t))
                    fmt = lambda c: ", ".join("%s %.1f" % (k, v) for k, v in c.items())
                    log("  CPU ms per command, sandboxd:    " + fmt(s_cpu))
                    log("  CPU ms per command, systemd-run: " + fmt(b_cpu))
                    results["cpu_per_command_ms"]["%s x%d" % (name, conc)] = {"sandboxd": s_cpu,
                                                                             "systemd_run": b_cpu}
                    table.add("%s: throughput, %d clients" % (name, conc), s_rate, b_rate, "cmd/s",
                              ("ratio", 1.0) if conc == 32 else None, better="higher",
                              key="throughput_%d_%s" % (conc, name))

        if "stream" not in SKIP:
            t = time.monotonic()
            s_runs, b_runs, stats = [], [], []
            s_stalled = False
            for i in range(STREAM_RUNS):
                rb = base.stream()
                if rb:
                    b_runs.append(rb)
                if s_stalled:
                    continue
                rs = sbx.stream(sid, i)
                if rs:
                    s_runs.append(rs[:2])
                    stats.append(rs[2])
                else:
                    s_stalled = True  # once is enough: each costs BENCH_TIMEOUT
            log("streaming: %d+%d runs in %.1f s; sandboxd events of the last: %s" %
                (len(s_runs), len(b_runs), time.monotonic() - t, json.dumps(stats[-1] if stats else None)))
            mib = STREAM_BYTES / 1048576.0
            rate = lambda runs, i: mib / statistics.median(x[i] for x in runs) if runs else float("nan")
            s_tot, b_tot, s_ff, b_ff = rate(s_runs, 0), rate(b_runs, 0), rate(s_runs, 1), rate(b_runs, 1)
            table.add("stream %d MiB stdout, end to end" % (STREAM_BYTES >> 20), s_tot, b_tot, "MiB/s",
                      ("abs", 200), better="higher", key="stream")
            table.add("stream, from the first byte", s_ff, b_ff, "MiB/s", better="higher", key="stream_first_byte")
            results["stream"] = {"sandboxd": s_runs, "systemd_run": b_runs, "events": stats}
    finally:
        sbx.cleanup()
        base.stop_slices()

    if sbx.phases["accepted"]:
        ph = sbx.phases
        ms = lambda xs: pct(xs, 50) * 1000
        log("sandboxd phases (sequential, p50): request -> accepted %.1f ms, accepted -> exit event %.1f ms; "
            "the unit: ExecMainStart -> exit (duration_ms) %.1f ms, CPU %.1f ms" %
            (ms(ph["accepted"]), ms(ph["exit_after_accepted"]), ms(ph["duration_ms"]), ms(ph["cpu"])))
        log("systemd-run units (sequential, p50): service runtime %.1f ms, CPU %.1f ms" %
            (ms(base.phases["runtime"]), ms(base.phases["cpu"])))
        results["phases"] = {"sandboxd": ph, "systemd_run": base.phases}

    p = subprocess.run(["journalctl", "-u", "sandboxd.service", "--since", since, "-p", "warning", "-o", "cat",
                        "--no-pager"], capture_output=True, text=True)
    jw = [l for l in p.stdout.splitlines() if l.strip() and not l.startswith("-- ")]
    if jw:
        log("sandboxd logged %d warnings or errors during the run, the first ones:" % len(jw))
        for l in jw[:10]:
            log("  " + l)

    print()
    print("sandboxd benchmark: N=%d sequential (+%d warm-up), K=%d per throughput run, %d MiB stream; "
          "full default hardening, same unit properties for systemd-run" % (N, WARMUP, K, STREAM_BYTES >> 20))
    n_pass, n_fail = table.print()
    print("systemd-run: the same unit properties%s, but not RemainAfterExit=yes (--wait would never return); "
          "ratio = sandboxd / systemd-run" % (" (checked on live units)" if "verify" not in SKIP and not warnings
                                             else ""))
    elapsed = time.monotonic() - t_start
    notes = []
    if warnings:
        notes.append("%d property differences (see warnings above)" % len(warnings))
    if client.reconnects:
        notes.append("%d keep-alive reconnects" % client.reconnects)
    print()
    notes.append("load average %.1f at the start, %.1f at the end, %d CPUs" % (load0, os.getloadavg()[0],
                                                                             os.cpu_count()))
    print("targets: %d met, %d missed; %d errors; %.0f s; %s" %
          (n_pass, n_fail, len(ERRORS), elapsed, "; ".join(notes)))

    results["table"] = table.data
    results["errors"] = ERRORS
    results["property_warnings"] = warnings
    results["journal_warnings"] = jw
    results["elapsed_s"] = elapsed
    if os.environ.get("BENCH_JSON"):
        def clean(o):
            if isinstance(o, float) and o != o:
                return None
            if isinstance(o, dict):
                return {k: clean(v) for k, v in o.items()}
            if isinstance(o, (list, tuple)):
                return [clean(v) for v in o]
            return o
        with open(os.environ["BENCH_JSON"], "w") as f:
            json.dump(clean(results), f, indent=1)
    return 1 if ERRORS else 0


if __name__ == "__main__":
    sys.exit(main())
