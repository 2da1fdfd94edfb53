/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes what the MCP terminal tools do with a command's terminal output: text through
 * term-text.c in the chunks it came in, kept as the last max bytes in a tail-buf.c ring.
 * Input: one byte for max (1..256), one for the chunk size (1..256), then the output. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tail-buf.h"
#include "term-text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        TailBuf raw, text;
        TermText tt = {};
        Buf chunk = {};
        uint64_t text_total = 0, dropped;
        size_t max, step, n;
        const char *p;

        if (size < 2)
                return 0;
        max = (size_t) data[0] + 1;
        step = (size_t) data[1] + 1;
        data += 2;
        size -= 2;
        tail_buf_init(&raw, max);
        tail_buf_init(&text, max);
        for (size_t i = 0; i < size; i += step) {
                size_t k = size - i < step ? size - i : step;

                chunk.len = 0;
                if (term_text_feed(&tt, (const char *) data + i, k, &chunk) < 0 ||
                    tail_buf_append(&raw, (const char *) data + i, k) < 0 ||
                    tail_buf_append(&text, chunk.data, chunk.len) < 0)
                        goto finish;
                /* the text has no escapes and no CR, and at most one byte more than it came */
                if (chunk.len > k + 1 || memchr(chunk.data, 0x1b, chunk.len) || memchr(chunk.data, '\r', chunk.len))
                        abort();
                text_total += chunk.len;
        }
        p = tail_buf_finish(&raw, &n, &dropped);
        if (p) {
                /* the tail is the input's end (but a cut character's continuation bytes) */
                if (n > max || n + dropped != size || memcmp(p, data + dropped, n) != 0 || raw.alloc > max + 1)
                        abort();
        }
        p = tail_buf_finish(&text, &n, &dropped);
        if (p && (n > max || n + dropped != text_total || strlen(p) > n))
                abort();
finish:
        buf_done(&chunk);
        tail_buf_done(&raw);
        tail_buf_done(&text);
        return 0;
}
