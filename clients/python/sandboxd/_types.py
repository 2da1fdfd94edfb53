# SPDX-License-Identifier: LGPL-2.1-or-later
"""The typed answers of sandboxd's HTTP API and the exceptions of its errors.

Each dataclass keeps the whole JSON object it was made from in `raw`, so that a
field sandboxd adds later is not lost to a client built before it."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Optional


# ---- errors ---------------------------------------------------------------------------------

class SandboxdError(Exception):
    """Anything this package raises."""


class TransportError(SandboxdError):
    """sandboxd could not be reached, or its answer was not what the API promises (a
    connection refused or cut, a timeout, a malformed event line). No API error code."""


class ApiError(SandboxdError):
    """sandboxd answered with an error: `code` is the shared error code (the table of
    sandboxd-api(7), e.g. "not_found"), `status` the HTTP status, `message` its text,
    `retry_after` the seconds of Retry-After when sent (429, 503)."""

    def __init__(self, status: int, code: str, message: str, retry_after: Optional[int] = None):
        super().__init__("%s (%d %s)" % (message or code, status, code))
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


class InvalidRequest(ApiError):
    """400: the request was refused as invalid (invalid_value, invalid_path, ...)."""


class Unauthorized(ApiError):
    """401: no key, or a wrong one (TCP)."""


class Forbidden(ApiError):
    """403: the caller may not do this."""


class NotFound(ApiError):
    """404: no such session, command, file or port (for this caller)."""


class Conflict(ApiError):
    """409: the state does not allow it (exists, not_running, session_not_active, busy, ...)."""


class InvalidOffset(ApiError):
    """416: an event offset past the end, or not at a line boundary."""


class TooManyRequests(ApiError):
    """429: a quota (too_many_sessions, too_many_running, too_many_file_operations, ...)."""


class Unsupported(ApiError):
    """501: this host cannot do it (freezing on cgroup v1: unsupported)."""


class Unavailable(ApiError):
    """503: draining, overloaded or stopping: try again after `retry_after`. Also a load
    balancer's node_unavailable (503, or 504 when the node did not answer in time; HAProxy
    with contrib/haproxy/haproxy.cfg, sandboxd-api(7), NODES): `node` names the session's
    node when the balancer did."""

    def __init__(self, status: int, code: str, message: str, retry_after: Optional[int] = None,
                 node: Optional[str] = None):
        super().__init__(status, code, message, retry_after)
        self.node = node


class WrongNode(ApiError):
    """421 wrong_node: the session is another node's, `node` (sandboxd-api(7), NODES). The
    client already sent the request there once if $SANDBOXD_NODES names the node and the body
    could be sent again; the message says why it did not otherwise."""

    def __init__(self, status: int, code: str, message: str, retry_after: Optional[int] = None,
                 node: Optional[str] = None):
        super().__init__(status, code, message, retry_after)
        self.node = node


_BY_STATUS = {400: InvalidRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
              416: InvalidOffset, 421: WrongNode, 429: TooManyRequests, 501: Unsupported, 503: Unavailable}

NODE_UNAVAILABLE = "node_unavailable"  # a load balancer's 503/504 (contrib/haproxy/haproxy.cfg)
NODE_RE = re.compile(r"[a-z][a-z0-9]{0,31}")
NODES_ENV = "SANDBOXD_NODES"
NODES_SPEC_MAX = 64 * 1024


def parse_nodes(spec: Optional[str]) -> dict:
    """$SANDBOXD_NODES: NAME=URL entries separated by commas or whitespace, as {name: url}.
    ValueError for an entry that is not NAME=URL, a name no node has, a node named twice, a
    URL not http(s)://, or more than 64 KiB."""
    nodes: dict = {}
    if not spec:
        return nodes
    if len(spec) > NODES_SPEC_MAX:
        raise ValueError("$%s is longer than 64 KiB" % NODES_ENV)
    for entry in re.split(r"[,\s]+", spec):
        if not entry:
            continue
        name, eq, url = entry.partition("=")
        if not eq:
            raise ValueError("$%s: %r is not NAME=URL" % (NODES_ENV, entry[:80]))
        if not NODE_RE.fullmatch(name):
            raise ValueError("$%s: %r is not a node name (a-z, 0-9, a letter first)" % (NODES_ENV, name[:40]))
        if name in nodes:
            raise ValueError("$%s names node %s twice" % (NODES_ENV, name))
        if not re.fullmatch(r"https?://[^/\s]+/*", url):
            raise ValueError("$%s: the URL of %s is not http://HOST[:PORT] or https://..." % (NODES_ENV, name))
        nodes[name] = url.rstrip("/")
    return nodes


