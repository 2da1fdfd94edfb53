# SPDX-License-Identifier: LGPL-2.1-or-later
"""Images: sessions whose commands run in a root file system of their own.

Two images built by tools/mkimage on the host (tools/dev: "py" with python3,
"node" with nodejs, in SANDBOXD_TEST_IMAGES) are bound into sandboxd's [Images]
Directory= as an administrator who puts a directory there would; each session sees its
own image's /etc/os-release and interpreter and not the other's, with the workspace,
uploads, the network policy, limits, signals and a restart of sandboxd as on the host.
"""

import json
import os
import subprocess
import time

import pytest

from conftest import (Api, assert_error, commands_path, exec_result, restart_daemon, run, sh, snapshot,
                      start_command, unique_user, wait_command_running, wait_for, workspace_for)

IMAGES_SRC = os.environ.get("SANDBOXD_TEST_IMAGES", "")
IMAGES_DIR = "/var/lib/sandboxd/images"

pytestmark = pytest.mark.skipif(not (IMAGES_SRC and os.path.isdir(os.path.join(IMAGES_SRC, "py"))
                                     and os.path.isdir(os.path.join(IMAGES_SRC, "node"))),
                                 reason="no test images (SANDBOXD_TEST_IMAGES: tools/dev builds them with "
                                        "tools/mkimage; SANDBOXD_SKIP_IMAGES=1 skips that)")


def _mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


@pytest.fixture(scope="module")
def images(api):
    """py and node in sandboxd's images directory: bind mounts of the cached builds (the
    testbed's / is an overlay, a copy would take a while), then sandboxd restarted, as the
    mounts do not reach the mount namespace of a running sandboxd."""
    os.makedirs(IMAGES_DIR, exist_ok=True)
    mounted = False
    for name in ("py", "node"):
        dst = os.path.join(IMAGES_DIR, name)
        os.makedirs(dst, exist_ok=True)
        if not _mounted(dst):
            sh("mount", "--bind", os.path.join(IMAGES_SRC, name), dst)
            mounted = True
    if mounted:
        restart_daemon()
    yield ("py", "node")


def image_session(api, request, image, **extra):
    s = api.create_session(unique_user(), workspace_for(request.node.name), image=image, **extra)
    assert s["state"] == "active" and s["image"] == image, s
    return s


def sh_in(api, sid, script, **extra):
    return exec_result(api, sid, dict({"argv": ["/bin/sh", "-c", script]}, **extra))


# --------------------------------------------------------------------------
# the list and one image

@pytest.mark.one_exec_mode
def test_list_and_show(api, tcp, images):
    r = api.get("/v1/images")
    assert r.status == 200, r
    listed = {i["name"]: i for i in r.json["images"]}
    assert {"py", "node"} <= set(listed), r.json
    for name in ("py", "node"):
        i = listed[name]
        assert set(i) == {"name", "size_bytes", "created_usec", "os", "user_names", "sessions"}, i
        assert i["os"]["id"] == "debian" and i["os"]["version_id"] == "12", i
        assert "bookworm" in i["os"]["pretty_name"], i
        assert i["user_names"] is True, i  # tools/mkimage puts libnss-systemd in
        assert i["created_usec"] > 0 and isinstance(i["sessions"], int), i
    # every caller may look: an API tenant too
    r = tcp.get("/v1/images/py")
    assert r.status == 200 and r.json["name"] == "py", r


@pytest.mark.one_exec_mode
@pytest.mark.parametrize("name", ["nope", "UPPER", ".hidden", "-x", "a" * 65, "py.json"])
def test_unknown_image(api, images, request, name):
    r = api.get("/v1/images/" + name)
    assert_error(r, 404, "image_not_found")
    r = api.post("/v1/sessions", {"user": unique_user(), "workspace": workspace_for(request.node.name),
                                  "image": name})
    if name == "nope":
        assert_error(r, 404, "image_not_found")
    else:
        assert_error(r, 400, "invalid_name")


# --------------------------------------------------------------------------
# sessions on images

