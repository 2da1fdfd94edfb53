# SPDX-License-Identifier: LGPL-2.1-or-later
"""A client that stops reading a command's event stream costs sandboxd a bounded amount
of memory (OUTPUT_LIVE_PAUSE, 1 MiB of events it has not taken yet): past it, sandboxd
stops reading the command's pipes, so the command waits on its own writes. It used to
be 8 MiB per stalled stream. When the client goes, the command runs to its end."""

import socket

import pytest

from conftest import UNIX_SOCKET, commands_path, daemon_pid, start_command, wait_for, wait_terminal

pytestmark = pytest.mark.time_limit(120)

OUTPUT = 96 << 20  # well past OutputMax=: the rest is only streamed, live
SLACK = 3 << 20     # the pause threshold, and what the allocator keeps


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))


def test_a_stalled_reader_costs_a_bounded_amount(api, session):
    sid = session["id"]
    pid = daemon_pid()
    start_command(api, sid, {"argv": ["sh", "-c", "yes | head -c %d" % OUTPUT], "request_id": "flood"})
    before = rss(pid)

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(UNIX_SOCKET)
    s.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n" % commands_path(sid, "flood", "/events")).encode())
    assert s.recv(4096).startswith(b"HTTP/1.1 200"), "no stream"
    try:
        # the stream stalls: sandboxd holds what the client did not take, up to the pause
        samples = []

        def settled():
            samples.append(rss(pid))
            return len(samples) > 10 and max(samples[-10:]) - min(samples[-10:]) < (256 << 10)

        wait_for(settled, timeout=60, interval=0.3, what="sandboxd's memory to settle")
        grown = max(samples) - before
        assert grown < SLACK, "a stalled reader grew sandboxd by %d KiB" % (grown >> 10)
        snap = api.get(commands_path(sid, "flood")).json
        assert snap["terminal"] is False, "the command ran to its end without its stream being read"
    finally:
        s.close()
    done = wait_terminal(api, sid, "flood", timeout=90)
    assert done["status"] == "succeeded", done
