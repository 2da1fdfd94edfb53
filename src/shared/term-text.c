/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>

#include "term-text.h"

enum {
        TEXT,
        ESC,       /* after ESC */
        CSI,       /* ESC [ ... final byte 0x40..0x7e */
        STRING,    /* ESC ] (OSC), ESC P (DCS), ESC _ , ESC ^: until BEL or ESC \ */
        STRING_ESC,
        CHARSET,   /* ESC ( X, ESC ) X ...: one more byte */
};

int term_text_feed(TermText *t, const char *p, size_t n, Buf *out) {
        int r;

        assert(t);
        assert(out);
        assert(p || n == 0);

        r = buf_reserve(out, n + 1);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) p[i];

                switch (t->state) {
                case ESC:
                        t->state = c == '[' ? CSI
                                   : (c == ']' || c == 'P' || c == '_' || c == '^') ? STRING
                                   : (c == '(' || c == ')' || c == '*' || c == '+' || c == '#' || c == '%') ? CHARSET
                                                                                                    : TEXT;
                        continue;
                case CSI:
                        if (c >= 0x40 && c <= 0x7e)
                                t->state = TEXT;
                        continue;
                case STRING:
                        if (c == 0x07)
                                t->state = TEXT;
                        else if (c == 0x1b)
                                t->state = STRING_ESC;
                        continue;
                case STRING_ESC:
                        t->state = c == '\\' ? TEXT : STRING;
                        continue;
                case CHARSET:
                        t->state = TEXT;
                        continue;
                default:
                        break;
                }

                if (c == 0x1b) {
                        t->state = ESC;
                        continue;
                }
                if (t->cr && c != '\n')
                        /* a lone CR: the line goes on from its start; as text, a new line */
                        out->data[out->len++] = '\n';
                t->cr = false;
                if (c == '\r') {
                        t->cr = true;
                        continue;
                }
                if (c < 0x20 && c != '\n' && c != '\t')
                        continue;
                if (c == 0x7f)
                        continue;
                out->data[out->len++] = (char) c;
        }
        out->data[out->len] = 0;
        return 0;
}
