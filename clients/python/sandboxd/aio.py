# SPDX-License-Identifier: LGPL-2.1-or-later
"""The same client on asyncio: AsyncClient has Client's methods as coroutines, exec() and
events() give an AsyncEventStream (async for ev in stream). HTTP/1.1 over asyncio
streams, one connection a request; the parsing and the types are Client's."""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import urllib.parse
from typing import Any, AsyncIterator, Optional, Union

from ._client import (CHUNK, DEFAULT_TIMEOUT, MAX_ERROR_BODY, MAX_JSON_BODY, Endpoint, _EventLines,
                      command_path, files_path, image_path, session_path)
from ._types import (MAX_EVENT_LINE, Command, Entry, Event, Health, Image, Listing, Result, ResultCollector, Session,
                     TransportError, WrongNode, command_body, error_from_answer, follow_node, scope_header,
                     session_body)

MAX_HEAD = 64 << 10


class _Response:
    """An answer's status, headers and body reader (Content-Length, chunked, or to EOF)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeout: Optional[float]):
        self.reader, self.writer, self.timeout = reader, writer, timeout
        self.status = 0
        self.headers: dict = {}
        self._left: Optional[int] = None  # bytes left: of the body, or of the current chunk
        self._chunked = False
        self._done = False
        self._buf = b""

    async def _io(self, coro):
        try:
            return await asyncio.wait_for(coro, self.timeout)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError,
                ValueError) as e:
            raise TransportError("reading the answer: %s" % (e or type(e).__name__)) from e

    async def read_head(self) -> None:
        head = await self._io(self.reader.readuntil(b"\r\n\r\n"))
        if len(head) > MAX_HEAD:
            raise TransportError("an answer's head larger than %d bytes" % MAX_HEAD)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise TransportError("not an HTTP answer: %r" % lines[0][:100])
        self.status = int(parts[1])
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                self.headers[k.strip().lower()] = v.strip()
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            self._chunked, self._left = True, 0
        elif self.headers.get("content-length", "").isdigit():
            self._left = int(self.headers["content-length"])
        if self.status in (204, 304) or self._left == 0 and not self._chunked:
            self._done = True

    async def read_some(self, n: int = CHUNK) -> bytes:
        """Up to N bytes of the body; b"" at its end."""
        if self._done:
            return b""
        if self._chunked:
            if self._left == 0:
                size_line = await self._io(self.reader.readuntil(b"\r\n"))
                try:
                    self._left = int(size_line.split(b";")[0].strip(), 16)
                except ValueError as e:
                    raise TransportError("malformed chunked body") from e
                if self._left == 0:
                    await self._trailer()
                    self._done = True
                    return b""
            data = await self._io(self.reader.read(min(n, self._left)))
            if not data:
                raise TransportError("the answer was cut in a chunk")
            self._left -= len(data)
            if self._left == 0:
                await self._io(self.reader.readexactly(2))
            return data
        if self._left is None:
            data = await self._io(self.reader.read(n))
            if not data:
                self._done = True
            return data
        data = await self._io(self.reader.read(min(n, self._left)))
        if not data:
            raise TransportError("the answer was cut: %d bytes missing" % self._left)
        self._left -= len(data)
        self._done = self._left == 0
        return data

    async def _trailer(self) -> None:
        while (await self._io(self.reader.readuntil(b"\r\n"))) != b"\r\n":
            pass

    async def read(self, limit: int) -> bytes:
        out = bytearray()
        while len(out) <= limit:
            data = await self.read_some()
            if not data:
                return bytes(out)
            out += data
        raise TransportError("an answer larger than %d bytes" % limit)

    async def readline(self) -> bytes:
        """One line of the body (with its newline), or what is left at its end."""
        while b"\n" not in self._buf:
            if len(self._buf) > MAX_EVENT_LINE:
                raise TransportError("an event line longer than %d bytes" % MAX_EVENT_LINE)
            data = await self.read_some()
            if not data:
                line, self._buf = self._buf, b""
                return line
            self._buf += data
        i = self._buf.index(b"\n") + 1
        line, self._buf = self._buf[:i], self._buf[i:]
        return line

    def close(self) -> None:
        self.writer.close()


class AsyncEventStream(_EventLines):
    """EventStream on asyncio: `async for ev in stream`, `offset`, `request_id`, result()."""

    def __init__(self, resp: _Response, offset: int = 0, request_id: Optional[str] = None):
        super().__init__(offset, request_id)
        self._resp: Optional[_Response] = resp

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        if self._resp is None:
            raise StopAsyncIteration
        line = await self._resp.readline()
        if not line:
            self.close()
            raise StopAsyncIteration
        return self._take(line)

    async def result(self) -> Result:
        c = ResultCollector(self.request_id)
        async for ev in self:
            c.add(ev)
        c.request_id = c.request_id or self.request_id
        return c.result()

    def close(self) -> None:
        if self._resp is not None:
            self._resp.close()
            self._resp = None

    async def __aenter__(self) -> "AsyncEventStream":
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()


class AsyncClient:
    """Client on asyncio: the same arguments, the same methods as coroutines."""

    def __init__(self, url: Optional[str] = None, key: Optional[str] = None,
                 timeout: Optional[float] = DEFAULT_TIMEOUT):
        self.endpoint = Endpoint(url)
        self.key = key if key is not None else (os.environ.get("SANDBOXD_KEY") or None)
        self.timeout = timeout

    async def _open(self, method: str, path: str, body: Union[bytes, Any, None] = None,
                    content_type: Optional[str] = None, extra: Optional[dict] = None) -> _Response:
        """The response of a success; an error answer raised. A 421 wrong_node is sent again,
        once, to the node's URL in $SANDBOXD_NODES when the body can be sent twice."""
        try:
            return await self._open_at(self.endpoint, method, path, body, content_type, extra)
        except WrongNode as e:
            url = follow_node(e, body)
        return await self._open_at(Endpoint(url), method, path, body, content_type, extra)

    async def _open_at(self, ep: Endpoint, method: str, path: str, body, content_type: Optional[str],
                       extra: Optional[dict]) -> _Response:
        try:
            if ep.is_unix:
                conn = asyncio.open_unix_connection(ep.socket_path, limit=MAX_HEAD)
            else:
                conn = asyncio.open_connection(ep.host, ep.port, limit=MAX_HEAD,
                                               ssl=ssl.create_default_context() if ep.tls else None)
            reader, writer = await asyncio.wait_for(conn, self.timeout)
        except (OSError, asyncio.TimeoutError) as e:
            raise TransportError("%s %s on %s: %s" % (method, path, ep.url, e or type(e).__name__)) from e
        host = "localhost" if ep.is_unix else ("%s:%d" % (ep.host, ep.port))
        head = ["%s %s HTTP/1.1" % (method, path), "Host: " + host, "Connection: close"]
        if self.key:
            head.append("Authorization: Bearer " + self.key)
        if content_type:
            head.append("Content-Type: " + content_type)
        head += ["%s: %s" % kv for kv in (extra or {}).items()]
        streamed = body is not None and not isinstance(body, (bytes, bytearray, memoryview))
        if streamed:
            head.append("Transfer-Encoding: chunked")
        elif body is not None or method in ("POST", "PUT"):
            head.append("Content-Length: %d" % len(body or b""))
        resp = _Response(reader, writer, self.timeout)
        try:
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
            if streamed:
                async for chunk in _chunks(body):
                    if chunk:
                        writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        await asyncio.wait_for(writer.drain(), self.timeout)
                writer.write(b"0\r\n\r\n")
            elif body:
                writer.write(bytes(body))
            await asyncio.wait_for(writer.drain(), self.timeout)
            await resp.read_head()
        except (OSError, asyncio.TimeoutError) as e:
            resp.close()
            raise TransportError("%s %s: %s" % (method, path, e or type(e).__name__)) from e
        except BaseException:
            resp.close()
            raise
        if resp.status >= 400:
            try:
                data = await resp.read(MAX_ERROR_BODY)
            except TransportError:
                data = b""
            resp.close()
            raise error_from_answer(resp.status, data, resp.headers.get("retry-after"))
        return resp

    async def _json(self, method: str, path: str, body: Any = None, extra: Optional[dict] = None):
        data = json.dumps(body).encode("utf-8") if body is not None else None
        resp = await self._open(method, path, data, "application/json" if data is not None else None, extra)
        return resp.status, await _read_json(resp)

    async def health(self) -> Health:
        return Health.from_json((await self._json("GET", "/v1/health"))[1])

    async def list_images(self) -> list:
        return [Image.from_json(i) for i in (await self._json("GET", "/v1/images"))[1].get("images", [])]

    async def get_image(self, name: str) -> Image:
        return Image.from_json((await self._json("GET", image_path(name)))[1])

    async def import_image(self, name: str, data) -> Image:
        """DATA: a tar as bytes, a binary file object (read CHUNK at a time), or an (async)
        iterable of bytes; anything but bytes goes chunked. Administrators only."""
        if isinstance(data, str):
            raise TypeError("import bytes, not str")
        if data is None:
            raise TypeError("an image import needs a tar")
        resp = await self._open("PUT", image_path(name), data, "application/x-tar")
        return Image.from_json(await _read_json(resp))

    async def remove_image(self, name: str) -> Image:
        return Image.from_json((await self._json("DELETE", image_path(name)))[1])

    async def list_sessions(self, user: Optional[str] = None) -> list:
        path = "/v1/sessions" + ("?" + urllib.parse.urlencode({"user": user}) if user else "")
        return [Session.from_json(s, self) for s in (await self._json("GET", path))[1].get("sessions", [])]

    async def create_session(self, user: str, workspace: str, *, limits=None, network=None, ttl_s=None,
                             exec_mode=None, image=None) -> Session:
        status, obj = await self._json("POST", "/v1/sessions",
                                       session_body(user, workspace, limits, network, ttl_s, exec_mode, image),
                                       scope_header(user, workspace))
        return Session.from_json(obj, self, created=status == 201)

    async def get_session(self, sid: str) -> Session:
        return Session.from_json((await self._json("GET", session_path(sid)))[1], self)

    def session(self, sid: str) -> Session:
        return Session(id=sid, client=self)

    async def close_session(self, sid: str, purge: bool = False) -> Session:
        path = session_path(sid) + ("?purge=true" if purge else "")
        return Session.from_json((await self._json("DELETE", path))[1], self)

    async def freeze(self, sid: str) -> Session:
        return Session.from_json((await self._json("POST", session_path(sid, "/freeze")))[1], self)

    async def thaw(self, sid: str) -> Session:
        return Session.from_json((await self._json("POST", session_path(sid, "/thaw")))[1], self)

    async def touch(self, sid: str) -> Session:
        return Session.from_json((await self._json("POST", session_path(sid, "/activity")))[1], self)

    async def exec(self, sid: str, argv=None, *, shell=None, env=None, cwd=None, stdin=None, timeout_ms=None,
                   request_id=None, tty=None) -> AsyncEventStream:
        body = command_body(argv, shell, env, cwd, stdin, timeout_ms, request_id, tty)
        resp = await self._open("POST", session_path(sid, "/commands"), json.dumps(body).encode("utf-8"),
                                "application/json")
        return AsyncEventStream(resp, 0, request_id)

    async def start(self, sid: str, argv=None, **kw) -> Command:
        body = command_body(argv, kw.pop("shell", None), kw.pop("env", None), kw.pop("cwd", None),
                            kw.pop("stdin", None), kw.pop("timeout_ms", None), kw.pop("request_id", None),
                            kw.pop("tty", None))
        if kw:
            raise TypeError("unknown arguments: %s" % ", ".join(kw))
        return Command.from_json((await self._json("POST", session_path(sid, "/commands?wait=false"), body))[1])

    async def run(self, sid: str, argv=None, **kw) -> Result:
        async with await self.exec(sid, argv, **kw) as events:
            return await events.result()

    async def events(self, sid: str, request_id: str, offset: int = 0) -> AsyncEventStream:
        resp = await self._open("GET", command_path(sid, request_id, "/events?offset=%d" % int(offset)))
        return AsyncEventStream(resp, int(offset), request_id)

    async def wait(self, sid: str, request_id: str) -> Result:
        async with await self.events(sid, request_id, 0) as events:
            return await events.result()

    async def get_command(self, sid: str, request_id: str) -> Command:
        return Command.from_json((await self._json("GET", command_path(sid, request_id)))[1])

    async def list_commands(self, sid: str) -> list:
        obj = (await self._json("GET", session_path(sid, "/commands")))[1]
        return [Command.from_json(c) for c in obj.get("commands", [])]

    async def write_stdin(self, sid: str, request_id: str, data, eof: bool = False) -> int:
        if isinstance(data, str):
            data = data.encode("utf-8")
        path = command_path(sid, request_id, "/stdin" + ("?eof=1" if eof else ""))
        resp = await self._open("POST", path, bytes(data), "application/octet-stream")
        return int((await _read_json(resp) or {}).get("written", 0))

    async def close_stdin(self, sid: str, request_id: str) -> int:
        return await self.write_stdin(sid, request_id, b"", eof=True)

    async def signal(self, sid: str, request_id: str, signal: str = "SIGTERM") -> Any:
        return (await self._json("POST", command_path(sid, request_id, "/signal"), {"signal": signal}))[1]

    async def upload(self, sid: str, path: str, data, mode: Optional[int] = None) -> Entry:
        """DATA: bytes, a binary file object (read CHUNK at a time), or an (async) iterable
        of bytes; anything but bytes goes chunked."""
        query = {"mode": "%04o" % mode} if mode is not None else None
        resp = await self._open("PUT", files_path(sid, path, query), data if data is not None else b"",
                                "application/octet-stream")
        return Entry.from_json(await _read_json(resp))

    write_file = upload

    async def download(self, sid: str, path: str, dest, offset: int = 0) -> int:
        if not isinstance(offset, int) or offset < 0:
            raise ValueError("offset is an int >= 0")
        resp = await self._open("GET", files_path(sid, path),
                                extra={"Range": "bytes=%d-" % offset} if offset else None)
        try:
            if resp.headers.get("content-type", "").startswith("application/json"):
                raise IsADirectoryError("%s is a directory (list_dir() lists it)" % path)
            n = 0
            while True:
                chunk = await resp.read_some()
                if not chunk:
                    return n
                dest.write(chunk)
                n += len(chunk)
        finally:
            resp.close()

    async def read_file(self, sid: str, path: str) -> bytes:
        import io
        buf = io.BytesIO()
        await self.download(sid, path, buf)
        return buf.getvalue()

    async def list_dir(self, sid: str, path: str = "") -> Listing:
        resp = await self._open("GET", files_path(sid, path))
        if not resp.headers.get("content-type", "").startswith("application/json"):
            resp.close()
            raise NotADirectoryError("%s is a file (download() reads it)" % path)
        return Listing.from_json(await _read_json(resp))

    async def stat(self, sid: str, path: str) -> Entry:
        return Entry.from_json((await self._json("GET", files_path(sid, path, {"stat": "1"})))[1])

    async def mkdir(self, sid: str, path: str) -> Entry:
        return Entry.from_json((await self._json("PUT", files_path(sid, path, {"mkdir": "1"})))[1])

    async def remove(self, sid: str, path: str, recursive: bool = False) -> Any:
        return (await self._json("DELETE", files_path(sid, path, {"recursive": "true"} if recursive else None)))[1]

    async def move(self, sid: str, path: str, new_path: str, overwrite: bool = False) -> Entry:
        query = {"move_to": new_path}
        if overwrite:
            query["overwrite"] = "true"
        return Entry.from_json((await self._json("POST", files_path(sid, path, query)))[1])


async def _chunks(body) -> AsyncIterator[bytes]:
    if hasattr(body, "read"):
        while True:
            chunk = body.read(CHUNK)
            if not chunk:
                return
            yield chunk
    elif hasattr(body, "__aiter__"):
        async for chunk in body:
            yield bytes(chunk)
    else:
        for chunk in body:
            yield bytes(chunk)


async def _read_json(resp: _Response):
    try:
        data = await resp.read(MAX_JSON_BODY)
    finally:
        resp.close()
    try:
        return json.loads(data) if data else None
    except ValueError as e:
        raise TransportError("an answer that is not JSON: %r" % data[:200]) from e
