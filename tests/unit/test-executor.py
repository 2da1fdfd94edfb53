#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd-executor outside systemd (--no-cgroup), against a listener of this test that
plays sandboxd: the wire of src/shared/executor-proto.h, commands with their stdio fds, the
environment, setup failures, malformed EXECs, reconnects with the table told again, ACK,
SIGTERM with a command running, and that the executor is not dumpable.

usage: test-executor.py SANDBOXD-EXECUTOR"""

import errno
import fcntl
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

EXECUTOR = sys.argv[1]
failed = 0

MAGIC, VERSION = 0x45584253, 1
HELLO, STARTED, EXITED, READY, EXEC, ACK = range(1, 7)
HEADER = "=IHHII"
FORMATS = {HELLO: HEADER + "II", STARTED: HEADER + "IIQ32s", EXITED: HEADER + "iiQQQQ", READY: HEADER,
           EXEC: HEADER + "IIQQ", ACK: HEADER}
CLD_EXITED, CLD_KILLED = 1, 2
SPEC_MAGIC = 0x43455053
SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE


def check(cond, what):
    global failed
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failed += 1


def pack(t, n, *body):
    fmt = FORMATS[t]
    return struct.pack(fmt, MAGIC, VERSION, t, n, struct.calcsize(fmt), *body)


def unpack(data):
    magic, version, t, n, size = struct.unpack_from(HEADER, data)
    assert magic == MAGIC and version == VERSION and size == len(data), data
    assert struct.calcsize(FORMATS[t]) == len(data), (t, len(data))
    v = struct.unpack(FORMATS[t], data)
    return (t, n) + v[5:]  # type, n, body...


def spec_memfd(exe, cwd, argv, env=(), seal=True):
    body = b"".join(s.encode() + b"\0" for s in [exe, cwd, *argv, *env])
    fd = os.memfd_create("spec", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.write(fd, struct.pack("=IIII", SPEC_MAGIC, len(argv), len(env), 0) + body)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
    return fd


class Sandboxd:
    """The listener, as sandboxd has one per session."""

    def __init__(self, path):
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(path)
        os.chmod(path, 0o666)
        self.listener.listen(4)
        self.listener.settimeout(10)
        self.conn = None

    def accept(self):
        self.conn, _ = self.listener.accept()
        self.conn.settimeout(10)

    def recv(self, timeout=10):
        self.conn.settimeout(timeout)
        data = self.conn.recv(256)
        if not data:
            raise EOFError
        return unpack(data)

    def handshake(self):
        """Accepts, reads HELLO, the lines it announces and READY; returns (hello, lines)."""
        self.accept()
        hello = self.recv()
        assert hello[0] == HELLO, hello
        lines = []
        while True:
            m = self.recv()
            if m[0] == READY:
                return hello, lines
            lines.append(m)

    def exec(self, n, spec_fd, stdio, flags=0, memory_max=0, tasks_max=0, fds=None):
        fds = [spec_fd, *stdio] if fds is None else fds
        socket.send_fds(self.conn, [pack(EXEC, n, flags, 0, memory_max, tasks_max)], fds)
        os.close(spec_fd)

    def ack(self, n):
        self.conn.send(pack(ACK, n))

    def drop(self):
        self.conn.close()
        self.conn = None


def run(sbx, n, exe, argv, env=(), cwd="/", stdin=None):
    """One command, its stdout and stderr through pipes; returns (STARTED, EXITED, out, err)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    null = os.open("/dev/null", os.O_RDONLY)
    sbx.exec(n, spec_memfd(exe, cwd, argv, env), [stdin if stdin is not None else null, out_w, err_w])
    for fd in (null, out_w, err_w):
        os.close(fd)
    first = sbx.recv()
    second = sbx.recv() if first[0] == STARTED else None
    out = read_all(out_r)
    err = read_all(err_r)
    return first, second, out, err


def read_all(fd):
    chunks = []
    while True:
        b = os.read(fd, 65536)
        if not b:
            os.close(fd)
            return b"".join(chunks)
        chunks.append(b)


def start(path, env, preexec=None, user_args=()):
    return subprocess.Popen([*user_args, EXECUTOR, "--no-cgroup", "--socket=" + path], env=env,
                            preexec_fn=preexec)


