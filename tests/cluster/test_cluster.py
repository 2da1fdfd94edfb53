# SPDX-License-Identifier: LGPL-2.1-or-later
"""Node-routed sessions behind HAProxy (issue 18): three nodes, contrib/haproxy/haproxy.cfg
in front, the clients talking to HAProxy only. The tests run in this order and share the
sessions of the first: creates by scope, every later request on its node, a stream and a
terminal through the balancer, a drain, a node lost and back, a load run, sandboxctl."""

import asyncio
import concurrent.futures
import json
import os
import shutil
import socket
import statistics
import subprocess
import time

import pytest
import websockets

from conftest import (BUILD, HAPROXY_CFG, LB_ADDR, NODES, OPS, SANDBOXCTL, SESSION_ID_RE, TENANT, TENANT2, TOP,
                      assert_error, in_netns, metric_sum, ns_path, scope_header, sh, wait_for)

SCOPES = 100
# the TypeScript client as tools/dev builds it (build/typescript-client), or unset
TS_CLIENT = os.environ.get("SANDBOXD_TS_CLIENT")
REPEATS = 3
THREADS = 6

# the shared state of the tests: scope -> its session (the create's answer), and the
# request id of the command each ran
STATE = {}


def scopes(n, tag="s"):
    return [("%s%03d" % (tag, i), "ws%d" % (i % 7)) for i in range(n)]


def parallel(fn, items, threads=THREADS):
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return list(pool.map(fn, items))


def node_of(sid):
    m = SESSION_ID_RE.fullmatch(sid)
    assert m, "not a node's session id: %r" % sid
    return m.group(1)


@pytest.fixture(scope="module")
def population(cluster):
    """300 creates through HAProxy: 100 scopes, each asked for 3 times (the rounds
    interleaved, 6 at a time), then a command in each session."""
    lb = cluster.lb()
    t0 = time.monotonic()
    order = [s for _ in range(REPEATS) for s in scopes(SCOPES)]

    def create(scope):
        r = lb.create(*scope)
        return scope, r

    answers = parallel(create, order)
    created = time.monotonic() - t0

    sessions = {}
    for scope, r in answers:
        sessions.setdefault(scope, []).append(r)
    first = {scope: rs[0].json for scope, rs in sessions.items() if rs[0].status in (200, 201)}

    def command(scope):
        sid = first[scope]["id"]
        events, out, exit_ = lb.run(sid, ["sh", "-c", "echo $1", "sh", sid], request_id="first")
        return scope, out, exit_

    ran = parallel(command, sorted(first)) if len(first) == SCOPES else []
    STATE.update(sessions=first, answers=sessions, ran=ran)
    print("%d creates in %.1f s, %d commands in %.1f s" % (len(order), created, len(ran),
                                                           time.monotonic() - t0 - created))
    return STATE


def by_node(sessions):
    out = {n: [] for n in NODES}
    for s in sessions.values():
        out[node_of(s["id"])].append(s)
    return out


def test_haproxy_config_is_the_contrib_one(cluster):
    """The balancer runs contrib/haproxy/haproxy.cfg, checked by haproxy -c, with the
    node addresses of this test in its environment only."""
    r = sh("haproxy", "-c", "-f", HAPROXY_CFG, env=cluster.haproxy_env())
    assert "Configuration file is valid" in r.stdout + r.stderr
    stat = cluster.lb_stat()
    for name in NODES:
        for backend in ("creates", "node_" + name, "any"):
            row = stat[(backend, name)]
            assert row["status"] == "UP", row
            assert row["addr"] == "%s:8421" % cluster.nodes[name].addr, row


