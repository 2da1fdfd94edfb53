#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxctl's command line without a sandboxd: --help, --version, usage errors, and that
the help, the bash completion and the man page name the same verbs.

usage: test-sandboxctl.py SANDBOXCTL VERSION COMPLETION MANPAGE.scd"""

import os
import re
import shutil
import subprocess
import tempfile
import sys

sandboxctl, version, completion, manpage = sys.argv[1:5]
VERBS = ["create", "ls", "show", "rm", "freeze", "thaw", "exec", "run", "attach", "shell", "signal", "cp",
         "port", "image", "health", "drain", "mcp"]
failed = 0


def check(cond, what):
    global failed
    if not cond:
        failed += 1
        print("FAIL:", what)
    else:
        print("ok:", what)


def ctl(*args, env=None):
    e = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    e.update(env or {})
    return subprocess.run([sandboxctl] + list(args), capture_output=True, text=True, env=e, timeout=30)


p = ctl("--version")
check(p.returncode == 0 and p.stdout == "sandboxctl %s\n" % version and p.stderr == "",
      "--version prints 'sandboxctl %s' (got %r, exit %d)" % (version, p.stdout, p.returncode))

for flag in ("--help", "-h"):
    p = ctl(flag)
    check(p.returncode == 0 and p.stderr == "", "%s exits 0 quietly (exit %d, stderr %r)" % (flag, p.returncode, p.stderr))
    for verb in VERBS:
        check(re.search(r"^  %s\b" % verb, p.stdout, re.M), "%s describes the verb %s" % (flag, verb))
    for opt in ("--url=", "--key=", "--transport=", "--json", "--version"):
        check(opt in p.stdout, "%s describes %s" % (flag, opt))
    check("exit" in p.stdout and "124" in p.stdout and "125" in p.stdout, "%s tells the exit statuses" % flag)

p = ctl("show", "--help")
check(p.returncode == 0 and "Usage" not in p.stderr and "exec SESSION" in p.stdout, "--help after a verb")

# usage errors: status 1 and a message, or 125 for exec-like verbs (the command's own
# statuses are theirs)
for args, status, msg in (((), 1, "Missing command"),
                          (("frobnicate",), 1, "Unknown command"),
                          (("--frobnicate", "ls"), 1, "unrecognized option"),
                          (("show",), 1, "takes at least 1 argument"),
                          (("create", "a"), 1, "takes 2 arguments"),
                          (("health", "extra"), 1, "takes 0 arguments"),
                          (("exec", "not-a-session", "true"), 125, "not a session id"),
                          (("exec", "--timeout=soon", "0123456789abcdef", "true"), 125, "Invalid --timeout"),
                          (("--url=ftp://x", "ls"), 1, "Invalid --url"),
                          (("--transport=smoke", "ls"), 1, "takes dbus or http"),
                          (("--url=http://127.0.0.1:1", "--transport=dbus", "ls"), 1, "always talks HTTP"),
                          (("create", "--memory-max=lots", "u", "w"), 1, "Invalid --memory-max"),
                          (("create", "--exec-mode=fast", "u", "w"), 1, "takes unit or session, not 'fast'"),
                          (("run", "--exec-mode=Session", "true"), 125, "takes unit or session"),
                          (("signal", "0123456789abcdef", "r", "SIGSEGV"), 1, "Unknown signal"),
                          (("port", "ls"), 1, "takes at least 2 arguments"),
                          (("port", "open", "0123456789abcdef"), 1, "Unknown 'port' command 'open'"),
                          (("port", "expose", "0123456789abcdef"), 1, "takes SESSION PORT"),
                          (("port", "ls", "0123456789abcdef", "80"), 1, "takes SESSION only"),
                          (("port", "expose", "not-a-session", "80"), 1, "not a session id"),
                          (("port", "expose", "0123456789abcdef", "65536"), 1, "not a TCP port"),
                          (("port", "rm", "0123456789abcdef", "0"), 1, "not a TCP port"),
                          (("shell",), 125, "takes at least 1 argument"),
                          (("shell", "nope"), 125, "not a session id"),
                          (("shell", "--stdin", "0123456789abcdef"), 125, "--stdin and --json do not go"),
                          (("exec", "-t", "--json", "0123456789abcdef", "true"), 125, "--stdin and --json do not go")):
    p = ctl(*args)
    check(p.returncode == status and msg in p.stderr and p.stdout == "",
          "sandboxctl %s: exit %d and %r (got %d, %r)" % (" ".join(args), status, msg, p.returncode, p.stderr.strip()))

# nothing listening: a clear message naming where it looked
p = ctl("ls", env={"SANDBOXD_URL": "unix:/nonexistent/sandboxd.sock"})
check(p.returncode == 1 and "cannot reach sandboxd" in p.stderr and "/nonexistent/sandboxd.sock" in p.stderr,
      "unreachable sandboxd is reported (%r)" % p.stderr.strip())

# the default (D-Bus) without a system bus: said so, no quiet fallback to the socket
p = ctl("ls", env={"SANDBOXD_URL": "", "SANDBOXD_TRANSPORT": "",
                   "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent/system_bus_socket"})
check(p.returncode == 1 and "system bus" in p.stderr and "/nonexistent/system_bus_socket" in p.stderr
      and "--transport=http" in p.stderr and "http.sock" not in p.stderr,
      "no system bus is reported (%r)" % p.stderr.strip())

# bash completion: verbs and options (bash-completion's helpers stubbed where it is missing)
stub = """
if [ -f /usr/share/bash-completion/bash_completion ]; then . /usr/share/bash-completion/bash_completion
else
_init_completion() { words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; }
_filedir() { COMPREPLY=($(compgen -f -- "$cur")); }
compopt() { :; }
fi
. "$1"
complete_line() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _sandboxctl; printf '%s\\n' "${COMPREPLY[@]}"; }
"""
def complete(*words):
    p = subprocess.run(["bash", "-c", stub + 'complete_line "${@:2}"', "x", completion] + list(words),
                       capture_output=True, text=True, timeout=30,
                       env={"PATH": os.path.dirname(os.path.abspath(sandboxctl)) + ":/usr/bin:/bin",
                            "SANDBOXD_URL": "unix:/nonexistent/sandboxd.sock"})
    return set(p.stdout.split()), p


got, p = complete("sandboxctl", "")
check(got == set(VERBS), "completion offers the verbs (%r %r)" % (sorted(got), p.stderr))
got, _ = complete("sandboxctl", "exec", "--ti")
check(got == {"--timeout="}, "completion offers exec's options (%r)" % sorted(got))
got, _ = complete("sandboxctl", "--tr")
check(got == {"--transport="}, "completion offers --transport= (%r)" % sorted(got))
got, _ = complete("sandboxctl", "--transport", "")
check(got == {"dbus", "http"}, "completion offers the transports (%r)" % sorted(got))
got, _ = complete("sandboxctl", "create", "--exec")
check(got == {"--exec-mode="}, "completion offers create's --exec-mode= (%r)" % sorted(got))
got, _ = complete("sandboxctl", "run", "--exec-mode", "")
check(got == {"unit", "session"}, "completion offers the exec modes (%r)" % sorted(got))
got, _ = complete("sandboxctl", "--js")
check(got == {"--json"}, "completion offers global options (%r)" % sorted(got))
got, _ = complete("sandboxctl", "port", "")
check(got == {"expose", "ls", "rm"}, "completion offers port's commands (%r)" % sorted(got))
got, _ = complete("sandboxctl", "image", "")
check(got == {"ls", "show", "import", "rm"}, "completion offers image's commands (%r)" % sorted(got))
got, _ = complete("sandboxctl", "create", "--ima")
check(got == {"--image="}, "completion offers create's --image= (%r)" % sorted(got))
got, _ = complete("sandboxctl", "port", "expose", "--h")
check(got == {"--host", "--help"}, "completion offers port's --host (%r)" % sorted(got))
got, _ = complete("sandboxctl", "show", "")
check(got == set(), "no session ids without a sandboxd, and no error (%r)" % sorted(got))

# session ids of both forms from "sandboxctl ls" (a stand-in sandboxctl earlier in PATH)
fake = tempfile.mkdtemp()
with open(os.path.join(fake, "sandboxctl"), "w") as f:
    f.write("#!/bin/sh\nprintf 'ID  USER  WORKSPACE\\nn1_0123456789abcdef  alice  w\\n"
            "0123456789abcdee  bob  w\\nNo  -  -\\nn1-0123456789abcdef  x  x\\n'\n")
os.chmod(os.path.join(fake, "sandboxctl"), 0o755)
p = subprocess.run(["bash", "-c", stub + 'complete_line "${@:2}"', "x", completion, "sandboxctl", "show", ""],
                   capture_output=True, text=True, timeout=30, env={"PATH": fake + ":/usr/bin:/bin"})
got = set(p.stdout.split())
check(got == {"n1_0123456789abcdef", "0123456789abcdee"}, "completion offers session ids of both forms (%r %r)"
      % (sorted(got), p.stderr))
shutil.rmtree(fake)

# the man page documents every verb
if os.path.exists(manpage):
    text = open(manpage).read()
    for verb in VERBS:
        check(re.search(r"^\*%s\*" % verb, text, re.M), "sandboxctl(1) documents %s" % verb)
else:
    check(False, "%s exists" % manpage)

print("%d failed" % failed)
sys.exit(1 if failed else 0)
