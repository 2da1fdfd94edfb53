# SPDX-License-Identifier: LGPL-2.1-or-later
"""The HTTP details of the API, each with real clients (curl, http.client, raw sockets):
file paths as ?path=, one parser for every boolean query flag, Range on downloads, an
early 413 with Expect: 100-continue, Content-Encoding, event offsets at line boundaries,
Host on HTTP/1.1, and nullable fields present as null.

The HTTP surface is the same in both exec modes: these run in the unit lane only."""

import http.client
import json
import os
import urllib.parse

import pytest

from conftest import UNIX_SOCKET, assert_error, raw_connect, sh

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
    for bad in ("../x", "..", "../../etc/passwd", "/etc/passwd"):
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


# --- 2. one parser for every boolean query flag ----------------------------------------------

def assert_flag_refused(resp, name):
    err = assert_error(resp, 400, "invalid_value")
    assert "?%s=" % name in err["message"], err


def test_stat_flag_values(api, session):
    sid = session["id"]
    api.request("PUT", tail(sid, "f"), body=b"bytes", headers=OCTET)
    for v in ("stat", "stat=1", "stat=true"):
        r = api.get(tail(sid, "f", v))
        assert r.status == 200 and r.json["name"] == "f" and r.json["size"] == 5, (v, r)
    for v in ("stat=0", "stat=false"):
        r = api.get(tail(sid, "f", v))
        assert r.status == 200 and r.body == b"bytes", (v, r)
    for v in ("stat=bogus", "stat=yes", "stat=TRUE", "stat=2"):
        assert_flag_refused(api.get(tail(sid, "f", v)), "stat")


def test_file_flags(api, session):
    sid = session["id"]
    # mkdir: bare/true/1 make a directory; false/0 is no ?mkdir (a PUT uploads, a POST has nothing to do)
    for i, v in enumerate(("mkdir", "mkdir=true", "mkdir=1")):
        r = api.request("PUT", tail(sid, "d%d" % i, v))
        assert r.status == 201 and r.json["type"] == "dir", (v, r)
    r = api.request("PUT", tail(sid, "up", "mkdir=false"), body=b"up", headers=OCTET)
    assert r.status == 201 and r.json["type"] == "file" and r.json["size"] == 2, r
    assert_error(api.post(tail(sid, "x", "mkdir=0")), 400, "invalid_value")
    assert_flag_refused(api.request("PUT", tail(sid, "x", "mkdir=bogus")), "mkdir")
    assert_flag_refused(api.post(tail(sid, "x", "mkdir=yes")), "mkdir")
    assert api.get(tail(sid, "x")).status == 404
    # overwrite
    api.request("PUT", tail(sid, "a"), body=b"a", headers=OCTET)
    api.request("PUT", tail(sid, "b"), body=b"b", headers=OCTET)
    for v in ("overwrite=false", "overwrite=0"):
        assert_error(api.post(tail(sid, "a", "move_to=b&" + v)), 409, "exists")
    assert_flag_refused(api.post(tail(sid, "a", "move_to=b&overwrite=bogus")), "overwrite")
    r = api.post(tail(sid, "a", "move_to=b&overwrite=1"))
    assert r.status == 200 and api.get(tail(sid, "b")).body == b"a", r
    # recursive
    api.request("PUT", tail(sid, "d0/f"), body=b"f", headers=OCTET)
    for v in ("recursive=false", "recursive=0"):
        assert_error(api.delete(tail(sid, "d0", v)), 409, "not_empty")
    assert_flag_refused(api.delete(tail(sid, "d0", "recursive=bogus")), "recursive")
    assert api.delete(tail(sid, "d0", "recursive")).status == 200


def test_command_and_session_flags(api, session):
    sid = session["id"]
    base = "/v1/sessions/%s/commands" % sid
    assert_flag_refused(api.post(base + "?wait=bogus", {"argv": ["true"]}), "wait")
    r = api.post(base + "?wait=0", {"argv": ["sleep", "30"], "stdin": "stream"})
    assert r.status == 202, r
    rid = r.json["request_id"]
    assert_flag_refused(api.post(base + "/%s/stdin?eof=bogus" % rid, b"x"), "eof")
    r = api.post(base + "/%s/stdin?eof=0" % rid, b"x")
    assert r.status == 200 and r.json == {"written": 1}, r
    assert_flag_refused(api.get(base + "/%s/tty?readonly=bogus" % rid), "readonly")
    api.post(base + "/%s/signal" % rid, {"signal": "SIGKILL"})
    assert_flag_refused(api.delete("/v1/sessions/%s?purge=bogus" % sid), "purge")
    assert api.get("/v1/sessions/" + sid).json["state"] == "active"
    r = api.delete("/v1/sessions/%s?purge=0" % sid)
    assert r.status == 200 and r.json["state"] == "closed", r