def test_creates_follow_the_scope(cluster, population):
    answers = population["answers"]
    assert len(answers) == SCOPES
    for scope, rs in answers.items():
        assert len(rs) == REPEATS
        for r in rs:
            assert r.status in (200, 201), (scope, r)
        ids = {r.json["id"] for r in rs}
        assert len(ids) == 1, "scope %s got %d sessions: %s" % (scope, len(ids), ids)
        for r in rs:
            s = r.json
            assert s["node"] == node_of(s["id"]), s
            assert (s["user"], s["workspace"]) == scope, s
        # the first ask made it, the others found it
        assert sorted(r.status for r in rs) == [200] * (REPEATS - 1) + [201], (scope, [r.status for r in rs])
    counts = {n: len(v) for n, v in by_node(population["sessions"]).items()}
    print("scopes per node:", counts)
    assert sum(counts.values()) == SCOPES
    # a consistent hash over three nodes: each owns a share of the ring
    assert all(c > 0 for c in counts.values()), counts


def test_every_request_lands_on_its_node(cluster, population):
    sessions = population["sessions"]
    assert len(population["ran"]) == SCOPES
    for scope, out, exit_ in population["ran"]:
        sid = sessions[scope]["id"]
        assert exit_["status"] == "succeeded", exit_
        assert out == sid + "\n"

    lb = cluster.lb()

    def read(s):
        sid = s["id"]
        r1 = lb.get("/v1/sessions/" + sid)
        r2 = lb.get("/v1/sessions/%s/commands/first" % sid)
        return sid, r1, r2

    for sid, r1, r2 in parallel(read, list(sessions.values())):
        assert r1.status == 200, r1
        assert r1.json["id"] == sid and r1.json["node"] == node_of(sid), r1.json
        assert r1.json["commands"] == 1, r1.json
        assert r2.status == 200, r2
        assert r2.json["status"] == "succeeded" and r2.json["stdout"] == sid + "\n", r2.json

    # Each node, asked directly, has exactly the sessions whose ids name it, each with
    # the one command it ran: no create, command or read went to another node.
    # a listing through the balancer is one node's: the one X-Sandboxd-Node names
    for name, mine in by_node(sessions).items():
        r = lb.get("/v1/sessions", headers={"X-Sandboxd-Node": name})
        assert r.status == 200, r
        assert {s["id"] for s in r.json["sessions"]} == {s["id"] for s in mine}, name

    for name, mine in by_node(sessions).items():
        r = cluster.direct(name).get("/v1/sessions")
        assert r.status == 200, r
        listed = {s["id"]: s for s in r.json["sessions"]}
        assert set(listed) == {s["id"] for s in mine}, name
        assert all(s["commands"] == 1 and s["node"] == name for s in listed.values())
        # and none answered 421 (a request for another node's session)
        m = cluster.direct(name, OPS).get("/metrics")
        assert m.status == 200, m
        text = m.body.decode()
        assert metric_sum(text, "sandboxd_http_requests_total") > 0
        assert metric_sum(text, "sandboxd_http_requests_total", code="421") == 0, name
        assert metric_sum(text, "sandboxd_node_info", node=name) == 1, name
        assert metric_sum(text, "sandboxd_sessions", node=name, state="active") == len(mine), name
        assert cluster.direct(name).get("/v1/health").json["node"] == name

    # HAProxy's count per node backend: what reached node_NAME is what that node's
    # sessions asked for (1 GET of the session, 1 of the command, 1 command run)
    stat = cluster.lb_stat()
    for name, mine in by_node(sessions).items():
        assert int(stat[("node_" + name, name)]["stot"]) >= 3 * len(mine), stat[("node_" + name, name)]
    assert int(stat[("creates", "BACKEND")]["stot"]) == SCOPES * REPEATS

    # and HAProxy's own log: every request that named a session went to that node's
    # backend, every create to "creates". (HAProxy does not wait for its log: a line may
    # be dropped now and then, so the counts above are the stats', and the log's are
    # only nearly complete.)
    log = cluster.lb_log()
    logged = [(b, srv, path) for b, srv, status, method, path in log if path.startswith("/v1/sessions/n")]
    assert len(logged) >= 0.95 * 3 * SCOPES, len(logged)
    wrong = [x for x in logged if (x[0], x[1]) != ("node_" + node_of(x[2].split("/")[3]), node_of(x[2].split("/")[3]))]
    assert not wrong, wrong[:10]
    creates = [b for b, srv, status, method, path in log if method == "POST" and path == "/v1/sessions"]
    assert len(creates) >= 0.95 * SCOPES * REPEATS and set(creates) == {"creates"}, creates[:5]


