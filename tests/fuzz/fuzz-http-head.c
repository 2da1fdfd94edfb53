/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes what sandboxd reads from a server in a session that answers a relayed WebSocket
 * upgrade: the head of its response (http-head.c), then the tokens of its fields. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http-head.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static HttpHead h;
        int r;

        r = http_head_parse((const char *) data, size, &h);
        if (r <= 0)
                return 0;
        if (h.size > size || h.size > HTTP_HEAD_MAX || h.n_fields > HTTP_HEAD_FIELDS_MAX || h.status < 100 || h.status > 999)
                abort();
        for (size_t i = 0; i < h.n_fields; i++) {
                const HttpHeadField *f = &h.fields[i];

                if (f->name < (const char *) data || f->name + f->name_len > (const char *) data + h.size ||
                    f->value < (const char *) data || f->value + f->value_len > (const char *) data + h.size)
                        abort();
                (void) http_value_has_token(f->value, f->value_len, "upgrade");
        }
        (void) http_head_find(&h, "Sec-WebSocket-Accept");
        return 0;
}
