/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "tail-buf.h"

void tail_buf_init(TailBuf *t, size_t max) {
        assert(t);
        assert(max > 0);
        *t = (TailBuf) { .max = max };
}

/* room for want bytes and a NUL, never more than max + 1 */
static int tail_buf_grow(TailBuf *t, size_t want) {
        size_t a;
        char *p;

        if (want + 1 <= t->alloc)
                return 0;
        a = MIN(MAX(want, MAX(t->alloc * 2, (size_t) 256)), t->max) + 1;
        p = realloc(t->data, a);
        if (!p)
                return -ENOMEM;
        t->data = p;
        t->alloc = a;
        return 0;
}

int tail_buf_append(TailBuf *t, const char *p, size_t n) {
        size_t k;
        int r;

        assert(t);
        assert(p || n == 0);

        if (n == 0)
                return 0;
        r = tail_buf_grow(t, MIN(t->len + n, t->max));
        if (r < 0)
                return r;
        t->total += n;
        if (n >= t->max) {
                /* only its last max bytes stay */
                memcpy(t->data, p + n - t->max, t->max);
                t->len = t->max;
                t->pos = 0;
                return 0;
        }
        if (t->len < t->max) {
                k = MIN(n, t->max - t->len);
                memcpy(t->data + t->len, p, k);
                t->len += k;
                p += k;
                n -= k;
                t->pos = 0;
        }
        /* full: overwrite the oldest bytes, around the end */
        while (n > 0) {
                k = MIN(n, t->max - t->pos);
                memcpy(t->data + t->pos, p, k);
                t->pos = (t->pos + k) % t->max;
                p += k;
                n -= k;
        }
        return 0;
}

static void reverse(char *a, size_t n) {
        for (size_t i = 0; i < n / 2; i++) {
                char c = a[i];
                a[i] = a[n - 1 - i];
                a[n - 1 - i] = c;
        }
}

const char *tail_buf_finish(TailBuf *t, size_t *ret_len, uint64_t *ret_dropped) {
        size_t skip = 0;

        assert(t);

        if (tail_buf_grow(t, 0) < 0)
                return NULL;
        if (t->pos > 0) {
                /* rotate in place: the oldest byte first */
                reverse(t->data, t->pos);
                reverse(t->data + t->pos, t->len - t->pos);
                reverse(t->data, t->len);
                t->pos = 0;
        }
        if (t->total > t->len)
                /* a character cut in front: at most 3 continuation bytes */
                while (skip < 3 && skip < t->len && ((unsigned char) t->data[skip] & 0xc0) == 0x80)
                        skip++;
        t->data[t->len] = 0;
        *ret_len = t->len - skip;
        *ret_dropped = t->total - t->len + skip;
        return t->data + skip;
}

void tail_buf_done(TailBuf *t) {
        free(t->data);
        *t = (TailBuf) { .max = t->max };
}