def test_wrong_node_is_421(cluster, population):
    """A node asked for another node's session says which node has it."""
    s = by_node(population["sessions"])["n1"][0]
    r = cluster.direct("n2").get("/v1/sessions/" + s["id"])
    err = assert_error(r, 421, "wrong_node")
    assert err["node"] == "n1", err


def test_ids_of_no_node_go_to_backend_any(cluster, population):
    """An id of the old form (16 hex digits, from before nodes had names) and one naming
    a node HAProxy does not know go to backend "any", whose first node that is alive (n1)
    answers: 404 for an old id it does not have, 421 naming the node for the other; an
    old id with X-Sandboxd-Node goes to that node."""
    lb = cluster.lb()
    before = cluster.lb_stat()
    err = assert_error(lb.get("/v1/sessions/0123456789abcdef"), 404, "not_found")
    assert "load balancer" not in err["message"], err  # sandboxd's answer, not HAProxy's
    err = assert_error(lb.get("/v1/sessions/zz_0123456789abcdef/commands"), 421, "wrong_node")
    assert err["node"] == "zz", err
    after = cluster.lb_stat()
    hits = {n: int(after[("any", n)]["stot"]) - int(before[("any", n)]["stot"]) for n in NODES}
    assert hits == dict({n: 0 for n in NODES}, n1=2), hits
    # an old id names no node: X-Sandboxd-Node sends it to the node it names
    err = assert_error(lb.get("/v1/sessions/0123456789abcdef", headers={"X-Sandboxd-Node": "n2"}), 404, "not_found")
    stat = cluster.lb_stat()
    assert int(stat[("node_n2", "n2")]["stot"]) == int(after[("node_n2", "n2")]["stot"]) + 1
    assert int(stat[("any", "n1")]["stot"]) == int(after[("any", "n1")]["stot"])


def test_keys_pass_through(cluster, population):
    """Each request is its own key's, though HAProxy reuses its connections to a node for
    requests of many clients: interleaved, tenant1 sees its sessions, tenant2 and a
    request without a key do not."""
    sample = [s for n, mine in by_node(population["sessions"]).items() for s in mine[:4]]
    mine, other, anonymous = cluster.lb(), cluster.lb(TENANT2), cluster.lb(None)

    def three(s):
        path = "/v1/sessions/" + s["id"]
        return [(who, api.get(path)) for who, api in (("tenant1", mine), ("tenant2", other), ("none", anonymous))]

    for answers in parallel(three, sample * 3):
        for who, r in answers:
            if who == "tenant1":
                assert r.status == 200 and r.json["user"], r
            elif who == "tenant2":
                assert_error(r, 404, "not_found")
            else:
                assert_error(r, 401, "unauthorized")
    r = other.get("/v1/sessions", headers={"X-Sandboxd-Node": "n1"})
    assert r.status == 200 and r.json["sessions"] == [], r


def test_scope_header(cluster):
    lb = cluster.lb()
    # HAProxy refuses a create it cannot place
    r = lb.post("/v1/sessions", {"user": "nohdr", "workspace": "w", "network": {"mode": "none"}})
    err = assert_error(r, 400, "invalid_request")
    assert "X-Sandboxd-Scope" in err["message"], err
    # sandboxd refuses a header that is not the body's scope
    r = lb.post("/v1/sessions", {"user": "hdr", "workspace": "w", "network": {"mode": "none"}},
                headers=scope_header("hdr", "other"))
    err = assert_error(r, 400, "invalid_value")
    assert "load balancer" not in err["message"], err  # sandboxd's answer, not HAProxy's
    assert not [s for n in NODES for s in cluster.direct(n).get("/v1/sessions").json["sessions"] if s["user"] == "hdr"]
    # daemon-wide verbs need a node's name
    err = assert_error(cluster.lb(OPS).post("/v1/drain"), 400, "invalid_request")
    assert "X-Sandboxd-Node" in err["message"], err
    assert all(cluster.direct(n, OPS).get("/v1/drain").json["draining"] is False for n in NODES)


