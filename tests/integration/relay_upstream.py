# SPDX-License-Identifier: LGPL-2.1-or-later
"""The upstream of test_port_relay.py, run as a sandboxed command: python3 relay_upstream.py
PORT [WS_PORT]. On 127.0.0.1:PORT (HTTP/1.1, a thread per connection):
  /big?n=BYTES   that many bytes of a repeating pattern, with a Content-Length
  /hold          answers once the file "release" exists in the working directory (or 300 s)
  anything else  the request as JSON: method, path (with its query), headers, body (latin-1)
On WS_PORT, if given: a WebSocket echo server (python3-websockets)."""

import asyncio
import http.server
import json
import os
import sys
import threading
import time

PATTERN = bytes(range(256)) * 256  # 64 KiB


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                n = int(self.rfile.readline().strip().split(b";")[0], 16)
                if n == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(n)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def answer(self, send_body=True):
        if self.path.startswith("/big"):
            n = int(self.path.split("n=")[1])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            if not send_body:
                return
            while n > 0:
                chunk = PATTERN[:min(n, len(PATTERN))]
                self.wfile.write(chunk)
                n -= len(chunk)
            return
        if self.path.startswith("/hold"):
            deadline = time.monotonic() + 300
            while not os.path.exists("release") and time.monotonic() < deadline:
                time.sleep(0.1)
        out = json.dumps({"method": self.command, "path": self.path,
                          "headers": [[k, v] for k, v in self.headers.items()],
                          "body": self.body().decode("latin-1")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Upstream", "relay-test")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if send_body:
            self.wfile.write(out)

    def do_HEAD(self):
        self.answer(send_body=False)

    def __getattr__(self, name):
        if name.startswith("do_"):
            return self.answer
        raise AttributeError(name)


def websocket_echo(port):
    import websockets

    async def echo(ws, path=None):
        async for msg in ws:
            await ws.send(msg)

    async def main():
        async with websockets.serve(echo, "127.0.0.1", port):
            await asyncio.Future()

    asyncio.run(main())


if __name__ == "__main__":
    if len(sys.argv) > 2:
        threading.Thread(target=websocket_echo, args=(int(sys.argv[2]),), daemon=True).start()
    http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
