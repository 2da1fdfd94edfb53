# SPDX-License-Identifier: LGPL-2.1-or-later
"""What bench/terminal.py and bench/ports.py share: percentiles, their error, and a client
of sandboxd's HTTP API (or of any HTTP server) on a unix socket or on TCP with a key.
Python standard library only."""

import http.client
import json
import socket


class Failed(Exception):
    pass


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


class UnixConn(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class Http:
    """Requests to one server: a unix socket path or HOST:PORT, with a bearer key or none;
    a new connection for each."""

    def __init__(self, unix=None, tcp=None, key=None, timeout=60):
        self.unix, self.tcp, self.key, self.timeout = unix, tcp, key, timeout

    def conn(self):
        if self.unix:
            return UnixConn(self.unix, self.timeout)
        host, port = self.tcp.rsplit(":", 1)
        return http.client.HTTPConnection(host, int(port), timeout=self.timeout)

    def headers(self, body=None):
        h = {"Content-Type": "application/json"} if body is not None else {}
        if self.key:
            h["Authorization"] = "Bearer " + self.key
        return h

    def request(self, method, url, body=None, ok=(200, 201, 202, 204)):
        """A JSON request; its answer's JSON (None when empty). Failed for another status."""
        c = self.conn()
        try:
            c.request(method, url, body=json.dumps(body) if body is not None else None, headers=self.headers(body))
            r = c.getresponse()
            data = r.read()
        finally:
            c.close()
        if r.status not in ok:
            raise Failed("%s %s: %d %s" % (method, url, r.status, data[:300]))
        return json.loads(data) if data else None
