# SPDX-License-Identifier: LGPL-2.1-or-later
"""docs/openapi.yaml describes the HTTP API the daemon really serves: its paths and
methods are exactly those of `sandboxd --list-routes` (the route table), both ways, and
the running daemon serves every documented one (never 404 "No such route" or 405)."""

import os
import re

import pytest
import yaml

from conftest import SANDBOXD_BIN, commands_path, run, sh

SRCDIR = os.environ.get("SANDBOXD_SRCDIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OPENAPI = os.path.join(SRCDIR, "docs", "openapi.yaml")
METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


@pytest.fixture(scope="module")
def spec():
    with open(OPENAPI) as f:
        return yaml.safe_load(f)


def documented(spec):
    return {(m.upper(), path) for path, item in spec["paths"].items() for m in item if m in METHODS}


def served():
    out = sh(SANDBOXD_BIN, "--list-routes").stdout
    routes = set()
    for line in out.splitlines():
        method, path = line.split(" ")
        routes.add((method, path))
    assert routes, out
    return routes


def test_documented_routes_are_exactly_the_served_ones(spec):
    doc, srv = documented(spec), served()
    assert not doc - srv, "documented but not served: %s" % sorted(doc - srv)
    assert not srv - doc, "served but not documented: %s" % sorted(srv - doc)


def test_the_description_is_well_formed(spec):
    assert spec["openapi"].startswith("3.")
    ids = []
    for path, item in spec["paths"].items():
        names = set(re.findall(r"\{(\w+)\}", path))
        common = [p for p in item.get("parameters", [])]
        for m, op in item.items():
            if m not in METHODS:
                continue
            ids.append(op["operationId"])
            assert op.get("responses"), (m, path)
            params = common + op.get("parameters", [])
            declared = set()
            for p in params:
                if "$ref" in p:
                    p = spec["components"]["parameters"][p["$ref"].split("/")[-1]]
                if p["in"] == "path":
                    declared.add(p["name"])
            assert declared == names, "%s %s: path parameters %s, declared %s" % (m, path, names, declared)
            for code, resp in op["responses"].items():
                assert re.fullmatch(r"[1-5]\d\d", str(code)), (m, path, code)
                if "$ref" in resp:
                    assert resp["$ref"].split("/")[-1] in spec["components"]["responses"], resp
    assert len(ids) == len(set(ids)), "operationIds are not unique"
    # every $ref resolves
    text = open(OPENAPI).read()
    for ref in set(re.findall(r'\$ref: "#/components/(\w+)/(\w+)"', text)):
        assert ref[1] in spec["components"][ref[0]], ref


@pytest.fixture
def probe_session(api, scope):
    s = api.create_session(*scope)
    res = run(api, s["id"], {"argv": ["echo", "probe"], "request_id": "probe"})
    assert res["exit"]["status"] == "succeeded"
    r = api.request("PUT", "/v1/sessions/%s/files/probe.txt" % s["id"], body=b"x",
                    headers={"Content-Type": "application/octet-stream"})
    assert r.status == 201, r
    return s


def test_every_documented_route_is_served(api, spec, probe_session):
    """Each documented method on each documented path, with real ids, reaches a handler:
    never 404 "No such route.", never 405. (Errors of the handler itself are fine: a
    signal to a command that ended is 409, freezing on cgroup v1 is 501.)"""
    sid = probe_session["id"]
    # an image that does not exist: GET and DELETE answer 404 image_not_found, PUT of no tar 400
    values = {"sid": sid, "rid": "probe", "path": "probe.txt", "port": "8000", "image": "api-docs-no-such-image"}
    bodies = {
        ("POST", "/v1/sessions"): {"user": probe_session["user"], "workspace": probe_session["workspace"]},
        ("POST", "/v1/sessions/{sid}/commands"): {"argv": ["true"]},
        ("POST", "/v1/sessions/{sid}/commands/{rid}/signal"): {"signal": "SIGTERM"},
        ("PUT", "/v1/sessions/{sid}/files/{path}"): b"y",
        ("POST", "/v1/sessions/{sid}/ports"): {"port": 8000},
    }
    # the ones that end something last, and drain undone at once
    order = sorted(documented(spec), key=lambda mp: (mp[1] == "/v1/sessions/{sid}" and mp[0] == "DELETE",
                                                     mp[0] == "DELETE", mp))
    for method, path in order:
        url = re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)
        if path.startswith("/v1/sessions/{sid}/commands") and method == "POST" and path.endswith("commands"):
            url += "?wait=false"
        body = bodies.get((method, path))
        headers = {"Content-Type": "application/octet-stream"} if isinstance(body, bytes) else None
        r = api.request(method, url, body=body, headers=headers)
        if (method, path) == ("POST", "/v1/drain"):
            assert api.delete("/v1/drain").status == 200
        assert r.status != 405, (method, url, r)
        assert not (r.status == 404 and b"No such route" in r.body), (method, url, r)
        # a relay to the exposed port, where nothing listens, answers 502 itself
        relayed = path.startswith("/v1/sessions/{sid}/ports/{port}/")
        assert r.status < 500 or r.status == 501 or (relayed and r.status == 502), (method, url, r)
    assert api.get("/readyz").status == 200
    assert api.get(commands_path(sid)).status == 200  # closed, still readable
