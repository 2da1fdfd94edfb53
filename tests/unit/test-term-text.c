/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <string.h>

#include "term-text.h"
#include "tests.h"

static char *text(TermText *t, const char *s, Buf *b) {
        b->len = 0;
        if (term_text_feed(t, s, strlen(s), b) < 0)
                return NULL;
        return b->data;
}

int main(void) {
        Buf b = {};
        TermText t = {};

        ASSERT_STREQ(text(&t, "plain\n", &b), "plain\n");
        /* colours and cursor moves go */
        t = (TermText) {};
        ASSERT_STREQ(text(&t, "\x1b[1;31mred\x1b[0m \x1b[2J\x1b[H>>> ", &b), "red >>> ");
        /* CR LF as LF, a title (OSC ... BEL, OSC ... ST) dropped */
        t = (TermText) {};
        ASSERT_STREQ(text(&t, "a\r\nb\x1b]0;title\x07" "c\x1b]2;t\x1b\\d\r\n", &b), "a\nbcd\n");
        /* a sequence cut between two reads */
        t = (TermText) {};
        ASSERT_STREQ(text(&t, "x\x1b[3", &b), "x");
        ASSERT_STREQ(text(&t, "8;5;12my", &b), "y");
        /* a CR cut from its LF */
        t = (TermText) {};
        ASSERT_STREQ(text(&t, "a\r", &b), "a");
        ASSERT_STREQ(text(&t, "\nb", &b), "\nb");
        /* a lone CR (a progress bar redrawing its line) becomes a new line */
        t = (TermText) {};
        ASSERT_STREQ(text(&t, "10%\r20%\r\n", &b), "10%\n20%\n");
        /* other control bytes go, tabs and UTF-8 stay, charset selection goes */
        t = (TermText) {};
        ASSERT_STREQ(text(&t, "\x07\x08\ta\x7f\xc3\xa9\x1b(B.", &b), "\ta\xc3\xa9.");
        buf_done(&b);
        return TESTS_DONE();
}