def test_stream_through_haproxy(cluster, population):
    """A command's NDJSON lines come through the balancer as the command prints them."""
    s = population["sessions"][scopes(1)[0]]
    lb = cluster.lb()
    t0 = time.monotonic()
    events = list(lb.stream("/v1/sessions/%s/commands" % s["id"],
                            {"argv": ["sh", "-c", "for i in 1 2 3 4 5; do echo line$i; sleep 0.4; done"]}))
    out = [e for e in events if e["type"] == "stdout"]
    assert "".join(e["data"] for e in out) == "".join("line%d\n" % i for i in range(1, 6)), events
    assert events[-1]["type"] == "exit" and events[-1]["status"] == "succeeded", events[-1]
    # the first line arrived while the command ran (1.6 s of sleeps after it), not with
    # the end
    first, end = out[0]["_t"], events[-1]["_t"]
    assert end - first >= 1.2, "the first line came %.2f s before the end" % (end - first)
    assert first - t0 < end - t0 - 1.2


def test_terminal_websocket_through_haproxy(cluster, population):
    """GET .../tty upgrades to a WebSocket through the balancer, both ways."""
    s = population["sessions"][scopes(2)[1]]
    lb = cluster.lb()
    r = lb.post("/v1/sessions/%s/commands?wait=false" % s["id"],
                {"argv": ["sh", "-c", "stty raw -echo; echo ready; exec cat"], "tty": {"rows": 24, "cols": 80},
                 "request_id": "tty"})
    assert r.status == 202, r

    def ready():
        r = lb.get("/v1/sessions/%s/commands/tty" % s["id"])
        return r.status == 200 and r.json["stdout"].startswith("ready")

    wait_for(ready, timeout=30, what="the terminal")

    async def talk():
        with in_netns(cluster.hub):
            sock = socket.create_connection((lb.host, lb.port), 30)
        async with websockets.connect("ws://%s:%d/v1/sessions/%s/commands/tty/tty?offset=6" % (lb.host, lb.port,
                                                                                             s["id"]),
                                      sock=sock, extra_headers=lb.headers(), max_size=None, ping_interval=None,
                                      open_timeout=30) as ws:
            await ws.send(b"through-haproxy\n")
            got = b""
            deadline = time.monotonic() + 30
            while b"through-haproxy" not in got:
                m = await asyncio.wait_for(ws.recv(), max(0.1, deadline - time.monotonic()))
                if isinstance(m, bytes):
                    got += m
            return got

    got = asyncio.run(talk())
    assert b"through-haproxy" in got, got
    r = lb.post("/v1/sessions/%s/commands/tty/signal" % s["id"], {"signal": "SIGKILL"})
    assert r.status in (200, 202), r


