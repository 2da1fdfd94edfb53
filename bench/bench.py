#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd benchmark: sandboxd's two exec modes over HTTP against systemd-run with the
same unit properties and against bwrap, from one run.

Runs as root on a machine (or testbed) whose PID 1 is systemd and where sandboxd.socket
is listening; `tools/dev bench` sets that up. Python standard library only.

The sides (BENCH_MODES picks them):

  unit         sandboxd, a session in exec mode "unit": every command a transient unit
  session      sandboxd, a session in exec mode "session": every command a child of the
               session's executor service
  systemd-run  systemd-run --wait --pipe with the unit properties sandboxd sets (the
               baseline of unit mode; it runs whenever unit does)
  bwrap        bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc CMD

For `true` and for `echo hello`: sequential p50/p95 in a warm session (the sides
alternating, to spread machine noise), session create + first command in a fresh scope
(the baselines: a fresh systemd-run scope, one bwrap), throughput with 1, 8, 32 and 128
concurrent clients, each measure bounded by time (with the machine's CPU time per
command, and that of PID 1, dbus-daemon, journald, sandboxd, the client and its
children), and streaming 256 MiB of stdout. It prints a table with every value and the
ratios unit / systemd-run, session / unit and session / bwrap, the targets with PASS or
FAIL, and the load average at the start and the end. A side that is not available (a
sandboxd that refuses "exec_mode", no bwrap) is reported as n/a and its targets as not
evaluated. The exit status is 0 whether or not the targets are met (a benchmark, not a
test), 1 when something failed (a command that did not succeed, wrong output, an HTTP
error, a stream that stalled).

Environment:
  BENCH_MODES=unit,session,bwrap   the sides; systemd-run comes with unit
  BENCH_N=30            sequential iterations (after BENCH_WARMUP=3 warm-ups)
  BENCH_CONCURRENCY=1,8,32,128  clients of the throughput measures; sandboxd's clients
                        use one warm session per 32 (MaxRunningCommandsPerSession=
                        defaults to 64)
  BENCH_THROUGHPUT_SEC=3  length of one throughput measure: the clients start commands
                        until then, each at least one; BENCH_ROUNDS=2 rounds per side
  BENCH_STREAM_MIB=256  size of the streaming test; BENCH_STREAM_RUNS=3 (median)
  BENCH_SOCKET=/run/sandboxd/http.sock
  BENCH_TIMEOUT=30      seconds without progress before a request counts as stalled
  BENCH_LIMITS=JSON     "limits" of the warm sessions, e.g. {"cpu_quota":200} (default:
                        the configured defaults); the systemd-run slice gets the same
  BENCH_JSON=PATH       also write every number as JSON to PATH
  BENCH_SKIP=a,b        skip phases: seq, create, throughput, stream, verify