def test_each_session_sees_its_image(api, images, request):
    py = image_session(api, request, "py")
    node = image_session(api, request, "node")

    r = exec_result(api, py["id"], {"argv": ["python3", "-c",
                                             "import platform, sys; print(platform.freedesktop_os_release()['ID'],"
                                             " sys.version_info[:2])"]})
    assert r["exit_code"] == 0 and r["stdout"] == "debian (3, 11)\n", r
    r = exec_result(api, node["id"], {"argv": ["node", "-e", "console.log(process.versions.node.split('.')[0])"]})
    assert r["exit_code"] == 0 and r["stdout"] == "18\n", r

    # and not the other's interpreter
    r = api.post(commands_path(py["id"]), {"argv": ["node", "-e", "1"]})
    assert_error(r, 400, "executable_not_found")
    r = api.post(commands_path(node["id"]), {"argv": ["python3", "-c", "1"]})
    assert_error(r, 400, "executable_not_found")

    # the image's own os-release; nothing of the host's /etc/sandboxd
    for s in (py, node):
        r = sh_in(api, s["id"], ". /etc/os-release; echo $ID $VERSION_CODENAME; test -e /etc/sandboxd && echo host; "
                  "test -x /usr/bin/node && echo node; test -x /usr/bin/python3 && echo python; id -un")
        lines = r["stdout"].split("\n")
        assert r["exit_code"] == 0 and lines[0] == "debian bookworm", r
        assert "host" not in lines, r
        assert ("python" in lines) == (s is py) and ("node" in lines) == (s is node), r
        assert lines[-2].startswith("sbx-"), r  # the dynamic user has its name inside

    # the count of sessions using each
    assert api.get("/v1/images/py").json["sessions"] >= 1


def test_workspace_upload_and_read_only_root(api, images, request):
    s = image_session(api, request, "py")
    sid = s["id"]
    r = api.request("PUT", "/v1/sessions/%s/files?path=in.txt" % sid, body=b"uploaded\n",
                    headers={"Content-Type": "application/octet-stream"})
    assert r.status in (200, 201), r
    r = sh_in(api, sid, "cat in.txt; pwd; echo $HOME; echo $TMPDIR; python3 -c 'open(\"out.txt\",\"w\").write(\"x\")'; "
              "touch /etc/x 2>/dev/null && echo writable; touch /tmp/t && echo tmp; ls /var/lib/sandboxd")
    lines = r["stdout"].split("\n")
    assert r["exit_code"] == 0, r
    assert lines[0] == "uploaded" and lines[1].startswith("/var/lib/sandboxd/ws/"), r
    assert "writable" not in lines and "tmp" in lines, r
    r = api.get("/v1/sessions/%s/files?path=out.txt" % sid)
    assert r.status == 200 and r.body == b"x", r
    # the image itself got nothing of this session: no workspace names in its tree
    assert not os.path.exists(os.path.join(IMAGES_DIR, "py", "var/lib/sandboxd/ws")), \
        os.listdir(os.path.join(IMAGES_DIR, "py", "var/lib/sandboxd"))


def test_network_policy_and_limits(api, images, request):
    s = image_session(api, request, "py", limits={"memory_max": "64M", "tasks_max": 20},
                      network={"mode": "none"})
    sid = s["id"]
    code = ("import socket\n"
            "try:\n"
            "    socket.create_connection(('1.1.1.1', 80), timeout=3); print('connected')\n"
            "except OSError as e:\n"
            "    print('refused')\n")
    r = exec_result(api, sid, {"argv": ["python3", "-c", code]})
    assert r["stdout"] == "refused\n", r
    # memory: a command that asks for more than 64M is killed
    r = exec_result(api, sid, {"argv": ["python3", "-c", "b = bytearray(200 << 20); print(len(b))"]})
    assert r["exit_code"] != 0 or r["signal"], r
    assert "209715200" not in r["stdout"], r


def test_signal(api, images, request):
    s = image_session(api, request, "py")
    sid = s["id"]
    start_command(api, sid, {"argv": ["python3", "-c", "import time; print('up', flush=True); time.sleep(300)"],
                             "request_id": "long"})
    wait_for(lambda: snapshot(api, sid, "long")["stdout"] == "up\n", timeout=20, what="the command's output")
    r = api.post(commands_path(sid, "long", "/signal"), {"signal": "SIGTERM"})
    assert r.status in (200, 202), r
    wait_for(lambda: snapshot(api, sid, "long")["status"] != "running", timeout=20, what="the command's end")
    snap = snapshot(api, sid, "long")
    assert snap["signal"] == "SIGTERM", snap


