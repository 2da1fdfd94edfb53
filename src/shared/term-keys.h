/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

/* The bytes an xterm sends for a key named as the MCP terminal tools name them: Enter, Tab,
 * Escape, Backspace, Up, Down, Left, Right, Home, End, PageUp, PageDown, Delete, C-a..C-z,
 * F1..F12 (names are case-sensitive). Returns the NUL-terminated sequence (static), or NULL
 * for any other name. */
const char *term_key_bytes(const char *name);

/* The names above as a JSON Schema pattern, for the tools' descriptions. */
#define TERM_KEY_PATTERN \
        "^(Enter|Tab|Escape|Backspace|Up|Down|Left|Right|Home|End|PageUp|PageDown|Delete|C-[a-z]|F([1-9]|1[0-2]))$"
