# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd-dbus(5) describes the interface the daemon really has: every method with
its arguments, signal and property (and whether it emits PropertiesChanged), as
`busctl introspect` shows them, and every error name the code can send."""

import glob
import os
import re
import xml.etree.ElementTree as ET

import pytest

import sbxbus as B

SRCDIR = os.environ.get("SANDBOXD_SRCDIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PAGE = os.path.join(SRCDIR, "man", "sandboxd-dbus.5.scd")
ERRORS_HEADER = os.path.join(SRCDIR, "src", "sandboxd", "bus-util.h")
EMITS = "org.freedesktop.DBus.Property.EmitsChangedSignal"
FILES = "io.sandboxd.sandbox1.Files"


def parse_page():
    """{interface: {"methods": {name: [(dir, type, arg)]}, "signals": {name: [(type, arg)]},
    "properties": {name: (type, emits)}}} from the interface blocks of the page."""
    text = open(PAGE).read()
    interfaces = {}
    for block in re.findall(r"^```\n(.*?)^```", text, re.S | re.M):
        for name, body in re.findall(r"interface (io\.sandboxd\.sandbox1\.\w+) \{(.*?)\n\s*\};", block, re.S):
            iface = interfaces.setdefault(name, {"methods": {}, "signals": {}, "properties": {}})
            section = None
            pending = ""
            for line in body.splitlines():
                line = line.strip()
                if line in ("methods:", "signals:", "properties:"):
                    section = line[:-1]
                    continue
                if not line:
                    continue
                pending += " " + line
                if not pending.rstrip().endswith(";"):
                    continue
                stmt, pending = pending.strip().rstrip(";").strip(), ""
                if section == "properties":
                    m = re.fullmatch(r'(?:@%s\("(\w+)"\)\s+)?readonly (\S+) (\w+)' % re.escape(EMITS), stmt)
                    assert m, "cannot parse property %r" % stmt
                    iface["properties"][m.group(3)] = (m.group(2), m.group(1) or "true")
                    continue
                m = re.fullmatch(r"(\w+)\((.*)\)", stmt, re.S)
                assert m and section, "cannot parse %r" % stmt
                args = [a.split() for a in m.group(2).split(",") if a.strip()]
                if section == "methods":
                    assert all(len(a) == 3 and a[0] in ("in", "out") for a in args), stmt
                    iface["methods"][m.group(1)] = [tuple(a) for a in args]
                else:
                    assert all(len(a) == 2 for a in args), stmt
                    iface["signals"][m.group(1)] = [tuple(a) for a in args]
    return interfaces


def introspect(path, name):
    xml = B.busctl("introspect", "--xml-interface", B.NAME, path).stdout
    for iface in ET.fromstring(xml).findall("interface"):
        if iface.get("name") != name:
            continue
        out = {"methods": {}, "signals": {}, "properties": {}}
        for m in iface.findall("method"):
            out["methods"][m.get("name")] = [(a.get("direction", "in"), a.get("type"), a.get("name"))
                                             for a in m.findall("arg")]
        for s in iface.findall("signal"):
            out["signals"][s.get("name")] = [(a.get("type"), a.get("name")) for a in s.findall("arg")]
        for p in iface.findall("property"):
            assert p.get("access") == "read", (name, p.get("name"), p.get("access"))
            emits = [a.get("value") for a in p.findall("annotation") if a.get("name") == EMITS]
            out["properties"][p.get("name")] = (p.get("type"), emits[0] if emits else "true")
        return out
    raise AssertionError("%s has no interface %s" % (path, name))


@pytest.fixture(scope="module")
def objects(api_key):
    """A path for each interface: a session and a command of it must exist."""
    sid, path = B.manager("CreateSession", "ssa{sv}", "docprobe", "ws", {})
    rid, cpath = B.manager("Exec", "sasa{sv}", sid, ["true"], {})
    return {B.MANAGER: B.PATH, B.SESSION: path, B.COMMAND: cpath, FILES: path}


def test_page_parses():
    page = parse_page()
    assert set(page) == {B.MANAGER, B.SESSION, B.COMMAND, FILES}, set(page)
    assert page[B.MANAGER]["methods"]["CreateSession"][0] == ("in", "s", "user")


@pytest.mark.parametrize("interface", [B.MANAGER, B.SESSION, B.COMMAND, FILES])
def test_page_matches_introspection(objects, interface):
    page = parse_page()[interface]
    real = introspect(objects[interface], interface)
    for kind in ("methods", "signals", "properties"):
        missing = sorted(set(real[kind]) - set(page[kind]))
        extra = sorted(set(page[kind]) - set(real[kind]))
        assert not missing, "%s %s not in sandboxd-dbus(5): %s" % (interface, kind, missing)
        assert not extra, "sandboxd-dbus(5) lists %s %s the daemon does not have: %s" % (interface, kind, extra)
        for name in real[kind]:
            assert page[kind][name] == real[kind][name], \
                "%s.%s: the page says %r, introspection %r" % (interface, name, page[kind][name], real[kind][name])


def test_every_error_is_documented():
    header = open(ERRORS_HEADER).read()
    in_code = set(re.findall(r'BUS_ERROR_PREFIX "(\w+)"', header))
    assert "NoSuchSession" in in_code and "InvalidName" in in_code, in_code
    text = open(PAGE).read()
    section = text.split("\n# ERRORS\n", 1)[1].split("\n# ", 1)[0]
    documented = set(re.findall(r"^\*(\w+)\*$", section, re.M))
    assert documented == in_code, "in the code only: %s; on the page only: %s" % (
        sorted(in_code - documented), sorted(documented - in_code))
    for std in (B.ACCESS_DENIED, B.INTERACTIVE_REQUIRED):
        assert "*%s*" % std in section, std


def test_page_is_installed():
    pages = glob.glob("/usr/share/man/man5/sandboxd-dbus.5*")
    if not pages and not glob.glob("/usr/share/man/man8/sandboxd.8*"):
        pytest.skip("man pages are not built here (no scdoc)")
    assert pages, "sandboxd-dbus.5 is not installed"