"""

import base64
import fcntl
import functools
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
ROUNDS = max(1, int(os.environ.get("BENCH_ROUNDS", "2")))
THROUGHPUT_SEC = float(os.environ.get("BENCH_THROUGHPUT_SEC", "3"))
CONCURRENCY = [int(x) for x in os.environ.get("BENCH_CONCURRENCY", "1,8,32,128").split(",") if x.strip()]
MODES = [x.strip() for x in os.environ.get("BENCH_MODES", "unit,session,bwrap").split(",") if x.strip()]
CLIENTS_PER_SESSION = 32
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
BWRAP_ARGV = ["bwrap", "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--"]
# the same without a user namespace, where the kernel refuses one (CLONE_NEWUSER fails in a
# chroot, as in tools/testbed's testbeds); root needs none to unshare the others
BWRAP_ARGV_NO_USERNS = ["bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                        "--unshare-cgroup-try", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--"]

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


@functools.lru_cache(maxsize=None)
def manager_cgroup():
    """The cgroup of this systemd's root ("" where it is the host's); asked once, not per
    command (a busctl per systemd-run would cost the baseline a process and a call)."""
    return subprocess.run(["busctl", "get-property", "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                           "org.freedesktop.systemd1.Manager", "ControlGroup"], capture_output=True,
                          text=True).stdout.split('"')[1].rstrip("/")


@functools.lru_cache(maxsize=None)
def cgroup_view(parent_slice, slice_name):
    """[(tmpfs, bind)] per cgroup hierarchy, as src/sandboxd/cgroup.c computes them."""
    root = manager_cgroup()
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
# the baselines: a process per command, run by this client


class ProcessSide:
    """A side whose command is a process of this client: argv(cmd) builds its command line."""
    name = None
    available = True
    why_not = None

    def __init__(self):
        self.phases = {}

    def argv(self, cmd, scope="warm", unit=None):
        raise NotImplementedError

    def parse_phases(self, stderr):
        pass

    def run(self, name, scope="warm", record_phases=False, client=0, timeout=None):
        """One command, stdout to a file: done when the process exits. Returns seconds."""
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
                error("%s %s: exit %d, stdout %r, stderr %r" % (self.name, name, p.returncode, got[:100],
                                                                msg[:300]))
        if record_phases:
            self.parse_phases(msg)
        return dt

    def stream(self, i=0):
        """Streams STREAM_BYTES through the process's stdout; returns (seconds total,
        seconds from the first byte), or None."""
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
            error("%s stream: %sexit %d, %d of %d bytes, stderr %r" %
                  (self.name, "stalled, " if stalled else "", p.returncode, n, STREAM_BYTES, err[:300]))
            return None
        return t1 - t0, t1 - (t_first or t0)


class Bwrap(ProcessSide):
    """bubblewrap with every namespace it can unshare, the host's / read-only."""
    name = "bwrap"

    def __init__(self):
        super().__init__()
        self.prefix = None
        self.note = None
        for prefix in (BWRAP_ARGV, BWRAP_ARGV_NO_USERNS):
            try:
                p = subprocess.run(prefix + ["true"], stdin=subprocess.DEVNULL, capture_output=True, text=True)
            except OSError as e:
                self.why_not = "bwrap: %s" % e.strerror
                break
            if p.returncode == 0:
                self.prefix = prefix
                break
            failed = "%s: exit %d, %s" % (" ".join(prefix[:2]), p.returncode,
                                          (p.stderr.strip().splitlines() or [""])[0].split(", likely")[0][:200])
            self.why_not = failed if not self.why_not else self.why_not + "; " + failed
        if self.prefix is BWRAP_ARGV_NO_USERNS:
            self.note = "without a user namespace (%s)" % self.why_not
            log("bwrap: --unshare-all fails here, unsharing all but the user namespace: " + self.why_not)
            self.why_not = None
        self.available = self.prefix is not None

    def argv(self, cmd, scope="warm", unit=None):
        return self.prefix + cmd


class Baseline(ProcessSide):
    """systemd-run with the unit properties of a sandboxd command unit."""
    name = "systemd-run"

    def __init__(self, limits, runtime_max_sec, timeout_stop_sec):
        super().__init__()
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

    def parse_phases(self, msg):
        m1 = re.search(r"^Service runtime: (.+)$", msg, re.M)
        m2 = re.search(r"^CPU time consumed: (.+)$", msg, re.M)
        with LOCK:
            if m1:
                self.phases["runtime"].append(parse_timespan(m1.group(1)))
            if m2:
                self.phases["cpu"].append(parse_timespan(m2.group(1)))

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
    def __init__(self, msg, status=None):
        super().__init__(msg)
        self.status = status


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

    def request(self, method, url, body=None, timeout=None):
        """Returns the response (headers read). Retries once on a closed keep-alive connection.
        timeout: seconds without progress, from now on on this thread's connection."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        for attempt in (0, 1):
            c = self.conn()
            if timeout and c.timeout != timeout:
                c.timeout = timeout
                if c.sock:
                    c.sock.settimeout(timeout)
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
            raise HTTPError("%s %s: %d %s" % (method, url, resp.status, data[:300]), resp.status)
        if resp.will_close:
            self.drop()
        return json.loads(data) if data.strip() else None

    def exec(self, sid, argv, on_line=None, request_id=None, timeout=None):
        """Runs argv; returns (exit event, stdout bytes, t_accepted, t_exit) with times from
        the request's start. on_line, if given, gets every stdout event instead."""
        body = {"argv": argv}
        if request_id:
            body["request_id"] = request_id
        t0 = time.perf_counter()
        resp = self.request("POST", "/v1/sessions/%s/commands" % sid, body, timeout)
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

    def create_session(self, workspace, limits=None, exec_mode=None):
        body = {"user": "bench", "workspace": workspace}
        if limits:
            body["limits"] = limits
        if exec_mode:
            body["exec_mode"] = exec_mode
        s = self.c.json("POST", "/v1/sessions", body)
        self.sessions.append(s["id"])
        return s

    def delete_session(self, sid):
        self.c.json("DELETE", "/v1/sessions/%s?purge=true" % sid, ok=(200, 202, 204, 404))
        self.sessions.remove(sid)

    def run(self, sid, name, phases=None, timeout=None):
        """Runs COMMANDS[name] in session sid; returns seconds to its exit event. phases,
        if given, gets the times of the request's phases."""
        cmd, expected = COMMANDS[name]
        ev, out, t_acc, t_exit = self.c.exec(sid, cmd, timeout=timeout)
        if ev.get("status") != "succeeded" or ev.get("exit_code") != 0 or out != expected:
            error("sandboxd %s: exit %s, stdout %r" % (name, json.dumps(ev), out[:100]))
        if phases is not None:
            with LOCK:
                phases["accepted"].append(t_acc)
                phases["exit_after_accepted"].append(t_exit - t_acc)
                phases["duration_ms"].append(ev.get("duration_ms", 0) / 1000.0)
                phases["cpu"].append((ev.get("usage") or {}).get("cpu_usec", 0) / 1e6)
        return t_exit

    def stream(self, sid, i):
        """Streams STREAM_BYTES of stdout through sandboxd; returns (seconds total, seconds
        from the first byte, stats), or None when the stream stalled or failed."""
        st = {"bytes": 0, "live": 0, "kept": 0, "events": 0, "t_first": None}
        rid = "stream-%s-%s" % (RUN_ID, i)

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


