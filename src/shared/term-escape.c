/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>

#include "term-escape.h"

void escape_init(EscapeState *s, uint8_t ch) {
        assert(s);
        *s = (EscapeState) { .ch = ch, .line_start = true };
}

size_t escape_filter(EscapeState *s, const uint8_t *in, size_t n, uint8_t *out, size_t *ret_out,
                     EscapeAction *ret_action) {
        size_t i = 0, o = 0;

        assert(s);
        assert(in || n == 0);
        assert(out);
        assert(ret_out);
        assert(ret_action);

        *ret_action = ESCAPE_NONE;
        while (i < n) {
                uint8_t c = in[i++];

                if (s->held) {
                        s->held = false;
                        if (c == '.') {
                                *ret_action = ESCAPE_DETACH;
                                break;
                        }
                        if (c == '?') {
                                s->line_start = true; /* another escape may follow */
                                *ret_action = ESCAPE_HELP;
                                break;
                        }
                        if (c != s->ch)
                                out[o++] = s->ch;
                        out[o++] = c;
                        s->line_start = c == '\r' || c == '\n';
                        continue;
                }

                if (s->ch != 0 && s->line_start && c == s->ch) {
                        s->held = true;
                        continue;
                }

                out[o++] = c;
                s->line_start = c == '\r' || c == '\n';
        }

        *ret_out = o;
        return i;
}
