# SPDX-License-Identifier: LGPL-2.1-or-later
"""Commands on a pseudo-terminal ("tty": {"rows", "cols"}): the terminal is their stdin,
stdout, stderr and controlling terminal; input goes through .../stdin (?eof=1 is ^D), the
size through .../resize; a D-Bus caller may pass a pty slave of its own with the option."""

import os
import pty
import re

import dbus
import pytest

import sbxbus as B
from conftest import (assert_error, commands_path, daemon_pid, restart_daemon, sh, snapshot, start_command,
                      wait_daemon_running, wait_for, wait_terminal)

OCTET = {"Content-Type": "application/octet-stream"}
TTY = {"rows": 24, "cols": 80}


def out(api, sid, rid):
    return snapshot(api, sid, rid)["stdout"] or ""


def wait_out(api, sid, rid, text, timeout=30):
    wait_for(lambda: text in out(api, sid, rid), timeout=timeout, what="%r in the output of %s" % (text, rid))


def write(api, sid, rid, data, eof=False):
    r = api.post(commands_path(sid, rid, "/stdin" + ("?eof=1" if eof else "")), data, headers=OCTET)
    assert r.status == 200, r
    return r


def resize(api, sid, rid, body):
    return api.post(commands_path(sid, rid, "/resize"), body)


@pytest.mark.time_limit(90)
def test_command_runs_on_a_terminal(api, session):
    sid = session["id"]
    script = ("tty; test -t 0 -a -t 1 -a -t 2 && echo all-on-tty; echo \"TERM=$TERM\"; stty size; "
              "echo to-stderr >&2")
    start_command(api, sid, {"argv": ["sh", "-c", script], "request_id": "t", "tty": TTY})
    snap = wait_terminal(api, sid, "t", timeout=60)
    assert snap["status"] == "succeeded" and snap["exit_code"] == 0, snap
    text = snap["stdout"]
    assert re.search(r"^/dev/pts/\d+\r$", text, re.M), text
    assert "all-on-tty\r\n" in text and "TERM=xterm-256color\r\n" in text and "24 80\r\n" in text, text
    # one stream: stderr goes to the terminal too
    assert "to-stderr\r\n" in text and not snap["stderr"], snap
    assert snap["tty"] == TTY and snap["stdin"] == "stream", snap
    listed = api.get(commands_path(sid)).json["commands"]
    assert [c["tty"] for c in listed] == [TTY], listed


CURSES = ("import curses\n"
          "def main(w):\n"
          "    h, c = w.getmaxyx()\n"
          "    w.addstr(h - 1, 0, 'curses-%dx%d' % (h, c), curses.A_REVERSE)\n"
          "    w.refresh()\n"
          "    if w.getkey() == 'q':\n"
          "        return\n"
          "curses.wrapper(main)\n"
          "print('curses-done')\n")


@pytest.mark.time_limit(90)
def test_curses_program(api, session):
    """A full-screen program: it sees the terminal's size, draws with escape sequences from
    terminfo (the alternate screen, a cursor address, reverse video), reads a key in raw
    mode, and puts the terminal back."""
    sid = session["id"]
    start_command(api, sid, {"argv": ["python3", "-c", CURSES], "request_id": "c", "tty": {"rows": 30, "cols": 100}})
    wait_out(api, sid, "c", "curses-30x100")
    text = out(api, sid, "c")
    assert "\x1b[?1049h" in text, "no alternate screen: %r" % text  # smcup of xterm-256color
    assert re.search("\x1b\\[30(d|;1H)", text), "no move to the last line: %r" % text
    assert re.search("\x1b\\[(0;)?7m", text), "no reverse video: %r" % text
    write(api, sid, "c", b"q")  # one key, no Enter: curses reads in cbreak mode
    snap = wait_terminal(api, sid, "c", timeout=60)
    assert snap["status"] == "succeeded", snap
    assert "\x1b[?1049l" in snap["stdout"] and snap["stdout"].endswith("curses-done\r\n"), snap["stdout"][-300:]


@pytest.mark.time_limit(90)
def test_term_from_the_request_and_pipe_commands_have_no_tty(api, session):
    sid = session["id"]
    start_command(api, sid, {"argv": ["sh", "-c", "echo \"TERM=$TERM\""], "request_id": "t", "tty": TTY,
                             "env": {"TERM": "vt100"}})
    snap = wait_terminal(api, sid, "t", timeout=60)
    assert "TERM=vt100\r\n" in snap["stdout"], snap
    start_command(api, sid, {"argv": ["sh", "-c", "test -t 0 || test -t 1 || echo no-tty"], "request_id": "p"})
    snap = wait_terminal(api, sid, "p", timeout=60)
    assert snap["stdout"] == "no-tty\n" and snap["tty"] is None, snap