class SandboxdSide:
    """sandboxd in one exec mode: its warm sessions (one per CLIENTS_PER_SESSION clients)."""

    def __init__(self, sbx, mode, supported):
        """supported: whether sandboxd knows "exec_mode" (without it, unit mode is the default
        and the request leaves the field out)."""
        self.sbx = sbx
        self.name = mode
        self.exec_mode = mode if supported else None
        self.sids = []
        self.phases = {"accepted": [], "exit_after_accepted": [], "duration_ms": [], "cpu": []}
        self.available = True
        self.why_not = None

    def create(self, workspace, limits=None):
        s = self.sbx.create_session(workspace, limits, self.exec_mode)
        got = s.get("exec_mode")
        if self.exec_mode and got is not None and got != self.exec_mode:
            self.sbx.delete_session(s["id"])
            raise HTTPError("asked for exec_mode %r, sandboxd made a session with %r" % (self.exec_mode, got))
        return s

    def open(self, n, limits=None):
        """Makes sure there are n warm sessions, each with a command run; returns the first's record."""
        first = None
        while len(self.sids) < n:
            s = self.create("warm-%s-%s-%d" % (self.name, RUN_ID, len(self.sids)), limits)
            first = first or s
            self.sids.append(s["id"])
            self.sbx.run(s["id"], "true")
        return first

    def run(self, name, scope="warm", record_phases=False, client=0, timeout=None):
        return self.sbx.run(self.sids[client // CLIENTS_PER_SESSION], name,
                            self.phases if record_phases else None, timeout)

    def stream(self, i):
        return self.sbx.stream(self.sids[0], "%s-%d" % (self.name, i))


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


def rotated(xs, i):
    """xs, rotated by i: each side takes each place in turn, to spread the machine's noise."""
    i %= len(xs)
    return xs[i:] + xs[:i]


def sequential(sides, name):
    """WARMUP + N runs of each side, one after the other; returns {side: [seconds]}."""
    times = {side.name: [] for side in sides}
    for i in range(WARMUP + N):
        for side in rotated(sides, i):
            t = side.run(name, record_phases=i >= WARMUP)
            if i >= WARMUP:
                times[side.name].append(t)
    return times


def create_first(sbx_sides, baselines, name):
    """Per iteration and sandboxd side: a fresh scope, its session created, the first command
    and two later ones, the session closed; per baseline one command (systemd-run with fresh
    state directories)."""
    r = {side.name: {"create": [], "first": [], "later": [], "total": [], "pool_misses": 0}
         for side in sbx_sides}
    r.update({side.name: {"fresh": []} for side in baselines})
    tag = name.split()[0]
    for i in range(WARMUP + N):
        for side in rotated(sbx_sides + baselines, i):
            if isinstance(side, SandboxdSide):
                ready = side.sbx.wait_pool()
                t0 = time.perf_counter()
                s = side.create("c%s-%s-%s-%d" % (RUN_ID, side.name, tag, i))
                t1 = time.perf_counter()
                t_first = side.sbx.run(s["id"], name)
                t_later = [side.sbx.run(s["id"], name) for _ in range(2)]
                # PoolSize= counts the pool's sessions in use too: close this one (it waits for
                # the end), so that the next iteration finds the pool as warm as the first did
                side.sbx.delete_session(s["id"])
                if i >= WARMUP:
                    x = r[side.name]
                    x["pool_misses"] += not ready
                    x["create"].append(t1 - t0)
                    x["first"].append(t_first)
                    x["later"].extend(t_later)
                    x["total"].append(t1 - t0 + t_first)
            else:
                t = side.run(name, scope="c%s-%s-%d" % (RUN_ID, tag, i))
                if i >= WARMUP:
                    r[side.name]["fresh"].append(t)
    return r


class CpuProbe:
    """CPU time of the processes on a command's path (PID 1, dbus-daemon, journald, sandboxd,
    this client and its children: systemd-run or bwrap), of the whole machine, and of this
    systemd's: the cgroup tree of its manager with this client and its children where they
    are outside it (in a testbed: what the bench costs, without the rest of a shared
    machine; where systemd is the host's, the machine)."""

    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self):
        root = manager_cgroup()
        self.tree = None  # (file, v2) of the manager's cgroup
        self.client_outside = True
        if root:
            for f, v2 in (("/sys/fs/cgroup%s/cpu.stat" % root, True),
                          ("/sys/fs/cgroup/cpuacct%s/cpuacct.usage" % root, False),
                          ("/sys/fs/cgroup/cpu,cpuacct%s/cpuacct.usage" % root, False)):
                if os.path.exists(f):
                    self.tree = (f, v2)
                    break
            with open("/proc/self/cgroup") as f:
                for line in f:
                    _, ctrl, path = line.rstrip("\n").split(":", 2)
                    if (ctrl == "" if self.tree and self.tree[1] else "cpuacct" in ctrl.split(",")):
                        self.client_outside = not (path == root or path.startswith(root + "/"))
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

    def _tree(self):
        with open(self.tree[0]) as f:
            if self.tree[1]:
                for line in f:
                    k, _, v = line.partition(" ")
                    if k == "usage_usec":
                        return int(v) / 1e6
                return 0.0
            return int(f.read()) / 1e9

    def snapshot(self):
        t = os.times()
        snap = {name: self._proc(pid) for name, pid in self.pids.items()}
        snap["client"] = t.user + t.system
        snap["children"] = t.children_user + t.children_system
        snap["machine"] = self._machine()
        if self.tree is None:
            snap["systemd"] = snap["machine"]
        else:
            snap["systemd"] = self._tree() + (snap["client"] + snap["children"] if self.client_outside else 0.0)
        return snap

    @staticmethod
    def delta(a, b):
        return {name: b[name] - a[name] for name in a}