@pytest.mark.time_limit(90)
def test_restart_keeps_the_image(api, images, request):
    s = image_session(api, request, "node")
    sid = s["id"]
    restart_daemon()
    got = Api("unix").get_session(sid)
    assert got["image"] == "node", got
    r = exec_result(Api("unix"), sid, {"argv": ["node", "-e", "console.log('still')"]})
    assert r["exit_code"] == 0 and r["stdout"] == "still\n", r


# --------------------------------------------------------------------------
# removal

def _tiny_image(name):
    root = os.path.join(IMAGES_DIR, name)
    os.makedirs(os.path.join(root, "etc"), exist_ok=True)
    with open(os.path.join(root, "etc/os-release"), "w") as f:
        f.write('ID=tiny\nVERSION_ID="1"\nPRETTY_NAME="Tiny \\"one\\""\n')
    return root


@pytest.mark.one_exec_mode
def test_remove(api, tcp, images, request):
    root = _tiny_image("tiny-" + os.urandom(3).hex())
    name = os.path.basename(root)
    r = api.get("/v1/images/" + name)
    assert r.status == 200 and r.json["os"] == {"id": "tiny", "version_id": "1", "pretty_name": 'Tiny "one"'}, r
    assert r.json["size_bytes"] is None and r.json["user_names"] is False, r

    # not by a tenant that is no administrator
    assert_error(tcp.delete("/v1/images/" + name), 403, "forbidden")
    assert os.path.isdir(root)

    r = api.delete("/v1/images/" + name)
    assert r.status == 200 and r.json["name"] == name, r
    assert not os.path.exists(root)
    assert_error(api.get("/v1/images/" + name), 404, "image_not_found")
    assert_error(api.delete("/v1/images/" + name), 404, "image_not_found")


@pytest.mark.one_exec_mode
def test_remove_in_use(api, images, request):
    s = image_session(api, request, "py")
    r = api.delete("/v1/images/py")
    assert_error(r, 409, "image_in_use")
    assert os.path.isdir(os.path.join(IMAGES_DIR, "py", "usr"))
    assert api.delete("/v1/sessions/" + s["id"]).status == 200


# --------------------------------------------------------------------------
# imports: PUT /v1/images/NAME with a tar, streamed to sandboxd-unpack

def _put_tar(api, name, data, chunked=False):
    return api.request("PUT", "/v1/images/" + name, body=[data] if chunked else data,
                       headers={"Content-Type": "application/x-tar"}, encode_chunked=chunked)


def _tar(tmp_path, files, **tar_opts):
    """A tar of FILES {path: bytes or None (a directory)} plus anything tarfile makes."""
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            for k, v in tar_opts.get(path, {}).items():
                setattr(info, k, v)
            if data is None and info.type == tarfile.REGTYPE:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                t.addfile(info)
            else:
                info.size = len(data or b"")
                info.mode = tar_opts.get(path, {}).get("mode", 0o755)
                t.addfile(info, io.BytesIO(data or b""))
    return buf.getvalue()


def _leftovers():
    return sorted(n for n in os.listdir(IMAGES_DIR) if n.startswith(".import-"))


def _minimal(extra=None):
    with open("/bin/dash", "rb") as f:
        sh_bytes = f.read()
    files = {"bin": None, "bin/sh": sh_bytes, "etc": None,
             "etc/os-release": b'ID=mini\nVERSION_ID=1\nPRETTY_NAME="Mini 1"\n'}
    files.update(extra or {})
    return files


@pytest.mark.one_exec_mode
def test_import_tar(api, tcp, images, tmp_path):
    name = "mini-" + os.urandom(3).hex()
    data = _tar(tmp_path, _minimal())
    # not by a tenant that is no administrator: nothing is unpacked
    assert_error(_put_tar(tcp, name, data), 403, "forbidden")
    assert_error(api.get("/v1/images/" + name), 404, "image_not_found")

    r = _put_tar(api, name, data, chunked=True)
    assert r.status == 201, r
    i = r.json
    assert i["name"] == name and i["os"]["id"] == "mini" and i["size_bytes"] >= len(data) // 2, i
    st = os.stat(os.path.join(IMAGES_DIR, name, "bin/sh"))
    assert st.st_uid == 0 and st.st_mode & 0o7777 == 0o755, st
    # a second import of the name is refused; the first stays
    assert_error(_put_tar(api, name, data), 409, "exists")
    assert api.get("/v1/images/" + name).json["size_bytes"] == i["size_bytes"]
    assert api.delete("/v1/images/" + name).status == 200
    assert _leftovers() == []


