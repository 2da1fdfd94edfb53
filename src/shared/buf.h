/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* A growable byte buffer. The data is always NUL-terminated for convenience. */
typedef struct Buf {
        char *data;
        size_t len;
        size_t cap;
} Buf;

int buf_reserve(Buf *b, size_t extra);
int buf_append(Buf *b, const void *p, size_t n);
int buf_puts(Buf *b, const char *s);
int buf_printf(Buf *b, const char *fmt, ...) _printf_(2, 3);
void buf_done(Buf *b);
char *buf_steal(Buf *b);
