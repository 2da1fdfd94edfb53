#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd benchmark: keystroke-to-echo latency of a command on a terminal.

Every side runs the same command on a pseudo-terminal, `sh -c 'stty raw -echo; echo ready;
exec cat'`, and the bench types BENCH_TERM_N (200) single bytes into it, one at a time,
each timed from its write to its echo read back (p50, p95, p99). The sides take turns byte
by byte (their order rotated each round), so that the machine's noise spreads over all:

  local-pty    the baseline: the same command on a local pty pair (os.openpty) in this
               machine, not sandboxed
  ws-unix      sandboxd: the WebSocket GET .../commands/RID/tty over the unix socket
  ws-tcp       the same over TCP 127.0.0.1:8421 with a bearer key (BENCH_KEY_FILE, a file
               with a key of a tenant in /etc/sandboxd/api-keys; without one: n/a)
  dbus-socket  D-Bus Command.OpenTerminal(): a socket of raw bytes
  ctl-dbus     `sandboxctl exec -t` under a local pty: over D-Bus sandboxctl passes a pty
               of its own to Exec and copies between it and its terminal
  ctl-http     `sandboxctl --transport=http exec -t` under a local pty: the WebSocket over
               the unix socket, through sandboxctl

It prints a table with each side's p50/p95/p99, its added latency (p50 minus the
baseline's) and its ratio to the baseline, and the target: added p50 <= 5 ms for every
sandboxd side (PASS, FAIL or not evaluated). Exit status 0 whether or not the target is
met, 1 when something failed (an echo that did not come, a side that could not start).
Runs as root where sandboxd.socket listens (a testbed, see bench/README.md); Python's
standard library plus python3-websockets and python3-dbus (tools/bench-deps.txt).

Environment:
  BENCH_TERM_N=200        bytes typed per side (after BENCH_TERM_WARMUP=10)
  BENCH_TERM_EXEC_MODE=   exec mode of the bench's sessions ("unit", "session"; default:
                          the configured one)
  BENCH_SOCKET=/run/sandboxd/http.sock
  BENCH_TCP=127.0.0.1:8421
  BENCH_KEY_FILE=PATH     a bearer key for the TCP side
  BENCH_SANDBOXCTL=/usr/bin/sandboxctl
  BENCH_TIMEOUT=30        seconds an echo may take before it counts as lost
  BENCH_JSON=PATH         also write every number as JSON to PATH
"""

import asyncio
import fcntl
import json
import os
import select
import subprocess
import sys
import termios
import time

import dbus
import websockets

from benchlib import Failed, Http, pct

SOCK = os.environ.get("BENCH_SOCKET", "/run/sandboxd/http.sock")
TCP = os.environ.get("BENCH_TCP", "127.0.0.1:8421")
N = int(os.environ.get("BENCH_TERM_N", "200"))
WARMUP = int(os.environ.get("BENCH_TERM_WARMUP", "10"))
EXEC_MODE = os.environ.get("BENCH_TERM_EXEC_MODE", "")
KEY_FILE = os.environ.get("BENCH_KEY_FILE", "")
SANDBOXCTL = os.environ.get("BENCH_SANDBOXCTL", "/usr/bin/sandboxctl")
TIMEOUT = float(os.environ.get("BENCH_TIMEOUT", "30"))
TARGET_ADDED_MS = 5.0

SCRIPT = "stty raw -echo; echo ready; exec cat"
READY = b"ready\n"
TTY = {"rows": 24, "cols": 80}
BUS_NAME = "io.sandboxd.sandbox1"
BUS_PATH = "/io/sandboxd/sandbox1"
SIDES = ["local-pty", "ws-unix", "ws-tcp", "dbus-socket", "ctl-dbus", "ctl-http"]


def log(msg):
    print("bench-terminal: " + msg, file=sys.stderr, flush=True)


class Api(Http):
    """sandboxd's API: on its unix socket, or on TCP with a key."""

    def __init__(self, key=None):
        super().__init__(unix=None if key else SOCK, tcp=TCP if key else None, key=key)

    def create_session(self, user, workspace):
        body = {"user": user, "workspace": workspace}
        if EXEC_MODE:
            body["exec_mode"] = EXEC_MODE
        return self.request("POST", "/v1/sessions", body)["id"]

    def start_tty(self, sid):
        """The command on sandboxd's terminal, once it printed READY: its request id."""
        rid = self.request("POST", "/v1/sessions/%s/commands?wait=false" % sid,
                           {"argv": ["sh", "-c", SCRIPT], "tty": TTY})["request_id"]
        deadline = time.monotonic() + TIMEOUT
        while True:
            snap = self.request("GET", "/v1/sessions/%s/commands/%s" % (sid, rid))
            if (snap.get("stdout") or "").startswith(READY.decode()):
                return rid
            if snap.get("terminal") or time.monotonic() > deadline:
                raise Failed("the terminal command %s did not start: %r" % (rid, snap))
            time.sleep(0.05)

    def delete_session(self, sid):
        try:
            self.request("DELETE", "/v1/sessions/" + sid)
        except Exception as e:  # noqa: BLE001
            log("deleting session %s: %s" % (sid, e))