@pytest.mark.time_limit(90)
def test_resize_reaches_the_command(api, session):
    sid = session["id"]
    script = "trap 'echo winch' WINCH; stty size; echo ready; read x; stty size"
    start_command(api, sid, {"argv": ["bash", "-c", script], "request_id": "r", "tty": {"rows": 30, "cols": 100}})
    wait_out(api, sid, "r", "ready")
    assert "30 100\r\n" in out(api, sid, "r")
    r = resize(api, sid, "r", {"rows": 40, "cols": 120})
    assert r.status == 200, r
    assert r.json == {"request_id": "r", "tty": {"rows": 40, "cols": 120}}, r.json
    assert snapshot(api, sid, "r")["tty"] == {"rows": 40, "cols": 120}
    write(api, sid, "r", b"go\n")
    snap = wait_terminal(api, sid, "r", timeout=60)
    assert snap["stdout"].rstrip().endswith("40 120"), snap
    # finished: what the signal route answers
    assert_error(resize(api, sid, "r", {"rows": 10, "cols": 10}), 409, "not_running")


@pytest.mark.time_limit(90)
def test_ctrl_c_interrupts_the_foreground_group(api, session):
    sid = session["id"]
    script = "trap 'echo got-int' INT; echo ready; sleep 100; echo after"
    start_command(api, sid, {"argv": ["sh", "-c", script], "request_id": "c", "tty": TTY})
    wait_out(api, sid, "c", "ready")
    wait_for(lambda: "sleep" in sh("ps", "-eo", "args").stdout, timeout=30, what="sleep to run")
    write(api, sid, "c", b"\x03")
    snap = wait_terminal(api, sid, "c", timeout=60)
    assert "got-int" in snap["stdout"] and "after" in snap["stdout"], snap
    assert snap["duration_ms"] < 90000, snap


@pytest.mark.time_limit(90)
def test_eof_ends_cat_and_the_terminal_stays_open(api, session):
    sid = session["id"]
    start_command(api, sid, {"argv": ["cat"], "request_id": "cat", "tty": TTY})
    write(api, sid, "cat", b"hello\n")
    wait_out(api, sid, "cat", "hello\r\nhello\r\n")  # the echo, then cat's copy
    write(api, sid, "cat", b"", eof=True)
    snap = wait_terminal(api, sid, "cat", timeout=60)
    assert snap["status"] == "succeeded", snap


@pytest.mark.time_limit(90)
def test_python_prompt_round_trip(api, session):
    sid = session["id"]
    start_command(api, sid, {"argv": ["python3", "-q", "-i"], "request_id": "py", "tty": TTY})
    write(api, sid, "py", b"print(6 * 7)\n")  # held until the terminal is set up
    wait_out(api, sid, "py", "42\r\n>>> ")
    # the terminal echoed the input (written before python read it), python prompted first
    text = out(api, sid, "py")
    assert text.index(">>> ") < text.index("42\r\n"), text
    write(api, sid, "py", b"", eof=True)
    snap = wait_terminal(api, sid, "py", timeout=60)
    assert snap["status"] == "succeeded", snap


@pytest.mark.parametrize("body, code", [
    ({"tty": {"rows": 0, "cols": 80}}, "invalid_value"),
    ({"tty": {"rows": 24, "cols": 1001}}, "invalid_value"),
    ({"tty": {"rows": "24", "cols": 80}}, "invalid_type"),
    ({"tty": {"rows": 24}}, "missing_field"),
    ({"tty": {"rows": 24, "cols": 80, "x": 1}}, "unknown_field"),
    ({"tty": [24, 80]}, "invalid_type"),
    ({"tty": TTY, "stdin": {"text": "x"}}, "invalid_value"),
    ({"tty": TTY, "stdin": "null"}, "invalid_value"),
])
def test_bad_tty_requests_start_nothing(api, session, body, code):
    sid = session["id"]
    r = api.post(commands_path(sid), dict(body, argv=["true"]))
    assert_error(r, 400, code)
    assert api.get(commands_path(sid)).json["commands"] == []