@pytest.mark.one_exec_mode
def test_import_drops_setuid_keeps_links(api, images, tmp_path):
    """Set-user-ID and set-group-ID bits are dropped, files are root's whatever the tar
    says, and links inside the image are kept as they are."""
    import tarfile
    name = "modes-" + os.urandom(3).hex()
    data = _tar(tmp_path, _minimal({"bin/suid": b"#!/bin/sh\n", "bin/sgid": b"#!/bin/sh\n", "bin/hard": b"",
                                    "bin/soft": b""}),
                **{"bin/suid": {"mode": 0o4755, "uid": 1234}, "bin/sgid": {"mode": 0o2755, "gid": 1234},
                   "bin/hard": {"type": tarfile.LNKTYPE, "linkname": "bin/suid"},
                   "bin/soft": {"type": tarfile.SYMTYPE, "linkname": "sh"}})
    r = _put_tar(api, name, data)
    assert r.status == 201, r
    try:
        root = os.path.join(IMAGES_DIR, name)
        for f in ("bin/suid", "bin/sgid"):
            st = os.lstat(os.path.join(root, f))
            assert st.st_mode & 0o7777 == 0o755 and st.st_uid == 0 and st.st_gid == 0, (f, oct(st.st_mode), st)
        assert os.path.samefile(os.path.join(root, "bin/hard"), os.path.join(root, "bin/suid"))
        assert os.readlink(os.path.join(root, "bin/soft")) == "sh"
    finally:
        assert api.delete("/v1/images/" + name).status == 200
    assert not os.path.exists(os.path.join(IMAGES_DIR, name)) and _leftovers() == []


@pytest.mark.one_exec_mode
@pytest.mark.parametrize("case", ["dotdot", "absolute", "device", "symlink-out", "not-a-tar", "no-sh"])
def test_import_refused(api, images, tmp_path, case):
    import tarfile
    name = "bad-" + os.urandom(3).hex()
    if case == "dotdot":
        data = _tar(tmp_path, _minimal({"../escaped": b"x"}))
    elif case == "absolute":
        data = _tar(tmp_path, _minimal({"/etc/escaped": b"x"}))
    elif case == "device":
        data = _tar(tmp_path, _minimal({"dev/null2": b""}), **{"dev/null2": {"type": tarfile.CHRTYPE, "devmajor": 1,
                                                                              "devminor": 3}})
    elif case == "symlink-out":
        data = _tar(tmp_path, _minimal({"out": b"", "out/x": b"x"}),
                    **{"out": {"type": tarfile.SYMTYPE, "linkname": "/etc"}})
    elif case == "not-a-tar":
        data = b"this is no tar\n" * 100
    else:
        files = _minimal()
        del files["bin/sh"]
        data = _tar(tmp_path, files)
    r = _put_tar(api, name, data)
    err = assert_error(r, 400, "invalid_image")
    assert "sandboxd-unpack" in err["message"] or "/bin/sh" in err["message"], err
    assert not os.path.exists(os.path.join(IMAGES_DIR, name))
    assert not os.path.exists("/etc/escaped")
    assert _leftovers() == []
    assert_error(api.get("/v1/images/" + name), 404, "image_not_found")


