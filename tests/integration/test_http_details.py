# SPDX-License-Identifier: LGPL-2.1-or-later
"""The HTTP details of the API, each with real clients (curl, http.client, raw sockets):
file paths as ?path=, one parser for every boolean query flag, Range on downloads, an
early 413 with Expect: 100-continue, Content-Encoding, event offsets at line boundaries,
Host on HTTP/1.1, and nullable fields present as null.

The HTTP surface is the same in both exec modes: these run in the unit lane only."""

import http.client
import json
import os
import socket
import urllib.parse

import pytest

from conftest import UNIX_SOCKET, assert_error, sh

pytestmark = pytest.mark.unit_mode_only

OCTET = {"Content-Type": "application/octet-stream"}


def files(sid, path=None, query=""):
    """.../files with the path as ?path= (quoted as a generated client does: '/' as %2F)."""
    q = []
    if path is not None:
        q.append("path=" + urllib.parse.quote(path, safe=""))
    if query:
        q.append(query)
    return "/v1/sessions/%s/files" % sid + ("?" + "&".join(q) if q else "")


def tail(sid, path="", query=""):
    """.../files/PATH, the path form."""
    return "/v1/sessions/%s/files/%s" % (sid, urllib.parse.quote(path, safe="/")) + ("?" + query if query else "")


def raw_connect(timeout=30):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(UNIX_SOCKET)
    return s


def read_response(s):
    resp = http.client.HTTPResponse(s)
    resp.begin()
    return resp.status, resp.headers, resp.read()


def curl(*args, check=True):
    return sh("curl", "-sS", "--unix-socket", UNIX_SOCKET, *args, check=check)


# --- 1. file paths as ?path= ---------------------------------------------------------------

def test_path_query_every_method(api, session):
    sid = session["id"]
    # PUT ?mkdir, PUT upload, GET, HEAD, ?stat, POST ?move_to=, DELETE: all by ?path=
    r = api.request("PUT", files(sid, "a/b", "mkdir"))
    assert r.status == 201 and r.json["path"] == "a/b", r
    r = api.request("PUT", files(sid, "a/b/c.txt"), body=b"hello", headers=OCTET)
    assert r.status == 201 and r.json["path"] == "a/b/c.txt" and r.json["size"] == 5, r
    r = api.get(files(sid, "a/b/c.txt"))
    assert r.status == 200 and r.body == b"hello", r
    assert api.get(tail(sid, "a/b/c.txt")).body == b"hello"
    r = api.request("HEAD", files(sid, "a/b/c.txt"))
    assert r.status == 200 and r.headers["Content-Length"] == "5" and r.body == b"", r
    r = api.get(files(sid, "a/b/c.txt", "stat"))
    assert r.status == 200 and r.json["name"] == "c.txt" and r.json["type"] == "file", r
    r = api.get(files(sid, "a/b"))
    assert r.status == 200 and r.json["path"] == "a/b" and [e["name"] for e in r.json["entries"]] == ["c.txt"], r
    r = api.post(files(sid, "a/b/c.txt", "move_to=a/d.txt"))
    assert r.status == 200 and r.json["path"] == "a/d.txt", r
    r = api.delete(files(sid, "a", "recursive=true"))
    assert r.status == 200 and r.json == {"path": "a", "deleted": True}, r
    assert api.get(tail(sid, "a")).status == 404


def test_path_query_missing_or_empty_is_the_top(api, session):
    sid = session["id"]
    api.request("PUT", tail(sid, "top.txt"), body=b"x", headers=OCTET)
    for u in (files(sid), files(sid, ""), tail(sid)):
        r = api.get(u)
        assert r.status == 200 and r.json["path"] == "" and "top.txt" in [e["name"] for e in r.json["entries"]], (u, r)


def test_path_query_validated_as_the_path_form(api, session):
    sid = session["id"]
    assert api.request("PUT", files(sid, "mine.txt"), body=b"x", headers=OCTET).status == 201  # the workspace exists
    for bad in ("../x", "a/../../x", "/etc/passwd"):
        assert_error(api.get(files(sid, bad)), 400, "invalid_path")
        assert_error(api.request("PUT", files(sid, bad), body=b"x", headers=OCTET), 400, "invalid_path")
    assert_error(api.get(files(sid) + "?path=a%00b"), 400, "invalid_path")
    # both forms at once
    assert_error(api.get(tail(sid, "a") + "?path=b"), 400, "invalid_path")
    assert_error(api.request("PUT", tail(sid, "a") + "?path=b", body=b"x", headers=OCTET), 400, "invalid_path")
    assert_error(api.delete(tail(sid, "a") + "?path=a"), 400, "invalid_path")


def test_path_query_with_curl(api, session, tmp_path):
    sid = session["id"]
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(100000))
    base = "http://localhost/v1/sessions/%s/files" % sid
    curl("--fail-with-body", "-T", str(src), base + "?path=d%2Fsrc.bin", check=False)  # no d/ yet
    out = curl("-o", "/dev/null", "-w", "%{http_code}", "-T", str(src), base + "?path=d%2Fsrc.bin", check=False).stdout
    assert out == "404", out
    curl("--fail-with-body", "-X", "PUT", base + "?path=d&mkdir")
    curl("--fail-with-body", "-T", str(src), base + "?path=d%2Fsrc.bin")
    out = curl("--fail-with-body", "-o", str(tmp_path / "dst.bin"), base + "?path=d/src.bin")
    assert (tmp_path / "dst.bin").read_bytes() == src.read_bytes()
