# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxctl mcp's tool schemas, checked by a validator nobody here wrote (python3-jsonschema's
Draft202012Validator: MCP's schemas are JSON Schema 2020-12), the conventions every tool keeps,
and protocol version negotiation against the versions of the installed official SDK.

Spoken to over stdio as raw JSON-RPC (RawMcp), one message a line, as a client would; the
SDK's own client (tests/integration/mcp-client.mjs) for the negotiation it does itself."""

import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import unique_user
from test_mcp import SANDBOXCTL, SDK, mcp

pytestmark = pytest.mark.skipif(not SDK, reason="SANDBOXD_MCP_SDK is not set: run through tools/dev test, "
                                                "which installs the MCP SDK")

jsonschema = pytest.importorskip("jsonschema", reason="python3-jsonschema is missing (tools/test-deps.txt)")
from jsonschema import Draft202012Validator  # noqa: E402

# integer properties that are a time, a limit or a port: a negative one means nothing
BOUNDED_INT = re.compile(r"(_ms$|^max_|(^|_)port$)")


class RawMcp:
    """sandboxctl mcp on pipes: request() writes one JSON-RPC request a line and reads lines
    until the answer with its id (notifications from the server in between are kept)."""

    def __init__(self, *args, timeout=60):
        self.timeout = timeout
        self.stderr = tempfile.TemporaryFile()
        self.p = subprocess.Popen([SANDBOXCTL, "mcp"] + list(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.stderr, env={"PATH": os.environ["PATH"], "LANG": "C.UTF-8"})
        self.buf = b""
        self.next_id = 1
        self.notifications = []

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.p.stdout.close()
        self.stderr.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def diagnostics(self):
        self.stderr.seek(0)
        return "sandboxctl mcp (exit %s) said on stderr: %s" % (self.p.poll(), self.stderr.read().decode(errors="replace"))

    def send(self, msg):
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()

    def readline(self):
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0, "no answer from sandboxctl mcp in %ds; %s" % (self.timeout, self.diagnostics())
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if r:
                chunk = os.read(self.p.stdout.fileno(), 65536)
                assert chunk, "sandboxctl mcp closed stdout; %s" % self.diagnostics()
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, method, params=None):
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        while True:
            answer = self.readline()
            assert answer.get("jsonrpc") == "2.0", answer
            if "id" in answer and answer["id"] == rid:
                return answer
            assert "method" in answer and "id" not in answer, "an answer to no request of ours: %r" % answer
            self.notifications.append(answer)

    def result(self, method, params=None):
        answer = self.request(method, params)
        assert "error" not in answer and "result" in answer, (method, answer)
        return answer["result"]

    def initialize(self, version):
        """The handshake: initialize, then notifications/initialized; the result."""
        res = self.result("initialize", {"protocolVersion": version, "capabilities": {},
                                         "clientInfo": {"name": "sandboxd-schema-test", "version": "1.0.0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return res

    def call(self, name, arguments):
        return self.result("tools/call", {"name": name, "arguments": arguments})


def sdk_versions():
    """LATEST_PROTOCOL_VERSION and SUPPORTED_PROTOCOL_VERSIONS of the installed SDK (its types.js)."""
    node = shutil.which("node")
    assert node, "node is not installed"
    script = ('const r = require("node:module").createRequire(process.argv[1] + "/package.json");'
              'const t = r("@modelcontextprotocol/sdk/types.js");'
              'console.log(JSON.stringify({latest: t.LATEST_PROTOCOL_VERSION,'
              '                            supported: t.SUPPORTED_PROTOCOL_VERSIONS}));')
    p = subprocess.run([node, "-e", script, SDK], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, "reading the SDK's protocol versions failed: %s" % p.stderr
    v = json.loads(p.stdout)
    assert isinstance(v["latest"], str) and v["latest"] in v["supported"], v
    return v


@pytest.fixture(scope="module")
def versions():
    return sdk_versions()


@pytest.fixture(scope="module")
def tools(versions):
    with RawMcp() as m:
        m.initialize(versions["latest"])
        listed = m.result("tools/list")
    assert listed["tools"], listed
    return listed["tools"]


def walk(schema, where):
    """(where, name, property schema) of every property, nested ones (objects in objects,
    in arrays) too."""
    if not isinstance(schema, dict):
        return
    for name, prop in (schema.get("properties") or {}).items():
        yield where, name, prop
        yield from walk(prop, "%s.%s" % (where, name))
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from walk(schema[key], "%s[%s]" % (where, key))


def test_schemas_are_valid_json_schema_2020_12(tools):
    bad = []
    for t in tools:
        for kind in ("inputSchema", "outputSchema"):
            if kind not in t:
                assert kind == "outputSchema", "%s has no inputSchema" % t["name"]
                continue
            # an absent $schema means 2020-12 (MCP 2025-11-25); any other dialect must be named
            dialect = t[kind].get("$schema", "https://json-schema.org/draft/2020-12/schema")
            if dialect != "https://json-schema.org/draft/2020-12/schema":
                bad.append("%s %s: $schema %s is not draft 2020-12" % (t["name"], kind, dialect))
            try:
                Draft202012Validator.check_schema(t[kind])
            except jsonschema.exceptions.SchemaError as e:
                bad.append("%s %s: %s (at %s)" % (t["name"], kind, e.message, "/".join(map(str, e.path))))
    assert not bad, "schemas that are not valid JSON Schema 2020-12:\n" + "\n".join(bad)


def test_input_schema_conventions(tools):
    bad = []
    for t in tools:
        name, schema = t["name"], t["inputSchema"]
        assert re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", name), name
        assert t.get("description"), "%s has no description" % name
        if schema.get("type") != "object":
            bad.append("%s: inputSchema type is %r, not object" % (name, schema.get("type")))
        if schema.get("additionalProperties") is not False:
            bad.append("%s: inputSchema does not say additionalProperties: false" % name)
        props = schema.get("properties") or {}
        for req in schema.get("required", []):
            if req not in props:
                bad.append("%s: required %s is not among its properties" % (name, req))
        for where, prop_name, prop in walk(schema, name):
            if prop_name == "session_id":
                if "pattern" not in prop:
                    bad.append("%s: session_id has no pattern" % where)
                else:
                    re.compile(prop["pattern"])
            if prop.get("type") == "integer" and BOUNDED_INT.search(prop_name) and "minimum" not in prop:
                bad.append("%s: integer %s has no minimum" % (where, prop_name))
            if "pattern" in prop:
                try:
                    re.compile(prop["pattern"])
                except re.error as e:
                    bad.append("%s: %s's pattern does not compile: %s" % (where, prop_name, e))
    assert not bad, "input schemas that break the conventions:\n" + "\n".join(bad)


@pytest.fixture(scope="module")
def results(api, versions):
    """(tool, tools/call result) of a few real calls, a refused one among them."""
    user = unique_user()
    out = []
    with RawMcp() as m:
        m.initialize(versions["latest"])

        def call(name, arguments):
            res = m.call(name, arguments)
            out.append((name, res))
            return res

        created = call("sandbox_create_session", {"user": user, "workspace": "schemas"})
        sid = created["structuredContent"]["data"]["id"]
        try:
            call("sandbox_list_sessions", {"user": user})
            call("sandbox_exec", {"session_id": sid, "argv": ["sh", "-c", "echo out; echo err >&2; exit 2"]})
            call("sandbox_run", {"user": user, "workspace": "schemas", "command": "echo run"})
            call("sandbox_write_file", {"session_id": sid, "path": "d/f.txt", "content": "text\n",
                                        "make_parents": True})
            call("sandbox_read_file", {"session_id": sid, "path": "d/f.txt"})
            call("sandbox_list_files", {"session_id": sid, "path": "d"})
            call("sandbox_list_ports", {"session_id": sid})
            call("sandbox_exec", {"session_id": sid})  # refused: neither argv nor command
            call("sandbox_close_session", {"session_id": sid})
        finally:
            api.request("DELETE", "/v1/sessions/" + sid)
    return out


def test_structured_content_is_an_object_and_its_text(results):
    """The spec: structuredContent is a JSON object, and its serialization is also given as text."""
    assert [r["isError"] for _, r in results].count(True) == 1, results
    for name, res in results:
        sc = res.get("structuredContent")
        assert isinstance(sc, dict) and sc["ok"] is (not res["isError"]), (name, res)
        texts = [c for c in res["content"] if c.get("type") == "text"]
        assert texts and json.loads(texts[0]["text"]) == sc, (name, res)


def test_structured_content_matches_output_schema(tools, results):
    """The spec: a tool with an outputSchema returns structuredContent that conforms to it."""
    by_name = {t["name"]: t for t in tools}
    bad = []
    validated = 0
    for name, res in results:
        schema = by_name.get(name, {}).get("outputSchema")
        if schema is None or res.get("isError"):
            continue
        validated += 1
        errors = sorted(Draft202012Validator(schema).iter_errors(res["structuredContent"]), key=lambda e: list(e.path))
        bad += ["%s: %s (at %s)" % (name, e.message, "/".join(map(str, e.path))) for e in errors]
    assert not bad, "structuredContent that does not match its tool's outputSchema:\n" + "\n".join(bad)
    if not validated:
        pytest.skip("no tool called here declares an outputSchema yet")


# --- protocol version negotiation -----------------------------------------------------------

def test_sdk_client_negotiates_the_sdks_latest_version(versions):
    out = mcp([])
    assert out["protocolVersion"] == versions["latest"], (out["protocolVersion"], versions)


def test_each_sdk_supported_version_is_answered_with_itself(versions):
    """The spec: a server that supports the requested version answers with the same one. The
    server must support every version the SDK does (SUPPORTED_PROTOCOL_VERSIONS)."""
    answers = {}
    for v in versions["supported"]:
        with RawMcp() as m:
            res = m.initialize(v)
            answers[v] = res["protocolVersion"]
            # and it goes on to serve in that version
            assert m.result("tools/list")["tools"], v
    wrong = {v: a for v, a in answers.items() if a != v}
    assert not wrong, "initialize with these SDK versions got another version back (asked: answered): %s" % wrong


def test_unknown_version_is_answered_with_the_servers_latest(versions):
    """The spec: a version the server does not support is answered with one it does, which
    SHOULD be its latest; the SDK's client disconnects unless that is one it supports."""
    with RawMcp() as m:
        answer = m.initialize("1999-01-01")["protocolVersion"]
        assert m.result("tools/list")["tools"]
    assert answer in versions["supported"], (answer, versions)
    # the server's latest: the newest of the versions it answers with themselves
    spoken = []
    for v in versions["supported"]:
        with RawMcp() as m:
            if m.initialize(v)["protocolVersion"] == v:
                spoken.append(v)
    assert spoken, "the server speaks none of the SDK's versions: %s" % versions["supported"]
    assert answer == max(spoken), "asked for 1999-01-01, got %s; the newest the server speaks is %s" % (
        answer, max(spoken))


def test_unknown_method_after_the_handshake(versions):
    with RawMcp() as m:
        m.initialize(versions["latest"])
        unknown = m.request("no/such/method", {})
        assert unknown["error"]["code"] == -32601, unknown
        assert m.result("ping") == {}
