# SPDX-License-Identifier: LGPL-2.1-or-later
"""The client of sandboxd's HTTP API, on http.client: over the unix socket or TCP."""

from __future__ import annotations

import http.client
import io
import json
import os
import socket
import stat as stat_module
import urllib.parse
from typing import IO, Any, Iterable, Iterator, Optional, Union

from ._types import (MAX_EVENT_LINE, Command, Entry, Event, Health, Image, Listing, Result,
                     ResultCollector, Session, TransportError, command_body, error_from_answer,
                     session_body, WrongNode, follow_node, scope_header)

DEFAULT_SOCKET = "/run/sandboxd/http.sock"
DEFAULT_TIMEOUT = 60.0
CHUNK = 1 << 20  # bytes moved at a time by uploads and downloads
MAX_ERROR_BODY = 64 << 10  # an error's body is read up to this much
MAX_JSON_BODY = 256 << 20  # a JSON answer (a listing of 100000 entries fits)


# ---- endpoints and paths (shared with the asyncio client) -----------------------------------

class Endpoint:
    """Where sandboxd is: a unix socket path, or a TCP host and port (http or https)."""

    def __init__(self, url: Optional[str] = None):
        if url is None:
            url = os.environ.get("SANDBOXD_URL") or ""
        if not url:
            url = "unix:" + DEFAULT_SOCKET
        self.url = url
        self.socket_path: Optional[str] = None
        self.host, self.port, self.tls = "localhost", 80, False
        if url.startswith("unix:") or url.startswith("/"):
            path = url[5:] if url.startswith("unix:") else url
            if path.startswith("//"):  # unix:///run/... written as a URL
                path = path[2:]
            if not path.startswith("/"):
                raise ValueError("a unix socket is an absolute path: %r" % url)
            self.socket_path = path
        elif url.startswith(("http://", "https://")):
            u = urllib.parse.urlsplit(url)
            if not u.hostname or u.path not in ("", "/") or u.query or u.fragment:
                raise ValueError("expected http://HOST:PORT, got %r" % url)
            self.tls = u.scheme == "https"
            self.host, self.port = u.hostname, u.port or (443 if self.tls else 80)
        else:
            raise ValueError("expected unix:/PATH, /PATH or http://HOST:PORT, got %r" % url)

    @property
    def is_unix(self) -> bool:
        return self.socket_path is not None


def quote_segment(seg: str) -> str:
    return urllib.parse.quote(seg, safe="")


def session_path(sid: str, tail: str = "") -> str:
    return "/v1/sessions/" + quote_segment(sid) + tail


def command_path(sid: str, rid: str, tail: str = "") -> str:
    return session_path(sid, "/commands/" + quote_segment(rid) + tail)


def image_path(name: str) -> str:
    return "/v1/images/" + quote_segment(name)


def files_path(sid: str, path: str, query: Optional[dict] = None) -> str:
    """The URL of PATH in the session's workspace: /v1/sessions/SID/files?path=PATH (the top of
    the workspace without a path), the query form every generator can write; sandboxd judges the
    path itself ('..' must stay beneath the workspace)."""
    if not isinstance(path, str):
        raise TypeError("a workspace path is a str")
    q = {"path": path} if path.strip("/") else {}
    q.update(query or {})
    url = session_path(sid, "/files")
    if q:
        url += "?" + urllib.parse.urlencode(q)
    return url


def body_length(data: Any) -> Optional[int]:
    """The length of an upload body if known without reading it."""
    if isinstance(data, (bytes, bytearray)):
        return len(data)
    if isinstance(data, memoryview):
        return data.nbytes
    try:
        st = os.fstat(data.fileno())
        if stat_module.S_ISREG(st.st_mode):
            return st.st_size - data.tell()
    except (AttributeError, OSError, io.UnsupportedOperation):
        pass
    return None


# ---- the connection -------------------------------------------------------------------------

class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: Optional[float]):
        super().__init__("localhost", timeout=timeout, blocksize=CHUNK)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


def _transport_error(e: BaseException, what: str) -> TransportError:
    err = TransportError("%s: %s" % (what, e or type(e).__name__))
    err.__cause__ = e
    return err


