# SPDX-License-Identifier: LGPL-2.1-or-later
"""Talking to sandboxd over D-Bus in the integration tests: python3-dbus in this
process (as root), the same calls run as another user (runuser + python3-dbus),
busctl, and a monitor for signals (busctl monitor).

Calls are built by hand (dbus.lowlevel) with an explicit signature, so that a test
can send wrong types on purpose, and with the allow-interactive-authorization flag
set as busctl sets it by default."""

import json
import queue
import subprocess
import threading
import time

import dbus
import dbus.lowlevel

NAME = "io.sandboxd.sandbox1"
PATH = "/io/sandboxd/sandbox1"
MANAGER = "io.sandboxd.sandbox1.Manager"
SESSION = "io.sandboxd.sandbox1.Session"
COMMAND = "io.sandboxd.sandbox1.Command"
PROPERTIES = "org.freedesktop.DBus.Properties"
ERROR = "io.sandboxd.sandbox1.Error."
ACCESS_DENIED = "org.freedesktop.DBus.Error.AccessDenied"
INTERACTIVE_REQUIRED = "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired"
PYTHON = "/usr/bin/python3"


class BusError(Exception):
    def __init__(self, name, message):
        super().__init__("%s: %s" % (name, message))
        self.name = name
        self.message = message


def unwrap(v):
    """dbus-python values as plain Python ones (ay as bytes)."""
    if isinstance(v, (dbus.ByteArray, bytes)):
        return bytes(v)
    if isinstance(v, dbus.Boolean):
        return bool(v)
    if isinstance(v, (dbus.String, dbus.ObjectPath, dbus.Signature)):
        return str(v)
    if isinstance(v, (dbus.Byte, dbus.Int16, dbus.UInt16, dbus.Int32, dbus.UInt32, dbus.Int64, dbus.UInt64)):
        return int(v)
    if isinstance(v, dbus.Double):
        return float(v)
    if isinstance(v, dbus.Dictionary):
        return {unwrap(k): unwrap(x) for k, x in v.items()}
    if isinstance(v, dbus.Struct):
        return tuple(unwrap(x) for x in v)
    if isinstance(v, dbus.Array):
        if v.signature == "y":
            return bytes(int(x) for x in v)
        return [unwrap(x) for x in v]
    if isinstance(v, dbus.types.UnixFd):
        return v
    return v


_bus = None


def bus():
    global _bus
    if _bus is None:
        _bus = dbus.SystemBus()
    return _bus


def call(path, interface, method, signature="", *args, interactive=True, timeout=60):
    """One method call; returns the unwrapped results (a list), raises BusError."""
    msg = dbus.lowlevel.MethodCallMessage(NAME, path, interface, method)
    msg.set_allow_interactive_authorization(interactive)
    if signature:
        msg.append(*args, signature=signature)
    try:
        reply = bus().send_message_with_reply_and_block(msg, timeout)
    except dbus.DBusException as e:
        raise BusError(e.get_dbus_name(), e.get_dbus_message()) from None
    return [unwrap(v) for v in reply.get_args_list(byte_arrays=True)]


def manager(method, signature="", *args, **kw):
    return call(PATH, MANAGER, method, signature, *args, **kw)


def get_property(path, interface, name):
    return call(path, PROPERTIES, "Get", "ss", interface, name)[0]


def get_all(path, interface):
    return call(path, PROPERTIES, "GetAll", "s", interface)[0]


def error_of(fn, *args, **kw):
    """The D-Bus error name (and message) fn raises; fails if it succeeds."""
    try:
        r = fn(*args, **kw)
    except BusError as e:
        assert e.message, "error %s without a message" % e.name
        return e.name
    raise AssertionError("expected a D-Bus error, got %r" % (r,))


def t(v):
    return dbus.UInt64(v)


# --------------------------------------------------------------------------
# as another user

