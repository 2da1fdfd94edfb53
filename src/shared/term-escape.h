/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The escape character of an interactive terminal client (as ssh's): recognized only
 * first on a line (at the start, or after CR or LF). "~." detaches, "~?" asks for help,
 * "~~" sends one "~", "~" and any other byte sends both. */

typedef enum EscapeAction {
        ESCAPE_NONE,
        ESCAPE_DETACH,
        ESCAPE_HELP,
        _ESCAPE_ACTION_MAX,
        _ESCAPE_ACTION_INVALID = -22,
} EscapeAction;

typedef struct EscapeState {
        uint8_t ch;        /* 0: no escape character, every byte passes */
        bool line_start;
        bool held;         /* an escape character first on its line, not sent yet */
} EscapeState;

void escape_init(EscapeState *s, uint8_t ch);

/* Filters in[0..n) into out (room for n + 1 bytes: a held escape character and the byte
 * after it), stopping after the first action. Returns the bytes of in consumed; *ret_out
 * the bytes written to out, *ret_action what was asked for (ESCAPE_NONE: all consumed). */
size_t escape_filter(EscapeState *s, const uint8_t *in, size_t n, uint8_t *out, size_t *ret_out,
                     EscapeAction *ret_action);
