/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>

#include "encoding.h"
#include "ndjson.h"

/* Bytes that cannot appear raw inside a JSON string (and DEL, for readability). */
static bool needs_escape(unsigned char c) {
        return c < 0x20 || c == '"' || c == '\\' || c == 0x7f;
}

/* Whether any of 8 bytes needs_escape(), a word at a time (this scan is most of the cost of
 * streaming text): a byte below 0x20, or equal to '"', '\\' or DEL. */
static bool word_needs_escape(const char *p) {
        const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
        uint64_t x;

        memcpy(&x, p, sizeof(x));
#define HAS_ZERO_BYTE(v) (((v) - ones) & ~(v) & highs)
        /* below 0x20: exact for any byte, as 0x20 <= 0x80 */
        return ((x - ones * 0x20) & ~x & highs) || HAS_ZERO_BYTE(x ^ (ones * '"')) ||
               HAS_ZERO_BYTE(x ^ (ones * '\\')) || HAS_ZERO_BYTE(x ^ (ones * 0x7f));
#undef HAS_ZERO_BYTE
}

int json_append_string(Buf *b, const char *s, size_t n) {
        static const char hex[] = "0123456789abcdef";
        char *o;
        int r;

        /* Worst case every byte becomes \u00XX. */
        r = buf_reserve(b, n * 6 + 2);
        if (r < 0)
                return r;
        o = b->data + b->len;
        *o++ = '"';
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) s[i];
                size_t run = 0;

                /* Copy runs of plain bytes at once: output is mostly text. */
                while (i + run + 8 <= n && !word_needs_escape(s + i + run))
                        run += 8;
                while (i + run < n && !needs_escape((unsigned char) s[i + run]))
                        run++;
                if (run > 0) {
                        memcpy(o, s + i, run);
                        o += run;
                        i += run;
                        if (i >= n)
                                break;
                        c = (unsigned char) s[i];
                }
                switch (c) {
                case '"':
                        *o++ = '\\', *o++ = '"';
                        break;
                case '\\':
                        *o++ = '\\', *o++ = '\\';
                        break;
                case '\n':
                        *o++ = '\\', *o++ = 'n';
                        break;
                case '\r':
                        *o++ = '\\', *o++ = 'r';
                        break;
                case '\t':
                        *o++ = '\\', *o++ = 't';
                        break;
                default:
                        if (c < 0x20 || c == 0x7f) {
                                *o++ = '\\', *o++ = 'u', *o++ = '0', *o++ = '0';
                                *o++ = hex[c >> 4], *o++ = hex[c & 15];
                        } else
                                *o++ = (char) c;
                }
        }
        *o++ = '"';
        b->len = (size_t) (o - b->data);
        b->data[b->len] = 0;
        return 0;
}

int ndjson_append_accepted(Buf *b, const char *request_id, const char *unit, const char *session_id) {
        int r;

        r = buf_puts(b, "{\"type\":\"accepted\",\"request_id\":");
        if (r >= 0)
                r = json_append_string(b, request_id, strlen(request_id));
        if (r >= 0)
                r = buf_puts(b, ",\"unit\":");
        if (r >= 0)
                r = json_append_string(b, unit, strlen(unit));
        if (r >= 0)
                r = buf_puts(b, ",\"session\":");
        if (r >= 0)
                r = json_append_string(b, session_id, strlen(session_id));
        if (r >= 0)
                r = buf_puts(b, "}\n");
        return r;
}

int ndjson_append_output(Buf *b, const char *stream, const char *data, size_t n, bool final,
                         size_t *ret_consumed) {
        size_t ok;
        bool valid;
        int r;

        ok = utf8_valid_prefix(data, n, &valid);
        if (valid && !final && ok == 0 && n > 0) {
                /* Only an incomplete character so far: wait for more. */
                *ret_consumed = 0;
                return 0;
        }

        r = buf_printf(b, "{\"type\":\"%s\",", stream);
        if (r < 0)
                return r;

        if (valid && (ok == n || !final)) {
                r = buf_puts(b, "\"data\":");
                if (r >= 0)
                        r = json_append_string(b, data, ok);
                *ret_consumed = ok;
        } else {
                /* Not text: ship the whole chunk losslessly. */
                r = buf_puts(b, "\"data_b64\":\"");
                if (r >= 0)
                        r = base64_encode(b, data, n);
                if (r >= 0)
                        r = buf_puts(b, "\"");
                *ret_consumed = n;
        }
        if (r >= 0)
                r = buf_puts(b, "}\n");
        return r;
}

int ndjson_append_result_fields(Buf *b, const CommandResult *res) {
        const char *sig = res->signal > 0 ? signal_to_string(res->signal) : NULL;
        int r;

        r = buf_printf(b, "\"status\":\"%s\",", command_status_to_string(res->status));
        if (r < 0)
                return r;
        if (res->exit_code >= 0)
                r = buf_printf(b, "\"exit_code\":%d,", res->exit_code);
        else
                r = buf_puts(b, "\"exit_code\":null,");
        if (r < 0)
                return r;
        if (sig)
                r = buf_printf(b, "\"signal\":\"%s\",", sig);
        else if (res->signal > 0)
                r = buf_printf(b, "\"signal\":\"SIG%d\",", res->signal);
        else
                r = buf_puts(b, "\"signal\":null,");
        if (r < 0)
                return r;
        r = buf_puts(b, "\"reason\":");
        if (r >= 0)
                r = json_append_string(b, res->reason, strlen(res->reason));
        if (r >= 0)
                r = buf_printf(b,
                               ",\"duration_ms\":%" PRIu64 ",\"usage\":{\"cpu_usec\":%" PRIu64
                               ",\"memory_bytes\":%" PRIu64 ",\"tasks\":%" PRIu64 "}",
                               res->duration_ms, res->usage.cpu_usec, res->usage.memory_bytes,
                               res->usage.tasks);
        return r;
}

int ndjson_append_exit(Buf *b, const CommandResult *res) {
        int r;

        r = buf_puts(b, "{\"type\":\"exit\",");
        if (r >= 0)
                r = ndjson_append_result_fields(b, res);
        if (r >= 0)
                r = buf_puts(b, "}\n");
        return r;
}
