# SPDX-License-Identifier: LGPL-2.1-or-later
"""libsandboxd against sandboxd: a C program that uses only its public header and shared
library (tests/integration/libsandboxd-live.c) runs its checks over each transport: the
unix socket, TCP with a key, and D-Bus (sandboxd_client_new_bus(), compared there with an
HTTP client of the same sandboxd)."""

import os
import subprocess

import pytest

from conftest import TCP_HOST, TCP_PORT, unique_user

BUILDDIR = os.environ.get("SANDBOXD_BUILDDIR", "build")
LIVE = os.path.join(BUILDDIR, "tests/integration/libsandboxd-live")


def run_live(url, env=None):
    if not os.path.exists(LIVE):
        pytest.fail("%s is missing: build the tree first" % LIVE)
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([LIVE, url, unique_user(), "lib"], capture_output=True, text=True, env=e, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "ok", "exit %d\nstdout: %s\nstderr: %s" % (
        p.returncode, p.stdout, p.stderr)


def test_unix_socket(api):
    run_live("")


def test_tcp_with_key(tcp, api_key):
    run_live("http://%s:%d" % (TCP_HOST, TCP_PORT), {"SANDBOXD_KEY": api_key})


def test_dbus(api):
    run_live("dbus")
