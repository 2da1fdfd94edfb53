#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd benchmark: `sandboxctl mcp` serving calls at once, seen by the official MCP SDK
client (tests/integration/mcp-protocol.mjs, the same scenarios test_mcp_protocol.py checks).

  ping idle      BENCH_MCP_PINGS pings with nothing else in flight: the baseline
  ping busy      the same pings while a tools/call (sandbox_exec: sleep) runs
  parallel       BENCH_MCP_N sandbox_exec calls of `sleep BENCH_MCP_SLEEP` at once
  serial         the same calls one after the other: the baseline

It prints p50/p99 of both pings with the busy/idle ratio, and parallel/serial wall time with
its ratio; targets: busy p99 under 100 ms, the parallel calls under 1.5 x one serial call. Exit status 0
whether or not a target is met, 1 when something failed. Runs as root where sandboxd runs
(a testbed, see bench/README.md), with node and the SDK that tools/dev installs
(BENCH_MCP_SDK, default build/mcp-sdk of this checkout).

Environment:
  BENCH_MCP_PINGS=40  BENCH_MCP_N=4  BENCH_MCP_SLEEP=1  BENCH_MCP_LONG=6 (s of the busy call)
  BENCH_MCP_SDK=DIR   BENCH_SANDBOXCTL=/usr/bin/sandboxctl   BENCH_JSON=PATH
"""

import json
import os
import shutil
import subprocess
import sys

from benchlib import Failed, Http, pct

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SDK = os.environ.get("BENCH_MCP_SDK", os.path.join(TOP, "build", "mcp-sdk"))
SANDBOXCTL = os.environ.get("BENCH_SANDBOXCTL", "/usr/bin/sandboxctl")
SOCK = os.environ.get("BENCH_SOCKET", "/run/sandboxd/http.sock")
PINGS = int(os.environ.get("BENCH_MCP_PINGS", "40"))
N = int(os.environ.get("BENCH_MCP_N", "4"))
SLEEP = float(os.environ.get("BENCH_MCP_SLEEP", "1"))
LONG = float(os.environ.get("BENCH_MCP_LONG", "6"))
SCENARIOS = os.path.join(TOP, "tests", "integration", "mcp-protocol.mjs")


def scenario(name, args):
    node = shutil.which("node")
    if not node or not os.path.isdir(os.path.join(SDK, "node_modules", "@modelcontextprotocol", "sdk")):
        raise Failed("node or the MCP SDK (%s) is missing: run tools/dev test once, or set BENCH_MCP_SDK" % SDK)
    p = subprocess.run([node, SCENARIOS, SDK, SANDBOXCTL, name, json.dumps(args)], capture_output=True, text=True,
                       timeout=600)
    if p.returncode != 0:
        raise Failed("scenario %s failed: %s" % (name, p.stderr[-2000:]))
    return json.loads(p.stdout)


def main():
    api = Http(unix=SOCK)
    sid = api.request("POST", "/v1/sessions", {"user": "mcpbench", "workspace": "bench"})["id"]
    try:
        idle = [p["ms"] for p in scenario("pings", {"session_id": sid, "pings": PINGS})["pings"]]
        busy_out = scenario("ping", {"session_id": sid, "long_s": LONG, "pings": PINGS, "delay_ms": 300})
        busy = [p["ms"] for p in busy_out["pings"] if p["call_running"]]
        if len(busy) < PINGS // 2:
            raise Failed("the long call ended before the pings did: raise BENCH_MCP_LONG")
        par = scenario("parallel", {"session_id": sid, "sleep_s": SLEEP, "n": N, "serial": True})
    finally:
        api.request("DELETE", "/v1/sessions/" + sid)

    res = {
        "ping_idle_ms": {"p50": pct(idle, 50), "p99": pct(idle, 99)},
        "ping_busy_ms": {"p50": pct(busy, 50), "p99": pct(busy, 99)},
        "parallel_ms": par["parallel_ms"], "serial_ms": par["serial_ms"], "n": N, "sleep_s": SLEEP,
    }
    res["ping_ratio_p50"] = res["ping_busy_ms"]["p50"] / max(res["ping_idle_ms"]["p50"], 1e-3)
    res["parallel_ratio"] = par["parallel_ms"] / par["serial_ms"]
    res["targets"] = {"ping_busy_p99_under_100ms": res["ping_busy_ms"]["p99"] < 100,
                      "parallel_under_1.5_calls": par["parallel_ms"] < 1.5 * par["serial_ms"] / N}
    print("%-12s %10s %10s" % ("", "p50 ms", "p99 ms"))
    for k in ("ping_idle_ms", "ping_busy_ms"):
        print("%-12s %10.2f %10.2f" % (k[:-3].replace("_", " "), res[k]["p50"], res[k]["p99"]))
    print("ping busy/idle p50 ratio: %.2f" % res["ping_ratio_p50"])
    print("%d x sleep %gs: parallel %.0f ms, serial %.0f ms (%.0f ms a call), ratio %.2f" % (
        N, SLEEP, par["parallel_ms"], par["serial_ms"], par["serial_ms"] / N, res["parallel_ratio"]))
    for k, v in res["targets"].items():
        print("target %s: %s" % (k, "PASS" if v else "FAIL"))
    if os.environ.get("BENCH_JSON"):
        with open(os.environ["BENCH_JSON"], "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    try:
        main()
    except Failed as e:
        print("bench/mcp.py: %s" % e, file=sys.stderr)
        sys.exit(1)