def test_drain_one_node(cluster, population):
    """A draining node gets no new scopes; its sessions stay reachable through HAProxy."""
    name = "n2"
    node = cluster.nodes[name]
    mine = by_node(population["sessions"])[name]
    assert mine, "no session on %s" % name
    ops = cluster.lb(OPS)

    r = ops.post("/v1/drain", headers={"X-Sandboxd-Node": name})
    assert r.status == 200 and r.json["draining"] is True, r
    assert all(cluster.direct(n, OPS).get("/v1/drain").json["draining"] is (n == name) for n in NODES)
    cluster.wait_server("creates", name, "DOWN")
    # alive all the same: its sessions keep their route
    assert cluster.server_status("node_" + name, name) == "UP"
    assert node.exec("test", "-e", "/run/sandboxd/draining", check=False).returncode == 0

    lb = cluster.lb()
    fresh = scopes(30, "d")
    placed = {}
    for scope in fresh:
        r = lb.create(*scope)
        assert r.status == 201, r
        placed[scope] = node_of(r.json["id"])
    assert name not in placed.values(), placed
    # a scope of the draining node asked for again is a new session elsewhere: workspaces
    # are node-local (docs/deployment.md)
    moved = lb.create(mine[0]["user"], mine[0]["workspace"])
    assert moved.status == 201 and node_of(moved.json["id"]) != name, moved

    # the draining node's sessions: reads work, new commands are refused as draining
    for s in mine:
        r = lb.get("/v1/sessions/" + s["id"])
        assert r.status == 200 and r.json["node"] == name, r
        r = lb.get("/v1/sessions/%s/commands/first" % s["id"])
        assert r.status == 200 and r.json["stdout"] == s["id"] + "\n", r
    r = lb.post("/v1/sessions/%s/commands" % mine[0]["id"], {"argv": ["true"]})
    assert_error(r, 503, "draining")

    r = ops.delete("/v1/drain", headers={"X-Sandboxd-Node": name})
    assert r.status == 200 and r.json["draining"] is False, r
    cluster.wait_server("creates", name, "UP")
    # back on the ring: its scopes come home, to the sessions they had
    again = lb.create(mine[0]["user"], mine[0]["workspace"])
    assert again.status == 200 and again.json["id"] == mine[0]["id"], again
    assert lb.delete("/v1/sessions/" + moved.json["id"]).status == 200
    _, out, exit_ = lb.run(mine[0]["id"], ["echo", "after-drain"])
    assert exit_["status"] == "succeeded" and out == "after-drain\n"


def test_lost_node_and_back(cluster, population):
    """A node that is gone: its sessions answer 503 from HAProxy at once, the others are
    untouched; back, its sessions and results are there again."""
    name = "n3"
    node = cluster.nodes[name]
    groups = by_node(population["sessions"])
    lost, others = groups[name], [s for n in NODES if n != name for s in groups[n]]
    assert lost and others
    lb = cluster.lb()

    node.exec("systemctl", "stop", "sandboxd.socket", "sandboxd.service")
    cluster.wait_server("node_" + name, name, "DOWN")
    cluster.wait_server("creates", name, "DOWN")

    for s in lost:
        r = lb.get("/v1/sessions/" + s["id"])
        err = assert_error(r, 503, "node_unavailable")  # HAProxy's, in sandboxd's format
        assert err["node"] == name, err
    # the clients take it for their kind of a 503, naming the node
    import sys
    sys.path.insert(0, str(TOP / "clients" / "python"))
    import sandboxd
    with in_netns(cluster.hub):  # the client's sockets, made in this thread
        with pytest.raises(sandboxd.Unavailable) as e:
            sandboxd.Client(lb.url, key=cluster.keys[TENANT]).get_session(lost[0]["id"])
    assert (e.value.status, e.value.code, e.value.node) == (503, "node_unavailable", name), e.value
    r = sandboxctl(cluster, "--url=" + lb.url, "show", lost[0]["id"], check=False)
    assert r.returncode != 0 and "No sandboxd node is available" in r.stderr, r  # HAProxy's message
    # new scopes go elsewhere
    for scope in scopes(10, "l"):
        r = lb.create(*scope)
        assert r.status == 201 and node_of(r.json["id"]) != name, r

    def check_other(s):
        r = lb.get("/v1/sessions/%s/commands/first" % s["id"])
        return s, r

    for s, r in parallel(check_other, others):
        assert r.status == 200 and r.json["stdout"] == s["id"] + "\n", (s["id"], r)
    for s in others[::10]:
        _, out, exit_ = lb.run(s["id"], ["echo", "still-here"])
        assert exit_["status"] == "succeeded" and out == "still-here\n"

    node.exec("systemctl", "start", "sandboxd.socket")
    cluster.wait_server("node_" + name, name, "UP")
    cluster.wait_server("creates", name, "UP")
    for s in lost:
        r = lb.get("/v1/sessions/" + s["id"])
        assert r.status == 200 and r.json["state"] == "active", r
        r = lb.get("/v1/sessions/%s/commands/first" % s["id"])
        assert r.status == 200 and r.json["status"] == "succeeded" and r.json["stdout"] == s["id"] + "\n", r
    _, out, exit_ = lb.run(lost[0]["id"], ["echo", "back"])
    assert exit_["status"] == "succeeded" and out == "back\n"


