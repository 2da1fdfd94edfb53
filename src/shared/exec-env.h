/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "buf.h"

/* What PID 1 hands sandboxd-exec (src/exec/): the command's environment and command line
 * as an EnvironmentFile= (systemd's env-file syntax), root-only, instead of world-readable
 * Environment= and ExecStart= lines in the transient unit file. */

#define EXEC_ENV_PREFIX "SANDBOXD_EXEC_"

/* Appends `NAME="value"` lines: env entries ("NAME=value", names already validated), then
 * SANDBOXD_EXEC_PATH, SANDBOXD_EXEC_ARGC and SANDBOXD_EXEC_ARGV_<i>. Every value is
 * quoted so that systemd reads back exactly the bytes given (newlines included). */
int exec_env_format(Buf *b, const char *path, char * const *argv, char * const *env);

/* Set (to 1) for a command on a pseudo-terminal: sandboxd-exec makes its stdin the
 * controlling terminal of a session it leads, or exits with systemd's 208 (STDIN). */
#define EXEC_ENV_TTY EXEC_ENV_PREFIX "TTY"

/* Where a command finds the user records of its scope; sandboxd-exec waits for its own. */
#define EXEC_USERDB_DIR "/run/userdb"