def error_from_answer(status: int, body: bytes, retry_after: Optional[str] = None) -> ApiError:
    """The exception for an error answer: its class by status, its code and message from the
    body {"error":{"code","message"}} (code "http_<status>" when the body is not that, as for
    the few answers libmicrohttpd makes itself). A balancer's node_unavailable is Unavailable
    whether 503 or 504 (sandboxd's own 504, upstream_timeout of a port, stays ApiError)."""
    code, message, node = "http_%d" % status, "", None
    try:
        err = json.loads(body)["error"]
        code, message = str(err["code"]), str(err.get("message", ""))
        n = err.get("node")
        if isinstance(n, str) and NODE_RE.fullmatch(n):
            node = n
    except (ValueError, KeyError, TypeError, AttributeError):
        message = body[:200].decode("utf-8", "replace").strip()
    ra = None
    if retry_after and retry_after.strip().isdigit():
        ra = int(retry_after.strip())
    if status == 421:
        return WrongNode(status, code, message, ra, node)
    if status == 503 or code == NODE_UNAVAILABLE:
        return Unavailable(status, code, message, ra, node)
    return _BY_STATUS.get(status, ApiError)(status, code, message, ra)


# ---- answers --------------------------------------------------------------------------------

def _build(cls, obj: Any, **extra):
    """A dataclass CLS from a JSON object: its known fields, the rest stays in raw."""
    if not isinstance(obj, dict):
        raise TransportError("expected a JSON object for %s, got %r" % (cls.__name__, type(obj).__name__))
    names = {f.name for f in dataclasses.fields(cls)}
    kw = {k: v for k, v in obj.items() if k in names and k != "raw"}
    kw.update(extra)
    return cls(raw=obj, **kw)


def _output(obj: dict, name: str) -> bytes:
    """A snapshot's or event's bytes: NAME as UTF-8 text, or NAME_b64."""
    if obj.get(name + "_b64") is not None:
        return base64.b64decode(obj[name + "_b64"])
    v = obj.get(name)
    return v.encode("utf-8") if isinstance(v, str) else b""


@dataclass
class Health:
    status: str = ""
    version: str = ""
    node: str = ""  # this node's name ([Node] Name=)
    uptime: float = 0
    timestamp: str = ""
    sessions: int = 0
    running_commands: int = 0
    pool: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, obj: dict) -> "Health":
        return _build(cls, obj)


@dataclass
class Usage:
    cpu_usec: Optional[int] = None
    memory_bytes: Optional[int] = None
    tasks: Optional[int] = None

    @classmethod
    def from_json(cls, obj: Any) -> Optional["Usage"]:
        if not isinstance(obj, dict):
            return None
        return cls(obj.get("cpu_usec"), obj.get("memory_bytes"), obj.get("tasks"))


@dataclass
class Entry:
    """A file, directory, symlink or other entry of a workspace. `name`/`path`/`target`
    are None when sandboxd sent them as *_b64 (not UTF-8); the bytes are then in raw."""
    name: Optional[str] = None
    path: Optional[str] = None
    type: str = ""
    size: int = 0
    mode: str = ""
    mtime: str = ""
    mtime_usec: int = 0
    target: Optional[str] = None
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, obj: dict) -> "Entry":
        return _build(cls, obj)