# --- 3. Range on file downloads ------------------------------------------------------------------

def test_range_with_http_client(api, session):
    sid = session["id"]
    data = os.urandom(10000)
    assert api.request("PUT", tail(sid, "r.bin"), body=data, headers=OCTET).status == 201
    u = files(sid, "r.bin")
    r = api.get(u)
    assert r.status == 200 and r.body == data and r.headers["Accept-Ranges"] == "bytes", r
    r = api.request("HEAD", u)
    assert r.status == 200 and r.headers["Accept-Ranges"] == "bytes" and r.headers["Content-Length"] == "10000", r
    for spec, start, end in (("0-99", 0, 99), ("9990-", 9990, 9999), ("-10", 9990, 9999), ("100-100", 100, 100),
                             ("5000-99999", 5000, 9999), ("-20000", 0, 9999)):
        r = api.get(u, headers={"Range": "bytes=" + spec})
        assert r.status == 206, (spec, r)
        assert r.body == data[start:end + 1], spec
        assert r.headers["Content-Range"] == "bytes %d-%d/10000" % (start, end), (spec, r.headers)
        assert r.headers["Content-Length"] == str(end - start + 1), (spec, r.headers)
    # unsatisfiable: 416, the JSON error, and the size
    for spec in ("10000-", "20000-20001", "-0"):
        r = api.get(u, headers={"Range": "bytes=" + spec})
        assert_error(r, 416, "invalid_offset")
        assert r.headers["Content-Range"] == "bytes */10000", (spec, r.headers)
    # malformed, several ranges, another unit, or an If-Range: the whole file
    for h in ({"Range": "bytes=5-1"}, {"Range": "bytes=0-1,5-6"}, {"Range": "items=0-1"}, {"Range": "bytes=abc"},
              {"Range": "bytes=0-1", "If-Range": '"x"'}):
        r = api.get(u, headers=h)
        assert r.status == 200 and r.body == data and "Content-Range" not in r.headers, (h, r)
    # HEAD ignores Range; a directory listing has none
    r = api.request("HEAD", u, headers={"Range": "bytes=0-1"})
    assert r.status == 200 and r.headers["Content-Length"] == "10000", r
    r = api.get(files(sid), headers={"Range": "bytes=0-1"})
    assert r.status == 200 and r.json["entries"], r
    # an empty file: no range of it can be satisfied
    api.request("PUT", tail(sid, "empty"), body=b"", headers=OCTET)
    r = api.get(tail(sid, "empty"), headers={"Range": "bytes=0-"})
    assert_error(r, 416, "invalid_offset")
    assert r.headers["Content-Range"] == "bytes */0", r.headers


def test_range_with_curl(api, session, tmp_path):
    sid = session["id"]
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(3 << 20))
    base = "http://localhost" + files(sid, "big.bin")
    curl("--fail-with-body", "-T", str(src), base)
    # curl -r
    out = curl("--fail-with-body", "-r", "1000-1999", "-o", str(tmp_path / "part"), "-w", "%{http_code}", base).stdout
    assert out == "206" and (tmp_path / "part").read_bytes() == src.read_bytes()[1000:2000], out
    # curl -C -: resume a partial download
    dst = tmp_path / "dst.bin"
    dst.write_bytes(src.read_bytes()[:1234567])
    out = curl("--fail-with-body", "-C", "-", "-o", str(dst), "-w", "%{http_code}", base).stdout
    assert out == "206", out
    assert dst.read_bytes() == src.read_bytes()
    # resuming a complete download: 416, which curl takes as done
    out = curl("-C", "-", "-o", str(dst), "-w", "%{http_code}", base, check=False)
    assert out.stdout == "416", out
    assert dst.read_bytes() == src.read_bytes()


# --- 4. an early 413 with Expect: 100-continue ------------------------------------------------------

def head(method, path, headers):
    return ("%s %s HTTP/1.1\r\nHost: localhost\r\n" % (method, path)).encode() + \
        b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in headers.items()) + b"\r\n"