@pytest.mark.time_limit(90)
def test_resize_refusals(api, tcp, tcp2, session):
    sid = session["id"]
    start_command(api, sid, {"argv": ["sleep", "100"], "request_id": "pipe"})
    assert_error(resize(api, sid, "pipe", {"rows": 10, "cols": 10}), 409, "not_a_terminal")
    start_command(api, sid, {"argv": ["sleep", "100"], "request_id": "t", "tty": TTY})
    for body, code in (({"rows": 0, "cols": 10}, "invalid_value"), ({"rows": 10}, "missing_field"),
                       ({"rows": 10, "cols": 10, "x": 1}, "unknown_field"), ({"rows": "1", "cols": 1}, "invalid_type")):
        assert_error(resize(api, sid, "t", body), 400, code)
    assert snapshot(api, sid, "t")["tty"] == TTY
    # another tenant's session: not found
    s1 = tcp.create_session("ttyuser", "ttyws")
    start_command(tcp, s1["id"], {"argv": ["sleep", "100"], "request_id": "t", "tty": TTY})
    assert_error(resize(tcp2, s1["id"], "t", {"rows": 10, "cols": 10}), 404, "not_found")
    assert snapshot(tcp, s1["id"], "t")["tty"] == TTY
    tcp.delete("/v1/sessions/%s" % s1["id"])


@pytest.mark.time_limit(120)
def test_dbus_tty_resize_and_property(api, session):
    sid = session["id"]
    rid, cpath = B.manager("Exec", "sasa{sv}", sid, ["sh", "-c", "stty size; read x; stty size"],
                           {"request_id": dbus.String("bt"),
                            "tty": dbus.Struct((dbus.UInt16(20), dbus.UInt16(70)), signature="qq")})
    assert B.get_property(cpath, B.COMMAND, "Tty") == [20, 70] or \
        tuple(B.get_property(cpath, B.COMMAND, "Tty")) == (20, 70)
    wait_out(api, sid, "bt", "20 70")
    B.call(cpath, B.COMMAND, "Resize", "qq", dbus.UInt16(50), dbus.UInt16(150))
    assert tuple(B.get_property(cpath, B.COMMAND, "Tty")) == (50, 150)
    assert B.error_of(B.call, cpath, B.COMMAND, "Resize", "qq", dbus.UInt16(0), dbus.UInt16(1)) == \
        B.ERROR + "InvalidValue"
    B.call(cpath, B.COMMAND, "WriteStdin", "ayb", dbus.ByteArray(b"\n"), False)
    snap = wait_terminal(api, sid, "bt", timeout=60)
    assert "50 150" in snap["stdout"], snap
    # a pipe command: (0, 0), and Resize is refused
    rid, ppath = B.manager("Exec", "sasa{sv}", sid, ["sleep", "100"], {})
    assert tuple(B.get_property(ppath, B.COMMAND, "Tty")) == (0, 0)
    assert B.error_of(B.call, ppath, B.COMMAND, "Resize", "qq", dbus.UInt16(5), dbus.UInt16(5)) == \
        B.ERROR + "NotATerminal"


@pytest.mark.time_limit(120)
def test_dbus_callers_own_pty_with_the_option(api, session):
    sid = session["id"]
    master, slave = pty.openpty()
    try:
        rid, cpath = B.manager("Exec", "sasa{sv}", sid, ["sh", "-c", "test -t 0 -a -t 1 && tty && echo own-pty"],
                               {"stdin": dbus.types.UnixFd(slave), "stdout": dbus.types.UnixFd(slave),
                                "stderr": dbus.types.UnixFd(slave),
                                "tty": dbus.Struct((dbus.UInt16(24), dbus.UInt16(80)), signature="qq")})
        os.close(slave)
        slave = -1
        got = b""
        while b"own-pty" not in got:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every holder of the slave closed it
                break
            if not chunk:
                break
            got += chunk
        assert b"own-pty" in got and b"/dev/pts/" in got, got
        snap = wait_terminal(api, sid, rid, timeout=60)
        assert snap["status"] == "succeeded" and snap["tty"] == TTY, snap
        # sandboxd holds no master of it
        assert_error(resize(api, sid, rid, {"rows": 5, "cols": 5}), 409, "not_a_terminal")
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)


@pytest.mark.time_limit(120)
def test_tty_command_survives_a_restart(api, session):
    sid = session["id"]
    start_command(api, sid, {"argv": ["sh", "-c", "echo before; read x; echo \"got $x\"; stty size"],
                             "request_id": "rs", "tty": TTY})
    wait_out(api, sid, "rs", "before")
    old = daemon_pid()
    sh("systemctl", "reset-failed", "sandboxd.service", check=False)
    sh("systemctl", "restart", "sandboxd.service")
    wait_daemon_running(not_pid=old, timeout=30)
    snap = snapshot(api, sid, "rs")
    assert snap["status"] == "running" and snap["tty"] == TTY, snap
    assert resize(api, sid, "rs", {"rows": 33, "cols": 99}).status == 200
    write(api, sid, "rs", b"after\n")
    snap = wait_terminal(api, sid, "rs", timeout=60)
    assert snap["status"] == "succeeded", snap
    assert "before\r\n" in snap["stdout"] and "got after\r\n" in snap["stdout"] and "33 99" in snap["stdout"], snap