def main():
    tmp = tempfile.mkdtemp(prefix="test-executor-")
    os.chmod(tmp, 0o755)
    path = os.path.join(tmp, "sock")
    sbx = Sandboxd(path)
    env = {"PATH": "/usr/bin:/bin", "HOME": "/home/x", "FOO": "own", "KEEP": "kept", "SYSTEMD_EXEC_PID": "4242",
           "JOURNAL_STREAM": "9:123"}
    ex = start(path, env)
    try:
        tests(sbx, ex, path, tmp)
    finally:
        if ex.poll() is None:
            ex.kill()
        ex.wait()
        shutil.rmtree(tmp)
    print("%d failed" % failed)
    return 1 if failed else 0


def tests(sbx, ex, path, tmp):
    hello, lines = sbx.handshake()
    check(hello[2:] == (0, 0) and lines == [], "HELLO flags=0 (--no-cgroup) known=0, then READY")

    started, exited, out, _ = run(sbx, 1, "/bin/sh", ["sh", "-c", "echo hi; exit 3"])
    check(started[0] == STARTED and started[1] == 1 and started[2] > 0 and started[5] == b"\0" * 32,
          "STARTED n=1 with a pid and no cgroup")
    check(exited[0] == EXITED and exited[1] == 1 and exited[2:4] == (CLD_EXITED, 3), "EXITED CLD_EXITED 3")
    check(out == b"hi\n", "the command's stdout is the pipe sent with EXEC")
    check(exited[7] >= started[4] and exited[6] > 0, "exit time after start, maxrss in bytes")
    sbx.ack(1)

    _, exited, out, _ = run(sbx, 2, "/usr/bin/env", ["env"], env=["FOO=spec", "NEW=1"])
    lines = out.decode().splitlines()
    check(exited[2:4] == (CLD_EXITED, 0), "env ran")
    check("FOO=spec" in lines and "FOO=own" not in lines, "the spec's entry wins over the executor's")
    check("KEEP=kept" in lines and "NEW=1" in lines and "HOME=/home/x" in lines, "both environments merged")
    check(not any(x.startswith("SYSTEMD_EXEC_PID=") for x in lines), "SYSTEMD_EXEC_PID dropped")
    check(not any(x.startswith("JOURNAL_STREAM=") for x in lines), "JOURNAL_STREAM dropped")
    sbx.ack(2)

    _, exited, _, err = run(sbx, 3, "/nonexistent/x", ["x"])
    check(exited[2:4] == (CLD_EXITED, 203), "a missing exe exits 203")
    check(b"sandboxd-executor: cannot execute /nonexistent/x: No such file or directory" in err,
          "and says so on the command's stderr")
    sbx.ack(3)

    _, exited, _, _ = run(sbx, 4, "/bin/true", ["true"], cwd="/nonexistent")
    check(exited[2:4] == (CLD_EXITED, 200), "a missing cwd exits 200")
    sbx.ack(4)

    _, exited, _, _ = run(sbx, 5, "/bin/sh", ["sh", "-c", "kill -9 $$"])
    check(exited[2:4] == (CLD_KILLED, 9), "killed by SIGKILL: CLD_KILLED 9")
    sbx.ack(5)

    _, exited, out, _ = run(sbx, 6, "/bin/sh", ["sh", "-c", "trap '' INT; ls /proc/self/fd"])
    check(sorted(out.split()) == [b"0", b"1", b"2", b"3"], "the command gets 0/1/2 only (3 is ls's own dir)")
    sbx.ack(6)

    # an unsealed spec, the wrong number of fds, a malformed message: no answer at all
    null = os.open("/dev/null", os.O_RDWR)
    sbx.exec(7, spec_memfd("/bin/true", "/", ["true"], seal=False), [null, null, null])
    sbx.exec(8, spec_memfd("/bin/true", "/", ["true"]), [null, null])
    fd = spec_memfd("/bin/true", "/", ["true"])
    sbx.exec(9, fd, None, fds=[fd, null, null, null, null])
    sbx.conn.send(b"\0" * 40)
    sbx.conn.send(pack(ACK, 0))
    try:
        m = sbx.recv(timeout=0.5)
    except socket.timeout:
        m = None
    check(m is None, "unsealed spec, 3 fds, 5 fds, garbage, ACK n=0: all ignored, no answer (%r)" % (m,))
    os.close(null)

    # a reconnect while a command runs: it is told again
    stdin_r, stdin_w = os.pipe()
    out_r, out_w = os.pipe()
    sbx.exec(10, spec_memfd("/bin/sh", "/", ["sh", "-c", "read x; echo got $x; exit 5"]), [stdin_r, out_w, out_w])
    os.close(stdin_r)
    os.close(out_w)
    started = sbx.recv()
    check(started[0] == STARTED and started[1] == 10, "STARTED 10 (the executor still works after the garbage)")
    null = os.open("/dev/null", os.O_RDWR)
    sbx.exec(10, spec_memfd("/bin/true", "/", ["true"]), [null, null, null])
    os.close(null)
    m = sbx.recv()
    check(m[0] == EXITED and m[1] == 10 and m[2:4] == (0, errno.EEXIST), "an EXEC of a known n: EXITED 0/EEXIST")
    sbx.drop()
    hello, lines = sbx.handshake()
    check(hello[3] == 1 and [x[:3] for x in lines] == [(STARTED, 10, started[2])],
          "after a reconnect: HELLO known=1, STARTED 10 again with the same pid, READY")
    os.write(stdin_w, b"x\n")
    os.close(stdin_w)
    m = sbx.recv()
    check(m[0] == EXITED and m[1] == 10 and m[2:4] == (CLD_EXITED, 5), "then its EXITED")
    check(read_all(out_r) == b"got x\n", "its stdin is the pipe sent with EXEC")
    sbx.drop()
    hello, lines = sbx.handshake()
    check(hello[3] == 1 and [x[:2] for x in lines] == [(STARTED, 10), (EXITED, 10)] and lines[1] == m,
          "ended, not acknowledged: STARTED and the same EXITED again")
    sbx.ack(10)
    sbx.conn.send(pack(ACK, 10))  # twice: the second is of an unknown n
    time.sleep(0.2)
    sbx.drop()
    hello, lines = sbx.handshake()
    check(hello[3] == 0 and lines == [], "acknowledged: known=0 after the next reconnect")

    # dropping the listener: the executor dials again until it is back
    sbx.drop()
    sbx.listener.close()
    os.unlink(path)
    time.sleep(0.6)
    check(ex.poll() is None, "the executor waits while nobody listens")
    sbx.__init__(path)
    t0 = time.monotonic()
    hello, lines = sbx.handshake()
    check(time.monotonic() - t0 < 1.0, "and comes back within the backoff (<= 250 ms)")

    # SIGTERM: no new commands, the running one is reported, then exit 0
    stdin_r, stdin_w = os.pipe()
    null = os.open("/dev/null", os.O_RDWR)
    sbx.exec(11, spec_memfd("/bin/sh", "/", ["sh", "-c", "read x; exit 7"]), [stdin_r, null, null])
    check(sbx.recv()[:2] == (STARTED, 11), "STARTED 11")
    ex.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    check(ex.poll() is None, "SIGTERM with a command running: the executor stays")
    sbx.exec(12, spec_memfd("/bin/true", "/", ["true"]), [null, null, null])
    m = sbx.recv()
    check(m[:4] == (EXITED, 12, 0, errno.ESHUTDOWN), "an EXEC after SIGTERM: EXITED 0/ESHUTDOWN, never ran")
    os.write(stdin_w, b"\n")
    m = sbx.recv()
    check(m[:4] == (EXITED, 11, CLD_EXITED, 7), "the running command's EXITED")
    check(ex.wait(timeout=5) == 0, "then the executor exits 0")
    for fd in (stdin_r, stdin_w, null):
        os.close(fd)
    sbx.drop()

    non_dumpable(sbx, path)


