/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tail-buf.h"
#include "tests.h"

static const char *finish(TailBuf *t, uint64_t *dropped) {
        size_t n;
        const char *p = tail_buf_finish(t, &n, dropped);

        ASSERT(p && strlen(p) == n);
        return p;
}

int main(void) {
        TailBuf t;
        uint64_t d = 99;
        char big[10000];

        /* less than max: all of it */
        tail_buf_init(&t, 8);
        ASSERT(tail_buf_append(&t, "abc", 3) == 0);
        ASSERT(tail_buf_append(&t, "de", 2) == 0);
        ASSERT_STREQ(finish(&t, &d), "abcde");
        ASSERT(d == 0);
        tail_buf_done(&t);

        /* nothing */
        tail_buf_init(&t, 8);
        ASSERT_STREQ(finish(&t, &d), "");
        ASSERT(d == 0);
        tail_buf_done(&t);

        /* around the ring, several times */
        tail_buf_init(&t, 8);
        for (int i = 0; i < 7; i++)
                ASSERT(tail_buf_append(&t, "0123", 4) == 0);
        ASSERT_STREQ(finish(&t, &d), "01230123");
        ASSERT(d == 20);
        tail_buf_done(&t);
        tail_buf_init(&t, 8);
        ASSERT(tail_buf_append(&t, "abcdef", 6) == 0);
        ASSERT(tail_buf_append(&t, "ghi", 3) == 0);
        ASSERT(tail_buf_append(&t, "jk", 2) == 0);
        ASSERT_STREQ(finish(&t, &d), "defghijk");
        ASSERT(d == 3);
        /* appending after finish goes on */
        ASSERT(tail_buf_append(&t, "lm", 2) == 0);
        ASSERT_STREQ(finish(&t, &d), "fghijklm");
        ASSERT(d == 5);
        tail_buf_done(&t);

        /* one chunk larger than max: its end */
        tail_buf_init(&t, 4);
        ASSERT(tail_buf_append(&t, "x", 1) == 0);
        ASSERT(tail_buf_append(&t, "123456789", 9) == 0);
        ASSERT_STREQ(finish(&t, &d), "6789");
        ASSERT(d == 6);
        tail_buf_done(&t);

        /* a UTF-8 character cut at the start goes too, and is counted */
        tail_buf_init(&t, 4);
        ASSERT(tail_buf_append(&t, "a\xc3\xa9" "bcd", 6) == 0); /* kept: \xa9 b c d */
        ASSERT_STREQ(finish(&t, &d), "bcd");
        ASSERT(d == 3);
        tail_buf_done(&t);
        /* not when nothing was dropped */
        tail_buf_init(&t, 4);
        ASSERT(tail_buf_append(&t, "\xa9x", 2) == 0);
        ASSERT_STREQ(finish(&t, &d), "\xa9x");
        ASSERT(d == 0);
        tail_buf_done(&t);

        /* memory stays at max + 1 */
        memset(big, 'z', sizeof(big));
        tail_buf_init(&t, 1000);
        for (int i = 0; i < 50; i++)
                ASSERT(tail_buf_append(&t, big, (size_t) (i * 37) % sizeof(big)) == 0);
        ASSERT(t.alloc <= 1001);
        big[sizeof(big) - 1] = 'E';
        ASSERT(tail_buf_append(&t, big, sizeof(big)) == 0);
        ASSERT(finish(&t, &d)[999] == 'E');
        tail_buf_done(&t);
        return TESTS_DONE();
}
