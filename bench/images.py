#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd benchmark: a session on an image against a session on the host's root, in one
run (issue 17: create + first command within 1.2x), and how long an import of the image
takes.

Runs as root where sandboxd.socket listens (`tools/dev bench` sets that up and builds the
image with tools/mkimage). Python standard library only.

  1. Import: the image directory BENCH_IMAGE_DIR (default build/images/py), packed by tar
     and streamed as PUT /v1/images/NAME, timed to the 201 (the whole import: the unpacker
     writing every file, the check, the rename).
  2. Create + first command: per iteration, for each side in turn (alternating, to spread
     machine noise), a fresh scope's session created and its first command (`true`, the
     same binary path on both) run to its exit, then the session closed. Sides: "host"
     (no image) and "image". p50 and p95 of create, first command and their sum; the ratio
     image / host of the p50 sums against the goal of 1.2.

Environment:
  BENCH_IMAGE_DIR=DIR   the image to import (a directory; default build/images/py)
  BENCH_IMAGE_N=20      iterations (after BENCH_WARMUP=2 warm-ups)
  BENCH_SOCKET=/run/sandboxd/http.sock
  BENCH_JSON=PATH       also write the numbers as JSON to PATH
"""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Failed, Http, UnixConn, pct  # noqa: E402

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGE_DIR = os.environ.get("BENCH_IMAGE_DIR") or os.path.join(TOP, "build", "images", "py")
N = int(os.environ.get("BENCH_IMAGE_N", "20"))
WARMUP = int(os.environ.get("BENCH_WARMUP", "2"))
SOCKET = os.environ.get("BENCH_SOCKET", "/run/sandboxd/http.sock")
GOAL = 1.2
RUN_ID = "%x" % (int(time.time()) & 0xffffff)


def import_image(name):
    tar = subprocess.Popen(["tar", "--numeric-owner", "-C", IMAGE_DIR, "-c", "."], stdout=subprocess.PIPE)
    c = UnixConn(SOCKET, 600)
    t0 = time.perf_counter()
    try:
        c.putrequest("PUT", "/v1/images/" + name)
        c.putheader("Content-Type", "application/x-tar")
        c.putheader("Transfer-Encoding", "chunked")
        c.endheaders()
        while True:
            b = tar.stdout.read(1 << 20)
            if not b:
                break
            c.send(b"%x\r\n%s\r\n" % (len(b), b))
        c.send(b"0\r\n\r\n")
        r = c.getresponse()
        data = r.read()
    finally:
        c.close()
    took = time.perf_counter() - t0
    if tar.wait() != 0 or r.status != 201:
        raise Failed("import: tar %s, HTTP %d %s" % (tar.returncode, r.status, data[:300]))
    return took, json.loads(data)


def run_first(api, sid):
    """POST a command, read its NDJSON to the exit event: seconds."""
    c = UnixConn(SOCKET, 60)
    t0 = time.perf_counter()
    try:
        c.request("POST", "/v1/sessions/%s/commands" % sid, body=json.dumps({"argv": ["/bin/true"]}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status not in (200, 201, 202):
            raise Failed("command: %d %s" % (r.status, r.read()[:300]))
        last = None
        for line in r:
            if line.strip():
                last = json.loads(line)
    finally:
        c.close()
    if not last or last.get("type") != "exit" or last.get("exit_code") != 0:
        raise Failed("command did not succeed: %r" % last)
    return time.perf_counter() - t0


def main():
    api = Http(unix=SOCKET, timeout=120)
    if not os.path.isdir(IMAGE_DIR):
        print("images: no image at %s (tools/mkimage py python3)" % IMAGE_DIR, file=sys.stderr)
        return 1
    name = "bench-%s" % RUN_ID
    took, info = import_image(name)
    print("import of %s: %.1f s for %.0f MB (%.0f MB/s)" % (IMAGE_DIR, took, info["size_bytes"] / 1e6,
                                                          info["size_bytes"] / 1e6 / took))
    sides = {"host": None, "image": name}
    res = {s: {"create": [], "first": [], "total": []} for s in sides}
    try:
        for i in range(WARMUP + N):
            order = list(sides) if i % 2 == 0 else list(reversed(list(sides)))
            for side in order:
                body = {"user": "bench", "workspace": "img-%s-%s-%d" % (RUN_ID, side, i)}
                if sides[side]:
                    body["image"] = sides[side]
                t0 = time.perf_counter()
                s = api.request("POST", "/v1/sessions", body)
                t1 = time.perf_counter()
                first = run_first(api, s["id"])
                api.request("DELETE", "/v1/sessions/%s?purge=true" % s["id"])
                if i >= WARMUP:
                    res[side]["create"].append(t1 - t0)
                    res[side]["first"].append(first)
                    res[side]["total"].append(t1 - t0 + first)
    finally:
        try:
            api.request("DELETE", "/v1/images/" + name)
        except Failed as e:
            print("removing %s: %s" % (name, e), file=sys.stderr)

    print("\ncreate + first command (`/bin/true`), %d iterations, ms" % N)
    print("%-8s %10s %10s %10s %10s %10s %10s" % ("side", "create p50", "p95", "first p50", "p95", "total p50",
                                                  "p95"))
    out = {"import_s": took, "import_bytes": info["size_bytes"], "n": N}
    for side in sides:
        x = res[side]
        row = [pct(x[k], p) * 1000 for k in ("create", "first", "total") for p in (50, 95)]
        print("%-8s %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f" % tuple([side] + row))
        out[side] = {k: {"p50": pct(x[k], 50), "p95": pct(x[k], 95)} for k in x}
    ratio = pct(res["image"]["total"], 50) / pct(res["host"]["total"], 50)
    out["ratio_p50"] = ratio
    print("\nimage / host, p50 of create + first command: %.2f (goal <= %.1f: %s)"
          % (ratio, GOAL, "PASS" if ratio <= GOAL else "FAIL"))
    if os.environ.get("BENCH_JSON"):
        with open(os.environ["BENCH_JSON"], "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failed as e:
        print("images: %s" % e, file=sys.stderr)
        sys.exit(1)
