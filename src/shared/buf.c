/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdarg.h>

#include "buf.h"

int buf_reserve(Buf *b, size_t extra) {
        size_t want;
        char *p;

        if (extra > SIZE_MAX / 2 - b->len)
                return -ENOMEM;
        want = b->len + extra + 1;
        if (want <= b->cap)
                return 0;
        want = MAX(want, MAX(b->cap * 2, (size_t) 256));
        p = realloc(b->data, want);
        if (!p)
                return -ENOMEM;
        b->data = p;
        b->cap = want;
        return 0;
}

int buf_append(Buf *b, const void *p, size_t n) {
        int r;

        r = buf_reserve(b, n);
        if (r < 0)
                return r;
        if (n > 0)
                memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = 0;
        return 0;
}

int buf_puts(Buf *b, const char *s) {
        return buf_append(b, s, strlen(s));
}

int buf_printf(Buf *b, const char *fmt, ...) {
        va_list ap;
        int n, r;

        va_start(ap, fmt);
        n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -EINVAL;

        r = buf_reserve(b, (size_t) n);
        if (r < 0)
                return r;

        va_start(ap, fmt);
        (void) vsnprintf(b->data + b->len, (size_t) n + 1, fmt, ap);
        va_end(ap);
        b->len += (size_t) n;
        return 0;
}

void buf_done(Buf *b) {
        free(b->data);
        *b = (Buf) {};
}

char *buf_steal(Buf *b) {
        char *p = b->data;
        *b = (Buf) {};
        return p;
}
