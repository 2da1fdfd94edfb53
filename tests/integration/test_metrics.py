# SPDX-License-Identifier: LGPL-2.1-or-later
"""GET /metrics: valid Prometheus text format (0.0.4), checked line by line, and
counters that move exactly as the requests made here say they must."""

import math
import re

import pytest

from conftest import (Api, EventStream, assert_error, commands_path, start_command, wait_command_running,
                      wait_terminal)

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"\s*(,|$)')
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


def parse_labels(s):
    labels = {}
    pos = 0
    while pos < len(s):
        m = LABEL.match(s, pos)
        assert m, "bad labels %r at %d" % (s, pos)
        assert m.group(1) not in labels, "label %s twice in %r" % (m.group(1), s)
        labels[m.group(1)] = m.group(2)
        pos = m.end()
        if m.group(3) == "":
            break
    assert pos == len(s), "bad labels %r" % s
    return labels


def parse_value(s):
    if s in ("+Inf", "-Inf", "NaN"):
        return float(s.replace("Inf", "inf"))
    assert re.fullmatch(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", s), "bad value %r" % s
    return float(s)


def parse(text):
    """{family: {"type", "help", "samples": {(name, frozenset(labels)): value}}}, asserting
    the text format's rules as it goes: HELP and TYPE once each and before the samples, no
    sample outside a family, no sample twice, histograms whole and cumulative."""
    assert text.endswith("\n"), "the last line must end with a newline"
    families = {}
    current = None
    for n, line in enumerate(text[:-1].split("\n"), 1):
        assert line and line == line.strip(), "line %d: %r" % (n, line)
        if line.startswith("#"):
            parts = line.split(" ", 3)
            assert len(parts) >= 3 and parts[0] == "#" and parts[1] in ("HELP", "TYPE"), "line %d: %r" % (n, line)
            name = parts[2]
            assert NAME.fullmatch(name), line
            fam = families.setdefault(name, {"type": None, "help": None, "samples": {}})
            key = parts[1].lower()
            assert fam[key] is None, "line %d: second %s of %s" % (n, parts[1], name)
            assert not fam["samples"], "line %d: %s of %s after its samples" % (n, parts[1], name)
            fam[key] = parts[3] if len(parts) > 3 else ""
            if key == "type":
                assert fam["type"] in TYPES, line
            current = name
            continue
        m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( -?\d+)?", line)
        assert m, "line %d: not a sample: %r" % (n, line)
        name, labels, value = m.group(1), parse_labels(m.group(3) or ""), parse_value(m.group(4))
        fam = families.get(current)
        assert fam and fam["type"], "line %d: %s outside a family with a TYPE" % (n, name)
        if fam["type"] == "histogram":
            assert name in (current + "_bucket", current + "_sum", current + "_count"), line
            assert (name == current + "_bucket") == ("le" in labels), line
        else:
            assert name == current, "line %d: %s in family %s" % (n, name, current)
        key = (name, frozenset(labels.items()))
        assert key not in fam["samples"], "line %d: sample twice: %r" % (n, line)
        fam["samples"][key] = value
        if fam["type"] == "counter":
            assert value >= 0 and not math.isnan(value), line
    for name, fam in families.items():
        assert fam["type"] and fam["help"], "%s without TYPE or HELP" % name
        if fam["type"] == "counter":
            assert name.endswith("_total"), "counter %s does not end in _total" % name
        if fam["type"] == "histogram":
            check_histogram(name, fam["samples"])
    return families


def check_histogram(name, samples):
    buckets = sorted(((float(dict(k[1])["le"].replace("Inf", "inf")), v) for k, v in samples.items()
                      if k[0] == name + "_bucket"))
    assert buckets and buckets[-1][0] == math.inf, "%s has no +Inf bucket" % name
    counts = [v for _, v in buckets]
    assert counts == sorted(counts), "%s buckets are not cumulative: %r" % (name, buckets)
    count = samples[(name + "_count", frozenset())]
    assert buckets[-1][1] == count, (name, buckets[-1], count)
    assert samples[(name + "_sum", frozenset())] >= 0


class Metrics:
    def __init__(self, api):
        r = api.get("/metrics")
        assert r.status == 200, r
        ctype = r.headers.get("Content-Type", "")
        assert ctype.startswith("text/plain") and "version=0.0.4" in ctype, ctype
        self.families = parse(r.body.decode("utf-8"))

    def get(self, name, **labels):
        """The value of a sample (0 when it has not been counted yet: counters with labels
        appear once they are not 0)."""
        fam = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and name[:-len(suffix)] in self.families:
                fam = name[:-len(suffix)]
        assert fam in self.families, "no family %s" % fam
        return self.families[fam]["samples"].get((name, frozenset(labels.items())), 0)


def test_metrics_parse_and_have_every_family(api):
    m = Metrics(api)
    want = {
        "sandboxd_sessions": "gauge",
        "sandboxd_node_info": "gauge",
        "sandboxd_commands_running": "gauge",
        "sandboxd_pool_slices": "gauge",
        "sandboxd_http_connections": "gauge",
        "sandboxd_pid1_calls": "gauge",
        "sandboxd_pid1_jobs": "gauge",
        "sandboxd_file_operations": "gauge",
        "sandboxd_file_operations_total": "counter",
        "sandboxd_http_requests_waiting": "gauge",
        "sandboxd_dbus_calls_waiting": "gauge",
        "sandboxd_draining": "gauge",
        "sandboxd_uptime_seconds": "gauge",
        "sandboxd_build_info": "gauge",
        "sandboxd_http_requests_total": "counter",
        "sandboxd_commands_finished_total": "counter",
        "sandboxd_command_duration_seconds": "histogram",
        "sandboxd_stream_bytes_total": "counter",
        "sandboxd_auth_failures_total": "counter",
        "sandboxd_network_denials_total": "counter",
        "sandboxd_proxy_refused_total": "counter",
        "sandboxd_http_unauthenticated_closed_total": "counter",
    }
    for name, typ in want.items():
        assert name in m.families and m.families[name]["type"] == typ, name
    states = {dict(k[1])["state"] for k in m.families["sandboxd_sessions"]["samples"]}
    assert states == {"starting", "active", "closing", "closed", "failed"}, states
    node = api.get("/v1/health").json["node"]
    assert {dict(k[1])["node"] for k in m.families["sandboxd_sessions"]["samples"]} == {node}
    assert m.families["sandboxd_node_info"]["samples"] == {("sandboxd_node_info", frozenset({("node", node)})): 1}
    statuses = {dict(k[1])["status"] for k in m.families["sandboxd_commands_finished_total"]["samples"]}
    assert statuses == {"succeeded", "failed", "timed_out", "signaled", "lost"}, statuses
    assert m.get("sandboxd_draining") == 0
    calls = {dict(k[1])["state"] for k in m.families["sandboxd_pid1_calls"]["samples"]}
    assert calls == {"in_flight", "waiting"}, calls
    assert 0 <= m.get("sandboxd_pid1_calls", state="in_flight") <= 16
    # the scrape itself is an open connection
    assert m.get("sandboxd_http_connections") >= 1


def test_http_requests_by_route_and_code(api, session):
    sid = session["id"]
    before = Metrics(api)
    for _ in range(3):
        assert api.get("/v1/health").status == 200
    assert_error(api.get("/nope"), 404, "not_found")
    assert_error(api.request("PUT", "/v1/pool", body={}), 405, "method_not_allowed")
    assert_error(api.get("/v1/sessions/%s/commands/nope" % sid), 404, "not_found")
    assert api.get("/v1/sessions/%s/files/" % sid).status == 200
    after = Metrics(api)

    def delta(route, code):
        k = "sandboxd_http_requests_total"
        return after.get(k, route=route, code=str(code)) - before.get(k, route=route, code=str(code))

    assert delta("/v1/health", 200) == 3
    assert delta("unmatched", 404) == 1
    assert delta("/v1/pool", 405) == 1
    assert delta("/v1/sessions/{sid}/commands/{rid}", 404) == 1
    assert delta("/v1/sessions/{sid}/files", 200) == 1
    assert delta("/metrics", 200) == 1  # the first scrape, counted once answered


def test_commands_and_durations_and_bytes(api, session):
    sid = session["id"]
    before = Metrics(api)
    ok = EventStream(api, "POST", commands_path(sid), {"argv": ["sh", "-c", "echo out; echo err >&2"]})
    ok_events = ok.read_all()
    ok.close()
    bad = EventStream(api, "POST", commands_path(sid), {"argv": ["sh", "-c", "sleep 0.3; exit 3"]})
    bad.read_all()
    bad.close()
    assert ok_events[-1]["status"] == "succeeded" and bad.events[-1]["status"] == "failed"
    start_command(api, sid, {"argv": ["sleep", "30"], "request_id": "long", "timeout_ms": 200})
    wait_terminal(api, sid, "long")
    after = Metrics(api)

    def delta(name, **labels):
        return after.get(name, **labels) - before.get(name, **labels)

    assert delta("sandboxd_commands_finished_total", status="succeeded") == 1
    assert delta("sandboxd_commands_finished_total", status="failed") == 1
    assert delta("sandboxd_commands_finished_total", status="timed_out") == 1
    assert delta("sandboxd_command_duration_seconds_count") == 3
    assert delta("sandboxd_command_duration_seconds_bucket", le="+Inf") == 3
    assert delta("sandboxd_command_duration_seconds_bucket", le="0.01") <= 1
    assert 0.4 < delta("sandboxd_command_duration_seconds_sum") < 30
    streamed = len(ok.kept_raw + ok.live_raw) + len(bad.kept_raw + bad.live_raw)
    assert delta("sandboxd_stream_bytes_total") == streamed


def test_session_and_running_gauges(api, scope):
    node = api.get("/v1/health").json["node"]
    before = Metrics(api)
    s = api.create_session(*scope)
    start_command(api, s["id"], {"argv": ["sleep", "30"], "request_id": "sleeper"})
    # running, not merely accepted: a close before PID 1 starts the process ends it as
    # failed/not-started, which is not what this test is about
    wait_command_running(api, s["id"], "sleeper", timeout=30)
    mid = Metrics(api)
    assert mid.get("sandboxd_sessions", node=node, state="active") == before.get("sandboxd_sessions", node=node, state="active") + 1
    assert mid.get("sandboxd_commands_running", node=node) == before.get("sandboxd_commands_running", node=node) + 1
    assert api.delete("/v1/sessions/" + s["id"]).status == 200
    snap = wait_terminal(api, s["id"], "sleeper")  # its result may be recorded just after the close
    assert snap["status"] == "signaled", snap
    after = Metrics(api)
    assert after.get("sandboxd_sessions", node=node, state="active") == before.get("sandboxd_sessions", node=node, state="active")
    assert after.get("sandboxd_sessions", node=node, state="closed") == before.get("sandboxd_sessions", node=node, state="closed") + 1
    assert after.get("sandboxd_commands_running", node=node) == before.get("sandboxd_commands_running", node=node)
    assert after.get("sandboxd_commands_finished_total", status="signaled") == \
        before.get("sandboxd_commands_finished_total", status="signaled") + 1


def test_auth_failures_over_tcp(api, tcp):
    before = Metrics(api).get("sandboxd_auth_failures_total")
    assert Api("tcp").get("/v1/health").status == 401
    assert Api("tcp", key="x" * 40).get("/v1/sessions").status == 401
    assert Metrics(api).get("sandboxd_auth_failures_total") == before + 2


@pytest.mark.parametrize("text,error", [
    ("a 1", "newline"),
    ("# TYPE a counter\n# HELP a x\na 1\n", "_total"),
    ("# HELP a_total x\na_total 1\n", "outside a family"),
    ("# TYPE a gauge\n# HELP a x\na{b=\"1\"} 1\na{b=\"1\"} 2\n", "twice"),
    ("# TYPE h histogram\n# HELP h x\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n", "cumulative"),
])
def test_the_parser_catches_mistakes(text, error):
    with pytest.raises(AssertionError, match=error):
        parse(text)
