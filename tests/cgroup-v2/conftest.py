# SPDX-License-Identifier: LGPL-2.1-or-later
"""The cgroup-v2 lane: tests of what systemd does only on a unified hierarchy
(freezing units, its own oom-kill), run by tools/dev test in a VM booted by
tools/vm. They use the integration tests' fixtures and helpers."""

import importlib.util
import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("sandboxd_integration_conftest",
                                               os.path.join(_HERE, "..", "integration", "conftest.py"))
_it = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _it
_spec.loader.exec_module(_it)
# the fixtures, hooks and helpers of the integration tests, for this package too
globals().update({k: v for k, v in vars(_it).items() if not k.startswith("__")})


def unified():
    with open("/proc/self/mountinfo") as f:
        return any(l.split(" - ")[1].startswith("cgroup2 ") and l.split()[4] == "/sys/fs/cgroup" for l in f)


def pytest_collection_modifyitems(config, items):
    _it.pytest_collection_modifyitems(config, items)  # the exec mode's markers (this replaced it here)
    if unified():
        return
    why = pytest.mark.skip(reason="needs a cgroup-v2 host: tools/dev test runs these in a VM (tools/vm)")
    for item in items:
        if os.path.dirname(str(item.fspath)) == _HERE:
            item.add_marker(why)