@dataclass
class Listing:
    path: Optional[str] = None
    entries: list = field(default_factory=list)
    truncated: bool = False
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, obj: dict) -> "Listing":
        return _build(cls, obj, entries=[Entry.from_json(e) for e in obj.get("entries") or []])


@dataclass
class Command:
    """A command's summary (list, ?wait=false) or snapshot (get): the snapshot also has
    its kept output as bytes (`stdout`, `stderr`)."""
    request_id: str = ""
    unit: Optional[str] = None
    status: str = ""
    terminal: bool = False
    exit_code: Optional[int] = None
    signal: Optional[str] = None
    reason: Optional[str] = None
    duration_ms: Optional[int] = None
    argv: list = field(default_factory=list)
    usage: Optional[Usage] = None
    tty: Optional[dict] = None
    cgroup: Optional[str] = None
    session: Optional[str] = None
    stdout: Optional[bytes] = None
    stderr: Optional[bytes] = None
    truncated: bool = False
    events_bytes: Optional[int] = None
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, obj: dict) -> "Command":
        extra = {"usage": Usage.from_json(obj.get("usage"))}
        if "status" in obj and "terminal" not in obj:
            extra["terminal"] = obj["status"] not in ("running", "accepted", "starting")
        if any(k in obj for k in ("stdout", "stdout_b64", "stderr", "stderr_b64")):
            extra["stdout"] = _output(obj, "stdout")
            extra["stderr"] = _output(obj, "stderr")
        return _build(cls, obj, **extra)


@dataclass
class Event:
    """One line of a command's NDJSON event stream. `data` holds the bytes of stdout and
    stderr events (decoded from data or data_b64); `live` lines are output past the kept
    limit, which a re-attach will not replay."""
    type: str
    data: Optional[bytes] = None
    live: bool = False
    request_id: Optional[str] = None
    unit: Optional[str] = None
    session: Optional[str] = None
    status: Optional[str] = None
    exit_code: Optional[int] = None
    signal: Optional[str] = None
    reason: Optional[str] = None
    duration_ms: Optional[int] = None
    usage: Optional[Usage] = None
    stream: Optional[str] = None
    kept_bytes: Optional[int] = None
    host: Optional[str] = None
    port: Optional[int] = None
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_line(cls, line: bytes) -> "Event":
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise TransportError("an event line that is not JSON: %r" % line[:200]) from e
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            raise TransportError("an event line without a type: %r" % line[:200])
        extra = {"usage": Usage.from_json(obj.get("usage")), "live": bool(obj.get("live", False))}
        if obj["type"] in ("stdout", "stderr"):
            extra["data"] = _output(obj, "data")
        return _build(cls, obj, **extra)


@dataclass
class Result:
    """How a command ended, with the output its events carried."""
    request_id: Optional[str]
    status: str
    exit_code: Optional[int]
    signal: Optional[str]
    reason: Optional[str]
    duration_ms: Optional[int]
    stdout: bytes
    stderr: bytes
    usage: Optional[Usage] = None

    @property
    def ok(self) -> bool:
        return self.status == "succeeded"


class ResultCollector:
    """Builds a Result from events, the same way for the sync and the asyncio client."""

    def __init__(self, request_id: Optional[str] = None):
        self.request_id = request_id
        self.out: list = []
        self.err: list = []
        self.exit: Optional[Event] = None

    def add(self, ev: Event) -> None:
        if ev.type == "accepted" and ev.request_id:
            self.request_id = ev.request_id
        elif ev.type == "stdout":
            self.out.append(ev.data or b"")
        elif ev.type == "stderr":
            self.err.append(ev.data or b"")
        elif ev.type == "exit":
            self.exit = ev

    def result(self) -> Result:
        ex = self.exit
        if ex is None:
            raise TransportError("the event stream ended before the command's exit event")
        return Result(self.request_id, ex.status or "", ex.exit_code, ex.signal, ex.reason, ex.duration_ms,
                      b"".join(self.out), b"".join(self.err), ex.usage)


