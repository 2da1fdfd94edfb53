# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Debian packages, installed with apt into a booted systemd that has no sandboxd
yet, used, and removed and purged again.

tools/dev builds the packages (dpkg-buildpackage) before any testbed boots and runs this
file alone, in a fresh testbed of its own without the meson install, with
SANDBOXD_TEST_DEB_DIR pointing at them. Elsewhere it skips."""

import glob
import grp
import http.client
import json
import os
import socket
import stat
import subprocess

import pytest

from conftest import sh, wait_for

DEB_DIR = os.environ.get("SANDBOXD_TEST_DEB_DIR")

pytestmark = [
    pytest.mark.skipif(not DEB_DIR, reason="SANDBOXD_TEST_DEB_DIR is not set: tools/dev test runs this in a "
                                           "testbed of its own"),
    pytest.mark.time_limit(600),
]

APT_ENV = dict(os.environ, DEBIAN_FRONTEND="noninteractive")


@pytest.fixture(autouse=True)
def _daemon_survives():
    """Overrides conftest's: there is no sandboxd to watch before the package brings it."""
    yield


@pytest.fixture
def services_may_start():
    """A container image's /usr/sbin/policy-rc.d (Docker's exits 101) forbids maintainer
    scripts to start services; a real machine has none. The testbed's / is an overlay:
    moving it aside here does not touch the host."""
    path, aside = "/usr/sbin/policy-rc.d", "/usr/sbin/policy-rc.d.testbed"
    moved = os.path.exists(path)
    if moved:
        os.rename(path, aside)
    yield
    if moved:
        os.rename(aside, path)


def deb(name):
    found = glob.glob(os.path.join(DEB_DIR, "%s_*.deb" % name))
    assert len(found) == 1, "expected one %s package in %s: %r" % (name, DEB_DIR, found)
    return found[0]


def apt(*args):
    # no network in the testbed: everything the packages need must be there already
    p = subprocess.run(["apt-get", "-y", "-q", "--no-install-recommends", "-o", "Acquire::Retries=0"] + list(args),
                       capture_output=True, text=True, env=APT_ENV, timeout=300)
    assert p.returncode == 0, "apt-get %s exited %d\nstdout: %s\nstderr: %s" % (
        " ".join(args), p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    return p


def dpkg_status(pkg):
    p = subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Abbrev}", pkg], capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else "unknown"


def state(unit):
    return sh("systemctl", "is-active", unit, check=False).stdout.strip()


def sandboxd_units():
    out = sh("systemctl", "list-units", "--all", "--plain", "--no-legend", "sandboxd*").stdout
    return {l.split()[0]: l.split()[2] for l in out.splitlines() if l.strip()}


LIBRARY_EXAMPLE = r"""
#include <stdio.h>
#include <unistd.h>
#include <libsandboxd.h>

static int on_event(sandboxd_client *c, const sandboxd_event *ev, void *userdata) {
        if (ev->type == SANDBOXD_EVENT_STDOUT)
                fwrite(ev->data, 1, ev->size, stdout);
        return 0;
}

int main(void) {
        const char *argv[] = { "sh", "-c", "echo from-libsandboxd; exit 9", NULL };
        sandboxd_client *c = NULL;
        sandboxd_session *s = NULL;
        sandboxd_exec *e = NULL;
        sandboxd_result *res = NULL;

        if (sandboxd_client_new(NULL, NULL, &c) < 0 ||
            sandboxd_session_create(c, "debtest", "lib", NULL, &s, NULL) < 0 ||
            sandboxd_exec_new(&e) < 0 || sandboxd_exec_set_argv(e, argv) < 0 ||
            sandboxd_exec_run(c, s->id, e, on_event, NULL, &res) < 0) {
                fprintf(stderr, "%s\n", c ? sandboxd_client_last_error(c)->message : "no client");
                return 125;
        }
        return sandboxd_result_exit_status(res);
}
"""


PYTHON_DIR = "/usr/lib/python3/dist-packages/sandboxd"
PYTHON_EXAMPLE = r"""
import sandboxd
print(sandboxd.__file__)
s = sandboxd.Client().create_session("debtest", "py")
r = s.run(["sh", "-c", "echo from-python; exit 9"])
print(r.status, r.exit_code, r.stdout.decode().strip())
"""