@pytest.mark.one_exec_mode
@pytest.mark.time_limit(180)
def test_import_py_and_run(api, images, request):
    """The py image as an administrator would import it (a tar of the tree, streamed), then
    a session on the import: its interpreter runs."""
    name = "pyimp-" + os.urandom(3).hex()
    tar = subprocess.Popen(["tar", "--numeric-owner", "-C", os.path.join(IMAGES_SRC, "py"), "-c", "."],
                           stdout=subprocess.PIPE)
    t0 = time.monotonic()

    def chunks():
        while True:
            b = tar.stdout.read(1 << 20)
            if not b:
                return
            yield b

    r = api.request("PUT", "/v1/images/" + name, body=chunks(), headers={"Content-Type": "application/x-tar"},
                    encode_chunked=True)
    took = time.monotonic() - t0
    assert tar.wait() == 0
    assert r.status == 201, r
    print("import of py as a tar stream: %.1f s, %d MB" % (took, r.json["size_bytes"] >> 20))
    s = image_session(api, request, name)
    r = exec_result(api, s["id"], {"argv": ["python3", "-c", "print(6 * 7)"]})
    assert r["exit_code"] == 0 and r["stdout"] == "42\n", r
    api.delete("/v1/sessions/" + s["id"])
    assert api.delete("/v1/images/" + name).status == 200


# --------------------------------------------------------------------------
# the same over D-Bus

@pytest.mark.one_exec_mode
def test_dbus_images(api, images, tmp_path, request):
    import dbus
    import secrets
    import sbxbus as B

    listed = {i[0]: i for i in B.manager("ListImages")[0]}
    assert list(listed["py"][3:5]) == ["debian", "12"] and listed["py"][6] is True, listed["py"]
    assert B.manager("GetImage", "s", "node")[0][0] == "node"
    assert B.error_of(B.manager, "GetImage", "s", "nope") == B.ERROR + "NoSuchImage"

    # a session on an image; its Image property
    sid, path = B.manager("CreateSession", "ssa{sv}", unique_user(), workspace_for(request.node.name),
                          {"image": dbus.String("py", variant_level=1)})
    assert B.get_property(path, B.SESSION, "Image") == "py"
    assert B.error_of(B.manager, "CreateSession", "ssa{sv}", unique_user(), "ws",
                      {"image": dbus.String("nope", variant_level=1)}) == B.ERROR + "NoSuchImage"

    # import from an fd, refused for a member of group sandboxd, then removal
    name = "dbus-" + secrets.token_hex(3)
    tar = tmp_path / "mini.tar"
    tar.write_bytes(_tar(tmp_path, _minimal()))
    member = "sbxi" + secrets.token_hex(4)
    sh("useradd", "-M", "-G", "sandboxd", member)
    try:
        # the bus lets the calls through (dbus/io.sandboxd.sandbox1.conf), sandboxd decides:
        # listing is everyone's, removing and importing an administrator's
        assert "py" in {i[0] for i in B.call_as(member, B.PATH, B.MANAGER, "ListImages")[0]}
        assert B.call_as(member, B.PATH, B.MANAGER, "GetImage", "s", "py")[0][0] == "py"
        with pytest.raises(B.BusError) as e:
            B.call_as(member, B.PATH, B.MANAGER, "RemoveImage", "s", "py")
        assert e.value.name == B.ACCESS_DENIED and "AdminGroup=" in e.value.message, e.value
    finally:
        sh("userdel", member, check=False)
    with open(tar, "rb") as f:
        size, = B.manager("ImportImage", "sh", name, dbus.types.UnixFd(f))
    assert size > 0 and api.get("/v1/images/" + name).json["size_bytes"] == size
    with open(tar, "rb") as f:
        assert B.error_of(B.manager, "ImportImage", "sh", name, dbus.types.UnixFd(f)) == B.ERROR + "Exists"
    bad = tmp_path / "bad.tar"
    bad.write_bytes(b"no tar" * 100)
    with open(bad, "rb") as f:
        assert B.error_of(B.manager, "ImportImage", "sh", "bad-" + name, dbus.types.UnixFd(f)) == \
            B.ERROR + "InvalidImage"
    assert B.error_of(B.manager, "RemoveImage", "s", "py") == B.ERROR + "ImageInUse"
    B.call(path, B.SESSION, "Close", "b", False)
    assert B.manager("RemoveImage", "s", name) == []
    assert_error(api.get("/v1/images/" + name), 404, "image_not_found")
    assert _leftovers() == []


# --------------------------------------------------------------------------
# sandboxctl, on both transports

SANDBOXCTL = os.environ.get("SANDBOXD_TEST_SANDBOXCTL", "/usr/bin/sandboxctl")