@dataclass
class Session:
    """A session. Its methods are the client's, with this session's id: with the asyncio
    client they return coroutines (and stream objects) of that client."""
    id: str
    user: str = ""
    workspace: str = ""
    state: str = ""
    node: Optional[str] = None  # the node that has it
    exec_mode: Optional[str] = None
    image: Optional[str] = None  # the image its commands run in; None: the host's root
    unit: Optional[str] = None
    dynamic_user: Optional[str] = None
    workspace_path: Optional[str] = None
    limits: dict = field(default_factory=dict)
    network: Any = None
    ttl_s: Optional[int] = None
    frozen: bool = False
    commands: int = 0
    running: int = 0
    disk_bytes: Optional[int] = None
    close_reason: Optional[str] = None
    created_at_usec: Optional[int] = None
    last_activity_usec: Optional[int] = None
    expires_at_usec: Optional[int] = None
    created: Optional[bool] = None  # create_session(): True when new (201), False when the scope's (200)
    raw: dict = field(default_factory=dict, repr=False)
    client: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_json(cls, obj: dict, client: Any = None, created: Optional[bool] = None) -> "Session":
        return _build(cls, obj, client=client, created=created)

    # what the client does with a session id
    def refresh(self):
        return self.client.get_session(self.id)

    def close(self, purge: bool = False):
        return self.client.close_session(self.id, purge=purge)

    def freeze(self):
        return self.client.freeze(self.id)

    def thaw(self):
        return self.client.thaw(self.id)

    def touch(self):
        return self.client.touch(self.id)

    def exec(self, argv=None, **kw):
        return self.client.exec(self.id, argv, **kw)

    def start(self, argv=None, **kw):
        return self.client.start(self.id, argv, **kw)

    def run(self, argv=None, **kw):
        return self.client.run(self.id, argv, **kw)

    def events(self, request_id: str, offset: int = 0):
        return self.client.events(self.id, request_id, offset=offset)

    def wait(self, request_id: str):
        return self.client.wait(self.id, request_id)

    def command(self, request_id: str):
        return self.client.get_command(self.id, request_id)

    def commands_list(self):
        return self.client.list_commands(self.id)

    def write_stdin(self, request_id: str, data, eof: bool = False):
        return self.client.write_stdin(self.id, request_id, data, eof=eof)

    def close_stdin(self, request_id: str):
        return self.client.write_stdin(self.id, request_id, b"", eof=True)

    def signal(self, request_id: str, signal: str = "SIGTERM"):
        return self.client.signal(self.id, request_id, signal)

    def upload(self, path: str, data, mode: Optional[int] = None):
        return self.client.upload(self.id, path, data, mode=mode)

    def download(self, path: str, dest, offset: int = 0):
        return self.client.download(self.id, path, dest, offset)

    def read_file(self, path: str):
        return self.client.read_file(self.id, path)

    def write_file(self, path: str, data, mode: Optional[int] = None):
        return self.client.upload(self.id, path, data, mode=mode)

    def list_dir(self, path: str = ""):
        return self.client.list_dir(self.id, path)

    def stat(self, path: str):
        return self.client.stat(self.id, path)

    def mkdir(self, path: str):
        return self.client.mkdir(self.id, path)

    def remove(self, path: str, recursive: bool = False):
        return self.client.remove(self.id, path, recursive=recursive)

    def move(self, path: str, new_path: str, overwrite: bool = False):
        return self.client.move(self.id, path, new_path, overwrite=overwrite)


@dataclass
class ImageOs:
    """What an image's os-release says (None where it says nothing)."""
    id: Optional[str] = None
    version_id: Optional[str] = None
    pretty_name: Optional[str] = None

    @classmethod
    def from_json(cls, obj: Any) -> "ImageOs":
        if not isinstance(obj, dict):
            return cls()
        return cls(obj.get("id"), obj.get("version_id"), obj.get("pretty_name"))


