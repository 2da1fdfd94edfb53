# SPDX-License-Identifier: LGPL-2.1-or-later
"""The TypeScript client (clients/typescript, @sandboxd/client) live against sandboxd: its own
tests (clients/typescript/test/, Node's test runner) run here with the client as built.

tools/dev builds the client on the host before the testbed boots (npm ci, types generated from
docs/openapi.yaml, tsc, npm pack; the testbed has no network) into build/typescript-client and
passes that place in SANDBOXD_TS_CLIENT. The HTTP surface is the same in both exec modes: one
lane runs it."""

import os
import re
import shutil
import subprocess

import pytest

from conftest import TCP_HOST, TCP_PORT, UNIX_SOCKET, unique_user

CLIENT = os.environ.get("SANDBOXD_TS_CLIENT")

pytestmark = [
    pytest.mark.skipif(not CLIENT, reason="SANDBOXD_TS_CLIENT is not set: run through tools/dev test, "
                                          "which builds the TypeScript client"),
    pytest.mark.unit_mode_only,
]

# the tests of clients/typescript/test/client.test.ts
TESTS_AT_LEAST = 17


@pytest.mark.time_limit(150)
def test_typescript_client(api, tcp, api_key):
    node = shutil.which("node")
    assert node, "node is not installed"
    compiled = os.path.join(CLIENT, "test-dist", "test", "client.test.js")
    assert os.path.isfile(compiled), "the TypeScript client's tests are not built in %s" % CLIENT
    assert [f for f in os.listdir(CLIENT) if re.fullmatch(r"sandboxd-client-.*\.tgz", f)], \
        "npm pack made no tarball in %s" % CLIENT
    env = dict(os.environ,
               SANDBOXD_TEST_SOCKET=UNIX_SOCKET,
               SANDBOXD_TEST_TCP_URL="http://%s:%d" % (TCP_HOST, TCP_PORT),
               SANDBOXD_TEST_KEY=api_key,
               SANDBOXD_TEST_USER=unique_user())
    env.pop("SANDBOXD_URL", None)
    env.pop("SANDBOXD_KEY", None)
    p = subprocess.run([node, "--test", "--test-reporter=tap", compiled], cwd=CLIENT, env=env,
                       capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    print(out)  # shown with -s, and by pytest on a failure
    counts = {k: int(v) for k, v in re.findall(r"^# (pass|fail|cancelled|skipped|todo) (\d+)$", out, re.M)}
    assert p.returncode == 0 and counts.get("fail") == 0 and counts.get("cancelled") == 0, \
        "node --test failed (exit status %d, %r):\n%s" % (p.returncode, counts, out)
    assert counts.get("pass", 0) >= TESTS_AT_LEAST and counts.get("skipped") == 0, \
        "node --test ran fewer tests than expected (%r):\n%s" % (counts, out)
