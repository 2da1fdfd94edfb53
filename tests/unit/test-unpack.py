#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd-unpack on the host, in temporary directories (no systemd needed): hostile tars
made with Python's tarfile (.. entries, absolute names, symlink tricks, hard links out,
device nodes, set-uid files, oversize, too many entries, garbage), compressed ones, a good
tree with its symlinks and hard links, --from-dir, a signal midway. Every refusal: its exit
status, one line with its code on stderr, DEST gone, nothing new outside DEST.

usage: test-unpack.py SANDBOXD-UNPACK"""

import bz2
import gzip
import io
import json
import lzma
import os
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tarfile
import tempfile
import time

UNPACK = sys.argv[1]
failed = 0
ROOT = os.getuid() == 0


def check(cond, what):
    global failed
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failed += 1


def entry(name, kind=tarfile.REGTYPE, data=b"", mode=0o644, **kw):
    return (name, kind, data, mode, kw)


def make_tar(entries, fmt=tarfile.PAX_FORMAT):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for name, kind, data, mode, kw in entries:
            ti = tarfile.TarInfo(name)
            ti.type = kind
            ti.mode = mode
            ti.mtime = kw.get("mtime", 1700000000)
            ti.uid = kw.get("uid", 1234)
            ti.gid = kw.get("gid", 1234)
            ti.linkname = kw.get("linkname", "")
            if kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
                ti.devmajor, ti.devminor = 1, 3
            if kind == tarfile.REGTYPE:
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
            else:
                t.addfile(ti)
    return buf.getvalue()


def tree(top):
    """Everything under top (names, types, modes, sizes), symlinks not followed."""
    out = {}
    for d, dirs, files in os.walk(top):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            out[os.path.relpath(p, top)] = (stat.S_IFMT(st.st_mode), st.st_mode & 0o7777, st.st_size)
    return out


class Box:
    """A temporary directory with an 'outside' holding a sentinel; DEST is box/dest."""

    def __init__(self):
        self.top = tempfile.mkdtemp(prefix="test-unpack-")
        self.outside = os.path.join(self.top, "outside")
        os.mkdir(self.outside)
        with open(os.path.join(self.outside, "keep"), "w") as f:
            f.write("sentinel\n")
        self.dest = os.path.join(self.top, "box", "dest")
        os.mkdir(os.path.dirname(self.dest))
        self.before = tree(self.top)

    def run(self, data=b"", args=(), dest=None, timeout=60):
        p = subprocess.run([UNPACK, *args, dest or self.dest], input=data, capture_output=True, timeout=timeout)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def untouched(self):
        """Nothing but DEST (and what is in it) differs from before."""
        now = {k: v for k, v in tree(self.top).items() if not (k == "box/dest" or k.startswith("box/dest/"))}
        return now == self.before

    def close(self):
        # undo what a test made read-only, then remove
        for d, dirs, files in os.walk(self.top):
            for n in dirs:
                p = os.path.join(d, n)
                if not os.path.islink(p):
                    os.chmod(p, 0o755)
        shutil.rmtree(self.top)


def refused(what, data, code, status=65, args=()):
    b = Box()
    try:
        rc, out, err = b.run(data, args)
        lines = err.splitlines()
        check(rc == status, f"{what}: exit {status} (got {rc}: {err.strip()})")
        check(len(lines) == 1 and lines[0].startswith(f"sandboxd-unpack: {code}: "),
              f"{what}: one line '{code}' on stderr ({err.strip()!r})")
        check(out == "", f"{what}: nothing on stdout")
        check(not os.path.lexists(b.dest), f"{what}: DEST removed")
        check(b.untouched(), f"{what}: nothing outside DEST changed")
        return err
    finally:
        b.close()


def unpacked(what, data, args=(), check_tree=None):
    b = Box()
    try:
        rc, out, err = b.run(data, args)
        check(rc == 0 and err == "", f"{what}: exit 0 ({rc}: {err.strip()})")
        try:
            res = json.loads(out)
        except ValueError:
            res = None
        check(isinstance(res, dict) and set(res) == {"bytes", "entries"}, f"{what}: the JSON line ({out!r})")
        check(b.untouched(), f"{what}: nothing outside DEST changed")
        if rc == 0 and check_tree:
            check_tree(b, res)
        return res
    finally:
        b.close()


def test_good_tree():
    big = os.urandom(70000)
    entries = [
        entry("./", tarfile.DIRTYPE, mode=0o755),
        entry("./usr/", tarfile.DIRTYPE, mode=0o755),
        entry("./usr/bin/", tarfile.DIRTYPE, mode=0o755),
        entry("./usr/bin/tool", data=b"#!/bin/sh\necho hi\n", mode=0o755, mtime=1600000000),
        entry("./usr/bin/tool2", tarfile.LNKTYPE, linkname="./usr/bin/tool"),
        entry("./bin", tarfile.SYMTYPE, linkname="usr/bin", mode=0o777),
        entry("./etc/passwd-link", tarfile.SYMTYPE, linkname="/etc/passwd", mode=0o777),
        entry("./etc/secret", data=b"s", mode=0o600),
        entry("./data/big", data=big),
        entry("./data/caf\u00e9 \u2603", data=b"utf8"),
        entry("./ro/", tarfile.DIRTYPE, mode=0o555),
        entry("./tmp/", tarfile.DIRTYPE, mode=0o1777),
        entry("implicit/parent/file", data=b"x"),
        entry("./dup", data=b"first"),
        entry("./dup", data=b"second"),
        entry("./fifo", tarfile.FIFOTYPE),
    ]

    def verify(b, res):
        d = b.dest
        check(res["entries"] == len(entries), f"good tree: entries {res['entries']} == {len(entries)}")
        size = sum(len(e[2]) for e in entries)
        check(res["bytes"] == size, f"good tree: bytes {res['bytes']} == {size}")
        check(stat.S_IMODE(os.stat(d).st_mode) == 0o755, "good tree: DEST is 0755")
        tool = os.path.join(d, "usr/bin/tool")
        check(open(tool, "rb").read() == b"#!/bin/sh\necho hi\n", "good tree: a file's content")
        check(stat.S_IMODE(os.stat(tool).st_mode) == 0o755, "good tree: a file's mode")
        check(int(os.stat(tool).st_mtime) == 1600000000, "good tree: a file's mtime")
        check(os.stat(tool).st_uid == os.getuid() and os.stat(tool).st_gid == os.getgid(),
              "good tree: owned by the unpacker, not the archive's uid 1234")
        check(os.stat(tool).st_ino == os.stat(os.path.join(d, "usr/bin/tool2")).st_ino,
              "good tree: the hard link is one inode")
        check(os.readlink(os.path.join(d, "bin")) == "usr/bin", "good tree: a relative symlink kept")
        check(os.readlink(os.path.join(d, "etc/passwd-link")) == "/etc/passwd",
              "good tree: an absolute symlink kept as it is")
        check(stat.S_IMODE(os.stat(os.path.join(d, "etc/secret")).st_mode) == 0o600, "good tree: 0600 kept")
        check(open(os.path.join(d, "data/big"), "rb").read() == big, "good tree: 70000 bytes intact")
        check(os.path.exists(os.path.join(d, "data/caf\u00e9 \u2603")), "good tree: a UTF-8 (pax) name")
        check(stat.S_IMODE(os.stat(os.path.join(d, "ro")).st_mode) == 0o555, "good tree: a 0555 directory")
        check(stat.S_IMODE(os.stat(os.path.join(d, "tmp")).st_mode) == 0o1777, "good tree: the sticky bit kept")
        check(open(os.path.join(d, "implicit/parent/file"), "rb").read() == b"x", "good tree: implicit parents")
        check(stat.S_IMODE(os.stat(os.path.join(d, "implicit")).st_mode) == 0o755, "good tree: implicit parent 0755")
        check(open(os.path.join(d, "dup"), "rb").read() == b"second", "good tree: a later entry replaces a file")
        check(not os.path.lexists(os.path.join(d, "fifo")), "good tree: a FIFO is skipped")

    unpacked("good tree", make_tar(entries), check_tree=verify)
    unpacked("good tree (GNU format)", make_tar([e for e in entries if "\u2603" not in e[0]], tarfile.GNU_FORMAT))


def test_compressed():
    data = make_tar([entry("./a", data=b"hello" * 1000), entry("./b/", tarfile.DIRTYPE)])

    def verify(b, res):
        check(open(os.path.join(b.dest, "a"), "rb").read() == b"hello" * 1000, "compressed: content")

    for name, z in (("gzip", gzip.compress), ("bzip2", bz2.compress), ("xz", lzma.compress)):
        unpacked(name, z(data), check_tree=verify)
    for prog in ("zstd", "lz4"):
        if shutil.which(prog):
            z = subprocess.run([prog, "-q", "-c"], input=data, capture_output=True, check=True).stdout
            unpacked(prog, z, check_tree=verify)
        else:
            print(f"skip: {prog} (no {prog} program to compress with)")


def test_paths():
    refused("'../' entry", make_tar([entry("../escape", data=b"x")]), "unsafe_path")
    refused("'a/../../' entry", make_tar([entry("a/", tarfile.DIRTYPE), entry("a/../../escape", data=b"x")]),
            "unsafe_path")
    refused("'..' directory", make_tar([entry("..", tarfile.DIRTYPE)]), "unsafe_path")
    b = Box()
    target = os.path.join(b.outside, "abs")
    b.close()
    refused("absolute name", make_tar([entry(target, data=b"x")]), "unsafe_path")
    refused("absolute name '/'", make_tar([entry("/", tarfile.DIRTYPE)]), "unsafe_path")
    refused("too long a name", make_tar([entry("a/" * 2100 + "f", data=b"x")]), "invalid_archive")
    refused("too deep", make_tar([entry("d/" * 200 + "f", data=b"x")]), "invalid_archive")
    refused("the top as a symlink", make_tar([entry(".", tarfile.SYMTYPE, linkname="/")]), "unsafe_path")
    refused("a file replacing a directory",
            make_tar([entry("d/", tarfile.DIRTYPE), entry("d/f", data=b"1"), entry("d", data=b"x")]), "unsafe_path")


def test_symlinks():
    b = Box()
    outside = b.outside
    b.close()
    refused("a file through a symlink out (absolute)",
            make_tar([entry("link", tarfile.SYMTYPE, linkname=outside), entry("link/pwned", data=b"x")]),
            "unsafe_path")
    refused("a file through a symlink out (relative)",
            make_tar([entry("link", tarfile.SYMTYPE, linkname="../../outside"), entry("link/pwned", data=b"x")]),
            "unsafe_path")
    refused("a file through a symlink to /etc",
            make_tar([entry("etc", tarfile.SYMTYPE, linkname="/etc"), entry("etc/sandboxd-unpack-test", data=b"x")]),
            "unsafe_path")
    check(not os.path.exists("/etc/sandboxd-unpack-test"), "nothing written into /etc")
    refused("a directory through a symlink",
            make_tar([entry("link", tarfile.SYMTYPE, linkname="../../outside"), entry("link/d/", tarfile.DIRTYPE)]),
            "unsafe_path")
    refused("a symlink through a symlink",
            make_tar([entry("link", tarfile.SYMTYPE, linkname="../../outside"),
                      entry("link/s", tarfile.SYMTYPE, linkname="/")]), "unsafe_path")
    refused("a symlink loop", make_tar([entry("a", tarfile.SYMTYPE, linkname="b"),
                                        entry("b", tarfile.SYMTYPE, linkname="a"), entry("a/x", data=b"x")]),
            "unsafe_path")
    refused("a symlink to itself", make_tar([entry("a", tarfile.SYMTYPE, linkname="a"), entry("a/x", data=b"x")]),
            "unsafe_path")

    # a symlink out, then a file or directory of the same name: replaces the link, never writes through it
    def verify_file(b, res):
        check(os.path.isfile(os.path.join(b.dest, "f")) and not os.path.islink(os.path.join(b.dest, "f")),
              "a file replaces a symlink of its name")
        check(open(os.path.join(b.outside, "keep")).read() == "sentinel\n", "the symlink's target is untouched")

    unpacked("a file over a symlink out",
             make_tar([entry("f", tarfile.SYMTYPE, linkname="../../outside/keep"), entry("f", data=b"new")]),
             check_tree=verify_file)

    def verify_dir(b, res):
        check(os.path.isdir(os.path.join(b.dest, "d")) and not os.path.islink(os.path.join(b.dest, "d")),
              "a directory replaces a symlink of its name")
        check(os.path.isfile(os.path.join(b.dest, "d/x")), "a file in that directory lands inside DEST")

    unpacked("a directory over a symlink out",
             make_tar([entry("d", tarfile.SYMTYPE, linkname="../../outside"), entry("d/", tarfile.DIRTYPE),
                       entry("d/x", data=b"x")]), check_tree=verify_dir)


def test_hardlinks():
    b = Box()
    keep = os.path.join(b.outside, "keep")
    b.close()
    refused("a hard link to an absolute path", make_tar([entry("h", tarfile.LNKTYPE, linkname="/etc/passwd")]),
            "unsafe_path")
    refused("a hard link to the sentinel (absolute)", make_tar([entry("h", tarfile.LNKTYPE, linkname=keep)]),
            "unsafe_path")
    refused("a hard link out with '..'", make_tar([entry("h", tarfile.LNKTYPE, linkname="../../outside/keep")]),
            "unsafe_path")
    refused("a hard link to nothing extracted", make_tar([entry("h", tarfile.LNKTYPE, linkname="missing")]),
            "unsafe_path")
    refused("a hard link through a symlink",
            make_tar([entry("l", tarfile.SYMTYPE, linkname="../../outside"), entry("h", tarfile.LNKTYPE,
                                                                                    linkname="l/keep")]),
            "unsafe_path")
    refused("a hard link to a symlink",
            make_tar([entry("l", tarfile.SYMTYPE, linkname="../../outside/keep"),
                      entry("h", tarfile.LNKTYPE, linkname="l")]), "unsafe_path")
    refused("a hard link to a directory",
            make_tar([entry("d/", tarfile.DIRTYPE), entry("h", tarfile.LNKTYPE, linkname="d")]), "unsafe_path")
    refused("a hard link to itself", make_tar([entry("h", data=b"x"), entry("h", tarfile.LNKTYPE, linkname="h")]),
            "unsafe_path")


def test_nodes_and_modes():
    refused("a character device", make_tar([entry("dev/null", tarfile.CHRTYPE)]), "device_node")
    refused("a block device", make_tar([entry("./sda", tarfile.BLKTYPE)]), "device_node")
    refused("a device after good files",
            make_tar([entry("a/", tarfile.DIRTYPE), entry("a/f", data=b"x" * 100), entry("a/mem", tarfile.CHRTYPE)]),
            "device_node")

    def verify(b, res):
        m = lambda p: stat.S_IMODE(os.stat(os.path.join(b.dest, p)).st_mode)
        check(m("suid") == 0o755, f"set-uid dropped ({oct(m('suid'))})")
        check(m("sgid") == 0o755, f"set-gid dropped ({oct(m('sgid'))})")
        check(m("both") == 0o4777 & 0o777, f"both dropped ({oct(m('both'))})")
        check(m("sgiddir") == 0o775, f"set-gid of a directory dropped ({oct(m('sgiddir'))})")
        check(os.stat(os.path.join(b.dest, "suid")).st_uid == os.getuid(), "set-uid file owned by the unpacker")

    unpacked("set-uid and set-gid files",
             make_tar([entry("suid", data=b"x", mode=0o4755, uid=0), entry("sgid", data=b"x", mode=0o2755),
                       entry("both", data=b"x", mode=0o6777), entry("sgiddir/", tarfile.DIRTYPE, mode=0o2775)]),
             check_tree=verify)


def lying_size(size):
    """A tar whose one header claims size bytes, followed by far fewer."""
    ti = tarfile.TarInfo("huge")
    ti.size = size
    return ti.tobuf(tarfile.GNU_FORMAT) + b"\0" * 4096


def test_limits():
    refused("one file over --max-bytes", make_tar([entry("f", data=b"x" * 2000)]), "too_large",
            args=["--max-bytes=1000"])
    refused("files adding up over --max-bytes",
            make_tar([entry("a", data=b"x" * 600), entry("b", data=b"x" * 600)]), "too_large",
            args=["--max-bytes=1000"])
    refused("a header claiming 100 GiB", lying_size(100 << 30), "too_large")
    refused("a header claiming 2 MiB, --max-bytes=1M", lying_size(2 << 20), "too_large", args=["--max-bytes=1M"])
    unpacked("exactly --max-bytes", make_tar([entry("a", data=b"x" * 600), entry("b", data=b"x" * 400)]),
             args=["--max-bytes=1000"])
    refused("over --max-entries", make_tar([entry(f"f{i}", data=b"") for i in range(10)]), "too_many_entries",
            args=["--max-entries=5"])
    unpacked("--max-entries met", make_tar([entry(f"f{i}", data=b"") for i in range(5)]), args=["--max-entries=5"])
    if shutil.which("truncate") and shutil.which("tar"):
        # a real sparse file: its apparent size counts, not the little data it has
        b = Box()
        try:
            src = os.path.join(b.top, "src")
            os.mkdir(src)
            with open(os.path.join(src, "sparse"), "wb") as f:
                f.truncate(64 << 20)
                f.write(b"data")
            arch = subprocess.run(["tar", "-C", src, "--sparse", "-cf", "-", "sparse"], capture_output=True,
                                  check=True).stdout
        finally:
            b.close()
        check(len(arch) < (1 << 20), "the sparse tar is small")
        refused("a sparse file of 64 MiB, --max-bytes=1M", arch, "too_large", args=["--max-bytes=1M"])
        unpacked("a sparse file of 64 MiB", arch, check_tree=lambda b, res: check(
            res["bytes"] == 64 << 20 and os.path.getsize(os.path.join(b.dest, "sparse")) == 64 << 20,
            f"sparse: counted at its apparent size ({res['bytes']})"))


def test_invalid():
    refused("garbage", os.urandom(20000), "invalid_archive")
    refused("empty input", b"", "invalid_archive")
    refused("text", b"hello world\n" * 100, "invalid_archive")
    good = make_tar([entry("a", data=os.urandom(5000)), entry("b", data=b"y" * 5000)])
    refused("a truncated tar", good[:3000], "invalid_archive")
    refused("truncated gzip", gzip.compress(good)[:-200], "invalid_archive")
    # a zip is not a tar
    zbuf = io.BytesIO()
    import zipfile
    with zipfile.ZipFile(zbuf, "w") as z:
        z.writestr("a", "x")
    refused("a zip file", zbuf.getvalue(), "invalid_archive")


def test_dest():
    b = Box()
    try:
        os.mkdir(b.dest)
        with open(os.path.join(b.dest, "mine"), "w") as f:
            f.write("x")
        rc, out, err = b.run(make_tar([entry("a", data=b"x")]))
        check(rc == 74 and err.startswith("sandboxd-unpack: exists: "), f"DEST exists: 74 exists ({rc} {err.strip()})")
        check(os.path.exists(os.path.join(b.dest, "mine")), "DEST exists: left as it was")
        rc, out, err = b.run(b"garbage" * 100)
        check(rc == 74 and err.startswith("sandboxd-unpack: exists: "), f"DEST exists, garbage input: exists ({err.strip()})")
        rc, out, err = b.run(args=[f"--from-dir={b.outside}"])
        check(rc == 74 and err.startswith("sandboxd-unpack: exists: "), f"DEST exists, --from-dir: exists ({err.strip()})")
        check(sorted(os.listdir(b.dest)) == ["mine"], "DEST exists: still only what it had")
        rc, out, err = b.run(make_tar([entry("a", data=b"x")]), dest=os.path.join(b.top, "nope", "dest"))
        check(rc == 74 and err.startswith("sandboxd-unpack: io_error: "), f"no parent: 74 io_error ({rc} {err.strip()})")
        rc, out, err = b.run(b"", args=["--max-bytes=lots"])
        check(rc == 64, f"a bad option: 64 ({rc})")
        p = subprocess.run([UNPACK], capture_output=True)
        check(p.returncode == 64, f"no DEST: 64 ({p.returncode})")
    finally:
        b.close()


def test_from_dir():
    b = Box()
    try:
        src = os.path.join(b.top, "src")
        os.makedirs(os.path.join(src, "usr/bin"))
        with open(os.path.join(src, "usr/bin/tool"), "wb") as f:
            f.write(b"tool")
        os.chmod(os.path.join(src, "usr/bin/tool"), 0o4755)
        os.link(os.path.join(src, "usr/bin/tool"), os.path.join(src, "usr/bin/tool-again"))
        os.symlink("usr/bin", os.path.join(src, "bin"))
        os.symlink(b.outside, os.path.join(src, "out"))
        os.mkfifo(os.path.join(src, "fifo"))
        s = socket.socket(socket.AF_UNIX)
        s.bind(os.path.join(src, "sock"))
        s.close()
        b.before = tree(b.top)
        rc, out, err = b.run(args=[f"--from-dir={src}/"])
        check(rc == 0, f"--from-dir: exit 0 ({rc} {err.strip()})")
        d = b.dest
        if rc == 0:
            res = json.loads(out)
            check(res["bytes"] == 4, f"--from-dir: bytes 4, the hard link once ({res})")
            check(open(os.path.join(d, "usr/bin/tool"), "rb").read() == b"tool", "--from-dir: content")
            check(stat.S_IMODE(os.stat(os.path.join(d, "usr/bin/tool")).st_mode) == 0o755, "--from-dir: set-uid dropped")
            check(os.stat(os.path.join(d, "usr/bin/tool")).st_ino == os.stat(os.path.join(d, "usr/bin/tool-again")).st_ino,
                  "--from-dir: the hard link kept")
            check(os.readlink(os.path.join(d, "bin")) == "usr/bin", "--from-dir: a symlink kept")
            check(os.readlink(os.path.join(d, "out")) == b.outside and not os.path.exists(os.path.join(d, "out/keep"))
                  or os.path.islink(os.path.join(d, "out")), "--from-dir: a symlink out not followed")
            check(not os.path.lexists(os.path.join(d, "fifo")) and not os.path.lexists(os.path.join(d, "sock")),
                  "--from-dir: FIFOs and sockets skipped")
        check(b.untouched(), "--from-dir: nothing outside DEST changed")
        shutil.rmtree(d, ignore_errors=True)
        rc, out, err = b.run(args=[f"--from-dir={src}", "--max-bytes=3"])
        check(rc == 65 and "too_large" in err and not os.path.lexists(d), f"--from-dir: too_large ({err.strip()})")
        rc, out, err = b.run(args=[f"--from-dir={os.path.join(b.top, 'missing')}"])
        check(rc == 74 and "io_error" in err and not os.path.lexists(d), f"--from-dir: no source ({err.strip()})")
        inner = os.path.join(src, "usr", "image")
        rc, out, err = b.run(args=[f"--from-dir={src}"], dest=inner)
        check(rc == 74 and "io_error" in err and not os.path.lexists(inner),
              f"--from-dir: DEST inside the source refused ({err.strip()})")
        if ROOT:
            os.mknod(os.path.join(src, "null"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            rc, out, err = b.run(args=[f"--from-dir={src}"])
            check(rc == 65 and err.startswith("sandboxd-unpack: device_node: ") and not os.path.lexists(d),
                  f"--from-dir: a device node refused ({err.strip()})")
        else:
            print("skip: --from-dir with a device node (not root)")
    finally:
        b.close()


def test_signal():
    b = Box()
    try:
        data = make_tar([entry("a", data=b"x" * 100000), entry("b", data=b"y" * 100000)])
        p = subprocess.Popen([UNPACK, b.dest], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdin.write(data[:150000])
        p.stdin.flush()
        deadline = time.monotonic() + 10
        while not os.path.exists(os.path.join(b.dest, "a")) and time.monotonic() < deadline:
            time.sleep(0.02)
        check(os.path.exists(os.path.join(b.dest, "a")), "SIGTERM: unpacking had begun")
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
        p.stdin.close()
        check(p.returncode == 74 and err.decode().startswith("sandboxd-unpack: io_error: "),
              f"SIGTERM: 74 io_error ({p.returncode} {err.decode().strip()})")
        check(not os.path.lexists(b.dest), "SIGTERM: DEST removed")
    finally:
        b.close()


def test_nonblocking():
    # a non-blocking pipe as stdin, written in pieces: waited for, not spun on
    b = Box()
    try:
        data = make_tar([entry("a", data=b"x" * 300000)])
        r, w = os.pipe()
        os.set_blocking(r, False)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.Popen([UNPACK, b.dest], stdin=r, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.close(r)
        for i in range(0, len(data), 50000):
            os.write(w, data[i:i + 50000])
            time.sleep(0.1)
        os.close(w)
        out, err = p.communicate(timeout=30)
        check(p.returncode == 0 and json.loads(out)["bytes"] == 300000,
              f"non-blocking stdin: unpacked ({p.returncode} {err.decode().strip()})")
        check(os.path.getsize(os.path.join(b.dest, "a")) == 300000, "non-blocking stdin: the whole file")
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime
        check(cpu < 0.3, f"non-blocking stdin: no busy wait over 0.6 s ({cpu:.2f} s of CPU)")
    finally:
        b.close()


def test_unprivileged():
    """As a user without privileges (nobody), as in a unit without capabilities: directories
    the archive makes 0000 or 0555, and a refusal after them still removes DEST."""
    if not ROOT:
        print("skip: unprivileged (not root: the whole test already is)")
        return
    data = make_tar([entry("ro/", tarfile.DIRTYPE, mode=0o555), entry("ro/f", data=b"x", mode=0o444),
                     entry("none/", tarfile.DIRTYPE, mode=0), entry("none/sub/", tarfile.DIRTYPE),
                     entry("none/sub/g", data=b"y", mode=0o600)])
    b = Box()
    try:
        os.chmod(b.top, 0o755)
        os.chown(os.path.dirname(b.dest), 65534, 65534)
        b.before = tree(b.top)

        def nobody():
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)

        def run(args):
            p = subprocess.run([UNPACK, *args, b.dest], input=data, capture_output=True, preexec_fn=nobody)
            return p.returncode, p.stderr.decode()

        rc, err = run([])
        check(rc == 0, f"unprivileged: unpacked ({rc} {err.strip()})")
        if rc == 0:
            check(stat.S_IMODE(os.stat(os.path.join(b.dest, "none")).st_mode) == 0 and
                  stat.S_IMODE(os.stat(os.path.join(b.dest, "ro")).st_mode) == 0o555,
                  "unprivileged: the directories' modes are the archive's")
            check(os.stat(os.path.join(b.dest, "ro/f")).st_uid == 65534, "unprivileged: owned by the unpacker")
        for d, dirs, files in os.walk(b.dest):
            os.chmod(d, 0o755)
        shutil.rmtree(b.dest, ignore_errors=True)
        rc, err = run(["--max-bytes=1"])
        check(rc == 65 and err.startswith("sandboxd-unpack: too_large: "), f"unprivileged: too_large ({err.strip()})")
        check(not os.path.lexists(b.dest), "unprivileged: DEST removed, its 0000 directory too")
        check(b.untouched(), "unprivileged: nothing outside DEST changed")
    finally:
        b.close()


for t in (test_good_tree, test_compressed, test_paths, test_symlinks, test_hardlinks, test_nodes_and_modes,
          test_limits, test_invalid, test_dest, test_from_dir, test_signal, test_nonblocking, test_unprivileged):
    print(f"# {t.__name__}")
    t()

print(f"{failed} failed" if failed else "all passed")
sys.exit(1 if failed else 0)
