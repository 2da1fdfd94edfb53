#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The error table (src/shared/error-table.c) against the sources and the documents:
every error code the daemon answers with is a row of it, the list in sandboxd-api(7) is
the table, sandboxd-dbus(5) documents every D-Bus name of it, and docs/openapi.yaml names
every code. On a mismatch, prints what the man page's list should be."""

import glob
import os
import re
import sys

root = sys.argv[1]
failed = []


def check(cond, what):
    if not cond:
        failed.append(what)
        print("FAIL:", what, file=sys.stderr)


def read(*path):
    with open(os.path.join(root, *path)) as f:
        return f.read()


STD = {"ACCESS_DENIED": "AccessDenied", "INTERACTIVE_AUTHORIZATION_REQUIRED": "InteractiveAuthorizationRequired"}

src = read("src", "shared", "error-table.c")
rows = re.findall(r'\{ "(\w+)", (E\w+), (\d{3}), (?:NULL|E\("(\w+)"\)|SD_BUS_ERROR_(\w+)), SANDBOXD_ERROR_\w+ \}', src)
aliases = re.findall(r'\{ (?:E\("(\w+)"\)|SD_BUS_ERROR_(\w+)), "(\w+)" \}', src)
check(len(rows) == len(re.findall(r'^ +\{ "\w+", ', src, re.M)), "every row of error-table.c parses")
codes = {r[0]: r for r in rows}
check(len(codes) == len(rows), "codes are unique")

# 1. every code the daemon sends is a row
emit = re.compile(r'(?:request_error\(\w+, |->code = |\.code = |http_queue_error\(r, |http_complete_error\(r, |'
                  r'http_refuse_upload_error\(r, |refuse_early\(r, |refuse\(ret_resp, |http_error_response\(|http_error_status\()"(\w+)"')
sources = glob.glob(os.path.join(root, "src", "sandboxd", "*.c")) + glob.glob(os.path.join(root, "src", "shared", "*.c"))
used = set()
for path in sources:
    if path.endswith("error-table.c"):
        continue
    with open(path) as f:
        for code in emit.findall(f.read()):
            used.add(code)
            check(code in codes, "%s sends the code %r, which is not in the error table" % (os.path.basename(path), code))
check(len(used) > 30, "the sources were found (%d codes)" % len(used))
for code in codes:
    check(code in used, "the table's %r is never sent" % code)

# 2. sandboxd-api(7) lists the table
names_of = {}
for row in rows:
    names_of[row[0]] = [row[3] or STD.get(row[4], "-")]
for own, std, code in aliases:
    names_of[code].append(own or STD[std])
expected = "\n".join(("%-25s %s    %-12s %s" % (r[0], r[2], r[1], ", ".join(names_of[r[0]]))).rstrip() for r in rows)
page = read("man", "sandboxd-api.7.scd")
section = page.split("\n# ERRORS\n", 1)[1].split("\n# ", 1)[0]
block = section.split("```\n", 2)[1]
listed = block.split("\n", 1)[1].rstrip("\n")
check(listed == expected, "the list in sandboxd-api(7) is the error table")
if listed != expected:
    print("sandboxd-api(7) should list:\n" + expected, file=sys.stderr)

# 3. sandboxd-dbus(5) documents every name
dbus_page = read("man", "sandboxd-dbus.5.scd")
dbus_section = dbus_page.split("\n# ERRORS\n", 1)[1].split("\n# ", 1)[0]
for code, names in names_of.items():
    for name in names:
        if name == "-":
            continue
        entry = re.search(r"^\*(?:org\.freedesktop\.DBus\.Error\.)?%s\*\n((?:\t.*\n)+)" % name, dbus_section, re.M)
        check(entry, "sandboxd-dbus(5) documents %s" % name)
        check(entry and "*%s*" % code in entry.group(1).replace("\n\t", " "),
              "sandboxd-dbus(5) gives %s the code %s" % (name, code))

# 4. docs/openapi.yaml names every code
openapi = read("docs", "openapi.yaml")
for code in codes:
    check("`%s`" % code in openapi, "docs/openapi.yaml names `%s`" % code)

print("%d rows, %d other D-Bus names, %d codes sent; %d failed" % (len(rows), len(aliases), len(used), len(failed)))
sys.exit(1 if failed else 0)
