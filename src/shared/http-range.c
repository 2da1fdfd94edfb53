/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <strings.h>

#include "http-range.h"
#include "macro.h"

static const char *skip_ows(const char *p) {
        while (*p == ' ' || *p == '\t')
                p++;
        return p;
}

/* Digits, at least one, saturating at UINT64_MAX; NULL when there are none. */
static const char *parse_digits(const char *p, uint64_t *ret) {
        uint64_t v = 0;

        if (!(*p >= '0' && *p <= '9'))
                return NULL;
        for (; *p >= '0' && *p <= '9'; p++) {
                unsigned d = (unsigned) (*p - '0');

                v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
        }
        *ret = v;
        return p;
}

int http_range_parse(const char *value, uint64_t size, uint64_t *ret_start, uint64_t *ret_length) {
        uint64_t first = 0, last = UINT64_MAX, suffix = 0;
        bool is_suffix = false;
        const char *p;

        if (!value)
                return 0;
        p = skip_ows(value);
        if (strncasecmp(p, "bytes", 5) != 0)
                return 0; /* another unit, or none */
        p = skip_ows(p + 5);
        if (*p != '=')
                return 0;
        p = skip_ows(p + 1);

        if (*p == '-') {
                is_suffix = true;
                p = parse_digits(p + 1, &suffix);
                if (!p)
                        return 0;
        } else {
                p = parse_digits(p, &first);
                if (!p || *p != '-')
                        return 0;
                p++;
                if (*p >= '0' && *p <= '9') {
                        p = parse_digits(p, &last);
                        if (last < first)
                                return 0; /* invalid, not unsatisfiable (RFC 9110 14.1.1) */
                }
        }
        p = skip_ows(p);
        if (*p != 0)
                return 0; /* several ranges ("," follows), or junk */

        if (size == 0)
                return -ERANGE;
        if (is_suffix) {
                if (suffix == 0)
                        return -ERANGE;
                suffix = MIN(suffix, size);
                *ret_start = size - suffix;
                *ret_length = suffix;
                return 1;
        }
        if (first >= size)
                return -ERANGE;
        last = MIN(last, size - 1);
        *ret_start = first;
        *ret_length = last - first + 1;
        return 1;
}
