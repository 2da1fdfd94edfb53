/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "parse-util.h"

typedef struct SuffixFactor {
        const char *suffix;
        uint64_t factor;
} SuffixFactor;

int parse_uint64(const char *s, uint64_t *ret) {
        unsigned long long v;
        char *end;

        if (!s || !(*s >= '0' && *s <= '9'))
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || *end != 0)
                return -ERANGE;
        *ret = v;
        return 0;
}

static int parse_with_suffix(const char *s, const SuffixFactor *table,
                             size_t n, uint64_t *ret) {
        unsigned long long v;
        char *end;

        if (!s || !(*s >= '0' && *s <= '9'))
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0)
                return -ERANGE;
        for (size_t i = 0; i < n; i++)
                if (streq(end, table[i].suffix)) {
                        if (table[i].factor != 0 && v > UINT64_MAX / table[i].factor)
                                return -ERANGE;
                        *ret = v * table[i].factor;
                        return 0;
                }
        return -EINVAL;
}

int parse_size(const char *s, uint64_t *ret) {
        static const SuffixFactor table[] = {
                { "", 1 },
                { "K", 1ULL << 10 },
                { "M", 1ULL << 20 },
                { "G", 1ULL << 30 },
                { "T", 1ULL << 40 },
        };
        return parse_with_suffix(s, table, ELEMENTSOF(table), ret);
}

int parse_duration(const char *s, uint64_t *ret_usec) {
        static const SuffixFactor table[] = {
                { "", USEC_PER_SEC },
                { "s", USEC_PER_SEC },
                { "ms", USEC_PER_MSEC },
                { "min", 60 * USEC_PER_SEC },
                { "h", 3600 * USEC_PER_SEC },
                { "d", 86400 * USEC_PER_SEC },
        };
        return parse_with_suffix(s, table, ELEMENTSOF(table), ret_usec);
}

int parse_percent(const char *s, uint64_t *ret) {
        static const SuffixFactor table[] = {
                { "%", 1 },
        };
        uint64_t v;
        int r;

        r = parse_with_suffix(s, table, ELEMENTSOF(table), &v);
        if (r < 0)
                return r;
        if (v == 0 || v > 100000)
                return -ERANGE;
        *ret = v;
        return 0;
}

int parse_flag(const char *s) {
        if (!s)
                return -EINVAL;
        if (streq(s, "") || streq(s, "1") || streq(s, "true"))
                return 1;
        if (streq(s, "0") || streq(s, "false"))
                return 0;
        return -EINVAL;
}

int parse_mode(const char *s, unsigned *ret) {
        unsigned long l;
        char *end;

        if (!s || !(*s >= '0' && *s <= '7'))
                return -EINVAL;
        errno = 0;
        l = strtoul(s, &end, 8);
        if (errno != 0 || *end != 0 || l > 0777)
                return -EINVAL;
        *ret = (unsigned) l;
        return 0;
}