def test_install_use_remove_purge(tmp_path, services_may_start):
    assert not os.path.exists("/usr/libexec/sandboxd"), "sandboxd is already installed in this testbed"
    assert dpkg_status("sandboxd") in ("unknown", "un")

    # --- install: the daemon, the library, its development files, the Python client
    apt("install", deb("sandboxd"), deb("libsandboxd0"), deb("libsandboxd-dev"), deb("python3-sandboxd"))
    for pkg in ("sandboxd", "libsandboxd0", "libsandboxd-dev", "python3-sandboxd"):
        assert dpkg_status(pkg) == "ii", (pkg, dpkg_status(pkg))

    # the group, the socket (enabled and listening, group sandboxd, 0660), not the service
    gid = grp.getgrnam("sandboxd").gr_gid
    assert sh("systemctl", "is-enabled", "sandboxd.socket").stdout.strip() == "enabled"
    assert state("sandboxd.socket") == "active"
    assert state("sandboxd.service") == "inactive", "the package started the socket-activated service itself"
    st = os.stat("/run/sandboxd/http.sock")
    assert stat.S_ISSOCK(st.st_mode) and st.st_gid == gid and stat.S_IMODE(st.st_mode) == 0o660, st
    # tmpfiles, polkit, D-Bus, man pages, completion, configuration
    assert os.path.isdir("/var/lib/private/sandboxd")
    for f in ("/usr/share/polkit-1/actions/io.sandboxd.sandbox1.policy",
              "/usr/share/polkit-1/rules.d/io.sandboxd.sandbox1.rules",
              "/usr/share/dbus-1/system.d/io.sandboxd.sandbox1.conf",
              "/usr/share/man/man8/sandboxd.8.gz", "/usr/share/man/man8/sandboxd-exec.8.gz",
              "/usr/share/man/man1/sandboxctl.1.gz",
              "/usr/share/man/man5/sandboxd.conf.5.gz", "/usr/share/man/man7/sandboxd-api.7.gz",
              "/usr/share/man/man3/libsandboxd.3.gz",
              "/usr/share/bash-completion/completions/sandboxctl",
              "/etc/sandboxd/sandboxd.conf"):
        assert os.path.exists(f), f
    assert "/etc/sandboxd/sandboxd.conf" in sh("dpkg-query", "-W", "-f=${Conffiles}", "sandboxd").stdout

    # --- use it: a command through sandboxctl, socket-activated
    p = sh("sandboxctl", "run", "--user=debtest", "--workspace=pkg", "--",
           "sh", "-c", "echo hello from the package; id -un", check=False, timeout=120)
    assert p.returncode == 0, p
    lines = p.stdout.splitlines()
    assert lines[0] == "hello from the package" and lines[1].startswith("sbx-"), lines
    assert state("sandboxd.service") == "active"
    # and through the library, built against the installed header and pkg-config file
    src = tmp_path / "example.c"
    src.write_text(LIBRARY_EXAMPLE)
    flags = sh("pkg-config", "--cflags", "--libs", "libsandboxd").stdout.split()
    sh("cc", "-o", str(tmp_path / "example"), str(src), *flags)
    p = subprocess.run([str(tmp_path / "example")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 9 and p.stdout == "from-libsandboxd\n", p
    assert any(u.startswith("sandboxd-") and u.endswith(".slice") for u in sandboxd_units())
    # and through the Python client, imported from the package (not from the source tree)
    p = subprocess.run(["/usr/bin/python3", "-c", PYTHON_EXAMPLE], capture_output=True, text=True, timeout=120,
                       cwd=str(tmp_path), env={"PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p
    assert p.stdout.splitlines() == [PYTHON_DIR + "/__init__.py", "failed 9 from-python"], p

    # --- remove: the daemon and every sandbox stop, the configuration stays
    apt("remove", "sandboxd", "libsandboxd-dev", "libsandboxd0", "python3-sandboxd")
    assert dpkg_status("sandboxd") == "rc"
    assert not os.path.exists("/usr/libexec/sandboxd") and not os.path.exists("/usr/bin/sandboxctl")
    assert not os.path.exists("/lib/systemd/system/sandboxd.socket")
    assert not glob.glob("/usr/lib/*/libsandboxd.so*") and not os.path.exists("/usr/include/libsandboxd.h")
    assert not os.path.exists(PYTHON_DIR)
    wait_for(lambda: all(s != "active" for s in sandboxd_units().values()), timeout=30,
             what="sandboxd's units to stop")
    failed = sh("systemctl", "list-units", "--failed", "--plain", "--no-legend", "sandboxd*").stdout.strip()
    assert not failed, failed
    assert os.path.exists("/etc/sandboxd/sandboxd.conf")

    # --- purge: nothing of sandboxd is left but its group (the libraries have no
    # configuration: removing them was all)
    apt("purge", "sandboxd")
    for pkg in ("sandboxd", "libsandboxd0", "libsandboxd-dev", "python3-sandboxd"):
        assert dpkg_status(pkg) in ("unknown", "un", "pn"), (pkg, dpkg_status(pkg))
    for path in ("/etc/sandboxd", "/var/lib/sandboxd", "/var/lib/private/sandboxd",
                 "/etc/systemd/system/sockets.target.wants/sandboxd.socket"):
        assert not os.path.lexists(path), path


def rebuilt_with_higher_version(tmp_path, name, suffix="+upgrade1"):
    """The package NAME again with VERSION+SUFFIX (and its exact dependencies on its
    siblings raised the same way): what an `apt upgrade` to the next build installs."""
    src = deb(name)
    tree = tmp_path / ("tree-" + name)
    sh("dpkg-deb", "-R", src, str(tree))
    control = tree / "DEBIAN" / "control"
    text = control.read_text()
    version = next(l.split(":", 1)[1].strip() for l in text.splitlines() if l.startswith("Version:"))
    text = text.replace("Version: %s" % version, "Version: %s%s" % (version, suffix))
    text = text.replace("(= %s)" % version, "(= %s%s)" % (version, suffix))
    control.write_text(text)
    out = tmp_path / ("%s_%s%s_upgrade.deb" % (name, version, suffix))
    sh("dpkg-deb", "--root-owner-group", "-b", str(tree), str(out))
    return str(out), version + suffix


class UnixConnection(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(60)
        self.sock.connect("/run/sandboxd/http.sock")


def http_json(method, path, body=None):
    """METHOD PATH on sandboxd's unix socket with BODY (JSON, or bytes as they are):
    (status, the answer as JSON)."""
    c = UnixConnection("localhost")
    if isinstance(body, bytes):
        c.request(method, path, body, {"Content-Type": "application/octet-stream"})
    else:
        c.request(method, path, json.dumps(body) if body is not None else None,
                  {"Content-Type": "application/json"} if body is not None else {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, (json.loads(data) if data else None)


def test_upgrade_while_commands_run(tmp_path, services_may_start):
    """apt installs a newer build over the running one: sandboxd restarts into the new
    binary, the commands that were running go on (they belong to PID 1), their sessions,
    records and output are there, and their results come in as usual."""
    apt("install", deb("sandboxd"), deb("libsandboxd0"))
    status, s = http_json("POST", "/v1/sessions", {"user": "debtest", "workspace": "upgrade"})
    assert status in (200, 201), s
    sid = s["id"]
    status, c = http_json("POST", "/v1/sessions/%s/commands?wait=false" % sid,
                          {"argv": ["sh", "-c", "echo before; read x; echo after $x"], "stdin": "stream",
                           "request_id": "across"})
    assert status == 202, c
    old_pid = int(sh("systemctl", "show", "-p", "MainPID", "--value", "sandboxd.service").stdout)
    assert old_pid > 0

    new_daemon, new_version = rebuilt_with_higher_version(tmp_path, "sandboxd")
    new_lib, _ = rebuilt_with_higher_version(tmp_path, "libsandboxd0")
    apt("install", new_daemon, new_lib)
    assert sh("dpkg-query", "-W", "-f=${Version}", "sandboxd").stdout == new_version

    # restarted by the postinst into the new binary; the command still runs
    wait_for(lambda: int(sh("systemctl", "show", "-p", "MainPID", "--value", "sandboxd.service").stdout or 0)
             not in (0, old_pid), timeout=60, what="sandboxd to run again after the upgrade")
    status, snap = http_json("GET", "/v1/sessions/%s/commands/across" % sid)
    assert status == 200 and snap["terminal"] is False, snap
    assert snap["stdout"] == "before\n", snap
    # stdin through the new sandboxd reaches the command that the old one started
    status, w = http_json("POST", "/v1/sessions/%s/commands/across/stdin?eof=1" % sid, b"ok\n")
    assert status == 200 and w == {"written": 3}, (status, w)

    def done():
        st, sn = http_json("GET", "/v1/sessions/%s/commands/across" % sid)
        return sn if st == 200 and sn["terminal"] else None

    snap = wait_for(done, timeout=60, what="the command started before the upgrade to end")
    assert snap["status"] == "succeeded", snap
    assert snap["stdout"] == "before\nafter ok\n", snap
    failed = sh("systemctl", "list-units", "--failed", "--plain", "--no-legend", "sandboxd*").stdout.strip()
    assert not failed, failed

    apt("purge", "sandboxd", "libsandboxd0")
    assert dpkg_status("sandboxd") in ("unknown", "un", "pn")