class _EventLines:
    """What both event streams keep: the offset to re-attach at, the request id, the exit."""

    def __init__(self, offset: int, request_id: Optional[str]):
        self.offset = offset
        self.request_id = request_id
        self.exit: Optional[Event] = None

    def close(self) -> None:
        raise NotImplementedError

    def _take(self, line: bytes) -> Event:
        """The event of LINE (read whole, with its newline), accounted."""
        if not line.endswith(b"\n"):
            self.close()
            raise TransportError("the event stream was cut in the middle of a line (%d bytes)" % len(line))
        ev = Event.from_line(line)
        if not ev.live:
            self.offset += len(line)
        if ev.type == "accepted" and ev.request_id:
            self.request_id = ev.request_id
        elif ev.type == "exit":
            self.exit = ev
        return ev


class EventStream(_EventLines):
    """A command's events as they come (an iterator of Event), read line by line from the
    answer: nothing is read ahead. `offset` is where to re-attach (Client.events) to get
    the rest once: the bytes of the kept lines received so far, counted from the offset the
    stream began at. `request_id` is the command's, once its accepted event came (or the
    one re-attached to). Close it (or use `with`) when not reading to the end."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse,
                 offset: int = 0, request_id: Optional[str] = None):
        super().__init__(offset, request_id)
        self._conn, self._resp = conn, resp
        self._collector: Optional[ResultCollector] = None

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        if self._resp is None:
            raise StopIteration
        try:
            line = self._resp.readline(MAX_EVENT_LINE + 1)
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise _transport_error(e, "reading the events") from e
        if not line:
            self.close()
            raise StopIteration
        ev = self._take(line)
        if self._collector is not None:
            self._collector.add(ev)
        return ev

    def result(self) -> Result:
        """Reads the rest of the stream: the command's Result, with the output of the events
        read by this call (not those iterated before)."""
        c = ResultCollector(self.request_id)
        for ev in self:
            c.add(ev)
        if c.request_id is None:
            c.request_id = self.request_id
        return c.result()

    def close(self) -> None:
        if self._resp is not None:
            self._resp.close()
            self._conn.close()
            self._resp = None

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


Body = Union[bytes, bytearray, memoryview, IO[bytes], Iterable[bytes], None]


class Client:
    """sandboxd's HTTP API.

    url: "unix:/PATH" or "/PATH" for a unix socket, "http://HOST:PORT" for TCP; default
    $SANDBOXD_URL, else the local socket /run/sandboxd/http.sock. key: the bearer key
    (TCP; default $SANDBOXD_KEY). timeout: seconds any one socket operation may take (a
    stream of events waits as long for its next line); None waits for ever.

    Every request opens a connection of its own, so one Client may be used from several
    threads. Errors sandboxd answers raise ApiError (its subclasses by status); failures to
    reach it or to read it, TransportError."""

    def __init__(self, url: Optional[str] = None, key: Optional[str] = None,
                 timeout: Optional[float] = DEFAULT_TIMEOUT):
        self.endpoint = Endpoint(url)
        self.key = key if key is not None else (os.environ.get("SANDBOXD_KEY") or None)
        self.timeout = timeout

    def __repr__(self) -> str:
        return "Client(%r)" % self.endpoint.url

    # ---- plumbing

    def _connection(self, timeout: Optional[float] = None, ep: Optional[Endpoint] = None) -> http.client.HTTPConnection:
        t = self.timeout if timeout is None else timeout
        ep = ep or self.endpoint
        if ep.is_unix:
            return _UnixConnection(ep.socket_path, t)
        if ep.tls:
            return http.client.HTTPSConnection(ep.host, ep.port, timeout=t, blocksize=CHUNK)
        return http.client.HTTPConnection(ep.host, ep.port, timeout=t, blocksize=CHUNK)

    def _headers(self, extra: Optional[dict] = None) -> dict:
        h = {}
        if self.key:
            h["Authorization"] = "Bearer " + self.key
        if extra:
            h.update(extra)
        return h

    def _open(self, method: str, path: str, body: Body = None, headers: Optional[dict] = None,
              timeout: Optional[float] = None):
        """Sends the request: (connection, response) of a success (< 400); an error answer is
        raised as ApiError. The caller reads and closes. A 421 wrong_node is sent again, once,
        to the node's URL in $SANDBOXD_NODES when the body can be sent twice (follow_node())."""
        try:
            return self._open_at(self.endpoint, method, path, body, headers, timeout)
        except WrongNode as e:
            url = follow_node(e, body)
        return self._open_at(Endpoint(url), method, path, body, headers, timeout)

    def _open_at(self, ep: Endpoint, method: str, path: str, body: Body, headers: Optional[dict],
                 timeout: Optional[float]):
        conn = self._connection(timeout, ep)
        try:
            try:
                conn.request(method, path, body=body, headers=self._headers(headers))
            except (BrokenPipeError, ConnectionResetError) as e:
                # refused before the whole body was sent (413 for a Content-Length over the
                # limit, at once): the answer may be waiting all the same
                if conn.sock is None:
                    raise
                try:
                    resp = conn.getresponse()
                except (OSError, http.client.HTTPException):
                    raise e from None
            else:
                resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise _transport_error(e, "%s %s on %s" % (method, path, ep.url)) from e
        if resp.status >= 400:
            try:
                data = resp.read(MAX_ERROR_BODY)
            except (OSError, http.client.HTTPException):
                data = b""
            conn.close()
            raise error_from_answer(resp.status, data, resp.getheader("Retry-After"))
        return conn, resp

    def _json(self, method: str, path: str, body: Any = None, timeout: Optional[float] = None,
              headers: Optional[dict] = None):
        """(status, the answer's JSON) of a request with a JSON body (or none)."""
        data, headers = None, dict(headers or {})
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        conn, resp = self._open(method, path, data, headers, timeout)
        return resp.status, self._read_json(conn, resp)

    @staticmethod
    def _read_json(conn, resp):
        try:
            data = resp.read(MAX_JSON_BODY + 1)
        except (OSError, http.client.HTTPException) as e:
            raise _transport_error(e, "reading the answer") from e
        finally:
            conn.close()
        if len(data) > MAX_JSON_BODY:
            raise TransportError("an answer larger than %d bytes" % MAX_JSON_BODY)
        try:
            return json.loads(data) if data else None
        except ValueError as e:
            raise TransportError("an answer that is not JSON: %r" % data[:200]) from e

    # ---- sandboxd

    def health(self) -> Health:
        return Health.from_json(self._json("GET", "/v1/health")[1])

    # ---- images

    def list_images(self) -> list:
        """The images sessions may run in (every caller may list them), by name."""
        obj = self._json("GET", "/v1/images")[1]
        return [Image.from_json(i) for i in obj.get("images", [])]

    def get_image(self, name: str) -> Image:
        """The image NAME (NotFound, code image_not_found, when there is none)."""
        return Image.from_json(self._json("GET", image_path(name))[1])

    def import_image(self, name: str, data: Body) -> Image:
        """Imports the image NAME from a tar (plain or compressed): bytes, a binary file object
        or an iterable of bytes, streamed as upload() streams (chunked without a known length).
        Administrators only (Forbidden before any of the body is read). The image imported;
        InvalidRequest (invalid_image) for an unsafe or broken archive or a tree without
        /bin/sh or os-release, Conflict (exists) for a name taken, ApiError 413 past
        [Images] MaxSize=."""
        if isinstance(data, str):
            raise TypeError("import bytes, not str")
        if data is None:
            raise TypeError("an image import needs a tar")
        headers = {"Content-Type": "application/x-tar"}
        n = body_length(data)
        if n is not None:
            headers["Content-Length"] = str(n)
        conn, resp = self._open("PUT", image_path(name), data, headers)
        return Image.from_json(self._read_json(conn, resp))

    def remove_image(self, name: str) -> Image:
        """Removes the image NAME (administrators only; Conflict image_in_use while a session
        that is not closed uses it): the image as it was."""
        return Image.from_json(self._json("DELETE", image_path(name))[1])

    # ---- sessions

    def list_sessions(self, user: Optional[str] = None) -> list:
        path = "/v1/sessions" + ("?" + urllib.parse.urlencode({"user": user}) if user else "")
        obj = self._json("GET", path)[1]
        return [Session.from_json(s, self) for s in obj.get("sessions", [])]

    def create_session(self, user: str, workspace: str, *, limits: Optional[dict] = None,
                       network: Union[str, dict, None] = None, ttl_s: Optional[int] = None,
                       exec_mode: Optional[str] = None, image: Optional[str] = None) -> Session:
        """The scope's session: a new one (created True), or its active one (created False).
        limits: {"memory_max", "cpu_quota", "tasks_max"}; network: a mode ("none", "proxy",
        "host") or {"mode", "allow", "deny"}; exec_mode: "unit" or "session"; image: the
        image (list_images()) its commands run in (default: sandboxd's [Images] Default=,
        else the host's root)."""
        status, obj = self._json("POST", "/v1/sessions",
                                 session_body(user, workspace, limits, network, ttl_s, exec_mode, image),
                                 headers=scope_header(user, workspace))
        return Session.from_json(obj, self, created=status == 201)

    def get_session(self, sid: str) -> Session:
        return Session.from_json(self._json("GET", session_path(sid))[1], self)

    def session(self, sid: str) -> Session:
        """A handle on session SID without asking sandboxd (its fields are empty)."""
        return Session(id=sid, client=self)

    def close_session(self, sid: str, purge: bool = False) -> Session:
        path = session_path(sid) + ("?purge=true" if purge else "")
        return Session.from_json(self._json("DELETE", path)[1], self)

    def freeze(self, sid: str) -> Session:
        return Session.from_json(self._json("POST", session_path(sid, "/freeze"))[1], self)

    def thaw(self, sid: str) -> Session:
        return Session.from_json(self._json("POST", session_path(sid, "/thaw"))[1], self)

    def touch(self, sid: str) -> Session:
        """Pushes back the session's idle expiry."""
        return Session.from_json(self._json("POST", session_path(sid, "/activity"))[1], self)

    # ---- commands

    def exec(self, sid: str, argv: Optional[list] = None, *, shell: Optional[str] = None,
             env: Optional[dict] = None, cwd: Optional[str] = None, stdin: Union[bytes, str, None] = None,
             timeout_ms: Optional[int] = None, request_id: Optional[str] = None,
             tty: Optional[tuple] = None) -> EventStream:
        """Starts a command (argv, or shell: a line for sh -c) and streams its events.
        stdin: bytes or str for all of it at once, "stream" to write it later
        (write_stdin), None for /dev/null. request_id makes the call idempotent: the same
        id again streams the first command's events."""
        body = command_body(argv, shell, env, cwd, stdin, timeout_ms, request_id, tty)
        data = json.dumps(body).encode("utf-8")
        conn, resp = self._open("POST", session_path(sid, "/commands"), data,
                                {"Content-Type": "application/json"})
        return EventStream(conn, resp, 0, request_id)

    def start(self, sid: str, argv: Optional[list] = None, **kw) -> Command:
        """Starts a command without waiting (?wait=false): its summary (request_id, unit,
        status). The same arguments as exec()."""
        body = command_body(argv, kw.pop("shell", None), kw.pop("env", None), kw.pop("cwd", None),
                            kw.pop("stdin", None), kw.pop("timeout_ms", None), kw.pop("request_id", None),
                            kw.pop("tty", None))
        if kw:
            raise TypeError("unknown arguments: %s" % ", ".join(kw))
        return Command.from_json(self._json("POST", session_path(sid, "/commands?wait=false"), body)[1])

    def run(self, sid: str, argv: Optional[list] = None, **kw) -> Result:
        """exec() to the end: the command's Result (output and how it ended)."""
        with self.exec(sid, argv, **kw) as events:
            return events.result()

    def events(self, sid: str, request_id: str, offset: int = 0) -> EventStream:
        """Re-attaches to a command's events from OFFSET (an EventStream's offset: the bytes of
        kept lines already received): the rest of the kept log, then live until exit."""
        path = command_path(sid, request_id, "/events?offset=%d" % int(offset))
        conn, resp = self._open("GET", path)
        return EventStream(conn, resp, int(offset), request_id)

    def wait(self, sid: str, request_id: str) -> Result:
        """Waits for the command to end: its Result, with the output of its kept events."""
        with self.events(sid, request_id, 0) as events:
            return events.result()

    def get_command(self, sid: str, request_id: str) -> Command:
        """The command's snapshot, its kept output included."""
        return Command.from_json(self._json("GET", command_path(sid, request_id))[1])

    def list_commands(self, sid: str) -> list:
        obj = self._json("GET", session_path(sid, "/commands"))[1]
        return [Command.from_json(c) for c in obj.get("commands", [])]

    def write_stdin(self, sid: str, request_id: str, data: Union[bytes, str], eof: bool = False) -> int:
        """Writes DATA to the stdin of a command started with stdin="stream" (and closes it
        after with eof=True): the number of bytes written."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        path = command_path(sid, request_id, "/stdin" + ("?eof=1" if eof else ""))
        conn, resp = self._open("POST", path, bytes(data), {"Content-Type": "application/octet-stream"})
        return int((self._read_json(conn, resp) or {}).get("written", 0))

    def close_stdin(self, sid: str, request_id: str) -> int:
        return self.write_stdin(sid, request_id, b"", eof=True)

    def signal(self, sid: str, request_id: str, signal: str = "SIGTERM") -> Any:
        """Sends SIGNAL ("SIGINT", "SIGTERM", "SIGKILL", "SIGHUP", "SIGUSR1", "SIGUSR2") to
        every process of the command."""
        return self._json("POST", command_path(sid, request_id, "/signal"), {"signal": signal})[1]

    # ---- files

    def upload(self, sid: str, path: str, data: Body, mode: Optional[int] = None) -> Entry:
        """Writes PATH in the workspace from bytes, a binary file object or an iterable of
        bytes, streamed (a file object is read CHUNK bytes at a time; without a known length
        the body goes chunked). mode: the permission bits. The entry written."""
        if isinstance(data, str):
            raise TypeError("upload bytes, not str (encode it)")
        query = {"mode": "%04o" % mode} if mode is not None else None
        headers = {"Content-Type": "application/octet-stream"}
        n = body_length(data)
        if n is not None:
            headers["Content-Length"] = str(n)
        conn, resp = self._open("PUT", files_path(sid, path, query), data if data is not None else b"", headers)
        return Entry.from_json(self._read_json(conn, resp))

    write_file = upload

    def download(self, sid: str, path: str, dest: IO[bytes], offset: int = 0) -> int:
        """Copies the file PATH into the binary file object DEST, CHUNK bytes at a time: the
        number of bytes. OFFSET > 0 resumes a download (Range: bytes=OFFSET-; past the end
        raises InvalidOffset). A directory raises IsADirectoryError."""
        if not isinstance(offset, int) or offset < 0:
            raise ValueError("offset is an int >= 0")
        conn, resp = self._open("GET", files_path(sid, path),
                                headers={"Range": "bytes=%d-" % offset} if offset else None)
        try:
            if (resp.getheader("Content-Type") or "").startswith("application/json"):
                raise IsADirectoryError("%s is a directory (list_dir() lists it)" % path)
            n = 0
            while True:
                try:
                    chunk = resp.read(CHUNK)
                except (OSError, http.client.HTTPException) as e:
                    raise _transport_error(e, "downloading %s" % path) from e
                if not chunk:
                    break
                dest.write(chunk)
                n += len(chunk)
            length = resp.getheader("Content-Length")
            if length is not None and length.isdigit() and int(length) != n:
                raise TransportError("download of %s cut after %d of %s bytes" % (path, n, length))
            return n
        finally:
            conn.close()

    def read_file(self, sid: str, path: str) -> bytes:
        buf = io.BytesIO()
        self.download(sid, path, buf)
        return buf.getvalue()

    def list_dir(self, sid: str, path: str = "") -> Listing:
        conn, resp = self._open("GET", files_path(sid, path))
        if not (resp.getheader("Content-Type") or "").startswith("application/json"):
            conn.close()
            raise NotADirectoryError("%s is a file (download() reads it)" % path)
        return Listing.from_json(self._read_json(conn, resp))

    def stat(self, sid: str, path: str) -> Entry:
        return Entry.from_json(self._json("GET", files_path(sid, path, {"stat": "1"}))[1])

    def mkdir(self, sid: str, path: str) -> Entry:
        """Makes the directory and its missing parents (there already: no error)."""
        return Entry.from_json(self._json("PUT", files_path(sid, path, {"mkdir": "1"}))[1])

    def remove(self, sid: str, path: str, recursive: bool = False) -> Any:
        query = {"recursive": "true"} if recursive else None
        return self._json("DELETE", files_path(sid, path, query))[1]

    def move(self, sid: str, path: str, new_path: str, overwrite: bool = False) -> Entry:
        query = {"move_to": new_path}
        if overwrite:
            query["overwrite"] = "true"
        return Entry.from_json(self._json("POST", files_path(sid, path, query))[1])