def percentile(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def load_round(api, paths, threads):
    """GET each of PATHS, THREADS at a time, each thread on one kept-alive connection:
    (latencies, statuses, seconds)."""
    chunks = [paths[i::threads] for i in range(threads)]

    def worker(chunk):
        conn = api.connection()
        lat, statuses = [], []
        try:
            for p in chunk:
                t = time.monotonic()
                r = api.get(p, conn=conn)
                lat.append(time.monotonic() - t)
                statuses.append(r.status)
        finally:
            conn.close()
        return lat, statuses

    t0 = time.monotonic()
    results = parallel(worker, chunks, threads)
    return [x for l, _ in results for x in l], [x for _, s in results for x in s], time.monotonic() - t0


def summary(lat, statuses, secs, threads, rounds):
    return {"requests": len(lat), "threads": threads, "rounds": rounds, "seconds": round(secs, 3),
            "rps": round(len(lat) / secs, 1), "p50_ms": round(percentile(lat, 50) * 1000, 2),
            "p99_ms": round(percentile(lat, 99) * 1000, 2), "mean_ms": round(statistics.mean(lat) * 1000, 2),
            "statuses": sorted(set(statuses))}


def test_load_through_haproxy_and_direct(cluster, population):
    """The same GETs of sessions through HAProxy and straight to their node, the two sides
    taking turns (ROUNDS rounds each, so that neither has the quieter half of the run):
    numbers for build/cluster-load.json, no timing asserted."""
    n = int(os.environ.get("SANDBOXD_CLUSTER_LOAD_N", "10000"))
    name, threads, rounds = "n1", 4, 4
    mine = by_node(population["sessions"])[name]
    paths = ["/v1/sessions/" + mine[i % len(mine)]["id"] for i in range(n)]
    sides = {"haproxy": (cluster.lb(), [], [], [0.0]), "direct": (cluster.direct(name), [], [], [0.0])}
    for i in range(rounds):
        part = paths[i::rounds]
        for api, lat, statuses, secs in sides.values():
            l, st, t = load_round(api, part, threads)
            lat += l
            statuses += st
            secs[0] += t
    via, direct = (summary(lat, st, secs[0], threads, rounds) for _, lat, st, secs in sides.values())
    result = {"what": "GET /v1/sessions/ID of node %s, %d requests each way in %d alternating rounds, %d threads, "
                      "kept-alive connections" % (name, n, rounds, threads),
              "haproxy": via, "direct": direct,
              # through HAProxy against the direct baseline of the same run
              "ratio": {"rps": round(via["rps"] / direct["rps"], 3), "p99": round(via["p99_ms"] / direct["p99_ms"], 3)}}
    out = BUILD / "cluster-load.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print("load through HAProxy: %(rps)s req/s, p50 %(p50_ms)s ms, p99 %(p99_ms)s ms" % via)
    print("load direct to %s:     %s req/s, p50 %s ms, p99 %s ms" % (name, direct["rps"], direct["p50_ms"],
                                                                      direct["p99_ms"]))
    print("ratio HAProxy/direct:  req/s %(rps).3f, p99 %(p99).3f" % result["ratio"])
    print("written to", out)
    for r in (via, direct):
        assert r["requests"] == n and r["statuses"] == [200], r


def sandboxctl(cluster, *args, env=None, check=True):
    e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SANDBOXD_KEY": cluster.keys[TENANT]}
    e.update(env or {})
    r = subprocess.run(["nsenter", "--net=" + ns_path(cluster.hub), str(SANDBOXCTL)] + list(args),
                       capture_output=True, text=True, timeout=120, env=e)
    if check:
        assert r.returncode == 0, "sandboxctl %s: %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr)
    return r


def test_sandboxctl_through_haproxy(cluster, population):
    """sandboxctl --url at the balancer: create (placed by its X-Sandboxd-Scope), exec,
    show and rm, on sessions of every node."""
    url = "--url=" + cluster.lb().url
    r = sandboxctl(cluster, url, "create", "ctl", "ws")
    sid = r.stdout.strip()
    assert SESSION_ID_RE.fullmatch(sid), r.stdout
    # placed as the balancer places that scope for any client: the same session again
    r = cluster.lb().create("ctl", "ws")
    assert r.status == 200 and r.json["id"] == sid, r
    r = sandboxctl(cluster, url, "exec", sid, "sh", "-c", "echo ctl-through-haproxy")
    assert r.stdout == "ctl-through-haproxy\n", r
    r = sandboxctl(cluster, url, "--json", "show", sid)
    shown = json.loads(r.stdout)
    assert shown["session"]["node"] == node_of(sid), r.stdout
    assert [c["argv"] for c in shown["commands"]] == [["sh", "-c", "echo ctl-through-haproxy"]], shown
    # a session of every node, by its id, through the same URL
    for name, mine in by_node(population["sessions"]).items():
        r = sandboxctl(cluster, url, "--json", "show", mine[0]["id"])
        shown = json.loads(r.stdout)
        assert shown["session"]["id"] == mine[0]["id"] and shown["session"]["node"] == name, shown["session"]
        assert "first" in [c["request_id"] for c in shown["commands"]], shown["commands"]
        r = sandboxctl(cluster, url, "show", mine[0]["id"], "first")
        assert "succeeded" in r.stdout, r.stdout
    sandboxctl(cluster, url, "rm", sid)
    r = sandboxctl(cluster, url, "--json", "show", sid)
    assert json.loads(r.stdout)["session"]["state"] == "closed", r.stdout
    # a session of a node that does not exist: the balancer cannot place it, the first
    # node says which node the id names
    r = sandboxctl(cluster, url, "show", "n9_0123456789abcdef", check=False)
    assert r.returncode != 0 and "n9" in r.stderr, r


def test_sandboxctl_ls_fans_out(cluster, population):
    """sandboxctl ls with SANDBOXD_NODES lists every node's sessions, once each."""
    nodes = ",".join("%s=%s" % (n, cluster.direct(n).url) for n in NODES)
    r = sandboxctl(cluster, "--url=" + cluster.lb().url, "--json", "ls", env={"SANDBOXD_NODES": nodes})
    listed = json.loads(r.stdout)["sessions"]
    ids = [s["id"] for s in listed]
    assert len(ids) == len(set(ids)), "a session listed twice"
    assert {s["id"] for s in population["sessions"].values()} <= set(ids)
    assert {node_of(i) for i in ids} == set(NODES)
    for s in listed:
        assert s["node"] == node_of(s["id"]), s
    # a node that does not answer is reported, and the exit status says so
    down = nodes + ",n4=http://%s:9" % LB_ADDR  # the hub, where nothing listens on port 9
    r = sandboxctl(cluster, "--url=" + cluster.lb().url, "ls", env={"SANDBOXD_NODES": down}, check=False)
    assert r.returncode != 0 and "n4" in r.stderr, r


def test_clients_follow_421_with_sandboxd_nodes(cluster, population):
    """Straight to the wrong node: sandboxctl and the Python client follow its 421 to the
    node SANDBOXD_NODES names (without it, the error names the node)."""
    nodes = ",".join("%s=%s" % (n, cluster.direct(n).url) for n in NODES)
    s = by_node(population["sessions"])["n2"][0]
    n1 = "--url=" + cluster.direct("n1").url
    r = sandboxctl(cluster, n1, "--json", "show", s["id"], env={"SANDBOXD_NODES": nodes})
    assert json.loads(r.stdout)["session"]["node"] == "n2", r.stdout
    r = sandboxctl(cluster, n1, "show", s["id"], check=False)
    assert r.returncode != 0 and "n2" in r.stderr, r

    import sys
    sys.path.insert(0, str(TOP / "clients" / "python"))
    import sandboxd
    os.environ["SANDBOXD_NODES"] = nodes
    try:
        with in_netns(cluster.hub):  # the client's sockets, made in this thread
            c = sandboxd.Client(cluster.direct("n1").url, key=cluster.keys[TENANT])
            got = c.get_session(s["id"])
            assert got.node == "n2" and got.id == s["id"]
            lbc = sandboxd.Client(cluster.lb().url, key=cluster.keys[TENANT])
            made = lbc.create_session("pyclient", "ws", network="none")
            res = made.run(["echo", "python-through-haproxy"])
    finally:
        del os.environ["SANDBOXD_NODES"]
    assert res.status == "succeeded" and res.stdout == b"python-through-haproxy\n", res
    again = cluster.lb().create("pyclient", "ws")
    assert again.status == 200 and again.json["id"] == made.id, again


TS_SCRIPT = """
import { Client } from "%s";
const key = process.env.SANDBOXD_TEST_KEY;
const lb = new Client({ url: process.env.SANDBOXD_TEST_LB, key });
const s = await lb.createSession({ user: "tsclient", workspace: "ws", network: { mode: "none" } });
const r = await s.run({ argv: ["echo", "ts-through-haproxy"] });
const n1 = new Client({ url: process.env.SANDBOXD_TEST_N1, key });
const other = await n1.getSession(process.env.SANDBOXD_TEST_OTHER);
console.log(JSON.stringify({ id: s.id, node: s.info.node, status: r.status, stdout: r.stdoutText,
                             other: other.id, otherNode: other.info.node }));
lb.close();
n1.close();
"""


@pytest.mark.skipif(not TS_CLIENT, reason="SANDBOXD_TS_CLIENT is not set: tools/dev test builds the TypeScript "
                                          "client (SANDBOXD_SKIP_TS_CLIENT=1 leaves it out)")
def test_typescript_client_through_haproxy(cluster, population):
    """The TypeScript client at the balancer (its create placed by X-Sandboxd-Scope), and
    straight to n1 for a session of n2, which it follows with SANDBOXD_NODES."""
    node = shutil.which("node")
    assert node, "node is not installed"
    module = os.path.join(TS_CLIENT, "dist", "index.js")
    assert os.path.isfile(module), "the TypeScript client is not built in %s" % TS_CLIENT
    script = BUILD / "cluster" / ("ts-client-%d.mjs" % os.getpid())
    script.write_text(TS_SCRIPT % ("file://" + module))
    other = by_node(population["sessions"])["n2"][0]["id"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SANDBOXD_TEST_KEY": cluster.keys[TENANT],
           "SANDBOXD_TEST_LB": cluster.lb().url, "SANDBOXD_TEST_N1": cluster.direct("n1").url,
           "SANDBOXD_TEST_OTHER": other,
           "SANDBOXD_NODES": ",".join("%s=%s" % (n, cluster.direct(n).url) for n in NODES)}
    try:
        p = subprocess.run(["nsenter", "--net=" + ns_path(cluster.hub), node, str(script)], env=env,
                           capture_output=True, text=True, timeout=120)
    finally:
        script.unlink()
    assert p.returncode == 0, p.stdout + p.stderr
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["status"] == "succeeded" and got["stdout"] == "ts-through-haproxy\n", got
    assert got["node"] == node_of(got["id"]), got
    assert (got["other"], got["otherNode"]) == (other, "n2"), got
    again = cluster.lb().create("tsclient", "ws")
    assert again.status == 200 and again.json["id"] == got["id"], again
