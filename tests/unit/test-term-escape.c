/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <string.h>

#include "term-escape.h"
#include "tests.h"

/* Feeds s in one call and returns what passes through until the first action. */
static EscapeAction feed(EscapeState *st, const char *s, char *ret, size_t *ret_consumed) {
        uint8_t out[256];
        size_t n = strlen(s), o, used;
        EscapeAction a;

        used = escape_filter(st, (const uint8_t *) s, n, out, &o, &a);
        memcpy(ret, out, o);
        ret[o] = 0;
        if (ret_consumed)
                *ret_consumed = used;
        return a;
}

int main(void) {
        EscapeState st;
        char out[300];
        size_t used;

        /* plain bytes pass */
        escape_init(&st, '~');
        ASSERT(feed(&st, "ls -l\r", out, NULL) == ESCAPE_NONE);
        ASSERT_STREQ(out, "ls -l\r");

        /* ~. first on a line detaches; what came before it passes, the rest waits */
        escape_init(&st, '~');
        ASSERT(feed(&st, "echo\r~.more", out, &used) == ESCAPE_DETACH);
        ASSERT_STREQ(out, "echo\r");
        ASSERT(used == 7);

        /* at the very start too, and after LF */
        escape_init(&st, '~');
        ASSERT(feed(&st, "~.", out, NULL) == ESCAPE_DETACH);
        ASSERT_STREQ(out, "");
        escape_init(&st, '~');
        ASSERT(feed(&st, "a\n~.", out, NULL) == ESCAPE_DETACH);
        ASSERT_STREQ(out, "a\n");

        /* not first on a line: the tilde is data */
        escape_init(&st, '~');
        ASSERT(feed(&st, "cd ~.x", out, NULL) == ESCAPE_NONE);
        ASSERT_STREQ(out, "cd ~.x");

        /* ~~ sends one tilde, and the line goes on (a later ~. is data) */
        escape_init(&st, '~');
        ASSERT(feed(&st, "~~.", out, NULL) == ESCAPE_NONE);
        ASSERT_STREQ(out, "~.");

        /* ~ and another byte sends both */
        escape_init(&st, '~');
        ASSERT(feed(&st, "~/bin\r", out, NULL) == ESCAPE_NONE);
        ASSERT_STREQ(out, "~/bin\r");

        /* ~? asks for help and leaves the line start, so ~. follows */
        escape_init(&st, '~');
        ASSERT(feed(&st, "~?~.", out, &used) == ESCAPE_HELP);
        ASSERT(used == 2);
        ASSERT(feed(&st, "~.", out, NULL) == ESCAPE_DETACH);

        /* split across reads: the held tilde waits for the next byte */
        escape_init(&st, '~');
        ASSERT(feed(&st, "\r~", out, NULL) == ESCAPE_NONE);
        ASSERT_STREQ(out, "\r");
        ASSERT(st.held);
        ASSERT(feed(&st, ".", out, NULL) == ESCAPE_DETACH);
        escape_init(&st, '~');
        ASSERT(feed(&st, "~", out, NULL) == ESCAPE_NONE);
        ASSERT(feed(&st, "x", out, NULL) == ESCAPE_NONE);
        ASSERT_STREQ(out, "~x");

        /* a held tilde then a newline: both pass, and the next line may escape */
        escape_init(&st, '~');
        ASSERT(feed(&st, "~\r~.", out, NULL) == ESCAPE_DETACH);
        ASSERT_STREQ(out, "~\r");

        /* no escape character: everything passes */
        escape_init(&st, 0);
        ASSERT(feed(&st, "~.", out, NULL) == ESCAPE_NONE);
        ASSERT_STREQ(out, "~.");

        /* another escape character */
        escape_init(&st, '^');
        ASSERT(feed(&st, "~.^.", out, NULL) == ESCAPE_NONE);
        ASSERT_STREQ(out, "~.^.");
        escape_init(&st, '^');
        ASSERT(feed(&st, "^.", out, NULL) == ESCAPE_DETACH);

        /* the worst case output: n + 1 bytes (a held tilde from before, then n bytes) */
        escape_init(&st, '~');
        ASSERT(feed(&st, "~", out, NULL) == ESCAPE_NONE);
        ASSERT(feed(&st, "abc", out, NULL) == ESCAPE_NONE);
        ASSERT_STREQ(out, "~abc");

        return TESTS_DONE();
}
