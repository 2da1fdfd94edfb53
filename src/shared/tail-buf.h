/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

#include "macro.h"

/* The last max bytes of a stream of any length, in at most max bytes of memory (a ring once
 * full): for an answer that returns the newest output and says how much came before it. */
typedef struct TailBuf {
        char *data;
        size_t max;       /* bytes kept at most (> 0) */
        size_t len;       /* bytes kept, <= max */
        size_t alloc;
        size_t pos;       /* once full: where the oldest byte is (and the next one goes) */
        uint64_t total;   /* bytes appended */
} TailBuf;

void tail_buf_init(TailBuf *t, size_t max);
int tail_buf_append(TailBuf *t, const char *p, size_t n);
/* The kept bytes in order, NUL-terminated, in t's own memory (valid until the next call on
 * t); *ret_dropped: bytes appended before them. When some were dropped, a UTF-8 character cut
 * at the start is dropped too (counted). */
const char *tail_buf_finish(TailBuf *t, size_t *ret_len, uint64_t *ret_dropped);
void tail_buf_done(TailBuf *t);