def non_dumpable(sbx, path):
    """A process of the executor's uid cannot read its /proc/PID/environ (nor its fds),
    while it can read that of another process of that uid: the prctl is what differs."""
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    if os.getuid() != 0 or not shutil.which("setpriv"):
        nobody = []
    ex = start(path, {"PATH": "/usr/bin:/bin", "SECRET": "s"}, user_args=nobody)
    other = subprocess.Popen([*nobody, "sleep", "30"])
    try:
        sbx.handshake()
        probe = [*nobody, "sh", "-c", "cat /proc/$0/environ >/dev/null && echo readable || echo denied"]
        r_ex = subprocess.run(probe[:-1] + [probe[-1], str(ex.pid)], capture_output=True, text=True)
        r_other = subprocess.run(probe[:-1] + [probe[-1], str(other.pid)], capture_output=True, text=True)
        check(r_ex.stdout.strip() == "denied", "the executor's environ: denied to its own uid")
        check(r_other.stdout.strip() == "readable", "a dumpable process of that uid: readable (control)")
        if nobody:
            check(os.stat("/proc/%d/status" % ex.pid).st_uid == 0 and
                  os.stat("/proc/%d/status" % other.pid).st_uid == 65534,
                  "its /proc/PID files belong to root, those of the control to the uid")
    finally:
        other.kill()
        other.wait()
        ex.kill()
        ex.wait()


if __name__ == "__main__":
    sys.exit(main())