def throughput(fn, conc, seconds, probe):
    """conc clients, each calling fn(client) until `seconds` have passed (at least once);
    returns (commands that succeeded, commands that failed, seconds until the last one
    ended, CPU seconds by process). A client stops at an exception."""
    counts = [0] * conc
    raised = [0]
    errors0 = len(ERRORS)
    start = threading.Barrier(conc + 1)
    deadline = [0.0]

    def client(j):
        start.wait()
        while True:
            try:
                fn(j)
            except Exception as e:
                error("throughput: %r" % e)
                with LOCK:
                    raised[0] += 1
                return
            counts[j] += 1
            if time.perf_counter() >= deadline[0]:
                return

    threads = [threading.Thread(target=client, args=(j,), daemon=True) for j in range(conc)]
    for t in threads:
        t.start()
    before = probe.snapshot()
    t0 = time.perf_counter()
    deadline[0] = t0 + seconds
    start.wait()
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    failed = len(ERRORS) - errors0  # fn records a failed command with error()
    return sum(counts) - (failed - raised[0]), failed, dt, CpuProbe.delta(before, probe.snapshot())


def throughput_sides(fns, conc, probe):
    """fns: {side: fn(client)}. BENCH_ROUNDS rounds of a measure of each side, their order
    rotated each round; returns {side: (commands/s, CPU ms per command by process, commands
    that failed)}: only the commands that succeeded count."""
    acc = {name: [0, 0.0, None, 0] for name in fns}
    for r in range(ROUNDS):
        for name in rotated(list(fns), r):
            k, failed, dt, cpu = throughput(fns[name], conc, THROUGHPUT_SEC, probe)
            a = acc[name]
            a[0] += k
            a[1] += dt
            a[2] = cpu if a[2] is None else {n: a[2][n] + cpu[n] for n in cpu}
            a[3] += failed
    return {name: (k / t if t else float("nan"), {n: v * 1000.0 / k if k else float("nan") for n, v in cpu.items()},
                   failed)
            for name, (k, t, cpu, failed) in acc.items()}


# ---------------------------------------------------------------------------------------
# the table

