# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxctl shell, exec -t and attach -t driven as a person does: in tmux (send-keys,
capture-pane), over both transports."""

import re
import shutil
import subprocess
import time
import uuid

import pytest

from conftest import wait_for
from test_sandboxctl import SANDBOXCTL, both_transports, ctl, ctl_env, sid, transport  # noqa: F401

pytestmark = pytest.mark.skipif(not shutil.which("tmux"), reason="tmux is not installed (tools/test-deps.txt)")


class Tmux:
    """One detached tmux server of our own (its own socket), one window."""

    def __init__(self, argv, env, rows=30, cols=100):
        self.sock = "sbx-test-%s" % uuid.uuid4().hex[:12]
        self.env = env
        cmd = " ".join("'%s'" % a.replace("'", "'\\''") for a in argv)
        # the window stays when the command ends, so that its last screen and status can be read
        self.tmux("new-session", "-d", "-x", str(cols), "-y", str(rows), "-s", "t",
                  "sh -c %s" % ("'%s; echo sandboxctl-exited-$?; sleep 600'" % cmd.replace("'", "'\\''")))

    def tmux(self, *args, check=True):
        return subprocess.run(["tmux", "-L", self.sock] + list(args), env=self.env, capture_output=True,
                              text=True, timeout=30, check=check)

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "t", *keys)

    def text(self, s):
        self.tmux("send-keys", "-t", "t", "-l", s)

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "t", "-S", "-200").stdout

    def wait(self, needle, timeout=60, what=None):
        """needle on the screen; capture-pane drops the spaces that end a line, so a
        needle's own are not looked for at the end of one ("$ " is a line ending in "$")."""
        if needle.endswith(" "):
            pattern = re.compile(re.escape(needle.rstrip(" ")) + r"( |$)", re.M)
        else:
            pattern = re.compile(re.escape(needle))
        try:
            wait_for(lambda: pattern.search(self.screen()), timeout=timeout, interval=0.2,
                     what=what or "%r on the screen" % needle)
        except AssertionError as e:
            raise AssertionError("%s; the screen:\n%s" % (e, self.screen())) from None

    def resize(self, rows, cols):
        self.tmux("resize-window", "-t", "t", "-x", str(cols), "-y", str(rows))

    def kill(self):
        self.tmux("kill-server", check=False)


@pytest.fixture
def tmux_env(transport):
    e = ctl_env()
    e["TERM"] = "xterm-256color"
    e.pop("TMUX", None)
    return e


def start(env, *args):
    return Tmux([SANDBOXCTL] + list(args), env)


@both_transports
def test_shell_is_interactive(sid, tmux_env):
    t = start(tmux_env, "shell", sid, "sh", "-i")
    try:
        # a prompt: sh is interactive because its stdin is a terminal
        t.wait("$ ")
        t.text("tty; echo TERM=$TERM; stty size")
        t.keys("Enter")
        t.wait("/dev/pts/")
        t.wait("TERM=xterm-256color")
        t.wait("30 100")
        # the window's new size reaches the command (SIGWINCH, then stty reads it)
        t.resize(25, 90)
        time.sleep(0.5)
        t.text("stty size")
        t.keys("Enter")
        t.wait("25 90", what="the new window size inside")
        # Ctrl-C reaches the foreground job (as SIGINT), not sandboxctl
        t.text("python3 -c 'import signal, time; signal.signal(signal.SIGINT, lambda *a: exit(print(\"got-\" + \"SIGINT\"))); "
               "print(\"wait\" + \"ing\", flush=True); time.sleep(300)'")
        t.keys("Enter")
        t.wait("waiting")
        t.keys("C-c")
        t.wait("got-SIGINT", what="the foreground job's SIGINT handler")
        t.text("exit 7")
        t.keys("Enter")
        t.wait("sandboxctl-exited-7", what="sandboxctl to exit with the shell's status")
    finally:
        t.kill()


@both_transports
def test_exec_t_python_repl(sid, tmux_env):
    t = start(tmux_env, "exec", "-t", sid, "python3", "-i", "-q")
    try:
        t.wait(">>> ")
        t.text("import os, sys; print(os.isatty(0), os.isatty(1), sys.stdin.isatty(), 6 * 7)")
        t.keys("Enter")
        t.wait("True True True 42")
        t.keys("C-d")
        t.wait("sandboxctl-exited-0")
    finally:
        t.kill()


@both_transports
def test_typeahead_is_not_lost(sid, tmux_env):
    """Keys typed before the command runs reach it (systemd resets a terminal first)."""
    t = start(tmux_env, "exec", "-t", sid, "sh", "-c", "read line; echo got-$line")
    try:
        t.text("early")
        t.keys("Enter")
        t.wait("got-early", timeout=60)
        t.wait("sandboxctl-exited-0")
    finally:
        t.kill()


def test_detach_and_attach_again_over_http(api, scope, tmux_env):
    tmux_env["SANDBOXD_TRANSPORT"] = "http"
    user, ws = scope
    sid = api.create_session(user, ws)["id"]
    rid = "shell-" + uuid.uuid4().hex[:8]
    t = start(tmux_env, "exec", "-t", "--request-id=" + rid, sid, "sh", "-i")
    t2 = None
    try:
        t.wait("$ ")
        t.text("echo one-$((40+2))")
        t.keys("Enter")
        t.wait("one-42")
        # ~. first on a line: detach; the command goes on
        t.text("~.")
        t.wait("detached; the command goes on")
        t.wait("sandboxctl-exited-0")
        assert api.get("/v1/sessions/%s/commands/%s" % (sid, rid)).json["status"] == "running"

        t2 = start(tmux_env, "attach", "-t", sid, rid)
        t2.wait("one-42", what="the output so far replayed")
        t2.text("echo two-$((40+3)); exit 5")
        t2.keys("Enter")
        t2.wait("two-43")
        t2.wait("sandboxctl-exited-5")
    finally:
        t.kill()
        if t2:
            t2.kill()
        api.delete("/v1/sessions/" + sid)


@both_transports
def test_escape_help_and_tilde(sid, tmux_env):
    t = start(tmux_env, "exec", "-t", sid, "cat")
    try:
        time.sleep(1)
        t.text("~?")
        t.wait("~. ", what="the escape help")
        # ~~ sends one tilde; a tilde inside a line is data
        t.text("~~x a~b")
        t.keys("Enter")
        t.wait("~x a~b\r\n~x a~b".replace("\r\n", "\n"), what="cat echoing the line with its tildes")
        t.keys("C-d")
        t.wait("sandboxctl-exited-0")
    finally:
        t.kill()


@both_transports
def test_terminal_is_restored(sid, tmux_env):
    """After the command ends, the local terminal is cooked again (echo and line editing)."""
    # one shell, sandboxctl inside it: the shell's own settings after it returns
    t = Tmux(["sh", "-c", "%s exec -t %s true; stty -a | tr ' ' '\\n' | grep -x -e echo -e icanon -e -echo -e -icanon"
              % (SANDBOXCTL, sid)], tmux_env)
    try:
        t.wait("sandboxctl-exited-0")
        screen = t.screen()
        assert "\necho\n" in "\n" + screen and "icanon" in screen and "-icanon" not in screen and "-echo" not in screen, screen
    finally:
        t.kill()
