# SPDX-License-Identifier: LGPL-2.1-or-later
"""The file tools of sandboxctl mcp, with the official MCP SDK as the client: paths judged as
the HTTP API judges them (compared side by side), ranges of a large file, base64, parents,
guarded removal, copies, and copies to and from the --host-path= directories."""

import base64
import hashlib
import json
import os

import pytest

from conftest import unique_user
from test_mcp import SDK, mcp

pytestmark = pytest.mark.skipif(not SDK, reason="SANDBOXD_MCP_SDK is not set: run through tools/dev test")

OCTET = {"Content-Type": "application/octet-stream"}


def files_url(sid, path, query=""):
    """PATH as is, '..' reaching sandboxd untouched; a leading '/' as %2F (files//x would
    be x's URL with an empty component, which does not count)."""
    if path.startswith("/"):
        path = "%2F" + path[1:]
    return "/v1/sessions/%s/files/%s" % (sid, path) + ("?" + query if query else "")


def http_outcome(r):
    if r.status < 300:
        return ("ok", r.status if r.status >= 400 else None)
    return (json.loads(r.body)["error"]["code"], r.status)


def mcp_outcome(call):
    if not call["isError"]:
        assert call["body"]["ok"] is True, call
        return ("ok", None)
    err = call["body"]["error"]
    return (err["code"], err["http_status"])


@pytest.fixture
def sid(api):
    s = api.create_session(unique_user(), "mcpfiles")
    yield s["id"]
    api.request("DELETE", "/v1/sessions/" + s["id"] + "?purge=true")


REFUSED = ["/abs.txt", "a/../b", "../x", "", "sub/../../x", "/"]


@pytest.mark.parametrize("transport", ["dbus", "http"])
def test_mcp_files_paths_like_the_http_api(api, sid, transport):
    args = [] if transport == "dbus" else ["--transport=http"]
    api.request("PUT", files_url(sid, "sub", "mkdir"))
    api.request("PUT", files_url(sid, "keep"), body=b"k", headers=OCTET)
    # (tool, arguments, the HTTP request doing the same)
    cases = []
    for p in REFUSED:
        cases.append(("sandbox_stat", {"path": p}, ("GET", files_url(sid, p, "stat"), None)))
        cases.append(("sandbox_write_file", {"path": p, "content": "x"}, ("PUT", files_url(sid, p), b"x")))
        cases.append(("sandbox_remove", {"path": p}, ("DELETE", files_url(sid, p), None)))
        cases.append(("sandbox_move", {"from": p, "to": "moved"}, ("POST", files_url(sid, p, "move_to=moved"), None)))
        if p.strip("/"):  # the top: the HTTP API lists it, the tool is_a_directory
            cases.append(("sandbox_read_file", {"path": p}, ("GET", files_url(sid, p), None)))
        if p not in ("a/../b",):  # ?mkdir makes a and b there
            cases.append(("sandbox_mkdir", {"path": p, "parents": True}, ("PUT", files_url(sid, p, "mkdir"), None)))
    for p in ("/abs", "../x"):
        cases.append(("sandbox_move", {"from": "keep", "to": p}, ("POST", files_url(sid, "keep", "move_to=" + p), None)))
    # ".." that stays inside is the kernel's to resolve, in both
    cases.append(("sandbox_read_file", {"path": "sub/../keep"}, ("GET", files_url(sid, "sub/../keep"), None)))

    out = mcp([{"name": t, "arguments": dict(a, session_id=sid)} for t, a, _ in cases], *args)
    seen = {}
    for (tool, a, (method, url, body)), call in zip(cases, out["calls"]):
        want = http_outcome(api.request(method, url, body=body, headers=OCTET if body else None))
        got = mcp_outcome(call)
        seen[(tool, json.dumps(a))] = (got, want)
    assert {k: v for k, v in seen.items() if v[0] != v[1]} == {}, seen
    # and they are what the issue asks for
    assert seen[("sandbox_write_file", json.dumps({"path": "/abs.txt", "content": "x"}))][0] == ("invalid_path", 400)
    assert seen[("sandbox_stat", json.dumps({"path": "../x"}))][0] == ("invalid_path", 400)
    assert seen[("sandbox_write_file", json.dumps({"path": "", "content": "x"}))][0] == ("invalid_path", 400)
    assert seen[("sandbox_stat", json.dumps({"path": "a/../b"}))][0] == ("not_found", 404)
    assert seen[("sandbox_read_file", json.dumps({"path": "sub/../keep"}))][0] == ("ok", None)
    # the HTTP API trims trailing slashes first: "/" alone is the top, as ""
    assert seen[("sandbox_stat", json.dumps({"path": "/"}))][0] == ("ok", None)
    assert seen[("sandbox_write_file", json.dumps({"path": "/", "content": "x"}))][0] == ("invalid_path", 400)
    # nothing was written where an absolute path points, nor as its relative twin
    names = sorted(e["name"] for e in api.get(files_url(sid, "")).json["entries"])
    assert names == ["keep", "sub"], names