def _ctl(transport, *args, input=None, check=0):
    env = {k: v for k, v in os.environ.items() if k not in ("SANDBOXD_URL", "SANDBOXD_KEY")}
    env["SANDBOXD_TRANSPORT"] = transport
    p = subprocess.run([SANDBOXCTL] + list(args), capture_output=True, input=input, env=env, timeout=120)
    assert check is None or p.returncode == check, "sandboxctl %s: %d %r %r" % (" ".join(args), p.returncode,
                                                                             p.stdout[-2000:], p.stderr[-2000:])
    return p


@pytest.mark.one_exec_mode
@pytest.mark.parametrize("transport", ["dbus", "http"])
def test_sandboxctl_images(api, images, tmp_path, request, transport):
    listed = json.loads(_ctl(transport, "--json", "image", "ls").stdout)
    assert {"py", "node"} <= {i["name"] for i in listed["images"]}, listed
    out = _ctl(transport, "image", "show", "node").stdout.decode()
    assert "Debian GNU/Linux 12" in out and "Sessions:" in out, out

    # run in a session on an image
    user, ws = unique_user(), workspace_for(request.node.name)
    p = _ctl(transport, "run", "--user=" + user, "--workspace=" + ws, "--image=py", "--rm", "--",
             "python3", "-c", "print('in py')")
    assert p.stdout == b"in py\n", p

    # import a directory (packed by sandboxctl), a tar from stdin, then remove both
    root = tmp_path / "tree"
    for path, data in _minimal().items():
        if data is None:
            (root / path).mkdir(parents=True, exist_ok=True)
        else:
            (root / path).write_bytes(data)
            (root / path).chmod(0o755)
    name = "ctl-%s-%s" % (transport, os.urandom(2).hex())
    info = json.loads(_ctl(transport, "--json", "image", "import", name, str(root)).stdout)
    assert info["name"] == name and info["os"]["id"] == "mini", info
    p = _ctl(transport, "image", "import", name + "-t", "-", input=_tar(tmp_path, _minimal()))
    assert b"Mini 1" in p.stdout, p
    p = _ctl(transport, "image", "import", name + "-bad", "-", input=b"junk" * 100, check=None)
    assert p.returncode != 0 and b"invalid_image" in p.stderr + p.stdout or b"unpack" in p.stderr, p
    for n in (name, name + "-t"):
        _ctl(transport, "image", "rm", n)
    assert _ctl(transport, "image", "show", name, check=None).returncode != 0
    assert _leftovers() == []


@pytest.mark.one_exec_mode
def test_import_client_gone(api, images):
    """A client that goes away mid-body: the unpacker is stopped, nothing stays."""
    import socket
    name = "gone-" + os.urandom(3).hex()
    tar = subprocess.run(["tar", "--numeric-owner", "-C", os.path.join(IMAGES_SRC, "py"), "-c", "./usr/bin"],
                         capture_output=True, check=True).stdout
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("/run/sandboxd/http.sock")
    s.sendall(b"PUT /v1/images/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-tar\r\n"
              b"Content-Length: %d\r\n\r\n" % (name.encode(), len(tar)))
    s.sendall(tar[:len(tar) // 2])
    wait_for(lambda: _leftovers() != [], timeout=10, what="the import under way")
    s.close()
    wait_for(lambda: _leftovers() == [], timeout=20, what="the staging directory removed")
    assert_error(api.get("/v1/images/" + name), 404, "image_not_found")
    # sandboxd goes on, and imports that name afterwards
    assert _put_tar(api, name, _tar(None, _minimal())).status == 201
    assert api.delete("/v1/images/" + name).status == 200


@pytest.mark.one_exec_mode
def test_import_over_max_size(api, images, tmp_path):
    """[Images] MaxSize=: an import with more bytes of files is 413, and leaves nothing."""
    from conftest import config_dropin
    name = "big-" + os.urandom(3).hex()
    data = _tar(tmp_path, _minimal({"big.bin": os.urandom(3 << 20)}))
    with config_dropin("/etc/sandboxd/sandboxd.conf.d/50-test-images.conf") as write:
        write("[Images]\nMaxSize=2M\n")
        assert_error(_put_tar(api, name, data), 413, "payload_too_large")
        assert_error(api.get("/v1/images/" + name), 404, "image_not_found")
        assert _leftovers() == []