_AS_USER = r'''
import json, sys
import dbus, dbus.lowlevel
spec = json.loads(sys.argv[1])
def unwrap(v):
    if isinstance(v, dbus.ByteArray): return list(bytes(v))
    if isinstance(v, dbus.Boolean): return bool(v)
    if isinstance(v, (dbus.String, dbus.ObjectPath, dbus.Signature)): return str(v)
    if isinstance(v, (dbus.Byte, dbus.Int32, dbus.UInt32, dbus.Int64, dbus.UInt64, dbus.Int16, dbus.UInt16)): return int(v)
    if isinstance(v, dbus.Dictionary): return {str(k): unwrap(x) for k, x in v.items()}
    if isinstance(v, (dbus.Array, dbus.Struct, list, tuple)): return [unwrap(x) for x in v]
    return v
msg = dbus.lowlevel.MethodCallMessage(spec["name"], spec["path"], spec["interface"], spec["method"])
msg.set_allow_interactive_authorization(spec["interactive"])
args = [dbus.Dictionary({}, signature="sv") if a == {} else a for a in spec["args"]]
if spec["signature"]:
    msg.append(*args, signature=spec["signature"])
try:
    reply = dbus.SystemBus().send_message_with_reply_and_block(msg, 60)
    print(json.dumps({"ok": True, "result": [unwrap(v) for v in reply.get_args_list(byte_arrays=True)]}))
except dbus.DBusException as e:
    print(json.dumps({"ok": False, "error": e.get_dbus_name(), "message": e.get_dbus_message()}))
'''


def call_as(user, path, interface, method, signature="", *args, interactive=True):
    """The same call made by USER (its own login groups): returns the results, or
    raises BusError. Only JSON-able arguments (empty a{sv} as {})."""
    spec = {"name": NAME, "path": path, "interface": interface, "method": method, "signature": signature,
            "args": list(args), "interactive": interactive}
    p = subprocess.run(["runuser", "-u", user, "--", PYTHON, "-c", _AS_USER, json.dumps(spec)],
                       capture_output=True, text=True, timeout=90)
    assert p.returncode == 0 and p.stdout.strip(), "call as %s failed: %s %s" % (user, p.stdout, p.stderr)
    out = json.loads(p.stdout.strip().splitlines()[-1])
    if not out["ok"]:
        raise BusError(out["error"], out["message"])
    return out["result"]


# --------------------------------------------------------------------------
# signals

class Monitor:
    """busctl monitor io.sandboxd.sandbox1, as root: collects the signals sandboxd sends."""

    def __init__(self):
        self.proc = None
        self.q = queue.Queue()
        self.seen = []

    def __enter__(self):
        self.proc = subprocess.Popen(["busctl", "monitor", "--json=short", NAME], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        ready = threading.Event()

        def reader():
            for line in self.proc.stdout:
                line = line.strip()
                if line.startswith("Monitoring"):
                    ready.set()
                    continue
                try:
                    m = json.loads(line)
                except ValueError:
                    continue
                if m.get("type") == "signal":
                    self.q.put(m)
            ready.set()

        threading.Thread(target=reader, daemon=True).start()
        assert ready.wait(20), "busctl monitor did not start"
        assert self.proc.poll() is None, "busctl monitor exited"
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def wait(self, member, predicate=lambda data: True, timeout=30):
        """The payload data of the first signal MEMBER for which predicate(data) holds."""
        for m in self.seen:
            if m.get("member") == member and predicate(m["payload"]["data"]):
                return m["payload"]["data"]
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no signal %s within %d s; seen: %r" % (
                    member, timeout, [(m.get("path"), m.get("member")) for m in self.seen][-20:]))
            try:
                m = self.q.get(timeout=left)
            except queue.Empty:
                continue
            self.seen.append(m)
            if m.get("member") == member and predicate(m["payload"]["data"]):
                return m["payload"]["data"]

    def properties_changed(self, path, interface, prop, value=None, timeout=30):
        def match(data):
            return data[0] == interface and prop in data[1] and (value is None or data[1][prop]["data"] == value)

        for m in self.seen + [None]:
            if m and m.get("path") == path and m.get("member") == "PropertiesChanged" and match(m["payload"]["data"]):
                return m["payload"]["data"][1][prop]["data"]
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no PropertiesChanged of %s on %s within %d s" % (prop, path, timeout))
            try:
                m = self.q.get(timeout=left)
            except queue.Empty:
                continue
            self.seen.append(m)
            if m.get("path") == path and m.get("member") == "PropertiesChanged" and match(m["payload"]["data"]):
                return m["payload"]["data"][1][prop]["data"]


def busctl(*args, check=True, timeout=60):
    p = subprocess.run(["busctl", *args], capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError("busctl %s exited %d: %s" % (" ".join(args), p.returncode, p.stderr))
    return p