@dataclass
class Image:
    """A root file system sessions may run in (create_session(image=NAME)). `size_bytes` is
    None for a directory put into sandboxd's images directory by hand; `sessions` counts the
    sessions that use it and are not closed."""
    name: str = ""
    size_bytes: Optional[int] = None
    created_usec: Optional[int] = None
    os: ImageOs = field(default_factory=ImageOs)
    user_names: bool = False
    sessions: int = 0
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, obj: dict) -> "Image":
        return _build(cls, obj, os=ImageOs.from_json(obj.get("os") if isinstance(obj, dict) else None))


# ---- requests -------------------------------------------------------------------------------

MAX_EVENT_LINE = 16 << 20  # a longer line is not an event sandboxd sends


def command_body(argv, shell, env, cwd, stdin, timeout_ms, request_id, tty) -> dict:
    """The JSON body of POST .../commands."""
    if (argv is None) == (shell is None):
        raise ValueError("give argv or shell, not both nor neither")
    if shell is not None:
        argv = ["sh", "-c", shell]
    if isinstance(argv, (str, bytes)):
        raise ValueError("argv is a list of strings (use shell= for a command line)")
    body: dict = {"argv": list(argv)}
    if env:
        body["env"] = dict(env)
    if cwd is not None:
        body["cwd"] = cwd
    if timeout_ms is not None:
        body["timeout_ms"] = int(timeout_ms)
    if request_id is not None:
        body["request_id"] = request_id
    if tty is not None:
        rows, cols = tty
        body["tty"] = {"rows": int(rows), "cols": int(cols)}
    if stdin == "stream":
        body["stdin"] = "stream"
    elif isinstance(stdin, str):
        body["stdin"] = {"text": stdin}
    elif isinstance(stdin, (bytes, bytearray, memoryview)):
        body["stdin"] = {"base64": base64.b64encode(bytes(stdin)).decode("ascii")}
    elif stdin is not None:
        raise ValueError("stdin is bytes, str or \"stream\"")
    return body


def scope_header(user: str, workspace: str) -> dict:
    """X-Sandboxd-Scope of a new session, for a load balancer to place the scope by it."""
    q = urllib.parse.quote
    return {"X-Sandboxd-Scope": q(str(user), safe="") + "/" + q(str(workspace), safe="")}


def replayable(body: Any) -> bool:
    """Whether a request body can be sent a second time (a file or an iterable cannot)."""
    return body is None or isinstance(body, (bytes, bytearray, memoryview))


def follow_node(err: "WrongNode", body: Any) -> str:
    """The URL to send a request again to, once, after a 421 err: the node's in
    $SANDBOXD_NODES. Raises WrongNode saying why not: no node named, $SANDBOXD_NODES not naming
    it (or malformed), a body that cannot be sent twice."""
    node = err.node
    if not node:
        raise err
    try:
        url = parse_nodes(os.environ.get(NODES_ENV)).get(node)
    except ValueError as e:
        raise WrongNode(err.status, err.code, "The session is on node %s, and %s." % (node, e), node=node) from err
    if url is None:
        raise WrongNode(err.status, err.code,
                        "The session is on node %s, and $%s does not name it (NAME=URL entries, e.g. "
                        "%s=http://HOST:8421)." % (node, NODES_ENV, node), node=node) from err
    if not replayable(body):
        raise WrongNode(err.status, err.code,
                        "The session is on node %s (%s): a streamed body (a file or an iterable) cannot be sent "
                        "twice; send it there." % (node, url), node=node) from err
    return url


def session_body(user, workspace, limits, network, ttl_s, exec_mode, image=None) -> dict:
    body: dict = {"user": user, "workspace": workspace}
    if limits:
        body["limits"] = dict(limits)
    if network is not None:
        body["network"] = {"mode": network} if isinstance(network, str) else dict(network)
    if ttl_s is not None:
        body["ttl_s"] = int(ttl_s)
    if exec_mode is not None:
        body["exec_mode"] = exec_mode
    if image is not None:
        body["image"] = image
    return body
