# SPDX-License-Identifier: LGPL-2.1-or-later
"""The file API: PUT/GET/DELETE /v1/sessions/{sid}/files/{path}, listings, ?stat,
?mkdir, ?move_to=; streamed both ways; every path resolved beneath the workspace.

Escape attempts use what a command can plant in its own workspace (symlinks to
/etc/shadow and to another scope's workspace, loops, a FIFO) and must each get a
4xx with the error envelope while nothing changes, inside or outside."""

import datetime
import hashlib
import http.client
import os
import stat
import threading
import time
import urllib.parse

import pytest

from conftest import (UNIX_SOCKET, WORKSPACE_HOST_ROOT, Api, assert_error, config_dropin, raw_connect, run,
                      scope_dir, sh, unique_user, wait_for)

OCTET = {"Content-Type": "application/octet-stream"}
RSS_LIMIT = 32 << 20
BIG_MIB = int(os.environ.get("SANDBOXD_TEST_BIG_FILE_MIB", "1024"))
DROPIN = "/etc/sandboxd/sandboxd.conf.d/50-test-files.conf"


def url(sid, path="", query=""):
    """The URL of PATH (quoted as a client library would) in session SID."""
    u = "/v1/sessions/%s/files/%s" % (sid, urllib.parse.quote(path, safe="/"))
    return u + ("?" + query if query else "")


def raw_url(sid, path, query=""):
    """The URL with PATH as is: '..' and '%2e' reach sandboxd untouched."""
    return "/v1/sessions/%s/files/%s" % (sid, path) + ("?" + query if query else "")


def put(api, sid, path, data, query="", headers=None):
    h = dict(OCTET)
    h.update(headers or {})
    return api.request("PUT", url(sid, path, query), body=data, headers=h)


def get(api, sid, path="", query=""):
    return api.get(url(sid, path, query))


def host_dir(session):
    return scope_dir(session, WORKSPACE_HOST_ROOT)


def sh_in(api, sid, script):
    """Runs a shell script as the session's command; asserts it succeeded."""
    res = run(api, sid, ["sh", "-c", script])
    assert res["exit"]["status"] == "succeeded", res
    return res["stdout"]