def test_mcp_files_tools(api, sid):
    big = os.urandom(1536 * 1024 + 123)
    assert api.request("PUT", files_url(sid, "big.bin"), body=big, headers=OCTET).status == 201
    text = ("line %d é\n" * 20000) % tuple(range(20000))  # > 256 KiB
    assert api.request("PUT", files_url(sid, "t.txt"), body=text.encode(), headers=OCTET).status == 201
    small = "small é\n"
    binary = bytes(range(256)) * 3
    mib = 1024 * 1024
    calls = [
        # 0-3 ranges of a file larger than 1 MiB
        {"name": "sandbox_read_file", "arguments": {"path": "big.bin", "offset": mib, "length": 1000, "encoding": "base64"}},
        {"name": "sandbox_read_file", "arguments": {"path": "big.bin", "offset": len(big) - 10, "length": 100, "encoding": "base64"}},
        {"name": "sandbox_read_file", "arguments": {"path": "big.bin", "offset": len(big) + 1}},
        {"name": "sandbox_read_file", "arguments": {"path": "big.bin", "length": mib + 1}},
        # 4-5 make_parents
        {"name": "sandbox_write_file", "arguments": {"path": "new/dir/s.txt", "content": small}},
        {"name": "sandbox_write_file", "arguments": {"path": "new/dir/s.txt", "content": small, "make_parents": True}},
        # 6-8 text back, in a range, and as base64
        {"name": "sandbox_read_file", "arguments": {"path": "t.txt"}},
        {"name": "sandbox_read_file", "arguments": {"path": "t.txt", "offset": 7, "length": 5, "encoding": "text"}},
        {"name": "sandbox_write_file", "arguments": {"path": "b.bin", "content": base64.b64encode(binary).decode(),
                                                     "encoding": "base64"}},
        # 9-11
        {"name": "sandbox_read_file", "arguments": {"path": "b.bin"}},
        {"name": "sandbox_read_file", "arguments": {"path": "b.bin", "encoding": "text"}},
        {"name": "sandbox_write_file", "arguments": {"path": "b.bin", "content": "no", "overwrite": False}},
        # 12-16 stat, list, mkdir
        {"name": "sandbox_stat", "arguments": {"path": "b.bin"}},
        {"name": "sandbox_list_files", "arguments": {"path": "new"}},
        {"name": "sandbox_mkdir", "arguments": {"path": "m/n"}},
        {"name": "sandbox_mkdir", "arguments": {"path": "m/n", "parents": True}},
        {"name": "sandbox_mkdir", "arguments": {"path": "m/n/o"}},
        # 17-20 remove
        {"name": "sandbox_remove", "arguments": {"path": "m", "recursive": True}},
        {"name": "sandbox_remove", "arguments": {"path": "m"}},
        {"name": "sandbox_remove", "arguments": {"path": "m", "recursive": True, "confirm": True}},
        {"name": "sandbox_remove", "arguments": {"path": "m"}},
        # 21-25 move, copy
        {"name": "sandbox_move", "arguments": {"from": "b.bin", "to": "new/b2.bin"}},
        {"name": "sandbox_copy", "arguments": {"from": "big.bin", "to": "big2.bin"}},
        {"name": "sandbox_copy", "arguments": {"from": "big.bin", "to": "big2.bin"}},
        {"name": "sandbox_copy", "arguments": {"from": "new", "to": "new2"}},
        {"name": "sandbox_read_file", "arguments": {"path": "new"}},
        # 26-28 bounds of the arguments
        {"name": "sandbox_read_file", "arguments": {"path": "x" * 5000}},
        {"name": "sandbox_read_file", "arguments": {"path": "big.bin", "encoding": "utf16"}},
        {"name": "sandbox_stat", "arguments": {"path": "big.bin", "extra": 1}},
    ]
    for c in calls:
        c["arguments"]["session_id"] = sid
    out = mcp(calls)
    c = out["calls"]
    d = [x["body"].get("data") for x in c]
    err = [x["body"].get("error") for x in c]

    assert d[0] == {"path": "big.bin", "size": len(big), "offset": mib, "returned_bytes": 1000, "eof": False,
                    "content_b64": base64.b64encode(big[mib:mib + 1000]).decode()}, d[0]
    assert d[1]["returned_bytes"] == 10 and d[1]["eof"] is True, d[1]
    assert base64.b64decode(d[1]["content_b64"]) == big[-10:]
    assert (err[2]["code"], err[2]["http_status"]) == ("invalid_offset", 416), c[2]
    assert err[3]["code"] == "invalid_value" and "length" in err[3]["message"], c[3]

    assert (err[4]["code"], err[4]["http_status"]) == ("not_found", 404), c[4]
    assert d[5] == {"path": "new/dir/s.txt", "bytes": len(small.encode())}, c[5]
    assert api.get(files_url(sid, "new/dir/s.txt")).body == small.encode()
    # the default length is 256 KiB: the text is longer, and cut at a character (auto: text when UTF-8)
    assert d[6]["size"] == len(text.encode()) and d[6]["eof"] is False and d[6]["returned_bytes"] == 256 * 1024, d[6]
    assert d[6]["content"].encode() == text.encode()[:256 * 1024], d[6].keys()
    assert d[7]["content"] == text.encode()[7:12].decode() and d[7]["eof"] is False, d[7]
    assert d[8] == {"path": "b.bin", "bytes": len(binary)}, c[8]
    assert base64.b64decode(d[9]["content_b64"]) == binary and "content" not in d[9], d[9]
    assert d[9]["eof"] is True and d[9]["size"] == len(binary), d[9]
    assert err[10]["code"] == "invalid_value" and "base64" in err[10]["message"], c[10]
    assert err[11]["code"] == "exists", c[11]

    moved = api.get(files_url(sid, "new/b2.bin", "stat")).json  # b.bin, moved by call 21
    assert dict(d[12], name="b2.bin", path="new/b2.bin") == moved, (d[12], moved)
    assert d[12]["type"] == "file" and d[12]["size"] == len(binary)
    assert [e["name"] for e in d[13]["entries"]] == ["dir"] and d[13]["truncated"] is False, d[13]
    assert err[14]["code"] == "not_found", c[14]
    assert d[15]["type"] == "dir", c[15]
    assert d[16]["type"] == "dir" and d[16]["name"] == "o", c[16]

    assert (err[17]["code"], err[17]["http_status"]) == ("invalid_value", 400) and "confirm" in err[17]["message"]
    assert err[18]["code"] == "not_empty", c[18]
    assert d[19] == {"path": "m", "removed": True}, c[19]
    assert err[20]["code"] == "not_found", c[20]

    assert d[21] == {"from": "b.bin", "to": "new/b2.bin"}, c[21]
    assert api.get(files_url(sid, "new/b2.bin")).body == binary
    assert d[22] == {"from": "big.bin", "to": "big2.bin", "bytes": len(big)}, c[22]
    assert hashlib.sha256(api.get(files_url(sid, "big2.bin")).body).digest() == hashlib.sha256(big).digest()
    assert err[23]["code"] == "exists", c[23]
    assert err[24]["code"] == "is_a_directory", c[24]
    assert err[25]["code"] == "is_a_directory", c[25]
    assert err[26]["code"] == "invalid_path", c[26]
    assert err[27]["code"] == "invalid_value", c[27]
    assert err[28]["code"] == "unknown_field", c[28]

    tools = {t["name"]: t for t in out["tools"]}
    for name in ("sandbox_read_file", "sandbox_write_file", "sandbox_list_files", "sandbox_stat", "sandbox_mkdir",
                 "sandbox_remove", "sandbox_move", "sandbox_copy", "sandbox_copy_from_host", "sandbox_copy_to_host"):
        t = tools[name]
        s = t["inputSchema"]
        assert s["additionalProperties"] is False and "session_id" in s["required"], t
        for k, v in s["properties"].items():
            if "path" in k or k in ("from", "to"):
                assert v["maxLength"] == 4096, (name, k)
        assert "annotations" in t and "outputSchema" in t and t["title"], t
    rs = tools["sandbox_read_file"]["inputSchema"]["properties"]
    assert rs["length"]["maximum"] == 1024 * 1024 and rs["encoding"]["enum"] == ["auto", "text", "base64"]
    assert tools["sandbox_remove"]["annotations"]["destructiveHint"] is True
    assert tools["sandbox_stat"]["annotations"]["readOnlyHint"] is True


