/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "fdstore.h"
#include "validate.h"

static const struct {
        const char *prefix;
        bool command; /* a command's: its number follows the session id */
} kinds[_FDSTORE_KIND_MAX] = {
        [FDSTORE_STDOUT] = { "out-", true },
        [FDSTORE_STDERR] = { "err-", true },
        [FDSTORE_STDIN] = { "in-", true },
        [FDSTORE_PROXY] = { "proxy-", false },
};

/* A command's number as we write it: decimal, no sign, no leading zero, 1 to UINT_MAX. */
static int parse_number(const char *s, unsigned *ret) {
        uint64_t v = 0;

        if (s[0] < '1' || s[0] > '9')
                return -EINVAL;
        for (; *s; s++) {
                if (*s < '0' || *s > '9')
                        return -EINVAL;
                v = v * 10 + (uint64_t) (*s - '0');
                if (v > UINT_MAX)
                        return -EINVAL;
        }
        *ret = (unsigned) v;
        return 0;
}

int fdstore_name_parse(const char *name, FdStoreName *ret) {
        FdStoreName n = {};
        const char *p = NULL;
        size_t l;

        for (FdStoreKind k = 0; k < _FDSTORE_KIND_MAX && !p; k++)
                if ((p = startswith(name, kinds[k].prefix)))
                        n.kind = k;
        if (!p)
                return 0;

        /* <sid>[-<n>]: the id ends at '-' (none has one) */
        l = session_id_prefix(p, n.session_id);
        if (l == 0)
                return -EINVAL;
        p += l;
        if (kinds[n.kind].command ? p[0] != '-' || parse_number(p + 1, &n.n) < 0 : p[0] != 0)
                return -EINVAL;

        *ret = n;
        return 1;
}

int fdstore_name_format(const FdStoreName *n, char ret[static FDSTORE_NAME_MAX]) {
        if (n->kind < 0 || n->kind >= _FDSTORE_KIND_MAX || !session_id_is_valid(n->session_id) ||
            kinds[n->kind].command != (n->n > 0))
                return -EINVAL;
        if (kinds[n->kind].command)
                snprintf(ret, FDSTORE_NAME_MAX, "%s%s-%u", kinds[n->kind].prefix, n->session_id, n->n);
        else
                snprintf(ret, FDSTORE_NAME_MAX, "%s%s", kinds[n->kind].prefix, n->session_id);
        return 0;
}
