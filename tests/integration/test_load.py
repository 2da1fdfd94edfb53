# SPDX-License-Identifier: LGPL-2.1-or-later
"""Load: 64 concurrent clients for 30 s on GET /v1/health, then 64 concurrent clients
running `true` for 30 s in 4 sessions, over TCP with a key and keep-alive connections.
Zero errors, and afterwards sandboxd's open fds and resident memory back at what they
were before (see BASELINE_SLACK). Prints requests/s and latencies, and writes them to
build/meson-logs/load.json.

Select it alone with `-m load`; SANDBOXD_LOAD_CLIENTS and SANDBOXD_LOAD_SECONDS change
the defaults (64, 30)."""

import http.client
import json
import os
import threading
import time

import pytest

from conftest import TCP_HOST, TCP_PORT, daemon_pid, run

pytestmark = [pytest.mark.load, pytest.mark.time_limit(300)]

CLIENTS = int(os.environ.get("SANDBOXD_LOAD_CLIENTS", "64"))
SECONDS = float(os.environ.get("SANDBOXD_LOAD_SECONDS", "30"))
SESSIONS = 4
# After the load, sandboxd may hold on to a little more memory than before: glibc keeps
# some of what it freed, and each finished command stays in memory (a small record; its
# output is in /run/sandboxd/spool) as long as its session's results are kept.
RSS_SLACK_FIXED = 8 << 20
RSS_SLACK_PER_COMMAND = 4 << 10
FD_SLACK = 0
OUT = os.path.join(os.environ.get("SANDBOXD_BUILDDIR", "build"), "meson-logs", "load.json")


def proc_stats(pid):
    fds = len(os.listdir("/proc/%d/fd" % pid))
    with open("/proc/%d/status" % pid) as f:
        rss = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
    return fds, rss


def percentile(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def hammer(key, one, seconds=SECONDS, clients=CLIENTS):
    """CLIENTS threads, each with its own keep-alive connection, call ONE(conn, i) until
    SECONDS are over. Returns (number of requests, latencies in s, errors)."""
    latencies = [[] for _ in range(clients)]
    errors = []
    reconnects = [0]
    start = threading.Barrier(clients + 1)
    deadline = [0.0]

    def client(i):
        conn = http.client.HTTPConnection(TCP_HOST, TCP_PORT, timeout=60)
        start.wait()
        while time.monotonic() < deadline[0]:
            t0 = time.monotonic()
            try:
                one(conn, i)
            except Exception as e:  # noqa: BLE001 - every failure counts
                errors.append("%s: %r" % (type(e).__name__, e))
                conn.close()
                conn = http.client.HTTPConnection(TCP_HOST, TCP_PORT, timeout=60)
                reconnects[0] += 1
                continue
            latencies[i].append(time.monotonic() - t0)
        conn.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    deadline[0] = time.monotonic() + seconds
    t0 = time.monotonic()
    start.wait()
    for t in threads:
        t.join(seconds + 90)
    elapsed = time.monotonic() - t0
    lat = [x for l in latencies for x in l]
    return {"requests": len(lat), "errors": len(errors), "error_samples": errors[:5], "seconds": round(elapsed, 1),
            "rps": round(len(lat) / elapsed, 1), "p50_ms": round(percentile(lat, 50) * 1000, 1),
            "p99_ms": round(percentile(lat, 99) * 1000, 1), "max_ms": round(max(lat or [0]) * 1000, 1)}


def settle(pid, want_fds, timeout=20.0):
    """Waits until the connections are gone and the fd count is back (or TIMEOUT)."""
    end = time.monotonic() + timeout
    while True:
        fds, rss = proc_stats(pid)
        if fds <= want_fds + FD_SLACK or time.monotonic() > end:
            return fds, rss
        time.sleep(0.2)


def test_load(api, tcp, scope, capsys):
    key = tcp.key
    headers = {"Authorization": "Bearer " + key}
    exec_headers = dict(headers, **{"Content-Type": "application/json"})
    user, ws = scope
    sids = [tcp.create_session(user, "%s-%d" % (ws[:50], i))["id"] for i in range(SESSIONS)]
    body = json.dumps({"argv": ["true"]}).encode()

    def health(conn, i):
        conn.request("GET", "/v1/health", headers=headers)
        r = conn.getresponse()
        data = r.read()
        if r.status != 200 or b'"status":"ok"' not in data:
            raise AssertionError("%d %r" % (r.status, data[:200]))

    def execute(conn, i):
        conn.request("POST", "/v1/sessions/%s/commands" % sids[i % SESSIONS], body=body, headers=exec_headers)
        r = conn.getresponse()
        data = r.read()
        last = data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
        if r.status != 200 or b'"type":"exit"' not in last or b'"status":"succeeded"' not in last:
            raise AssertionError("%d %r" % (r.status, data[-300:]))

    # warm up (first allocations, the pool, the dynamic users), then the baseline
    for sid in sids:
        assert run(tcp, sid, ["true"])["exit"]["status"] == "succeeded"
    hammer(key, health, seconds=1, clients=8)
    hammer(key, execute, seconds=2, clients=8)
    pid = daemon_pid()
    time.sleep(2)
    base_fds, base_rss = proc_stats(pid)
    n_before = sum(api.get_session(s)["commands"] for s in sids)

    results = {"clients": CLIENTS, "seconds": SECONDS, "baseline": {"fds": base_fds, "rss_kib": base_rss >> 10}}
    results["health"] = hammer(key, health)
    fds, rss = settle(pid, base_fds)
    results["health"]["after"] = {"fds": fds, "rss_kib": rss >> 10}

    results["exec"] = hammer(key, execute)
    fds, rss = settle(pid, base_fds)
    n_commands = sum(api.get_session(s)["commands"] for s in sids) - n_before
    results["exec"]["after"] = {"fds": fds, "rss_kib": rss >> 10, "commands_kept": n_commands}
    assert daemon_pid() == pid, "sandboxd restarted during the load"

    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(results, f, indent=2)
    with capsys.disabled():
        print("\nload (%d clients, %.0f s each, TCP + key, keep-alive):" % (CLIENTS, SECONDS))
        for what in ("health", "exec"):
            r = results[what]
            print("  %-6s %7d requests  %7.1f req/s  p50 %6.1f ms  p99 %7.1f ms  max %7.1f ms  errors %d  "
                  "fds %d -> %d  RSS %d -> %d KiB" % (what, r["requests"], r["rps"], r["p50_ms"], r["p99_ms"],
                                                     r["max_ms"], r["errors"], base_fds, r["after"]["fds"],
                                                     base_rss >> 10, r["after"]["rss_kib"]))

    for what in ("health", "exec"):
        r = results[what]
        assert r["errors"] == 0, "%s: %d errors, e.g. %s" % (what, r["errors"], r["error_samples"])
        assert r["requests"] > 0
        assert r["after"]["fds"] <= base_fds + FD_SLACK, (what, base_fds, r["after"])
    assert results["health"]["after"]["rss_kib"] << 10 <= base_rss + RSS_SLACK_FIXED, results
    assert results["exec"]["after"]["rss_kib"] << 10 <= base_rss + RSS_SLACK_FIXED + RSS_SLACK_PER_COMMAND * n_commands, \
        results
