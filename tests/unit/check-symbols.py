#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The shared library exports exactly the functions its public header declares, each
under a version node of the .sym script: nothing internal leaks, nothing is forgotten.

usage: check-symbols.py LIBRARY.so HEADER.h SCRIPT.sym"""

import re
import subprocess
import sys

lib, header, script = sys.argv[1:4]

text = open(header).read()
text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
# function declarations: "type name(" not inside a typedef of a function pointer
declared = set(re.findall(r"^[a-z_][\w \*]*?\b(sandboxd_\w+)\(", text, re.M))
declared -= set(re.findall(r"\(\*(sandboxd_\w+)\)", text))

listed = set()
for node in re.finditer(r"(\w+)\s*\{(.*?)\}", re.sub(r"/\*.*?\*/", "", open(script).read(), flags=re.S), re.S):
    body = node.group(2)
    glob = body.split("local:")[0].replace("global:", "")
    listed |= {s.strip() for s in glob.split(";") if s.strip()}

out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
exported = set()
for line in out.splitlines():
    parts = line.split()
    if len(parts) == 3 and parts[1] in "TtWiDdBbRr" and not parts[2].startswith("LIBSANDBOXD_"):
        exported.add(parts[2].split("@")[0])

ok = True
for what, a, b in (("declared in the header but not in the .sym script", declared, listed),
                   ("in the .sym script but not declared in the header", listed, declared),
                   ("declared but not exported by the library", declared, exported),
                   ("exported by the library but not declared", exported, declared)):
    extra = sorted(a - b)
    if extra:
        ok = False
        print("%s: %s" % (what, " ".join(extra)))
print("%d functions declared, %d listed, %d exported" % (len(declared), len(listed), len(exported)))
sys.exit(0 if ok else 1)