def first_answer(s):
    """The status line and the rest of what came first, raw: a 100 Continue is not skipped."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return int(data.split(b" ", 2)[1]), data


def refused_from_headers(method, path, headers, status, code):
    """Sends only the headers; the answer must come before any body, and not be 100."""
    with raw_connect() as s:
        s.sendall(head(method, path, headers))
        got, data = first_answer(s)
        assert got == status, data[:300]
        head_bytes, body = data.split(b"\r\n\r\n", 1)
        length = [ln.split(b":", 1)[1] for ln in head_bytes.split(b"\r\n") if ln.lower().startswith(b"content-length:")]
        while len(body) < int(length[0]):
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
        err = json.loads(body)["error"]
        assert err["code"] == code, err
        return err


LARGE = str(64 << 40)  # 64 TiB: over every limit


def test_early_413(api, session):
    sid = session["id"]
    r = api.post("/v1/sessions/%s/commands?wait=false" % sid, {"argv": ["sleep", "30"], "stdin": "stream"})
    rid = r.json["request_id"]
    expect = {"Expect": "100-continue"}
    for method, path, ctype, length in (
            ("POST", "/v1/sessions", "application/json", str((1 << 20) + 1)),   # MaxBodySize=1M
            ("POST", "/v1/sessions/%s/commands" % sid, "application/json", LARGE),
            ("POST", "/v1/sessions/%s/commands/%s/stdin" % (sid, rid), "application/octet-stream", LARGE),
            ("PUT", tail(sid, "huge.bin"), "application/octet-stream", LARGE),      # MaxFileSize=
            ("PUT", files(sid, "huge.bin"), "application/octet-stream", LARGE)):
        h = dict(expect, **{"Content-Type": ctype, "Content-Length": length})
        refused_from_headers(method, path, h, 413, "payload_too_large")
    # an upload over MaxFileSize= is refused from its headers even without Expect (as before)
    refused_from_headers("PUT", tail(sid, "huge.bin"), {"Content-Type": "application/octet-stream",
                                                       "Content-Length": LARGE}, 413, "payload_too_large")
    assert api.get(tail(sid, "huge.bin")).status == 404
    # under the limit: 100 Continue, then the body is read
    with raw_connect() as s:
        body = json.dumps({"argv": ["true"]}).encode()
        s.sendall(head("POST", "/v1/sessions/%s/commands?wait=0" % sid,
                       {"Expect": "100-continue", "Content-Type": "application/json", "Content-Length": str(len(body))}))
        got, data = first_answer(s)
        assert got == 100, data
        s.sendall(body)
        status, _, _ = read_response(s)
        assert status == 202
    api.post("/v1/sessions/%s/commands/%s/signal" % (sid, rid), {"signal": "SIGKILL"})


# --- 5. Content-Encoding -----------------------------------------------------------------------------

def test_content_encoding_refused(api, session):
    import gzip
    sid = session["id"]
    body = gzip.compress(json.dumps({"argv": ["true"]}).encode())
    for ce in ("gzip", "deflate", "br", "identity, gzip", "GZIP"):
        r = api.post("/v1/sessions/%s/commands" % sid, body, headers={"Content-Encoding": ce})
        assert_error(r, 415, "unsupported_encoding")
        r = api.request("PUT", tail(sid, "z.gz"), body=body, headers=dict(OCTET, **{"Content-Encoding": ce}))
        assert_error(r, 415, "unsupported_encoding")
    assert api.get(tail(sid, "z.gz")).status == 404
    # chunked, and before 100 Continue
    r = api.request("PUT", tail(sid, "z.gz"), body=iter([body]), encode_chunked=True,
                    headers=dict(OCTET, **{"Content-Encoding": "gzip"}))
    assert_error(r, 415, "unsupported_encoding")
    refused_from_headers("POST", "/v1/sessions", {"Expect": "100-continue", "Content-Type": "application/json",
                                                  "Content-Length": "100", "Content-Encoding": "gzip"},
                         415, "unsupported_encoding")
    # identity is no coding; a request without a body is not refused for its header
    r = api.request("PUT", tail(sid, "plain"), body=b"plain", headers=dict(OCTET, **{"Content-Encoding": "identity"}))
    assert r.status == 201, r
    r = api.get(tail(sid, "plain"), headers={"Content-Encoding": "gzip"})
    assert r.status == 200 and r.body == b"plain", r
    # curl sends a gzip body as it is: refused
    out = curl("-o", "/dev/null", "-w", "%{http_code}", "-H", "Content-Encoding: gzip", "-H",
               "Content-Type: application/json", "--data-binary", "{}", "http://localhost/v1/sessions", check=False)
    assert out.stdout == "415", out


# --- 7. Host on HTTP/1.1 -----------------------------------------------------------------------------

def test_host_required_on_http11():
    with raw_connect() as s:
        s.sendall(b"GET /v1/health HTTP/1.1\r\n\r\n")
        status, ctype, body = read_response(s)
        assert status == 400 and ctype["Content-Type"] == "application/json", (status, body)
        assert json.loads(body)["error"]["code"] == "invalid_request", body
    # with a body pending and Expect: refused before 100 Continue
    with raw_connect() as s:
        s.sendall(b"POST /v1/sessions HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n")
        got, data = first_answer(s)
        assert got == 400, data
    with raw_connect() as s:
        s.sendall(b"GET /v1/health HTTP/1.0\r\n\r\n")
        status, _, body = read_response(s)
        assert status == 200 and json.loads(body)["status"], body
    with raw_connect() as s:
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        status, _, _ = read_response(s)
        assert status == 200


# --- 6. events?offset= at line boundaries only ---------------------------------------------------------

def test_event_offset_inside_a_line(api, session):
    sid = session["id"]
    base = "/v1/sessions/%s/commands" % sid
    r = api.post(base, {"argv": ["sh", "-c", "echo one; echo two >&2; printf 'three\\nfour\\n'; exit 3"],
                        "request_id": "lines"})
    assert r.status == 200, r
    whole = api.get(base + "/lines/events").body
    starts = {0} | {i + 1 for i, c in enumerate(whole) if c == ord("\n")}
    assert len(starts) >= 4 and max(starts) == len(whole), whole
    for offset in range(len(whole) + 1):
        r = api.get(base + "/lines/events?offset=%d" % offset)
        if offset in starts:
            assert r.status == 200 and r.body == whole[offset:], (offset, r)
        else:
            err = assert_error(r, 416, "invalid_offset")
            assert "inside a line" in err["message"], err
    assert_error(api.get(base + "/lines/events?offset=%d" % (len(whole) + 1)), 416, "invalid_offset")


# --- 8. nullable fields present as null; listing entries with their path ----------------------------------

def test_close_reason_null_until_closed(api, scope):
    s = api.create_session(*scope)
    assert "close_reason" in s and s["close_reason"] is None, s
    listed = [x for x in api.get("/v1/sessions").json["sessions"] if x["id"] == s["id"]]
    assert listed and listed[0]["close_reason"] is None, listed
    closed = api.delete("/v1/sessions/" + s["id"]).json
    assert closed["close_reason"] == "deleted", closed


def test_command_nullable_fields_present(api, session):
    sid = session["id"]
    r = api.post("/v1/sessions/%s/commands?wait=false" % sid, {"argv": ["sleep", "30"], "request_id": "nul"})
    assert r.status == 202, r
    snap = api.get("/v1/sessions/%s/commands/nul" % sid).json
    for field in ("exit_code", "signal", "reason", "duration_ms", "tty", "cgroup"):
        assert field in snap, (field, snap)
    assert snap["exit_code"] is None and snap["signal"] is None and snap["tty"] is None, snap
    api.post("/v1/sessions/%s/commands/nul/signal" % sid, {"signal": "SIGKILL"})


def test_listing_entries_carry_their_path(api, session):
    sid = session["id"]
    api.request("PUT", tail(sid, "d/e", "mkdir"))
    api.request("PUT", tail(sid, "d/e/f.txt"), body=b"f", headers=OCTET)
    api.request("PUT", tail(sid, "top.txt"), body=b"t", headers=OCTET)
    top = api.get(files(sid)).json
    assert {e["name"]: e["path"] for e in top["entries"]} == {"d": "d", "top.txt": "top.txt"}, top
    for u in (tail(sid, "d/e"), tail(sid, "d/e/"), files(sid, "d/e")):
        listing = api.get(u).json
        assert [(e["name"], e["path"]) for e in listing["entries"]] == [("f.txt", "d/e/f.txt")], (u, listing)
    # each entry's path is what ?stat of it answers
    entry = api.get(tail(sid, "d/e")).json["entries"][0]
    st = api.get(files(sid, entry["path"], "stat")).json
    assert st == entry, (st, entry)
