#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd benchmark: a download through an exposed port, against the same server reached
directly.

The upstream is one small HTTP server (python3's http.server, below as SERVER) that answers
GET /big with BENCH_PORT_MIB (256) MiB generated in memory and GET /small with 3 bytes. It
runs inside a session (network mode proxy) on 127.0.0.1:8000, exposed with "host": true,
and, for the baseline, directly on this machine. The sides:

  direct       the baseline: the server run here, not sandboxed, on 127.0.0.1:BENCH_PORT_DIRECT
  socket       the port's unix socket /run/sandboxd/ports/<sid>/8000.sock (systemd-socket-proxyd
               in the session's network namespace)
  host-tcp     the port's host TCP port (127.0.0.1:<host_port>, the same relay)
  relay-unix   sandboxd's HTTP relay GET /v1/sessions/<sid>/ports/8000/big over its unix socket
  relay-tcp    the same over TCP 127.0.0.1:8421 with a bearer key (BENCH_KEY_FILE; the session is
               then that tenant's; without a key: n/a)

The client is the same for every side (http.client, a new connection per request, the body
read into one 1 MiB buffer): throughput in MiB/s, the median of BENCH_PORT_RUNS (3) downloads
per side, the sides taking turns; then the latency of the small GET, p50/p95 over
BENCH_PORT_GETS (200) requests per side, a new connection each, the sides taking turns. It
prints one table with the ratios to direct and the targets: throughput socket and host-tcp
>= 0.5x direct, relay-unix and relay-tcp >= 0.3x direct (PASS, FAIL or not evaluated). Exit
status 0 whether or not the targets are met, 1 when something failed (a short or failed
download, a side that could not start). Runs as root where sandboxd.socket listens (a
testbed, see bench/README.md); Python standard library only.

Environment:
  BENCH_PORT_MIB=256      size of the download
  BENCH_PORT_RUNS=3       downloads per side (median)
  BENCH_PORT_GETS=200     small GETs per side
  BENCH_PORT_DIRECT=18000 the baseline server's port
  BENCH_PORT_EXEC_MODE=   exec mode of the bench's session (default: the configured one)
  BENCH_SOCKET=/run/sandboxd/http.sock
  BENCH_TCP=127.0.0.1:8421
  BENCH_KEY_FILE=PATH     a bearer key for relay-tcp
  BENCH_TIMEOUT=60        seconds a request may go without a byte
  BENCH_JSON=PATH         also write every number as JSON to PATH
"""

import http.client
import json
import os
import statistics
import subprocess
import sys
import time

from benchlib import Failed, Http, pct

SOCK = os.environ.get("BENCH_SOCKET", "/run/sandboxd/http.sock")
TCP = os.environ.get("BENCH_TCP", "127.0.0.1:8421")
MIB = float(os.environ.get("BENCH_PORT_MIB", "256"))
RUNS = max(1, int(os.environ.get("BENCH_PORT_RUNS", "3")))
GETS = max(1, int(os.environ.get("BENCH_PORT_GETS", "200")))
DIRECT_PORT = int(os.environ.get("BENCH_PORT_DIRECT", "18000"))
EXEC_MODE = os.environ.get("BENCH_PORT_EXEC_MODE", "")
KEY_FILE = os.environ.get("BENCH_KEY_FILE", "")
TIMEOUT = float(os.environ.get("BENCH_TIMEOUT", "60"))
PORT = 8000
BIG = int(MIB * 1024 * 1024)
SIDES = ["direct", "socket", "host-tcp", "relay-unix", "relay-tcp"]
TARGETS = {"socket": 0.5, "host-tcp": 0.5, "relay-unix": 0.3, "relay-tcp": 0.3}

# The upstream: python3 -c SERVER PORT BYTES. One 1 MiB block made at start, written again and
# again; a thread per connection.
SERVER = r"""
import http.server, sys
port, size = int(sys.argv[1]), int(sys.argv[2])
block = (bytes(range(256)) * 4096)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_GET(self):
        n = size if self.path == "/big" else 3
        self.send_response(200 if self.path in ("/big", "/small") else 404)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(n))
        self.end_headers()
        if self.path != "/big":
            self.wfile.write(b"ok\n"[:n])
            return
        mv = memoryview(block)
        while n > 0:
            k = min(n, len(block))
            self.wfile.write(mv[:k])
            n -= k
http.server.ThreadingHTTPServer.daemon_threads = True
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def log(msg):
    print("bench-ports: " + msg, file=sys.stderr, flush=True)


class Target(Http):
    """Where a side's GETs go: a unix socket path or a TCP port, a URL prefix, a key."""

    def __init__(self, unix=None, tcp=None, prefix="", key=None):
        super().__init__(unix=unix, tcp=tcp, key=key, timeout=TIMEOUT)
        self.prefix = prefix

    def get(self, path, buf=None):
        """GET PREFIX+PATH on a new connection; the body's length (read into BUF if given)."""
        c = self.conn()
        try:
            c.request("GET", self.prefix + path, headers=self.headers())
            r = c.getresponse()
            if r.status != 200:
                raise Failed("GET %s: %d %s" % (self.prefix + path, r.status, r.read(300)))
            if buf is None:
                return len(r.read())
            n = 0
            while True:
                k = r.readinto(buf)
                if not k:
                    return n
                n += k
        finally:
            c.close()


def wait_answer(target, what):
    deadline = time.monotonic() + 90
    while True:
        try:
            if target.get("/small") == 3:
                return
        except (OSError, http.client.HTTPException, Failed) as e:
            if time.monotonic() > deadline:
                raise Failed("%s did not answer within 90 s: %s" % (what, e)) from None
        time.sleep(0.2)


def download(target, buf):
    t = time.perf_counter()
    n = target.get("/big", buf)
    dt = time.perf_counter() - t
    if n != BIG:
        raise Failed("a download of %d bytes, not %d" % (n, BIG))
    return BIG / dt / (1024 * 1024)


def read_key():
    if not KEY_FILE:
        return None, "no BENCH_KEY_FILE (a bearer key; tools/dev bench makes one)"
    try:
        with open(KEY_FILE) as f:
            return f.read().strip(), None
    except OSError as e:
        return None, "BENCH_KEY_FILE: %s" % e


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def report(tput, lat, na, loads):
    res = {"mib": MIB, "runs": RUNS, "gets": GETS, "exec_mode": EXEC_MODE or "configured", "loadavg": loads,
           "targets_vs_direct": TARGETS, "sides": {}}
    d_t = statistics.median(tput["direct"])
    d_l = pct(lat["direct"], 50) * 1e3
    print("download of %g MiB (median of %d) and a small GET (%d, a new connection each)" % (MIB, RUNS, GETS))
    print("%-11s %9s %7s %10s %10s %10s  %s" % ("side", "MiB/s", "ratio", "GET p50 ms", "GET p95 ms", "added p50",
                                                "target"))
    for name in SIDES:
        if name in na:
            print("%-11s %9s %7s %10s %10s %10s  %s" % (name, "n/a", "", "", "", "", "not evaluated: " + na[name]))
            res["sides"][name] = {"n/a": na[name]}
            continue
        m = statistics.median(tput[name])
        p50, p95 = pct(lat[name], 50) * 1e3, pct(lat[name], 95) * 1e3
        r = {"mib_s": m, "mib_s_runs": tput[name], "get_p50_ms": p50, "get_p95_ms": p95, "ratio": m / d_t}
        if name == "direct":
            verdict = "baseline"
            added = ""
        else:
            r["get_added_p50_ms"] = p50 - d_l
            added = "%.3f" % (p50 - d_l)
            r["target_met"] = ok = m / d_t >= TARGETS[name]
            verdict = "%s (>= %.1fx direct)" % ("PASS" if ok else "FAIL", TARGETS[name])
        print("%-11s %9.1f %6.2fx %10.3f %10.3f %10s  %s" % (name, m, m / d_t, p50, p95, added, verdict))
        res["sides"][name] = r
    print("load average: %s at the start, %s at the end" % tuple(loads))
    if os.environ.get("BENCH_JSON"):
        with open(os.environ["BENCH_JSON"], "w") as f:
            json.dump(res, f, indent=2)


def main():
    loads = [loadavg()]
    key, why_no_tcp = read_key()
    unix_api = Target(unix=SOCK)
    # with a key the session is the tenant's (root on the unix socket manages it too)
    owner = Target(tcp=TCP, key=key) if key else unix_api
    tag = "%x" % (int(time.time()) & 0xFFFFFF)
    direct = sid = None
    rc = 0
    try:
        direct = subprocess.Popen([sys.executable, "-c", SERVER, str(DIRECT_PORT), str(BIG)])
        body = {"user": "benchports", "workspace": "ports" + tag}
        if EXEC_MODE:
            body["exec_mode"] = EXEC_MODE
        sid = owner.request("POST", "/v1/sessions", body)["id"]
        owner.request("POST", "/v1/sessions/%s/commands?wait=false" % sid,
                  {"argv": ["python3", "-c", SERVER, str(PORT), str(BIG)], "timeout_ms": 3600000})
        port = owner.request("POST", "/v1/sessions/%s/ports" % sid, {"port": PORT, "host": True})
        relay = "/v1/sessions/%s/ports/%d" % (sid, PORT)
        targets = {
            "direct": Target(tcp="127.0.0.1:%d" % DIRECT_PORT),
            "socket": Target(unix=port["socket"]),
            "host-tcp": Target(tcp="127.0.0.1:%d" % port["host_port"]),
            "relay-unix": Target(unix=SOCK, prefix=relay),
        }
        na = {}
        if key:
            targets["relay-tcp"] = Target(tcp=TCP, prefix=relay, key=key)
        else:
            na["relay-tcp"] = why_no_tcp
        for name, t in targets.items():
            wait_answer(t, name)
        names = list(targets)
        log("sides ready: %s; %d downloads of %g MiB each, then %d small GETs" % (", ".join(names), RUNS, MIB, GETS))

        buf = memoryview(bytearray(1024 * 1024))
        tput = {n: [] for n in names}
        for i in range(RUNS):
            k = i % len(names)
            for name in names[k:] + names[:k]:
                try:
                    tput[name].append(download(targets[name], buf))
                except (OSError, http.client.HTTPException, Failed) as e:
                    raise Failed("downloading from %s: %s" % (name, e)) from None
        lat = {n: [] for n in names}
        for i in range(GETS):
            k = i % len(names)
            for name in names[k:] + names[:k]:
                t = time.perf_counter()
                try:
                    n = targets[name].get("/small")
                except (OSError, http.client.HTTPException, Failed) as e:
                    raise Failed("a small GET from %s: %s" % (name, e)) from None
                lat[name].append(time.perf_counter() - t)
                if n != 3:
                    raise Failed("a small GET from %s: %d bytes" % (name, n))
        loads.append(loadavg())
        report(tput, lat, na, loads)
    except (Failed, OSError, http.client.HTTPException, KeyError) as e:
        log("FAILED: %s" % e)
        rc = 1
    finally:
        if direct is not None:
            direct.terminate()
            direct.wait()
        if sid is not None:
            try:
                owner.request("DELETE", "/v1/sessions/" + sid)
            except (Failed, OSError, http.client.HTTPException) as e:
                log("deleting session %s: %s" % (sid, e))
    return rc


if __name__ == "__main__":
    sys.exit(main())