# the columns, and the ratios of the table: (numerator, denominator)
COLUMNS = ["systemd-run", "unit", "session", "bwrap"]
RATIOS = [("unit", "systemd-run"), ("session", "unit"), ("session", "bwrap")]


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
    return ("%.3g %s" % (v, unit)).strip()


class Table:
    def __init__(self, sides):
        """sides: {name: side} of the sides asked for (available or not)."""
        self.cols = [c for c in COLUMNS if c in sides]
        self.na = {name: side.why_not for name, side in sides.items() if not side.available}
        self.ratios = [(n, d) for n, d in RATIOS if n in sides and d in sides]
        self.rows = []
        self.targets = []
        self.data = {}

    def ratio(self, values, n, d):
        a, b = values.get(n), values.get(d)
        if a is None or b is None or n in self.na or d in self.na or not b or a != a or b != b:
            return float("nan")
        return a / b

    def add(self, metric, values, unit, targets=(), better="lower", key=None):
        """values: {side: value}; targets: (side, other side or None, x): the ratio side / other
        (or the value of side) at most x (better="lower") or at least x."""
        ratios = {"%s/%s" % (n, d): self.ratio(values, n, d) for n, d in self.ratios}
        self.rows.append((metric, values, unit, ratios))
        entry = {"values": {c: (None if c in self.na else values.get(c)) for c in self.cols}, "unit": unit,
                 "ratios": ratios, "targets": []}
        for side, other, x in targets:
            if side not in self.cols or (other and other not in self.cols):
                continue  # a side not asked for: no target
            op = "<=" if better == "lower" else ">="
            if other:
                what = "%s / %s" % (side, other)
                v = self.ratio(values, side, other)
                tdesc = "%s %.2fx" % (op, x)
            else:
                what = side
                v = values.get(side, float("nan"))
                tdesc = "%s %s" % (op, fmt(x, unit))
            missing = [s for s in (side, other) if s and s in self.na]
            if missing:
                verdict = "not evaluated (%s n/a)" % " and ".join(missing)
            else:
                verdict = "PASS" if (v <= x if better == "lower" else v >= x) else "FAIL"
            shown = fmt(v, "x" if other else unit)
            self.targets.append((metric, what, shown, tdesc, verdict))
            entry["targets"].append({"what": what, "value": v, "target": tdesc, "result": verdict})
        if key:
            self.data[key] = entry

    def text(self, metric, text):
        self.rows.append((metric, text, None, None))

    def print(self):
        hdr = ["metric"] + self.cols + [r for r in ("%s/%s" % nd for nd in self.ratios)]
        lines = []
        for metric, values, unit, ratios in self.rows:
            if unit is None:
                lines.append([metric, values])
                continue
            cells = [metric]
            for c in self.cols:
                cells.append("n/a" if c in self.na else fmt(values.get(c), unit))
            for r in hdr[1 + len(self.cols):]:
                cells.append(fmt(ratios[r], "x"))
            lines.append(cells)
        w = [max(len(hdr[i]), *(len(l[i]) for l in lines if len(l) == len(hdr))) for i in range(len(hdr))]
        sep = "  "

        def row(cols):
            if len(cols) == 2 and len(hdr) > 2:
                return cols[0].ljust(w[0]) + sep + cols[1]
            return sep.join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(cols))

        print(row(hdr))
        print(sep.join("-" * x for x in w))
        for l in lines:
            print(row(l))
        for name, why in self.na.items():
            print("%s: n/a (%s)" % (name, why))
        print()
        print("targets:")
        tw = [max([0] + [len(t[i]) for t in self.targets]) for i in range(4)]
        for metric, what, v, tdesc, verdict in self.targets:
            print("  %s  %s  %s  %s  %s" % (metric.ljust(tw[0]), what.ljust(tw[1]), v.rjust(tw[2]),
                                          tdesc.ljust(tw[3]), verdict))
        n_pass = sum(1 for t in self.targets if t[4] == "PASS")
        n_fail = sum(1 for t in self.targets if t[4] == "FAIL")
        n_na = len(self.targets) - n_pass - n_fail
        return n_pass, n_fail, n_na