def test_mcp_files_host_copies(api, sid, tmp_path):
    ro = tmp_path / "ro"
    rw = tmp_path / "rw"
    outside = tmp_path / "outside"
    for d in (ro, rw, outside):
        d.mkdir()
    (ro / "in.txt").write_bytes(b"from the host\n")
    (outside / "secret").write_bytes(b"secret\n")
    (rw / "escape").symlink_to(outside / "secret")
    (rw / "escape-dir").symlink_to(outside)
    (rw / "taken").write_bytes(b"old\n")
    os.link(outside / "secret", rw / "hard")  # another name of a file outside
    big = os.urandom(2 * 1024 * 1024 + 7)
    (ro / "big.bin").write_bytes(big)
    api.request("PUT", files_url(sid, "w.txt"), body=b"from the sandbox\n", headers=OCTET)

    calls = [
        # 0-1 allowed both ways
        {"name": "sandbox_copy_from_host", "arguments": {"host_path": str(ro / "in.txt"), "path": "in.txt"}},
        {"name": "sandbox_copy_to_host", "arguments": {"path": "w.txt", "host_path": str(rw / "out.txt")}},
        # 2-3 no overwrite unless told
        {"name": "sandbox_copy_to_host", "arguments": {"path": "w.txt", "host_path": str(rw / "taken")}},
        {"name": "sandbox_copy_to_host", "arguments": {"path": "w.txt", "host_path": str(rw / "taken"), "overwrite": True}},
        # 4-11 refused: forbidden
        {"name": "sandbox_copy_from_host", "arguments": {"host_path": str(rw / "escape"), "path": "x"}},
        {"name": "sandbox_copy_from_host", "arguments": {"host_path": str(rw / "escape-dir" / "secret"), "path": "x"}},
        {"name": "sandbox_copy_from_host", "arguments": {"host_path": str(ro) + "/../outside/secret", "path": "x"}},
        {"name": "sandbox_copy_from_host", "arguments": {"host_path": str(outside / "secret"), "path": "x"}},
        {"name": "sandbox_copy_from_host", "arguments": {"host_path": "in.txt", "path": "x"}},
        {"name": "sandbox_copy_to_host", "arguments": {"path": "w.txt", "host_path": str(ro / "new.txt")}},
        {"name": "sandbox_copy_to_host", "arguments": {"path": "w.txt", "host_path": str(rw / "escape-dir" / "new")}},
        {"name": "sandbox_copy_to_host", "arguments": {"path": "w.txt", "host_path": str(rw / "escape"), "overwrite": True}},
        # 12-13 a larger file streams both ways
        {"name": "sandbox_copy_from_host", "arguments": {"host_path": str(ro / "big.bin"), "path": "big.bin"}},
        {"name": "sandbox_copy_to_host", "arguments": {"path": "big.bin", "host_path": str(rw / "big.bin")}},
        # 14 the workspace path is checked as everywhere
        {"name": "sandbox_copy_to_host", "arguments": {"path": "/w.txt", "host_path": str(rw / "abs")}},
        # 15 a hard link to a file outside
        {"name": "sandbox_copy_from_host", "arguments": {"host_path": str(rw / "hard"), "path": "x"}},
    ]
    for c in calls:
        c["arguments"]["session_id"] = sid
    out = mcp(calls, "--host-path=%s" % ro, "--host-path=%s:rw" % rw)
    c = out["calls"]
    d = [x["body"].get("data") for x in c]
    err = [x["body"].get("error") for x in c]

    assert d[0] == {"path": "in.txt", "host_path": str(ro / "in.txt"), "bytes": 14}, c[0]
    assert api.get(files_url(sid, "in.txt")).body == b"from the host\n"
    assert d[1]["bytes"] == 17 and (rw / "out.txt").read_bytes() == b"from the sandbox\n", c[1]
    assert err[2]["code"] == "exists", c[2]
    assert d[3]["bytes"] == 17 and (rw / "taken").read_bytes() == b"from the sandbox\n", c[3]
    for i in range(4, 12):
        assert (err[i]["code"], err[i]["http_status"]) == ("forbidden", 403), (i, c[i])
    assert "read-only" in err[9]["message"], c[9]
    assert (outside / "secret").read_bytes() == b"secret\n" and sorted(os.listdir(outside)) == ["secret"]
    assert (outside / "secret").stat().st_nlink == 2  # the test's own link, nothing else
    assert not (ro / "new.txt").exists()
    assert (rw / "escape").is_symlink()
    assert api.request("GET", files_url(sid, "x")).status == 404
    assert d[12]["bytes"] == len(big) and d[13]["bytes"] == len(big), (c[12], c[13])
    assert (rw / "big.bin").read_bytes() == big
    assert err[14]["code"] == "invalid_path", c[14]
    assert err[15]["code"] == "forbidden" and "hard links" in err[15]["message"], c[15]
    assert [n for n in os.listdir(rw) if n.startswith(".sandboxctl")] == []

    # without --host-path at all: forbidden, and the message says how to allow it
    out = mcp([{"name": "sandbox_copy_from_host", "arguments": {"session_id": sid, "host_path": str(ro / "in.txt"),
                                                                 "path": "y"}}])
    e = out["calls"][0]["body"]["error"]
    assert (e["code"], e["http_status"]) == ("forbidden", 403) and "--host-path=" in e["message"], e