def snapshot(root):
    """{relative path: (file type, size, content hash or link target)}, nothing followed."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    what = hashlib.sha256(f.read()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                what = os.readlink(p)
            else:
                what = None  # never open a FIFO
            out[os.path.relpath(p, root)] = (stat.S_IFMT(st.st_mode), st.st_size, what)
    return out


def file_state(path):
    st = os.lstat(path)
    with open(path, "rb") as f:
        return st.st_mode, st.st_uid, st.st_size, st.st_mtime_ns, hashlib.sha256(f.read()).hexdigest()


def read_response(s):
    """Status and parsed body of the response on socket S."""
    resp = http.client.HTTPResponse(s)
    resp.begin()
    return resp.status, resp.getheader("Content-Type", ""), resp.read()


def put_head(sid, path, length=None, extra=b""):
    head = b"PUT " + url(sid, path).encode() + b" HTTP/1.1\r\nHost: localhost\r\n"
    head += b"Content-Type: application/octet-stream\r\n"
    head += b"Content-Length: %d\r\n" % length if length is not None else b"Transfer-Encoding: chunked\r\n"
    return head + extra + b"\r\n"


def main_pid():
    pid = int(sh("systemctl", "show", "-p", "MainPID", "--value", "sandboxd.service").stdout.strip())
    assert pid > 0
    return pid


def proc_status(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no %s in /proc/%d/status" % (key, pid))


def no_leftovers(session, *names):
    """None of NAMES is in the workspace, nor any hidden temporary file of sandboxd."""
    left = os.listdir(host_dir(session))
    return not [n for n in left if n in names or n.startswith(".sandboxd-")]


# --------------------------------------------------------------------------
# round trips

BINARY = bytes(range(256)) * 64 + b"\x00\r\n\xff"


def test_upload_and_download_binary(api, session):
    sid = session["id"]
    r = put(api, sid, "data.bin", BINARY)
    assert r.status == 201, r
    e = r.json
    assert e["name"] == "data.bin" and e["path"] == "data.bin" and e["type"] == "file", e
    assert e["size"] == len(BINARY) and e["mode"] == "0600", e

    r = get(api, sid, "data.bin")
    assert r.status == 200, r
    assert r.body == BINARY
    assert r.headers["Content-Type"] == "application/octet-stream"
    assert int(r.headers["Content-Length"]) == len(BINARY)

    # again: replaced, 200
    r = put(api, sid, "data.bin", b"short")
    assert r.status == 200, r
    assert get(api, sid, "data.bin").body == b"short"

    # an empty file, a name that needs quoting
    assert put(api, sid, "empty", b"").status == 201
    assert get(api, sid, "empty").body == b""
    assert put(api, sid, "with space & ü?.txt", b"odd name").status == 201
    assert get(api, sid, "with space & ü?.txt").body == b"odd name"
    assert os.path.exists(os.path.join(host_dir(session), "with space & ü?.txt"))


def test_head_gives_the_size(api, session):
    sid = session["id"]
    put(api, sid, "h", b"12345")
    r = api.request("HEAD", url(sid, "h"))
    assert r.status == 200 and r.body == b"" and r.headers["Content-Length"] == "5", r


def test_curl_round_trip(api, session, tmp_path):
    sid = session["id"]
    src, dst = tmp_path / "src.bin", tmp_path / "dst.bin"
    src.write_bytes(os.urandom(3 << 20) + BINARY)
    base = "http://localhost" + url(sid, "dir-less/curl.bin")
    # the parent does not exist: 404, and curl waits for it with Expect: 100-continue
    out = sh("curl", "-sS", "--unix-socket", UNIX_SOCKET, "-o", "/dev/null", "-w", "%{http_code}",
             "-T", str(src), base, check=False).stdout
    assert out == "404", out

    base = "http://localhost" + url(sid, "curl.bin")
    out = sh("curl", "-sS", "--fail-with-body", "--unix-socket", UNIX_SOCKET, "-T", str(src), base).stdout
    assert '"size":%d' % src.stat().st_size in out, out
    sh("curl", "-sS", "--fail-with-body", "--unix-socket", UNIX_SOCKET, "-o", str(dst), base)
    assert dst.read_bytes() == src.read_bytes()

    # curl --data-binary sends a form content type: the bytes are stored as they are
    sh("curl", "-sS", "--fail-with-body", "--unix-socket", UNIX_SOCKET, "-X", "PUT", "--data-binary",
       "@" + str(src), base)
    assert get(api, sid, "curl.bin").body == src.read_bytes()


def test_chunked_upload(api, session):
    sid = session["id"]
    chunks = [b"a" * 1000, b"", b"b" * 70000, b"c"]
    r = api.request("PUT", url(sid, "chunked"), body=iter(c for c in chunks if c), headers=OCTET,
                    encode_chunked=True)
    assert r.status == 201, r
    assert get(api, sid, "chunked").body == b"".join(chunks)


def test_mode_of_uploads(api, session):
    sid = session["id"]
    r = put(api, sid, "run.sh", b"#!/bin/sh\necho ran as $(id -un)\n", query="mode=0755")
    assert r.status == 201 and r.json["mode"] == "0755", r
    out = sh_in(api, sid, session["workspace_path"] + "/run.sh")
    assert out == "ran as %s\n" % session["dynamic_user"]
    # replacing keeps the mode unless told
    assert put(api, sid, "run.sh", b"#!/bin/sh\necho again\n").json["mode"] == "0755"
    assert put(api, sid, "run.sh", b"x", query="mode=600").json["mode"] == "0600"
    for bad in ("8", "1777", "-1", "abc", "07777"):
        assert_error(put(api, sid, "run.sh", b"y", query="mode=" + bad), 400, "invalid_value")
    assert get(api, sid, "run.sh").body == b"x"


# --------------------------------------------------------------------------
# listing, stat, mkdir, move, delete

def test_listing(api, session):
    sid = session["id"]
    put(api, sid, "b.txt", b"bbb")
    put(api, sid, "a.txt", b"a")
    sh_in(api, sid, "mkdir sub && ln -s a.txt link && mkfifo fifo && printf x > sub/in")

    r = get(api, sid)
    assert r.status == 200 and r.headers["Content-Type"].startswith("application/json"), r
    listing = r.json
    assert listing["path"] == "" and listing["truncated"] is False, listing
    entries = {e["name"]: e for e in listing["entries"]}
    assert [e["name"] for e in listing["entries"]] == sorted(entries), "sorted by name"
    assert set(entries) == {"a.txt", "b.txt", "sub", "link", "fifo"}, entries
    assert entries["a.txt"]["type"] == "file" and entries["a.txt"]["size"] == 1
    assert entries["b.txt"]["size"] == 3 and entries["b.txt"]["mode"] == "0600"
    assert entries["sub"]["type"] == "dir" and entries["sub"]["mode"] == "0700"
    assert entries["link"]["type"] == "symlink" and entries["link"]["target"] == "a.txt"
    assert entries["fifo"]["type"] == "other"
    for e in entries.values():
        assert set(e) - {"target"} == {"name", "path", "type", "size", "mode", "mtime", "mtime_usec"}, e
        assert e["path"] == e["name"], e  # the top's entries
        t = datetime.datetime.strptime(e["mtime"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
        assert abs(t.timestamp() * 1e6 - e["mtime_usec"]) < 2, e
        assert abs(time.time() - t.timestamp()) < 600, e

    sub = get(api, sid, "sub").json
    assert sub["path"] == "sub" and [(e["name"], e["path"]) for e in sub["entries"]] == [("in", "sub/in")]
    # a symlink to a directory inside is followed (the paths are through it, as asked)
    sh_in(api, sid, "ln -s sub sublink")
    assert [(e["name"], e["path"]) for e in get(api, sid, "sublink/").json["entries"]] == [("in", "sublink/in")]


def test_listing_of_a_fresh_workspace(api, session):
    # no command ran yet: the workspace is made on demand, empty
    r = get(api, session["id"])
    assert r.status == 200 and r.json["entries"] == [], r


def test_stat(api, session):
    sid = session["id"]
    assert_error(put(api, sid, "d/f", b""), 404, "not_found")  # no parent yet
    api.request("PUT", url(sid, "d", "mkdir"))
    put(api, sid, "d/f", b"12")

    e = get(api, sid, "d/f", "stat").json
    assert e["name"] == "f" and e["path"] == "d/f" and e["type"] == "file" and e["size"] == 2, e
    e = get(api, sid, "d", "stat").json
    assert e["type"] == "dir" and e["mode"] == "0700", e
    e = get(api, sid, "", "stat").json
    assert e["type"] == "dir" and e["name"] == "", e
    assert_error(get(api, sid, "nope", "stat"), 404, "not_found")
    assert_error(get(api, sid, "d/f/x", "stat"), 409, "not_a_directory")


def test_mkdir_with_parents(api, session):
    sid = session["id"]
    r = api.request("PUT", url(sid, "a/b/c", "mkdir"))
    assert r.status == 201 and r.json["type"] == "dir" and r.json["path"] == "a/b/c", r
    r = api.request("POST", url(sid, "a/b/c/", "mkdir=true"))
    assert r.status == 200, r  # already there
    assert os.path.isdir(os.path.join(host_dir(session), "a/b/c"))
    put(api, sid, "a/file", b"x")
    assert_error(api.request("PUT", url(sid, "a/file", "mkdir")), 409, "not_a_directory")
    assert_error(api.request("PUT", url(sid, "a/file/sub", "mkdir")), 409, "not_a_directory")
    # ?mkdir=false is no ?mkdir (a POST then says nothing to do); a value that is no flag is refused
    assert_error(api.request("POST", url(sid, "a/x", "mkdir=false")), 400, "invalid_value")
    assert_error(api.request("PUT", url(sid, "a/x", "mkdir=bogus")), 400, "invalid_value")
    assert_error(api.request("POST", url(sid, "a/x")), 400, "invalid_value")
    # usable by the command
    sh_in(api, sid, "echo hi > a/b/c/from-cmd")
    assert get(api, sid, "a/b/c/from-cmd").body == b"hi\n"


def test_move_to(api, session):
    sid = session["id"]
    put(api, sid, "one", b"1")
    put(api, sid, "two", b"2")
    api.request("PUT", url(sid, "dir", "mkdir"))

    r = api.request("POST", url(sid, "one", "move_to=dir/uno"))
    assert r.status == 200 and r.json["path"] == "dir/uno" and r.json["size"] == 1, r
    assert_error(get(api, sid, "one"), 404, "not_found")
    assert get(api, sid, "dir/uno").body == b"1"

    # an existing destination stays, unless overwrite=true
    assert_error(api.request("POST", url(sid, "two", "move_to=dir/uno")), 409, "exists")
    assert get(api, sid, "dir/uno").body == b"1"
    r = api.request("PUT", url(sid, "two", "move_to=dir/uno&overwrite=true"))
    assert r.status == 200, r
    assert get(api, sid, "dir/uno").body == b"2"

    # directories move too, not into themselves
    assert api.request("POST", url(sid, "dir", "move_to=renamed")).status == 200
    assert get(api, sid, "renamed/uno").body == b"2"
    assert_error(api.request("POST", url(sid, "renamed", "move_to=renamed/inner")), 400, "invalid_path")
    assert_error(api.request("POST", url(sid, "missing", "move_to=x")), 404, "not_found")
    assert_error(api.request("POST", url(sid, "renamed", "move_to=" + urllib.parse.quote("/tmp/x"))), 400,
                 "invalid_path")
    assert_error(api.request("POST", url(sid, "renamed", "move_to=x&mkdir")), 400, "invalid_value")


def test_delete(api, session):
    sid = session["id"]
    put(api, sid, "f", b"x")
    api.request("PUT", url(sid, "d/e", "mkdir"))
    put(api, sid, "d/e/g", b"y")

    r = api.request("DELETE", url(sid, "f"))
    assert r.status == 200 and r.json == {"path": "f", "deleted": True}, r
    assert not os.path.exists(os.path.join(host_dir(session), "f"))
    assert_error(api.request("DELETE", url(sid, "f")), 404, "not_found")
    assert_error(api.request("DELETE", url(sid, "d")), 409, "not_empty")
    assert os.path.exists(os.path.join(host_dir(session), "d/e/g"))
    assert api.request("DELETE", url(sid, "d", "recursive=true")).status == 200
    assert not os.path.exists(os.path.join(host_dir(session), "d"))
    api.request("PUT", url(sid, "empty", "mkdir"))
    assert api.request("DELETE", url(sid, "empty")).status == 200
    # the workspace itself
    assert_error(api.request("DELETE", url(sid, "")), 400, "invalid_path")
    assert_error(api.request("DELETE", url(sid, "", "recursive=true")), 400, "invalid_path")
    assert os.path.isdir(host_dir(session))


def test_method_not_allowed(api, session):
    r = api.request("PATCH", url(session["id"], "x"))
    assert_error(r, 405, "method_not_allowed")
    assert "PUT" in r.headers["Allow"]


def test_unknown_or_closed_session(api, scope):
    assert_error(put(api, "0123456789abcdef", "x", b"x"), 404, "not_found")
    assert_error(get(api, "0123456789abcdef", "x"), 404, "not_found")
    assert_error(get(api, "nonsense", "x"), 404, "not_found")
    s = api.create_session(*scope)
    assert api.request("DELETE", "/v1/sessions/" + s["id"]).status == 200
    assert_error(put(api, s["id"], "x", b"x"), 409, "session_not_active")
    assert_error(get(api, s["id"]), 409, "session_not_active")


# --------------------------------------------------------------------------
# the command and the API share the files

def test_api_file_used_by_the_first_command(api, session):
    # the workspace does not exist yet: the API makes it, systemd hands it to the
    # dynamic user when the first command starts
    sid = session["id"]
    put(api, sid, "notes.txt", b"from the api\n")
    out = sh_in(api, sid, "cat notes.txt; echo appended >> notes.txt; stat -c %U notes.txt")
    assert out == "from the api\n%s\n" % session["dynamic_user"], out
    assert get(api, sid, "notes.txt").body == b"from the api\nappended\n"


def test_api_file_used_by_later_commands(api, session):
    sid = session["id"]
    sh_in(api, sid, "mkdir -p made/by/cmd")
    top = os.stat(host_dir(session))
    assert top.st_uid != 0, "the workspace belongs to the dynamic user after a command"

    put(api, sid, "made/by/cmd/api.txt", b"line 1\n")
    api.request("PUT", url(sid, "made/api-dir", "mkdir"))
    for p in ("made/by/cmd/api.txt", "made/api-dir"):
        st = os.stat(os.path.join(host_dir(session), p))
        assert (st.st_uid, st.st_gid) == (top.st_uid, top.st_gid), "%s belongs to the scope's user" % p

    out = sh_in(api, sid, "cat made/by/cmd/api.txt; echo line 2 >> made/by/cmd/api.txt; "
                "echo x > made/api-dir/y; echo ok")
    assert out == "line 1\nok\n"
    assert get(api, sid, "made/by/cmd/api.txt").body == b"line 1\nline 2\n"
    assert get(api, sid, "made/api-dir/y").body == b"x\n"
    # and the command may delete what the API wrote
    sh_in(api, sid, "rm -r made/api-dir made/by/cmd/api.txt")


def test_command_file_downloadable(api, session):
    sid = session["id"]
    sh_in(api, sid, "head -c 100000 /dev/urandom > rnd; sha256sum rnd > rnd.sum; chmod 400 rnd")
    body = get(api, sid, "rnd").body
    expect = get(api, sid, "rnd.sum").body.split()[0].decode()
    assert hashlib.sha256(body).hexdigest() == expect
    # what the scope's user may not read, the API may not either
    sh_in(api, sid, "echo secret > closed; chmod 000 closed")
    assert_error(get(api, sid, "closed"), 403, "forbidden")


def test_disk_bytes(api, session):
    sid = session["id"]
    assert api.get_session(sid)["disk_bytes"] < 64 << 10
    put(api, sid, "mb", os.urandom(1 << 20))
    # counted in the background: the answer is the last count, the new one follows at once
    wait_for(lambda: api.get_session(sid)["disk_bytes"] >= 1 << 20, timeout=5, what="the upload to count")
    used = api.get_session(sid)["disk_bytes"]
    assert (1 << 20) <= used < (2 << 20), used
    # what commands write counts too (seen within a few seconds at most)
    sh_in(api, sid, "head -c 2097152 /dev/zero > two-mb; ln -s /etc/passwd link")
    wait_for(lambda: api.get_session(sid)["disk_bytes"] >= 3 << 20, timeout=10, what="disk_bytes to grow")
    api.request("DELETE", url(sid, "mb"))
    wait_for(lambda: api.get_session(sid)["disk_bytes"] < 3 << 20, timeout=5, what="the removal to count")
    used = api.get_session(sid)["disk_bytes"]
    assert (2 << 20) <= used < (3 << 20), used
    listed = [s for s in api.get("/v1/sessions").json["sessions"] if s["id"] == sid]
    assert listed[0]["disk_bytes"] == used


# --------------------------------------------------------------------------
# escapes: each refused with a 4xx envelope, nothing changed

@pytest.fixture
def planted(api, session, scope):
    """A workspace with what a command can plant, another scope's workspace with a
    secret, and snapshots of both and of /etc/shadow."""
    sid = session["id"]
    other = api.create_session(unique_user(), "other-" + scope[1][-6:])
    assert put(api, other["id"], "secret", b"other scope's secret\n").status == 201
    other_path = other["workspace_path"]
    sh_in(api, sid, " && ".join([
        "echo mine > mine.txt",
        "mkdir sub",
        "ln -s /etc/shadow shadow",
        "ln -s /etc etc",
        "ln -s %s/secret other-abs" % other_path,
        "ln -s ../../%s/%s/secret other-rel" % (other["user"], other["workspace"]),
        "ln -s %s other-dir" % other_path,
        "ln -s ../../.. up",
        "ln -s loop loop",
        "ln -s loop-b loop-a", "ln -s loop-a loop-b",
        "ln -s ../loop-a sub/loop",
        "mkfifo fifo",
    ]))
    state = {
        "sid": sid,
        "session": session,
        "other": other,
        "mine": snapshot(host_dir(session)),
        "theirs": snapshot(host_dir(other)),
        "shadow": file_state("/etc/shadow"),
        "etc": sorted(os.listdir("/etc")),
    }
    yield state
    assert snapshot(host_dir(session)) == state["mine"], "the workspace changed"
    assert snapshot(host_dir(other)) == state["theirs"], "the other scope's workspace changed"
    assert file_state("/etc/shadow") == state["shadow"], "/etc/shadow changed"
    assert sorted(os.listdir("/etc")) == state["etc"], "something appeared in /etc"


ESCAPE_PATHS = [
    # (path as sent, code)
    ("..", "invalid_path"),
    ("../x", "invalid_path"),
    ("%2e%2e/%2e%2e/x", "invalid_path"),
    ("sub/../../x", "invalid_path"),
    ("sub/../../" + "../" * 6 + "etc/shadow", "invalid_path"),
    ("/etc/shadow", "invalid_path"),  # files//etc/shadow
    ("%2Fetc%2Fshadow", "invalid_path"),
    ("shadow", "invalid_path"),
    ("etc/shadow", "invalid_path"),
    ("etc/passwd", "invalid_path"),
    ("other-abs", "invalid_path"),
    ("other-rel", "invalid_path"),
    ("other-dir/secret", "invalid_path"),
    ("up/shadow", "invalid_path"),
    ("loop", "invalid_path"),
    ("loop-a", "invalid_path"),
    ("sub/loop", "invalid_path"),
    ("loop/x", "invalid_path"),
    ("mine.txt%00.jpg", "invalid_path"),
]

WRITE_ESCAPES = ESCAPE_PATHS + [("etc/new-file", "invalid_path"), ("other-dir/new-file", "invalid_path")]
# Deleting or moving a link itself is fine (test_links_themselves): not an escape.
LINKS = ("shadow", "other-abs", "other-rel", "loop", "loop-a", "sub/loop")
ENTRY_ESCAPES = [e for e in WRITE_ESCAPES if e[0] not in LINKS]


@pytest.mark.parametrize("path,code", ESCAPE_PATHS, ids=[p for p, _ in ESCAPE_PATHS])
def test_escape_by_get(api, planted, path, code):
    sid = planted["sid"]
    for q in ("", "stat"):
        r = api.get(raw_url(sid, path, q))
        assert_error(r, 400, code)
        assert b"root:" not in r.body and b"secret" not in r.body


@pytest.mark.parametrize("path,code", WRITE_ESCAPES, ids=[p for p, _ in WRITE_ESCAPES])
def test_escape_by_put(api, planted, path, code):
    sid = planted["sid"]
    r = api.request("PUT", raw_url(sid, path), body=b"pwned\n", headers=OCTET)
    assert_error(r, 400, code)
    r = api.request("PUT", raw_url(sid, path, "mkdir"))
    assert r.status in (400, 409), r  # "..": the workspace's parent exists


@pytest.mark.parametrize("path,code", ENTRY_ESCAPES, ids=[p for p, _ in ENTRY_ESCAPES])
def test_escape_by_delete_and_move(api, planted, path, code):
    sid = planted["sid"]
    assert_error(api.request("DELETE", raw_url(sid, path, "recursive=true")), 400, code)
    assert_error(api.request("POST", raw_url(sid, path, "move_to=stolen")), 400, code)
    assert_error(api.request("POST", url(sid, "mine.txt", "move_to=" + path)), 400, code)


def test_links_themselves(api, session):
    # a link is an entry of the workspace: it can be moved and deleted, what it
    # points to is not touched
    sid = session["id"]
    sh_in(api, sid, "ln -s /etc/shadow shadow")
    before = file_state("/etc/shadow")
    assert api.request("POST", url(sid, "shadow", "move_to=moved")).status == 200
    entries = get(api, sid).json["entries"]
    assert [(e["name"], e["type"], e.get("target")) for e in entries] == [("moved", "symlink", "/etc/shadow")]
    assert api.request("DELETE", url(sid, "moved")).status == 200
    assert file_state("/etc/shadow") == before
    # and uploading over a symlink that stays inside is refused too, not followed
    put(api, sid, "real", b"real")
    sh_in(api, sid, "ln -s real alias")
    assert_error(put(api, sid, "alias", b"new"), 409, "not_a_regular_file")
    assert get(api, sid, "alias").body == b"real"  # reading through it is fine


def test_fifo_is_never_opened(api, planted):
    sid = planted["sid"]
    t0 = time.monotonic()
    assert_error(get(api, sid, "fifo"), 409, "not_a_regular_file")
    assert_error(put(api, sid, "fifo", b"data"), 409, "not_a_regular_file")
    assert time.monotonic() - t0 < 5, "sandboxd blocked on the FIFO"
    st = os.lstat(os.path.join(host_dir(planted["session"]), "fifo"))
    assert stat.S_ISFIFO(st.st_mode)
    e = get(api, sid, "fifo", "stat").json  # looking at it is fine
    assert e["type"] == "other", e


def test_nul_in_path(api, session):
    sid = session["id"]
    assert_error(api.request("PUT", raw_url(sid, "a%00b"), body=b"x", headers=OCTET), 400, "invalid_path")
    assert_error(api.get(raw_url(sid, "a%00b")), 400, "invalid_path")
    assert_error(api.request("POST", url(sid, "a", "move_to=b%00c")), 400, "invalid_path")
    assert not os.path.exists(host_dir(session)) or os.listdir(host_dir(session)) == []
    # elsewhere in the API too
    assert_error(api.get("/v1/sessions?user=a%00b"), 400, "invalid_url")


def test_other_tenant_sees_nothing(api, tcp, session):
    put(api, session["id"], "mine", b"x")
    assert_error(tcp.get(url(session["id"], "mine")), 404, "not_found")
    assert_error(tcp.request("PUT", url(session["id"], "theirs"), body=b"y", headers=OCTET), 404, "not_found")
    assert sorted(os.listdir(host_dir(session))) == ["mine"]


def test_upload_over_tcp_needs_the_key(tcp, scope):
    s = tcp.create_session(*scope)
    anonymous = Api("tcp")
    r = anonymous.request("PUT", url(s["id"], "f"), body=b"x" * 5000, headers=OCTET)
    assert_error(r, 401, "unauthorized")
    assert not os.path.exists(os.path.join(host_dir(s), "f"))
    r = tcp.request("PUT", url(s["id"], "f"), body=b"x" * 5000, headers=OCTET)
    assert r.status == 201, r
    assert tcp.get(url(s["id"], "f")).body == b"x" * 5000


# --------------------------------------------------------------------------
# truncated and oversize bodies

def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def test_truncated_upload_leaves_nothing(api, session):
    sid = session["id"]
    put(api, sid, "kept", b"old content")
    pid = main_pid()
    fds = open_fds(pid)
    for path in ("new", "kept"):
        for chunked in (False, True):
            s = raw_connect()
            if chunked:
                s.sendall(put_head(sid, path) + b"10000\r\n" + b"z" * 0x8000)
            else:
                s.sendall(put_head(sid, path, 1 << 20) + b"z" * 100000)
            time.sleep(0.3)
            s.close()  # before the body is complete
            wait_for(lambda: no_leftovers(session, "new"), timeout=5, what="no trace of the upload")
    assert get(api, sid, "kept").body == b"old content"
    assert sorted(os.listdir(host_dir(session))) == ["kept"]
    # the anonymous files of the uploads are closed too
    wait_for(lambda: open_fds(pid) <= fds, timeout=5, what="sandboxd to close the uploads' files")
    # and the daemon is fine
    assert put(api, sid, "new", b"whole").status == 201


def test_oversize_by_content_length_is_refused_at_once(api, session):
    # the default MaxFileSize=1G: 413 before the body is sent
    s = raw_connect()
    try:
        s.sendall(put_head(session["id"], "huge", (1 << 30) + 1))
        status, ctype, body = read_response(s)
    finally:
        s.close()
    assert status == 413 and ctype.startswith("application/json") and b"payload_too_large" in body, body
    assert no_leftovers(session, "huge")


def test_refusal_before_the_body_with_expect_continue(api, session):
    sid = session["id"]
    sh_in(api, sid, "ln -s /etc/shadow shadow")
    s = raw_connect()
    try:
        s.sendall(put_head(sid, "shadow", 1 << 20, b"Expect: 100-continue\r\n"))
        status, _, body = read_response(s)
    finally:
        s.close()
    assert status == 400 and b"invalid_path" in body, body


@pytest.fixture
def small_file_cap(api):
    """MaxFileSize=1M for the test; sandboxd restarted (sessions survive)."""
    with config_dropin(DROPIN) as write:
        write("[Files]\nMaxFileSize=1M\n")
        yield 1 << 20


@pytest.mark.restarts_daemon
def test_max_file_size(api, scope, small_file_cap, tmp_path):
    s = api.create_session(*scope)
    sid = s["id"]
    cap = small_file_cap
    assert put(api, sid, "exact", b"e" * cap).status == 201
    put(api, sid, "kept", b"old")

    # announced: refused at once, before the body
    s_ = raw_connect()
    try:
        s_.sendall(put_head(sid, "over", cap + 1))
        status, _, body = read_response(s_)
    finally:
        s_.close()
    assert status == 413 and b"payload_too_large" in body and str(cap).encode() in body, body
    big = tmp_path / "big"
    big.write_bytes(b"c" * (2 * cap))
    out = sh("curl", "-sS", "--unix-socket", UNIX_SOCKET, "-w", "\n%{http_code}", "-T", str(big),
             "http://localhost" + url(sid, "kept")).stdout
    assert out.endswith("\n413") and "payload_too_large" in out, out

    # not announced (chunked): found out while writing, answered after the body
    r = api.request("PUT", url(sid, "kept"), body=(b"k" * 65536 for _ in range(40)), headers=OCTET,
                    encode_chunked=True)
    assert_error(r, 413, "payload_too_large")
    assert get(api, sid, "kept").body == b"old"
    assert no_leftovers(s, "over")
    assert sorted(os.listdir(host_dir(s))) == ["exact", "kept"]


# --------------------------------------------------------------------------
# big transfers stream: sandboxd's memory stays small

class RssSampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self.samples = 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                self.peak = max(self.peak, proc_status(self.pid, "VmRSS"))
                self.samples += 1
            except (OSError, AssertionError):
                pass
            time.sleep(0.02)

    def finish(self):
        self.stop.set()
        self.join()
        return self.peak


def pattern(mib):
    """MIB chunks of 1 MiB: pseudo-random, each different."""
    block = hashlib.sha256(b"sandboxd").digest() * (1 << 15)
    for i in range(mib):
        yield i.to_bytes(8, "little") + block[8:]


@pytest.mark.time_limit(900)
def test_big_transfer_streams(api, session, record_testsuite_property):
    sid = session["id"]
    size = BIG_MIB << 20
    pid = main_pid()
    hwm_before = proc_status(pid, "VmHWM")

    # upload
    sent = hashlib.sha256()

    def body():
        for chunk in pattern(BIG_MIB):
            sent.update(chunk)
            yield chunk

    sampler = RssSampler(pid)
    sampler.start()
    t0 = time.monotonic()
    conn = api.connection(timeout=300)
    conn.request("PUT", url(sid, "big.bin"), body=body(), headers=dict(OCTET, **{"Content-Length": str(size)}))
    resp = conn.getresponse()
    answer = resp.read()
    conn.close()
    t_up = time.monotonic() - t0
    rss_up = sampler.finish()
    assert resp.status == 201, answer
    assert os.path.getsize(os.path.join(host_dir(session), "big.bin")) == size

    # download
    sampler = RssSampler(pid)
    sampler.start()
    t0 = time.monotonic()
    got, n = hashlib.sha256(), 0
    conn = api.connection(timeout=300)
    conn.request("GET", url(sid, "big.bin"))
    resp = conn.getresponse()
    assert resp.status == 200
    assert int(resp.getheader("Content-Length")) == size
    while True:
        chunk = resp.read(1 << 20)
        if not chunk:
            break
        got.update(chunk)
        n += len(chunk)
    conn.close()
    t_down = time.monotonic() - t0
    rss_down = sampler.finish()
    assert n == size and got.digest() == sent.digest()

    hwm_after = proc_status(pid, "VmHWM")
    peak = max(rss_up, rss_down, hwm_after if hwm_after > hwm_before else 0)
    for k, v in (("size_mib", BIG_MIB), ("upload_s", round(t_up, 2)), ("download_s", round(t_down, 2)),
                 ("upload_mib_s", round(BIG_MIB / t_up, 1)), ("download_mib_s", round(BIG_MIB / t_down, 1)),
                 ("rss_peak_upload_kib", rss_up >> 10), ("rss_peak_download_kib", rss_down >> 10),
                 ("vmhwm_kib", hwm_after >> 10)):
        record_testsuite_property("big_transfer_" + k, v)  # in the JUnit report
    print("big transfer: %d MiB, up %.1f s (%.0f MiB/s), down %.1f s (%.0f MiB/s), peak RSS %d KiB up, %d KiB down,"
          " VmHWM %d KiB" % (BIG_MIB, t_up, BIG_MIB / t_up, t_down, BIG_MIB / t_down, rss_up >> 10, rss_down >> 10,
                             hwm_after >> 10))
    assert main_pid() == pid, "sandboxd restarted during the transfer"
    assert peak < RSS_LIMIT, "sandboxd's RSS reached %d KiB" % (peak >> 10)
    api.request("DELETE", url(sid, "big.bin"))


def test_two_uploads_at_once(api, session):
    sid = session["id"]
    a = raw_connect()
    try:
        a.sendall(put_head(sid, "a", 200000) + b"a" * 100000)
        assert put(api, sid, "b", b"b" * 300000).status == 201
        a.sendall(b"a" * 100000)
        status, _, body = read_response(a)
    finally:
        a.close()
    assert status == 201, body
    assert get(api, sid, "a").body == b"a" * 200000
    assert get(api, sid, "b").body == b"b" * 300000
