#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd benchmark: does one session's file work stall everyone else?

Fills a workspace with BENCH_STALL_FILES (400000) empty files in directories of 100000,
then measures another client's GET /healthz latency (p50, p99, max; one request at a
time, a new connection each, from a process of its own) twice in the same run:
  idle   nothing else happens;
  load   the big session is read (GET of the session, whose disk_bytes is the walk),
         listed (GET of a 100000-entry directory, by BENCH_STALL_LISTERS=4 clients),
         walked (GET /v1/sessions, ?stat) and finally deleted recursively.
Goal: load p99 <= 10 ms. Runs as root where sandboxd.socket listens (a testbed, see
bench/README.md). Python standard library only. Prints one table; BENCH_JSON=PATH also
writes the numbers there. Exit status 1 when a request failed."""

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time

SOCK = os.environ.get("BENCH_SOCKET", "/run/sandboxd/http.sock")
FILES = int(os.environ.get("BENCH_STALL_FILES", "400000"))
PER_DIR = 100000
LISTERS = int(os.environ.get("BENCH_STALL_LISTERS", "4"))
IDLE_SEC = float(os.environ.get("BENCH_STALL_IDLE_SEC", "5"))

PROBE = r"""
import json, socket, sys, select, time
lat = []
while not select.select([sys.stdin], [], [], 0.002)[0]:
    s = socket.socket(socket.AF_UNIX)
    t = time.monotonic()
    s.connect(%r)
    s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
    data = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        data += b
    lat.append(time.monotonic() - t)
    s.close()
    if b" 200 " not in data.split(b"\r\n", 1)[0]:
        sys.exit(1)
print(json.dumps(lat))
"""


class UnixConn(http.client.HTTPConnection):
    def __init__(self):
        super().__init__("localhost", timeout=600)

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(600)
        self.sock.connect(SOCK)


def request(method, url, body=None):
    c = UnixConn()
    h = {"Content-Type": "application/json"} if body is not None else {}
    c.request(method, url, body=json.dumps(body) if body is not None else None, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status >= 400:
        raise RuntimeError("%s %s: %d %s" % (method, url, r.status, data[:200]))
    return json.loads(data) if data and r.getheader("Content-Type", "").startswith("application/json") else data


def exec_wait(sid, script):
    c = UnixConn()
    c.request("POST", "/v1/sessions/%s/commands" % sid, body=json.dumps({"argv": ["sh", "-c", script]}),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    out = r.read().decode()
    c.close()
    if '"succeeded"' not in out:
        raise RuntimeError("the command failed: %s" % out[-500:])
    return out


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def probe(during):
    p = subprocess.Popen([sys.executable, "-c", PROBE % SOCK], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    try:
        during()
    finally:
        out, _ = p.communicate("stop\n", timeout=60)
    if p.returncode != 0:
        raise RuntimeError("a /healthz failed")
    lat = json.loads(out)
    return {"n": len(lat), "p50_ms": pct(lat, 50) * 1e3, "p99_ms": pct(lat, 99) * 1e3,
            "max_ms": max(lat) * 1e3, "sec": time.monotonic() - t0}


def main():
    user, ws = "benchstall", "ws%d" % os.getpid()
    s = request("POST", "/v1/sessions", {"user": user, "workspace": ws})
    sid = s["id"]
    try:
        t = time.monotonic()
        dirs = (FILES + PER_DIR - 1) // PER_DIR
        script = "; ".join("mkdir d%d && (cd d%d && seq 1 %d | xargs touch)" % (i, i, min(PER_DIR, FILES - i * PER_DIR))
                           for i in range(dirs))
        exec_wait(sid, script)
        fill = time.monotonic() - t
        n = sum(len(request("GET", "/v1/sessions/%s/files/d%d" % (sid, i))["entries"]) for i in range(dirs))
        if n != FILES:
            raise RuntimeError("the workspace has %d files, not %d" % (n, FILES))

        idle = probe(lambda: time.sleep(IDLE_SEC))

        timings = {}

        def load():
            t = time.monotonic()
            # each look may start the disk usage walk (in the background, at most every 5 s)
            for _ in range(20):
                request("GET", "/v1/sessions/" + sid)
                time.sleep(0.1)
            timings["session_and_walk"] = time.monotonic() - t
            t = time.monotonic()
            errors = []

            def lister(i):
                try:
                    request("GET", "/v1/sessions/%s/files/d%d" % (sid, i % dirs))
                except Exception as e:  # noqa: BLE001
                    errors.append(e)
            th = [threading.Thread(target=lister, args=(i,)) for i in range(LISTERS)]
            for x in th:
                x.start()
            for x in th:
                x.join()
            if errors:
                raise errors[0]
            timings["listings"] = time.monotonic() - t
            t = time.monotonic()
            request("GET", "/v1/sessions")
            request("GET", "/v1/sessions/%s/files/d0?stat" % sid)
            for i in range(dirs):
                request("DELETE", "/v1/sessions/%s/files/d%d?recursive=true" % (sid, i))
            timings["delete"] = time.monotonic() - t

        busy = probe(load)
    finally:
        try:
            request("DELETE", "/v1/sessions/" + sid)
        except Exception:  # noqa: BLE001
            pass

    res = {"files": FILES, "fill_sec": fill, "idle": idle, "load": busy, "phases_sec": timings,
           "goal_p99_ms": 10.0, "met": busy["p99_ms"] <= 10.0}
    print("%-6s %8s %8s %8s %8s" % ("", "probes", "p50 ms", "p99 ms", "max ms"))
    for k in ("idle", "load"):
        r = res[k]
        print("%-6s %8d %8.2f %8.2f %8.2f" % (k, r["n"], r["p50_ms"], r["p99_ms"], r["max_ms"]))
    print("files %d (filled in %.1f s); load phases: %s; goal load p99 <= 10 ms: %s; loadavg %s" % (
        FILES, fill, ", ".join("%s %.2f s" % kv for kv in timings.items()), "met" if res["met"] else "NOT met",
        open("/proc/loadavg").read().split()[0]))
    if os.environ.get("BENCH_JSON"):
        with open(os.environ["BENCH_JSON"], "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
