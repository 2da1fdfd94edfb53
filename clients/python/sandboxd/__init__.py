# SPDX-License-Identifier: LGPL-2.1-or-later
"""A client of sandboxd's HTTP API (sandboxd-api(7)), on the standard library only.

    import sandboxd
    c = sandboxd.Client()                     # $SANDBOXD_URL, else /run/sandboxd/http.sock
    s = c.create_session("alice", "demo")
    r = s.run(["sh", "-c", "echo hi"])        # a Result: r.status, r.exit_code, r.stdout
    for ev in s.exec(shell="seq 3"):          # events as they come
        print(ev.type, ev.data)

sandboxd.aio.AsyncClient is the same on asyncio."""

from ._client import DEFAULT_SOCKET, Client, Endpoint, EventStream
from ._types import (ApiError, Command, Conflict, Entry, Event, Forbidden, Health, Image, ImageOs,
                     InvalidOffset, InvalidRequest, Listing, NotFound, Result, SandboxdError, Session, TooManyRequests,
                     TransportError, Unauthorized, Unavailable, Unsupported, Usage, WrongNode)

__version__ = "0.1.0"

__all__ = ["DEFAULT_SOCKET", "Client", "Endpoint", "EventStream", "ApiError", "Command", "Conflict", "Entry",
           "Event", "Forbidden", "Health", "Image", "ImageOs", "InvalidOffset", "InvalidRequest", "Listing",
           "NotFound", "Result", "SandboxdError", "Session", "TooManyRequests", "TransportError", "Unauthorized",
           "Unavailable", "Unsupported", "Usage", "WrongNode"]
