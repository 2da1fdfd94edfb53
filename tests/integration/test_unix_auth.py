# SPDX-License-Identifier: LGPL-2.1-or-later
"""Who may use the unix socket: root and members of group sandboxd."""

import json
import secrets

import pytest

from conftest import UNIX_SOCKET, sh, unique_user, units

CURL = ["curl", "-sS", "--max-time", "20", "--unix-socket", UNIX_SOCKET, "-o", "-", "-w", "\n%{http_code}"]


def curl_as(setpriv_args, path="/v1/health", data=None):
    """curl as another user; returns (curl exit code, http status or None, body)."""
    args = ["setpriv"] + setpriv_args + ["--"] + CURL
    if data is not None:
        args += ["-H", "Content-Type: application/json", "-d", data]
    p = sh(*args, "http://localhost" + path, check=False)
    out = p.stdout.rsplit("\n", 1)
    status = int(out[1]) if len(out) == 2 and out[1].isdigit() and out[1] != "000" else None
    return p.returncode, status, out[0], p.stderr


NOBODY = ["--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def test_socket_mode_and_group():
    st = sh("stat", "-c", "%a %U %G", UNIX_SOCKET).stdout.split()
    assert st == ["660", "root", "sandboxd"], st


def test_outsider_cannot_connect():
    rc, status, body, err = curl_as(NOBODY)
    # the file mode refuses the connection (curl: 7, couldn't connect)
    assert rc == 7 and status is None, (rc, status, body, err)
    assert "Permission denied" in err or "Couldn't connect" in err or "Failed to connect" in err, err


def test_outsider_with_the_group_on_the_process_is_refused_by_sandboxd():
    # A process that carries group sandboxd gets through the file mode, but the
    # daemon checks the peer's user: nobody is not a member -> 403.
    before = units()
    rc, status, body, err = curl_as(["--reuid=nobody", "--regid=nogroup", "--groups=sandboxd"],
                                    "/v1/sessions", data='{"user":"%s","workspace":"w"}' % unique_user())
    assert rc == 0, (rc, err)
    assert status == 403, (status, body)
    e = json.loads(body)
    assert e["error"]["code"] == "forbidden" and e["error"]["message"], e
    assert units() == before


@pytest.fixture
def member():
    name = "sbxt" + secrets.token_hex(4)
    sh("useradd", "-M", "-N", "-s", "/usr/sbin/nologin", "-G", "sandboxd", name)
    try:
        yield name
    finally:
        sh("userdel", name, check=False)


def test_member_of_group_sandboxd_is_served(member):
    rc, status, body, err = curl_as(["--reuid=" + member, "--regid=users", "--init-groups"])
    assert rc == 0, (rc, err)
    assert status == 200, (status, body)
    assert json.loads(body)["status"] == "ok"


def test_member_can_create_a_session(member, api):
    # in a scope of its own login name (sandboxd(8), AUTHORIZATION)
    rc, status, body, err = curl_as(["--reuid=" + member, "--regid=users", "--init-groups"], "/v1/sessions",
                                    data='{"user":"%s","workspace":"w"}' % member)
    assert rc == 0, (rc, err)
    assert status == 201, (status, body)
    sid = json.loads(body)["id"]
    assert "sandboxd-%s.slice" % sid in units()


def test_member_cannot_create_a_session_for_another_name(member, api):
    before = units()
    rc, status, body, err = curl_as(["--reuid=" + member, "--regid=users", "--init-groups"], "/v1/sessions",
                                    data='{"user":"%s","workspace":"w"}' % unique_user())
    assert rc == 0, (rc, err)
    assert status == 403, (status, body)
    assert json.loads(body)["error"]["code"] == "forbidden"
    assert units() == before


def test_removed_member_is_refused(api):
    name = "sbxt" + secrets.token_hex(4)
    sh("useradd", "-M", "-N", "-s", "/usr/sbin/nologin", "-G", "sandboxd", name)
    try:
        rc, status, _, err = curl_as(["--reuid=" + name, "--regid=users", "--init-groups"])
        assert status == 200, (rc, status, err)
        # taken out of the group while its process keeps the group on
        sh("gpasswd", "-d", name, "sandboxd")
        rc, status, body, err = curl_as(["--reuid=" + name, "--regid=users", "--groups=sandboxd"])
        assert status == 403, (rc, status, body, err)
    finally:
        sh("userdel", name, check=False)
