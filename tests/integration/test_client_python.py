# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Python client (clients/python, package sandboxd), live against sandboxd: every
method, over the unix socket and TCP, imported from the source tree.

The HTTP surface is the same in both exec modes: these run in one lane (one_exec_mode)."""

import asyncio
import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import tracemalloc

import pytest

from conftest import TCP_HOST, TCP_PORT, UNIX_SOCKET, unique_user, workspace_for

sys.path.insert(0, os.path.join(os.environ.get("SANDBOXD_SRCDIR") or
                                os.path.join(os.path.dirname(__file__), "..", ".."), "clients", "python"))
import sandboxd  # noqa: E402
import sandboxd.aio  # noqa: E402

pytestmark = [pytest.mark.one_exec_mode]

MIB = 1 << 20


@pytest.fixture
def client(api):
    return sandboxd.Client("unix:" + UNIX_SOCKET, timeout=30)


@pytest.fixture
def tcp_client(tcp, api_key):
    return sandboxd.Client("http://%s:%d" % (TCP_HOST, TCP_PORT), key=api_key, timeout=30)


@pytest.fixture
def sess(client, request):
    s = client.create_session(unique_user(), workspace_for(request.node.name))
    assert isinstance(s, sandboxd.Session) and s.state == "active" and s.created is True, s
    yield s
    try:
        s.close()
    except sandboxd.ApiError:
        pass


def test_endpoints_and_health(client, tcp_client, monkeypatch):
    h = client.health()
    assert isinstance(h, sandboxd.Health) and h.status == "ok" and h.version, h
    assert isinstance(h.running_commands, int) and isinstance(h.pool, dict)
    assert tcp_client.health().version == h.version
    # from the environment, as sandboxctl and libsandboxd take them
    monkeypatch.setenv("SANDBOXD_URL", "http://%s:%d" % (TCP_HOST, TCP_PORT))
    monkeypatch.setenv("SANDBOXD_KEY", tcp_client.key)
    env_client = sandboxd.Client()
    assert env_client.endpoint.host == TCP_HOST and env_client.key == tcp_client.key
    assert env_client.list_sessions() is not None
    monkeypatch.setenv("SANDBOXD_URL", UNIX_SOCKET)
    assert sandboxd.Client().endpoint.socket_path == UNIX_SOCKET
    for bad in ("ftp://x", "unix:relative", "http://h:1/path"):
        with pytest.raises(ValueError):
            sandboxd.Client(bad)


def test_sessions(client, request):
    user, ws = unique_user(), workspace_for(request.node.name)
    s = client.create_session(user, ws, limits={"memory_max": "256M", "tasks_max": 64}, ttl_s=600,
                              network={"mode": "none"})
    assert s.created is True and s.user == user and s.workspace == ws and s.state == "active", s
    assert s.limits["tasks_max"] == 64 and s.ttl_s == 600, s
    again = client.create_session(user, ws)
    assert again.created is False and again.id == s.id
    got = client.get_session(s.id)
    assert s.refresh() == got and client.session(s.id).refresh() == got
    assert got.id == s.id and got.user == user and got.exec_mode in ("unit", "session")
    assert [x.id for x in client.list_sessions(user=user)] == [s.id]
    assert s.id in [x.id for x in client.list_sessions()]
    before = got.expires_at_usec
    touched = s.touch()
    assert touched.id == s.id and touched.expires_at_usec >= before
    closed = s.close(purge=True)
    assert closed.state == "closed", closed
    assert client.get_session(s.id).state == "closed"
    with pytest.raises(sandboxd.Conflict) as e:
        s.run(["true"])
    assert e.value.status == 409 and e.value.code == "session_not_active"


def test_exec_streams_events_with_stdin(sess):
    events = sess.exec(shell="echo first; read x; echo got $x; printf '\\377' >&2; exit 3", stdin="stream")
    with events:
        first = next(events)
        assert first.type == "accepted" and first.request_id and events.request_id == first.request_id
        ev = next(events)
        # the first line came while the command still waits for its stdin: streamed
        assert ev.type == "stdout" and ev.data == b"first\n", ev
        assert sess.command(events.request_id).status == "running"
        assert sess.write_stdin(events.request_id, "hello\n", eof=True) == 6
        rest = list(events)
    out = b"".join(e.data for e in rest if e.type == "stdout")
    err = b"".join(e.data for e in rest if e.type == "stderr")
    assert out == b"got hello\n" and err == b"\xff", rest  # stderr came as data_b64
    ex = rest[-1]
    assert ex.type == "exit" and ex.status == "failed" and ex.exit_code == 3 and events.exit is ex, ex
    assert isinstance(ex.usage, sandboxd.Usage) and ex.duration_ms is not None
    # stdin closed: writing again is refused
    with pytest.raises(sandboxd.Conflict) as e:
        sess.write_stdin(events.request_id, b"more")
    assert e.value.code in ("stdin_closed", "not_running"), e.value


def test_run_start_and_commands(sess):
    assert sess.mkdir("sub").type == "dir"
    r = sess.run(shell="echo out; echo err >&2; cat; pwd; echo $GREETING", stdin=b"in\x00put\n",
                 env={"GREETING": "hi"}, cwd="sub", request_id="run-1")
    assert isinstance(r, sandboxd.Result) and r.request_id == "run-1"
    assert r.status == "succeeded" and r.ok and r.exit_code == 0, r
    lines = r.stdout.split(b"\n")
    assert lines[0] == b"out" and lines[1] == b"in\x00put" and lines[2].endswith(b"/sub") and lines[3] == b"hi", r
    assert r.stderr == b"err\n"
    # the same request id again: the first command's events, not a second command
    assert sess.run(["false"], request_id="run-1").stdout == r.stdout
    cat = sess.start(["cat"], stdin="stream")
    assert sess.write_stdin(cat.request_id, b"abc") == 3 and sess.close_stdin(cat.request_id) == 0
    assert sess.wait(cat.request_id).stdout == b"abc"
    t = sess.run(["sleep", "10"], timeout_ms=300)
    assert t.status == "timed_out" and not t.ok, t

    started = sess.start(["sh", "-c", "echo started"], request_id="bg-1")
    assert isinstance(started, sandboxd.Command) and started.request_id == "bg-1"
    waited = sess.wait("bg-1")
    assert waited.status == "succeeded" and waited.stdout == b"started\n", waited
    snap = sess.command("bg-1")
    assert snap.terminal and snap.status == "succeeded" and snap.stdout == b"started\n" and snap.exit_code == 0
    assert snap.argv == ["sh", "-c", "echo started"]
    listed = {c.request_id: c for c in sess.commands_list()}
    assert {"run-1", "bg-1"} <= set(listed) and listed["bg-1"].status == "succeeded"
    with pytest.raises(sandboxd.InvalidRequest) as e:
        sess.run(["no-such-program-here"])
    assert e.value.status == 400 and e.value.code == "executable_not_found"


def test_reattach_by_offset(sess):
    events = sess.exec(shell="echo one; echo two; read x; echo three; echo four", stdin="stream")
    got = []
    for ev in events:
        got.append(ev)
        if ev.type == "stdout" and b"two" in b"".join(e.data for e in got if e.type == "stdout"):
            break
    rid, offset = events.request_id, events.offset
    events.close()  # dropped mid-stream
    assert offset > 0
    sess.write_stdin(rid, b"\n", eof=True)
    with sess.events(rid, offset=offset) as rest:
        tail = list(rest)
    assert b"".join(e.data for e in tail if e.type == "stdout") == b"three\nfour\n", tail
    assert [e.type for e in tail].count("exit") == 1 and tail[-1].type == "exit"
    assert not [e for e in tail if e.type == "accepted"]
    # the whole log from 0 equals what both streams saw together
    whole = sess.wait(rid)
    assert whole.stdout == b"one\ntwo\nthree\nfour\n" and whole.status == "succeeded"
    assert rest.offset == sess.command(rid).events_bytes
    with pytest.raises(sandboxd.InvalidOffset) as e:
        list(sess.events(rid, offset=rest.offset + 1000))
    assert e.value.status == 416


def test_signal(sess):
    with sess.exec(shell="echo ready; exec sleep 30") as events:
        for ev in events:
            if ev.type == "stdout":
                break
        sess.signal(events.request_id, "SIGTERM")
        r = events.result()
    assert r.status == "signaled" and r.signal == "SIGTERM", r
    with pytest.raises(sandboxd.Conflict) as e:
        sess.signal(r.request_id, "SIGKILL")
    assert e.value.code == "not_running"


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MIB), b""):
            h.update(chunk)
    return h.hexdigest()


def test_files_streamed_10mib(sess, tmp_path):
    src = tmp_path / "big.bin"
    with open(src, "wb") as f:
        for _ in range(10):
            f.write(os.urandom(MIB))
    tracemalloc.start()
    try:
        with open(src, "rb") as f:
            entry = sess.upload("big.bin", f)
        _, peak_up = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        with open(tmp_path / "back.bin", "wb") as f:
            n = sess.download("big.bin", f)
        _, peak_down = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(entry, sandboxd.Entry) and entry.size == 10 * MIB and entry.type == "file", entry
    assert n == 10 * MIB and sha256_of(tmp_path / "back.bin") == sha256_of(src)
    # streamed: neither held the 10 MiB in memory
    assert peak_up < 4 * MIB and peak_down < 4 * MIB, (peak_up, peak_down)

    # an upload of unknown length (a generator) goes chunked
    def gen():
        with open(src, "rb") as f:
            yield from iter(lambda: f.read(300000), b"")
    assert sess.upload("gen.bin", gen()).size == 10 * MIB
    out = io.BytesIO()
    sess.download("gen.bin", out)
    assert hashlib.sha256(out.getvalue()).hexdigest() == sha256_of(src)

    # a download resumed from an offset (Range) gets the rest; past the end is InvalidOffset
    with open(tmp_path / "back.bin", "r+b") as f:
        f.truncate(3 * MIB + 5)
        f.seek(0, 2)
        assert sess.download("big.bin", f, offset=3 * MIB + 5) == 7 * MIB - 5
    assert sha256_of(tmp_path / "back.bin") == sha256_of(src)
    with pytest.raises(sandboxd.InvalidOffset) as e:
        sess.download("big.bin", io.BytesIO(), offset=10 * MIB + 1)
    assert e.value.status == 416 and e.value.code == "invalid_offset"


def test_upload_over_the_limit(sess, tmp_path):
    """A file over MaxFileSize= (1G by default; sparse here): sandboxd refuses it by its
    Content-Length before the body, and the client reports that answer, not the broken pipe."""
    huge = tmp_path / "huge"
    with open(huge, "wb") as f:
        f.truncate((1 << 30) + 1)
    with open(huge, "rb") as f, pytest.raises(sandboxd.ApiError) as e:
        sess.upload("huge", f)
    assert e.value.status == 413 and e.value.code == "payload_too_large", e.value
    with pytest.raises(sandboxd.NotFound):
        sess.stat("huge")


def test_file_operations(sess):
    assert sess.write_file("hello.txt", b"hello\n").size == 6
    assert sess.read_file("hello.txt") == b"hello\n"
    assert sess.upload("hello.txt", b"again\n", mode=0o644).mode == "0644"
    d = sess.mkdir("a b/ü/c")
    assert d.type == "dir", d
    assert sess.mkdir("a b/ü/c").type == "dir"  # there already
    sess.write_file("a b/ü/c/f.txt", b"x")
    listing = sess.list_dir("a b/ü/c")
    assert isinstance(listing, sandboxd.Listing) and [e.name for e in listing.entries] == ["f.txt"]
    assert not listing.truncated
    assert "hello.txt" in [e.name for e in sess.list_dir().entries]
    st = sess.stat("a b/ü/c/f.txt")
    assert st.type == "file" and st.size == 1 and st.mode == "0600" and st.mtime_usec > 0, st
    assert sess.move("a b/ü/c/f.txt", "moved.txt").type == "file"
    assert sess.read_file("moved.txt") == b"x"
    with pytest.raises(sandboxd.Conflict) as e:
        sess.move("moved.txt", "hello.txt")
    assert e.value.code == "exists" and e.value.status == 409
    sess.move("moved.txt", "hello.txt", overwrite=True)
    assert sess.read_file("hello.txt") == b"x"
    sess.write_file("a b/ü/c/g", b"")
    with pytest.raises(sandboxd.Conflict) as e:
        sess.remove("a b")
    assert e.value.code == "not_empty"
    sess.remove("a b", recursive=True)
    with pytest.raises(sandboxd.NotFound) as e:
        sess.stat("a b")
    assert e.value.code == "not_found" and e.value.status == 404
    with pytest.raises(sandboxd.InvalidRequest) as e:
        sess.read_file("../../../etc/passwd")
    assert e.value.code == "invalid_path"
    with pytest.raises(IsADirectoryError):
        sess.read_file("")
    with pytest.raises(NotADirectoryError):
        sess.list_dir("hello.txt")
    # what a command wrote, read through the file API, and the other way round
    sess.run(shell="echo from-cmd > cmd.txt; cat hello.txt > copy.txt")
    assert sess.read_file("cmd.txt") == b"from-cmd\n" and sess.read_file("copy.txt") == b"x"


def test_freeze_thaw(sess):
    try:
        frozen = sess.freeze()
    except sandboxd.Unsupported as e:
        assert e.status == 501 and e.code == "unsupported"
        pytest.skip("freezing needs cgroup v2 (501 unsupported here)")
    assert frozen.frozen is True
    thawed = sess.thaw()
    assert thawed.frozen is False
    assert sess.run(["true"]).ok


def test_errors(client, tcp_client, tcp2, api_key, sess):
    with pytest.raises(sandboxd.NotFound) as e:
        client.get_session("0123456789abcdef")
    assert e.value.status == 404 and e.value.code == "not_found" and e.value.message
    assert isinstance(e.value, sandboxd.ApiError) and isinstance(e.value, sandboxd.SandboxdError)
    with pytest.raises(sandboxd.NotFound) as e:
        sess.command("no-such-command")
    assert e.value.code == "not_found"
    wrong = sandboxd.Client("http://%s:%d" % (TCP_HOST, TCP_PORT), key=api_key + "x")
    with pytest.raises(sandboxd.Unauthorized) as e:
        wrong.list_sessions()
    assert e.value.status == 401 and e.value.code == "unauthorized"
    with pytest.raises(sandboxd.InvalidRequest) as e:
        client.create_session("Not A User", "ws")
    assert e.value.status == 400 and e.value.code.startswith("invalid_")
    # another tenant's session is not there for tenant1
    other = sandboxd.Client("http://%s:%d" % (TCP_HOST, TCP_PORT), key=tcp2.key)
    theirs = other.create_session(unique_user(), "theirs")
    with pytest.raises(sandboxd.NotFound):
        tcp_client.get_session(theirs.id)
    theirs.close()
    # nothing listening: a transport error, no code
    with pytest.raises(sandboxd.TransportError):
        sandboxd.Client("unix:/run/sandboxd/no-such.sock").health()
    with pytest.raises(sandboxd.TransportError):
        sandboxd.Client("http://127.0.0.1:1").health()


def test_tcp_transport(tcp_client, request):
    s = tcp_client.create_session(unique_user(), workspace_for(request.node.name))
    try:
        assert s.id in [x.id for x in tcp_client.list_sessions()]
        events = list(s.exec(["sh", "-c", "echo over tcp"]))
        assert [e.type for e in events][0] == "accepted" and events[-1].exit_code == 0
        assert b"".join(e.data for e in events if e.type == "stdout") == b"over tcp\n"
        s.upload("t.bin", io.BytesIO(b"\x00\x01" * 1000))
        assert s.read_file("t.bin") == b"\x00\x01" * 1000
        assert s.stat("t.bin").size == 2000
    finally:
        assert s.close(purge=True).state == "closed"


def test_asyncio_client(api, api_key, request):
    async def main(c):
        h = await c.health()
        assert isinstance(h, sandboxd.Health) and h.status == "ok"
        s = await c.create_session(unique_user(), workspace_for(request.node.name))
        assert s.created and isinstance(s, sandboxd.Session)
        try:
            stream = await s.exec(shell="echo a; read x; echo b $x; exit 4", stdin="stream")
            seen = []
            async for ev in stream:
                seen.append(ev)
                if ev.type == "stdout" and ev.data == b"a\n":
                    assert await s.write_stdin(stream.request_id, b"z\n", eof=True) == 2
            assert b"".join(e.data for e in seen if e.type == "stdout") == b"a\nb z\n"
            assert seen[-1].type == "exit" and seen[-1].exit_code == 4
            r = await s.run(["sh", "-c", "echo run"])
            assert r.ok and r.stdout == b"run\n"
            tail = await s.events(stream.request_id, offset=0)
            assert (await tail.result()).stdout == b"a\nb z\n"
            assert (await s.command(stream.request_id)).exit_code == 4
            big = os.urandom(3 * MIB)
            assert (await s.upload("f.bin", big)).size == len(big)
            assert await s.read_file("f.bin") == big
            assert [e.name for e in (await s.list_dir()).entries] == ["f.bin"]
            assert (await s.mkdir("d/e")).type == "dir"
            assert (await s.move("f.bin", "d/e/g.bin")).type == "file"
            assert (await s.stat("d/e/g.bin")).size == len(big)
            out = io.BytesIO()
            assert await s.download("d/e/g.bin", out) == len(big) and out.getvalue() == big
            await s.remove("d", recursive=True)
            assert (await s.list_dir()).entries == []
            bg = await s.start(["sh", "-c", "echo ready; exec sleep 30"], request_id="bg")
            assert bg.request_id == "bg"
            with_ready = await s.events("bg")
            async for ev in with_ready:
                if ev.type == "stdout":
                    break
            with_ready.close()
            await s.signal("bg", "SIGKILL")
            killed = await s.wait("bg")
            assert killed.status == "signaled" and killed.signal == "SIGKILL" and killed.stdout == b"ready\n"
            assert "bg" in [x.request_id for x in await s.commands_list()]
            assert (await s.touch()).id == s.id and (await s.refresh()).id == s.id
            assert s.id in [x.id for x in await c.list_sessions()]
            try:
                await c.get_session("0123456789abcdef")
                raise AssertionError("no error")
            except sandboxd.NotFound as e:
                assert e.status == 404 and e.code == "not_found"
        finally:
            assert (await s.close(purge=True)).state == "closed"

    asyncio.run(main(sandboxd.aio.AsyncClient("unix:" + UNIX_SOCKET, timeout=30)))
    asyncio.run(main(sandboxd.aio.AsyncClient("http://%s:%d" % (TCP_HOST, TCP_PORT), key=api_key, timeout=30)))


def _runnable_image_tar():
    """A tar of the least image a command runs in: /bin/sh (the host's dash) with the libraries
    it loads at the paths ldd names, and an os-release."""
    files = {"bin/sh": "/bin/dash"}
    ldd = subprocess.run(["ldd", "/bin/dash"], capture_output=True, text=True, check=True).stdout
    for path in re.findall(r"(/\S+) \(0x[0-9a-f]+\)", ldd):
        files[path.lstrip("/")] = path
    assert any("libc.so" in p for p in files) and any("ld-linux" in p for p in files), ldd
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        dirs = sorted({os.path.dirname(p) for p in files} | {"etc"})
        for d in dirs:
            for i in range(1, d.count("/") + 2):
                info = tarfile.TarInfo("/".join(d.split("/")[:i]))
                if info.name not in t.getnames():
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    t.addfile(info)
        for path, src in files.items():
            with open(src, "rb") as f:
                data = f.read()
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o755
            t.addfile(info, io.BytesIO(data))
        osr = b'ID=pyclient\nVERSION_ID="7"\nPRETTY_NAME="Python client image 7"\n'
        info = tarfile.TarInfo("etc/os-release")
        info.size, info.mode = len(osr), 0o644
        t.addfile(info, io.BytesIO(osr))
    return buf.getvalue()


@pytest.mark.time_limit(120)
def test_images(client, tcp_client, request, tmp_path):
    name = "pyc-" + os.urandom(3).hex()
    data = _runnable_image_tar()
    # not by a tenant that is no administrator: nothing is imported
    with pytest.raises(sandboxd.Forbidden) as e:
        tcp_client.import_image(name, data)
    assert e.value.status == 403 and e.value.code == "forbidden", e.value
    with pytest.raises(sandboxd.NotFound) as e:
        client.get_image(name)
    assert e.value.status == 404 and e.value.code == "image_not_found", e.value

    # as root on the unix socket, from a file (its length known)
    (tmp_path / "img.tar").write_bytes(data)
    with open(tmp_path / "img.tar", "rb") as f:
        img = client.import_image(name, f)
    assert isinstance(img, sandboxd.Image) and img.name == name, img
    assert img.os == sandboxd.ImageOs("pyclient", "7", "Python client image 7"), img
    assert img.size_bytes >= len(data) // 2 and img.created_usec > 0 and img.sessions == 0, img
    assert img.user_names is False, img
    with pytest.raises(sandboxd.Conflict) as e:
        client.import_image(name, data)
    assert e.value.code == "exists", e.value
    assert tcp_client.get_image(name) == img  # every caller may look
    listed = {i.name: i for i in client.list_images()}
    assert listed[name].os.id == "pyclient" and listed[name].raw == img.raw, listed

    # a session on it: its commands see the image's root, not the host's
    s = client.create_session(unique_user(), workspace_for(request.node.name), image=name)
    try:
        assert s.image == name and client.get_session(s.id).image == name, s
        r = s.run(["/bin/sh", "-c", 'echo $0; . /etc/os-release; echo "$ID $PRETTY_NAME"; '
                                    '[ -e /usr/bin/cat ] && echo host-root; exit 0'])
        assert r.ok and r.stdout == b"/bin/sh\npyclient Python client image 7\n", r
        assert client.get_image(name).sessions == 1
        with pytest.raises(sandboxd.Conflict) as e:
            client.remove_image(name)
        assert e.value.status == 409 and e.value.code == "image_in_use", e.value
        with pytest.raises(sandboxd.Forbidden):
            tcp_client.remove_image(name)
    finally:
        s.close()
    # a session of the host's root says so
    plain = client.create_session(unique_user(), workspace_for(request.node.name))
    assert plain.image is None, plain
    plain.close()

    gone = client.remove_image(name)
    assert gone.name == name and gone.os.id == "pyclient", gone
    assert name not in [i.name for i in client.list_images()]
    with pytest.raises(sandboxd.NotFound) as e:
        client.remove_image(name)
    assert e.value.code == "image_not_found"

    # the asyncio client: the same, its tar chunked from an async iterable
    async def main(c):
        async def chunks():
            for i in range(0, len(data), 64 << 10):
                yield data[i:i + (64 << 10)]
        aname = name + "-aio"
        try:
            await c.import_image(aname, data)
            raise AssertionError("a tenant that is no administrator imported an image")
        except sandboxd.Forbidden as e:
            assert e.code == "forbidden"
        admin = sandboxd.aio.AsyncClient("unix:" + UNIX_SOCKET, timeout=30)
        got = await admin.import_image(aname, chunks())
        assert got.name == aname and got.os.pretty_name == "Python client image 7", got
        assert (await c.get_image(aname)).os.version_id == "7"
        assert aname in [i.name for i in await c.list_images()]
        s = await admin.create_session(unique_user(), workspace_for(request.node.name), image=aname)
        try:
            assert s.image == aname
            r = await s.run(["/bin/sh", "-c", ". /etc/os-release; echo $ID"])
            assert r.ok and r.stdout == b"pyclient\n", r
            try:
                await admin.remove_image(aname)
                raise AssertionError("an image in use was removed")
            except sandboxd.Conflict as e:
                assert e.code == "image_in_use"
        finally:
            await s.close()
        assert (await admin.remove_image(aname)).name == aname
        try:
            await c.get_image(aname)
            raise AssertionError("a removed image is still there")
        except sandboxd.NotFound as e:
            assert e.code == "image_not_found"

    asyncio.run(main(sandboxd.aio.AsyncClient("http://%s:%d" % (TCP_HOST, TCP_PORT), key=tcp_client.key,
                                              timeout=30)))