def open_sbx_side(sbx, mode, limits):
    """The sandboxd side of exec mode `mode` with its first warm session, or, where sandboxd
    refuses the mode, the side marked n/a. A sandboxd without "exec_mode" runs unit mode."""
    side = SandboxdSide(sbx, mode, True)
    try:
        side.open(1, limits)
        return side
    except HTTPError as e:
        if e.status is not None and e.status != 400:
            raise
        refusal = str(e)
    if mode == "unit":  # a sandboxd from before the exec modes: unit mode is all it has
        side = SandboxdSide(sbx, mode, False)
        side.open(1, limits)
        log("sandboxd refused \"exec_mode\": %s; unit mode without it" % refusal)
        return side
    side.available = False
    side.why_not = "not supported by this sandboxd: %s" % refusal
    log("%s mode: n/a (%s)" % (mode, side.why_not))
    return side


def main():
    if os.geteuid() != 0:
        sys.exit("bench: must run as root")
    if not os.path.exists("/run/systemd/system"):
        sys.exit("bench: PID 1 is not systemd here")
    bad = [m for m in MODES if m not in ("unit", "session", "bwrap")]
    if bad or not MODES:
        sys.exit("bench: BENCH_MODES: %s: the modes are unit, session and bwrap (systemd-run comes with unit)" %
                 (",".join(bad) or "empty"))
    t_start = time.monotonic()
    load0 = os.getloadavg()
    since = time.strftime("%Y-%m-%d %H:%M:%S")

    client = Client(SOCK)
    sbx = Sandboxd(client)
    health = client.json("GET", "/v1/health")
    log("sandboxd %s, pool %s; modes %s; N=%d (+%d warm-up), throughput %g s x %d rounds at %s clients, "
        "stream %d MiB x %d; %d CPUs, load %.2f" %
        (health.get("version"), json.dumps(health.get("pool")), ",".join(MODES), N, WARMUP, THROUGHPUT_SEC,
         ROUNDS, CONCURRENCY, STREAM_BYTES >> 20, STREAM_RUNS, os.cpu_count(), load0[0]))
    sbx.wait_pool(5.0)

    sides = {}  # name -> side, in the order of COLUMNS once sorted
    base = None
    table = None
    results = {"config": {"modes": MODES, "N": N, "warmup": WARMUP, "throughput_sec": THROUGHPUT_SEC,
                          "rounds": ROUNDS, "concurrency": CONCURRENCY, "clients_per_session": CLIENTS_PER_SESSION,
                          "stream_bytes": STREAM_BYTES, "stream_runs": STREAM_RUNS},
               "load_start": load0}
    warnings = []
    try:
        for mode in ("unit", "session"):
            if mode in MODES:
                sides[mode] = open_sbx_side(sbx, mode, LIMITS)
                if sides[mode].available:
                    log("%s mode: warm session %s" % (mode, sides[mode].sids[0]))
        limits = None
        for side in sides.values():
            if side.available:
                limits = sbx.c.json("GET", "/v1/sessions/%s" % side.sids[0])["limits"]
                break
        log("limits of the warm sessions: %s" % json.dumps(limits))
        if "unit" in MODES:
            # the defaults of sandboxd.conf: DefaultTimeoutSec=10min, TimeoutStopSec=5s (checked below)
            base = Baseline(limits, 600, 5)
            base.start_slices()
            sides["systemd-run"] = base
        if "bwrap" in MODES:
            sides["bwrap"] = Bwrap()
            if not sides["bwrap"].available:
                log("bwrap: n/a (%s)" % sides["bwrap"].why_not)
        sides = {name: sides[name] for name in COLUMNS if name in sides}
        table = Table(sides)
        live = [side for side in sides.values() if side.available]
        sbx_live = [side for side in live if isinstance(side, SandboxdSide)]
        proc_live = [side for side in live if not isinstance(side, SandboxdSide)]
        if not live:
            raise RuntimeError("no side is available")

        unit = sides.get("unit")
        if "verify" not in SKIP and unit and unit.available:
            log("comparing the properties of live units")
            warnings = verify_properties(sbx, unit.sids[0], base)

        # warm every path (first DynamicUser allocation, state directories, page cache)
        for name in COMMANDS:
            for _ in range(2):
                for side in live:
                    side.run(name)

        ms = lambda xs, p: pct(xs, p) * 1000
        if "seq" not in SKIP:
            for name in COMMANDS:
                t = time.monotonic()
                times = sequential(live, name)
                log("sequential %-10s: %s runs in %.1f s" %
                    (name, "+".join(str(len(v)) for v in times.values()), time.monotonic() - t))
                table.add("%s: p50, warm session" % name, {k: ms(v, 50) for k, v in times.items()}, "ms",
                          [("unit", "systemd-run", 1.10), ("session", "bwrap", 2.0)], key="seq_p50_" + name)
                table.add("%s: p95, warm session" % name, {k: ms(v, 95) for k, v in times.items()}, "ms",
                          key="seq_p95_" + name)
                results["seq_" + name] = times
            # where the time goes, both commands together: the command's own run time and CPU
            # (sandboxd: the exit event's duration_ms and usage.cpu_usec; systemd-run: its
            # "Service runtime" and "CPU time consumed")
            run_t = {side.name: ms(side.phases["duration_ms"], 50) for side in sbx_live}
            cpu_t = {side.name: ms(side.phases["cpu"], 50) for side in sbx_live}
            if base:
                run_t["systemd-run"] = ms(base.phases["runtime"], 50)
                cpu_t["systemd-run"] = ms(base.phases["cpu"], 50)
            table.add("command run time p50 (both)", run_t, "ms", key="run_time")
            table.add("command CPU p50 (both)", cpu_t, "ms", key="command_cpu")

        if "create" not in SKIP:
            for name in COMMANDS:
                t = time.monotonic()
                r = create_first(sbx_live, proc_live, name)
                log("create+first %-10s: %.1f s; created without a ready pool slice: %s" %
                    (name, time.monotonic() - t,
                     ", ".join("%s %d" % (s.name, r[s.name]["pool_misses"]) for s in sbx_live) or "-"))
                total = lambda p: {k: ms(v["total"] if "total" in v else v["fresh"], p) for k, v in r.items()}
                of = lambda what, p: {s.name: ms(r[s.name][what], p) for s in sbx_live}
                # a session in exec mode session is active once its executor runs: its create
                # takes that start, and its first command pays nothing for it
                table.add("%s: create + first exec p50" % name, total(50), "ms", [("session", "unit", 1.20)],
                          key="create_first_p50_" + name)
                table.add("%s: create + first exec p95" % name, total(95), "ms", key="create_first_p95_" + name)
                table.add("%s: session create p50" % name, of("create", 50), "ms", [("unit", None, 5)],
                          key="create_p50_" + name)
                table.add("%s: first exec p50" % name, of("first", 50), "ms", key="first_p50_" + name)
                table.add("%s: later exec p50" % name, of("later", 50), "ms", key="later_p50_" + name)
                table.add("%s: first / later exec p50" % name,
                          {s.name: pct(r[s.name]["first"], 50) / pct(r[s.name]["later"], 50) for s in sbx_live},
                          "x", [("unit", None, 1.20), ("session", None, 1.20)], key="first_over_later_" + name)
                results["create_" + name] = r

        if "throughput" not in SKIP:
            probe = CpuProbe()
            results["cpu_per_command_ms"] = {}
            for conc in CONCURRENCY:
                for side in sbx_live:
                    side.open(-(-conc // CLIENTS_PER_SESSION), LIMITS)
                for name in COMMANDS:
                    t = time.monotonic()
                    # under load a unit-mode command waits its turn at PID 1: about conc / rate
                    timeout = TIMEOUT * max(1.0, conc / CLIENTS_PER_SESSION)
                    fns = {side.name: (lambda j, side=side: side.run(name, client=j, timeout=timeout))
                           for side in live}
                    res = throughput_sides(fns, conc, probe)
                    log("throughput %-10s x%-3d: %.1f s: %s" % (name, conc, time.monotonic() - t,
                                                               ", ".join("%s %.1f/s" % (k, v[0])
                                                                         for k, v in res.items())))
                    for k, (_, cpu, _) in res.items():
                        log("  CPU ms per command, %-11s: %s" %
                            (k, ", ".join("%s %.1f" % (n, v) for n, v in cpu.items())))
                    results["cpu_per_command_ms"]["%s x%d" % (name, conc)] = {k: v[1] for k, v in res.items()}
                    table.add("%s: throughput, %d clients" % (name, conc), {k: v[0] for k, v in res.items()},
                              "cmd/s", [("unit", "systemd-run", 1.0), ("session", "unit", 10.0)] if conc == 32 else (),
                              better="higher", key="throughput_%d_%s" % (conc, name))
                    if any(v[2] for v in res.values()):
                        table.add("%s: failed commands, %d clients" % (name, conc),
                                  {k: v[2] for k, v in res.items()}, "", key="failed_%d_%s" % (conc, name))
                    table.add("%s: CPU per command, %d clients" % (name, conc),
                              {k: v[1]["systemd"] for k, v in res.items()}, "ms", key="cpu_%d_%s" % (conc, name))

        if "stream" not in SKIP:
            t = time.monotonic()
            runs = {side.name: [] for side in live}
            stats = {side.name: [] for side in sbx_live}
            stalled = set()
            for i in range(STREAM_RUNS):
                for side in rotated(live, i):
                    if side.name in stalled:
                        continue  # once is enough: each costs BENCH_TIMEOUT
                    rs = side.stream(i)
                    if not rs:
                        stalled.add(side.name)
                        continue
                    runs[side.name].append(rs[:2])
                    if len(rs) > 2:
                        stats[side.name].append(rs[2])
            log("streaming: %s runs in %.1f s; sandboxd events of the last: %s" %
                ("+".join(str(len(v)) for v in runs.values()), time.monotonic() - t,
                 json.dumps({k: v[-1] if v else None for k, v in stats.items()})))
            mib = STREAM_BYTES / 1048576.0
            rate = lambda xs, i: mib / statistics.median(x[i] for x in xs) if xs else float("nan")
            table.add("stream %d MiB stdout, end to end" % (STREAM_BYTES >> 20),
                      {k: rate(v, 0) for k, v in runs.items()}, "MiB/s", [("unit", None, 200), ("session", None, 200)],
                      better="higher", key="stream")
            table.add("stream, from the first byte", {k: rate(v, 1) for k, v in runs.items()}, "MiB/s",
                      better="higher", key="stream_first_byte")
            results["stream"] = {"runs": runs, "events": stats}
    finally:
        sbx.cleanup()
        if base:
            base.stop_slices()

    for side in sides.values():
        if isinstance(side, SandboxdSide) and side.phases["accepted"]:
            ph = side.phases
            ms = lambda xs: pct(xs, 50) * 1000
            log("sandboxd %s mode (sequential, p50): request -> accepted %.1f ms, accepted -> exit event %.1f ms; "
                "the command: run time (duration_ms) %.1f ms, CPU %.1f ms" %
                (side.name, ms(ph["accepted"]), ms(ph["exit_after_accepted"]), ms(ph["duration_ms"]), ms(ph["cpu"])))
    if base and base.phases["runtime"]:
        ms = lambda xs: pct(xs, 50) * 1000
        log("systemd-run units (sequential, p50): service runtime %.1f ms, CPU %.1f ms" %
            (ms(base.phases["runtime"]), ms(base.phases["cpu"])))
    results["phases"] = {name: side.phases for name, side in sides.items() if side.available}

    p = subprocess.run(["journalctl", "-u", "sandboxd.service", "--since", since, "-p", "warning", "-o", "cat",
                        "--no-pager"], capture_output=True, text=True)
    jw = [l for l in p.stdout.splitlines() if l.strip() and not l.startswith("-- ")]
    if jw:
        log("sandboxd logged %d warnings or errors during the run, the first ones:" % len(jw))
        for l in jw[:10]:
            log("  " + l)

    load1 = os.getloadavg()
    elapsed = time.monotonic() - t_start
    print()
    print("sandboxd benchmark: modes %s; N=%d sequential (+%d warm-up), throughput %g s x %d rounds per side, "
          "%d MiB stream; full default hardening, same unit properties for systemd-run" %
          (",".join(MODES), N, WARMUP, THROUGHPUT_SEC, ROUNDS, STREAM_BYTES >> 20))
    table.text("load average 1/5/15 min, start", "%.2f %.2f %.2f (%d CPUs)" % (load0 + (os.cpu_count(),)))
    table.text("load average 1/5/15 min, end", "%.2f %.2f %.2f" % load1)
    n_pass, n_fail, n_na = table.print()
    print("CPU per command: %s" % ("the testbed's cgroup tree (PID 1, dbus-daemon, sandboxd, the commands) and "
                                   "this client with its children (systemd-run, bwrap)" if manager_cgroup()
                                   else "the whole machine"))
    if base:
        print("systemd-run: the same unit properties%s, but not RemainAfterExit=yes (--wait would never return)" %
              (" (checked on live units)" if "verify" not in SKIP and not warnings else ""))
    if "bwrap" in sides and sides["bwrap"].available:
        print("bwrap: %s CMD, as root%s" % (" ".join(sides["bwrap"].prefix),
                                            ", " + sides["bwrap"].note if sides["bwrap"].note else ""))
    notes = []
    if warnings:
        notes.append("%d property differences (see warnings above)" % len(warnings))
    if client.reconnects:
        notes.append("%d keep-alive reconnects" % client.reconnects)
    print()
    print("targets: %d met, %d missed, %d not evaluated; %d errors; %.0f s%s" %
          (n_pass, n_fail, n_na, len(ERRORS), elapsed, "".join("; " + n for n in notes)))

    results["load_end"] = load1
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
