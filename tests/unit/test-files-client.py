#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxctl cp and the MCP file tools (through libsandboxd's file functions) against a
stand-in for sandboxd's file API on a unix socket, as the contract describes it:
PUT/GET/DELETE /v1/sessions/{sid}/files/{path} with raw bytes, a directory's GET a JSON
listing {"entries":[{name,type,size,mode,mtime}],"truncated":..}, ?stat, ?mkdir,
?move_to=. The real routes are tested in the integration suite once they exist.

usage: test-files-client.py SANDBOXCTL"""

import base64
import json
import os
import shutil
import socketserver
import stat
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler

SID = "0123456789abcdef"
sandboxctl = sys.argv[1]
failed = 0


def check(cond, what):
    global failed
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failed += 1


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    root = None  # the workspace

    def address_string(self):
        return "unix"

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, body=b"", ctype="application/json"):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def error(self, status, code, message):
        self.reply(status, {"error": {"code": code, "message": message}})

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                n = int(self.rfile.readline().split(b";")[0], 16)
                if n == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(n)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def target(self):
        url = urllib.parse.urlsplit(self.path)
        prefix = "/v1/sessions/%s/files/" % SID
        if not url.path.startswith(prefix):
            self.error(404, "not_found", "No such session.")
            return None, None
        rel = urllib.parse.unquote(url.path[len(prefix):])
        if rel.startswith("/") or ".." in rel.split("/"):
            self.error(400, "invalid_path", "Bad path.")
            return None, None
        return os.path.join(self.root, rel), urllib.parse.parse_qs(url.query, keep_blank_values=True)

    def entry(self, path, name):
        st = os.lstat(path)
        kind = "dir" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else \
            "symlink" if stat.S_ISLNK(st.st_mode) else "other"
        return {"name": name, "type": kind, "size": st.st_size, "mode": "%04o" % stat.S_IMODE(st.st_mode),
                "mtime": "2024-01-02T03:04:05Z", "mtime_usec": int(st.st_mtime * 1e6)}

    def do_GET(self):
        path, q = self.target()
        if path is None:
            return
        if not os.path.lexists(path):
            return self.error(404, "not_found", "No such file or directory.")
        if "stat" in q:
            return self.reply(200, self.entry(path, os.path.basename(path.rstrip("/"))))
        if os.path.isdir(path):
            entries = [self.entry(os.path.join(path, n), n) for n in sorted(os.listdir(path))]
            return self.reply(200, {"entries": entries, "truncated": False})
        with open(path, "rb") as f:
            self.reply(200, f.read(), "application/octet-stream")

    def do_PUT(self):
        path, q = self.target()
        if path is None:
            return
        data = self.body()
        if "mkdir" in q:
            os.makedirs(path, exist_ok=True)
            return self.reply(201, self.entry(path, os.path.basename(path)))
        if os.path.isdir(path):
            return self.error(409, "is_directory", "A directory is in the way.")
        if not os.path.isdir(os.path.dirname(path)):
            return self.error(404, "not_found", "No such directory.")
        with open(path, "wb") as f:
            f.write(data)
        self.reply(201, self.entry(path, os.path.basename(path)))

    def do_POST(self):
        path, q = self.target()
        if path is None:
            return
        self.body()
        if "move_to" in q:
            os.rename(path, os.path.join(self.root, q["move_to"][0]))
            return self.reply(200, {})
        # ?mkdir answers 405 to POST: the client must follow Allow
        self.send_response(405)
        self.send_header("Allow", "PUT")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self):
        path, q = self.target()
        if path is None:
            return
        if not os.path.lexists(path):
            return self.error(404, "not_found", "No such file or directory.")
        if os.path.isdir(path):
            if q.get("recursive") == ["true"]:
                shutil.rmtree(path)
            else:
                os.rmdir(path)
        else:
            os.unlink(path)
        self.reply(200, {})


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # a client that stops reading (a size limit) is no error of the stand-in
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


def ctl(*args, input=None, cwd=None):
    return subprocess.run([sandboxctl, "--url=unix:" + sock] + list(args), capture_output=True, input=input,
                          cwd=cwd, timeout=60)


tmp = tempfile.mkdtemp(prefix="sandboxctl-files-")
try:
    ws, local = os.path.join(tmp, "ws"), os.path.join(tmp, "local")
    os.mkdir(ws)
    os.mkdir(local)
    sock = os.path.join(tmp, "http.sock")
    Handler.root = ws
    server = Server(sock, Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    # upload and download of one file, bytes intact
    data = os.urandom(2 << 20) + b"\x00\xff end"
    with open(os.path.join(local, "in.bin"), "wb") as f:
        f.write(data)
    p = ctl("cp", os.path.join(local, "in.bin"), "%s:in.bin" % SID)
    check(p.returncode == 0 and open(os.path.join(ws, "in.bin"), "rb").read() == data, "upload a file %r" % p.stderr)
    p = ctl("cp", "%s:in.bin" % SID, os.path.join(local, "out.bin"))
    check(p.returncode == 0 and open(os.path.join(local, "out.bin"), "rb").read() == data,
          "download a file %r" % p.stderr)
    check(not [n for n in os.listdir(local) if "sandboxctl-" in n], "no temporary file left")

    # into directories, under their own names
    os.mkdir(os.path.join(ws, "dir"))
    p = ctl("cp", os.path.join(local, "in.bin"), "%s:dir/" % SID)
    check(p.returncode == 0 and os.path.exists(os.path.join(ws, "dir/in.bin")), "upload into a directory/")
    p = ctl("cp", os.path.join(local, "in.bin"), "%s:dir" % SID)
    check(p.returncode == 0 and os.path.exists(os.path.join(ws, "dir/in.bin")), "upload into a directory (stat)")
    os.mkdir(os.path.join(local, "d"))
    p = ctl("cp", "%s:in.bin" % SID, "%s:copy.bin" % SID)
    check(p.returncode == 1 and b"local" in p.stderr, "session to session is refused")
    p = ctl("cp", "%s:in.bin" % SID, os.path.join(local, "d"))
    check(p.returncode == 0 and os.path.exists(os.path.join(local, "d/in.bin")), "download into a directory")
    p = ctl("cp", "%s:in.bin" % SID, "%s:piped-later" % SID, os.path.join(local, "out.bin"))
    check(p.returncode == 1 and b"directory" in p.stderr, "several sources need a directory")

    # standard input and output
    p = ctl("cp", "-", "%s:piped.txt" % SID, input=b"from stdin\n")
    check(p.returncode == 0 and open(os.path.join(ws, "piped.txt"), "rb").read() == b"from stdin\n", "upload stdin")
    p = ctl("cp", "%s:piped.txt" % SID, "-")
    check(p.returncode == 0 and p.stdout == b"from stdin\n", "download to stdout")

    # directories need -r, both ways
    tree = os.path.join(local, "tree")
    os.makedirs(os.path.join(tree, "a/b"))
    open(os.path.join(tree, "top.txt"), "w").write("top\n")
    open(os.path.join(tree, "a/b/deep.txt"), "w").write("deep\n")
    p = ctl("cp", tree, "%s:tree" % SID)
    check(p.returncode == 1 and b"-r" in p.stderr, "a local directory needs -r")
    p = ctl("cp", "-r", tree, "%s:tree" % SID)
    check(p.returncode == 0 and open(os.path.join(ws, "tree/a/b/deep.txt")).read() == "deep\n",
          "upload a tree %r" % p.stderr)
    p = ctl("cp", "%s:tree" % SID, os.path.join(local, "back"))
    check(p.returncode == 1 and b"-r" in p.stderr and not os.path.exists(os.path.join(local, "back")),
          "a remote directory needs -r %r" % p.stderr)
    p = ctl("cp", "-r", "%s:tree" % SID, os.path.join(local, "back"))
    check(p.returncode == 0 and open(os.path.join(local, "back/a/b/deep.txt")).read() == "deep\n"
          and open(os.path.join(local, "back/top.txt")).read() == "top\n", "download a tree %r" % p.stderr)

    # errors name what failed
    p = ctl("cp", "%s:missing" % SID, os.path.join(local, "m"))
    check(p.returncode == 1 and b"No such file" in p.stderr and not os.path.exists(os.path.join(local, "m")),
          "a missing remote file %r" % p.stderr)
    p = ctl("cp", os.path.join(local, "missing"), "%s:m" % SID)
    check(p.returncode == 1 and b"missing" in p.stderr, "a missing local file")
    p = ctl("cp", os.path.join(local, "in.bin"), "%s:no/such/dir/x" % SID)
    check(p.returncode == 1 and b"No such directory" in p.stderr, "the server's error is shown %r" % p.stderr)

    # progress: forced on, it ends with a cleared line; off by default when not a terminal
    p = ctl("cp", "--progress", os.path.join(local, "in.bin"), "%s:p.bin" % SID)
    check(p.returncode == 0, "cp --progress works")
    p = ctl("cp", os.path.join(local, "in.bin"), "%s:p.bin" % SID)
    check(p.returncode == 0 and p.stderr == b"", "no progress when stderr is not a terminal")

    # the MCP file tools
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
                                                                      "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "sandbox_write_file", "arguments": {
            "session_id": SID, "path": "mcp/../x"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "sandbox_write_file", "arguments": {
            "session_id": SID, "path": "dir/note.txt", "content": "hello\n"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "sandbox_read_file", "arguments": {
            "session_id": SID, "path": "dir/note.txt"}}},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "sandbox_write_file", "arguments": {
            "session_id": SID, "path": "bin", "content": "/wA=", "encoding": "base64"}}},
        {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "sandbox_read_file", "arguments": {
            "session_id": SID, "path": "bin"}}},
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "sandbox_list_files", "arguments": {
            "session_id": SID, "path": "dir"}}},
        {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "sandbox_read_file", "arguments": {
            "session_id": SID, "path": "in.bin", "offset": 5, "length": 10, "encoding": "base64"}}},
        {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "sandbox_read_file", "arguments": {
            "session_id": SID, "path": "dir"}}},
        {"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "sandbox_write_file", "arguments": {
            "session_id": SID, "path": "/abs.txt", "content": "x"}}},
        {"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": "sandbox_write_file", "arguments": {
            "session_id": SID, "path": "mcp/../x", "content": "x"}}},
        {"jsonrpc": "2.0", "id": 12, "method": "tools/call", "params": {"name": "sandbox_write_file", "arguments": {
            "session_id": SID, "path": "no/such/x", "content": "x"}}},
    ]
    # --jobs=1: one call at a time, in order (each reads what the one before wrote)
    p = subprocess.run([sandboxctl, "--url=unix:" + sock, "mcp", "--jobs=1"], input="".join(json.dumps(m) + "\n" for m in msgs),
                       capture_output=True, text=True, timeout=60)
    res = {m["id"]: m for m in map(json.loads, p.stdout.splitlines())}
    body = lambda i: res[i]["result"]["structuredContent"]
    check(p.returncode == 0 and len(res) == len(msgs), "mcp answers every request %r" % p.stderr)
    check(body(2)["ok"] is False and "content" in body(2)["error"]["message"], "mcp: a missing argument")
    check(body(3)["ok"] and body(3)["data"]["bytes"] == 6, "mcp: write a file")
    check(body(4)["data"]["content"] == "hello\n", "mcp: read it back")
    check(open(os.path.join(ws, "bin"), "rb").read() == b"\xff\x00", "mcp: write base64")
    check(body(6)["data"].get("content_b64") == "/wA=", "mcp: bytes come back as base64")
    names = {e["name"]: e for e in body(7)["data"]["entries"]}
    check(set(names) == {"in.bin", "note.txt"} and names["note.txt"]["type"] == "file"
          and names["note.txt"]["size"] == 6, "mcp: list a directory %r" % body(7))
    check(body(8)["ok"] and body(8)["data"]["returned_bytes"] == 10 and body(8)["data"]["size"] == len(data)
          and base64.b64decode(body(8)["data"]["content_b64"]) == data[5:15], "mcp: a range %r" % body(8))
    check(body(9)["ok"] is False and "directory" in body(9)["error"]["message"], "mcp: reading a directory")
    check(body(10)["ok"] is False and body(10)["error"]["code"] == "invalid_path"
          and not os.path.exists(os.path.join(ws, "abs.txt")), "mcp: an absolute path is refused %r" % body(10))
    check(body(11)["ok"] is False and body(11)["error"]["code"] == "invalid_path", "mcp: '..' goes to sandboxd %r" % body(11))
    check(body(12)["ok"] is False and body(12)["error"]["code"] == "not_found"
          and not os.path.exists(os.path.join(ws, "no")), "mcp: no parents made unasked %r" % body(12))
    server.shutdown()
finally:
    shutil.rmtree(tmp, ignore_errors=True)

print("%d failed" % failed)
sys.exit(1 if failed else 0)