# --------------------------------------------------------------------------- the sides
# Each side: type(b) writes one byte, echo(b) waits until it came back (raises Failed
# after BENCH_TIMEOUT); both blocking, except the WebSocket sides (coroutines).

class FdSide:
    """A side whose terminal is a file descriptor: a pty master or a socket."""

    def __init__(self, fd):
        self.fd = fd
        self.pending = b""

    def read_until(self, needle, what):
        deadline = time.monotonic() + TIMEOUT
        while needle not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise Failed("no %s within %.0f s (got %r)" % (what, TIMEOUT, self.pending[-100:]))
            try:
                data = os.read(self.fd, 65536)
            except OSError as e:  # EIO: the pty's other side is gone
                raise Failed("reading %s: %s" % (what, e)) from None
            if not data:
                raise Failed("end of file before %s (got %r)" % (what, self.pending[-100:]))
            self.pending += data
        self.pending = self.pending[self.pending.index(needle) + len(needle):]

    async def roundtrip(self, b):
        t = time.perf_counter()
        os.write(self.fd, b)
        self.read_until(b, "echo of %r" % b)
        return time.perf_counter() - t

    def close(self):
        os.close(self.fd)


def spawn_on_pty(argv, env=None):
    """ARGV with a new local pty as its controlling terminal: (process, master)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, b"\x18\x00\x50\x00\x00\x00\x00\x00")  # 24 x 80

    def ctty():
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                         preexec_fn=ctty, env=env, close_fds=True)
    os.close(slave)
    return p, master


class ProcessSide(FdSide):
    """ARGV on a local pty; the terminal is ready once READY came."""

    def __init__(self, argv, env=None):
        self.proc, master = spawn_on_pty(argv, env)
        super().__init__(master)
        # the terminal of sandboxctl may still add a CR before the LF: the rest is no letter
        self.read_until(READY.rstrip(), "ready line")

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        super().close()


class WsSide:
    def __init__(self, ws):
        self.ws = ws
        self.pending = b""

    @classmethod
    async def open(cls, api, sid, rid):
        path = "/v1/sessions/%s/commands/%s/tty?offset=%d" % (sid, rid, len(READY))
        headers = {"Authorization": "Bearer " + api.key} if api.key else {}
        kw = {"extra_headers": headers, "max_size": None, "ping_interval": None, "open_timeout": TIMEOUT}
        if api.key is None:
            ws = await websockets.unix_connect(SOCK, "ws://localhost" + path, **kw)
        else:
            ws = await websockets.connect("ws://%s%s" % (TCP, path), **kw)
        return cls(ws)

    async def roundtrip(self, b):
        t = time.perf_counter()
        await self.ws.send(b)
        try:
            while b not in self.pending:
                m = await asyncio.wait_for(self.ws.recv(), TIMEOUT)
                if isinstance(m, bytes):
                    self.pending += m
                else:
                    raise Failed("the terminal ended: %s" % m)
        except asyncio.TimeoutError:
            raise Failed("no echo of %r within %.0f s" % (b, TIMEOUT)) from None
        self.pending = self.pending[self.pending.index(b) + len(b):]
        return time.perf_counter() - t

    def close(self):
        pass


def open_terminal_socket(sid, rid):
    bus = dbus.SystemBus()
    spath = bus.call_blocking(BUS_NAME, "%s/session/%s" % (BUS_PATH, sid), "io.sandboxd.sandbox1.Session",
                              "GetCommand", "s", [rid])
    fd = bus.call_blocking(BUS_NAME, spath, "io.sandboxd.sandbox1.Command", "OpenTerminal", "a{sv}",
                           [dbus.Dictionary({"offset": dbus.UInt64(len(READY))}, signature="sv")])
    return fd.take()


# --------------------------------------------------------------------------- main

def read_key():
    if not KEY_FILE:
        return None, "no BENCH_KEY_FILE (a bearer key; tools/dev bench makes one)"
    try:
        with open(KEY_FILE) as f:
            return f.read().strip(), None
    except OSError as e:
        return None, "BENCH_KEY_FILE: %s" % e


async def open_sides(sides, api, tcp_api, sid, tcp_sid, why_no_tcp):
    """Opens the sides into SIDES (closed by the caller, also on failure); returns the
    ones not available, with the reason."""
    na = {}
    for name in SIDES:
        try:
            if name == "local-pty":
                sides[name] = ProcessSide(["sh", "-c", SCRIPT])
            elif name == "ws-unix":
                sides[name] = await WsSide.open(api, sid, api.start_tty(sid))
            elif name == "ws-tcp":
                if tcp_api is None:
                    na[name] = why_no_tcp
                    continue
                sides[name] = await WsSide.open(tcp_api, tcp_sid, tcp_api.start_tty(tcp_sid))
            elif name == "dbus-socket":
                sides[name] = FdSide(open_terminal_socket(sid, api.start_tty(sid)))
            elif name in ("ctl-dbus", "ctl-http"):
                env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "xterm", "LANG": "C.UTF-8",
                       "HOME": os.environ.get("HOME", "/root"),
                       "SANDBOXD_TRANSPORT": "dbus" if name == "ctl-dbus" else "http"}
                sides[name] = ProcessSide([SANDBOXCTL, "exec", "-t", sid, "sh", "-c", SCRIPT], env)
        except (Failed, OSError, dbus.DBusException, websockets.WebSocketException) as e:
            raise Failed("opening side %s: %s" % (name, e)) from None
    return na


async def measure(sides):
    names = list(sides)
    lat = {n: [] for n in names}
    for i in range(WARMUP + N):
        b = bytes([ord("a") + i % 26])
        k = i % len(names)
        for name in names[k:] + names[:k]:
            try:
                d = await sides[name].roundtrip(b)
            except Failed as e:
                raise Failed("%s: %s" % (name, e)) from None
            if i >= WARMUP:
                lat[name].append(d)
    return lat


def report(lat, na, loads):
    base = pct(lat["local-pty"], 50) * 1e3
    res = {"n": N, "warmup": WARMUP, "exec_mode": EXEC_MODE or "configured", "target_added_p50_ms": TARGET_ADDED_MS,
           "loadavg": loads, "sides": {}}
    print("keystroke-to-echo latency, %d single bytes per side (ms)" % N)
    print("%-12s %8s %8s %8s %10s %7s  %s" % ("side", "p50", "p95", "p99", "added p50", "ratio", "target"))
    failed = 0
    for name in SIDES:
        if name in na:
            print("%-12s %8s %8s %8s %10s %7s  %s" % (name, "n/a", "", "", "", "", "not evaluated: " + na[name]))
            res["sides"][name] = {"n/a": na[name]}
            continue
        xs = lat[name]
        p50, p95, p99 = (pct(xs, p) * 1e3 for p in (50, 95, 99))
        r = {"p50_ms": p50, "p95_ms": p95, "p99_ms": p99}
        if name == "local-pty":
            print("%-12s %8.3f %8.3f %8.3f %10s %7s  %s" % (name, p50, p95, p99, "", "", "baseline"))
        else:
            added = p50 - base
            ok = added <= TARGET_ADDED_MS
            failed += not ok
            r.update(added_p50_ms=added, ratio=p50 / base if base > 0 else None, target_met=ok)
            print("%-12s %8.3f %8.3f %8.3f %10.3f %6.1fx  %s (added p50 <= %g ms)" % (
                name, p50, p95, p99, added, r["ratio"] or 0, "PASS" if ok else "FAIL", TARGET_ADDED_MS))
        res["sides"][name] = r
    print("load average: %s at the start, %s at the end" % tuple(loads))
    if os.environ.get("BENCH_JSON"):
        with open(os.environ["BENCH_JSON"], "w") as f:
            json.dump(res, f, indent=2)


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main():
    loads = [loadavg()]
    api = Api()
    key, why_no_tcp = read_key()
    tcp_api = Api(key) if key else None
    tag = "%x" % (int(time.time()) & 0xFFFFFF)
    sids, sides = [], {}
    rc = 0
    try:
        sid = api.create_session("benchterm", "term" + tag)
        sids.append((api, sid))
        tcp_sid = None
        if tcp_api is not None:
            tcp_sid = tcp_api.create_session("benchterm", "termtcp" + tag)
            sids.append((tcp_api, tcp_sid))

        async def go():
            na = await open_sides(sides, api, tcp_api, sid, tcp_sid, why_no_tcp)
            log("sides ready: %s; %d bytes each after %d warm-ups" % (", ".join(sides), N, WARMUP))
            lat = await measure(sides)
            for s in sides.values():
                if isinstance(s, WsSide):
                    await s.ws.close()
            return lat, na
        lat, na = asyncio.run(go())
        loads.append(loadavg())
        report(lat, na, loads)
    except Failed as e:
        log("FAILED: %s" % e)
        rc = 1
    finally:
        for s in sides.values():
            s.close()
        for a, s in sids:
            a.delete_session(s)
    return rc


if __name__ == "__main__":
    sys.exit(main())
