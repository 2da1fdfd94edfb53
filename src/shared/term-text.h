/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "buf.h"

/* What a terminal's output says, as plain text for a reader that is not a terminal (an
 * agent): escape sequences (CSI, OSC, DCS and the two-byte ones) dropped, CR LF as LF, other
 * control bytes but LF and TAB dropped. UTF-8 passes as it is. The state carries a sequence
 * cut between two calls. */
typedef struct TermText {
        unsigned state;
        bool cr;  /* a CR not yet followed by anything */
} TermText;

int term_text_feed(TermText *t, const char *p, size_t n, Buf *out);
