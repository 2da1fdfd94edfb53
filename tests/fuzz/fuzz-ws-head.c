/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes what libsandboxd's terminal reads from a server: the head of the answer to a
 * WebSocket upgrade, then the frames after it (output, the exit frame's JSON, close). */

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        WsHead h;
        size_t used;
        bool result;
        int r;

        /* the accept key of the request's key "dGhlIHNhbXBsZSBub25jZQ==" (RFC 6455's example) */
        r = ws_parse_head((const char *) data, size, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", &h);
        if (r > 0) {
                if (h.head_size > size)
                        abort();
                if (h.upgraded && h.status != 101)
                        abort();
                (void) terminal_replay(data + h.head_size, size - h.head_size, &used, &result);
        } else
                (void) terminal_replay(data, size, &used, &result);
        return 0;
}
