/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "fdstore.h"
#include "validate.h"

static const char *const kind_prefix[_FDSTORE_KIND_MAX] = {
        [FDSTORE_STDOUT] = "out-",
        [FDSTORE_STDERR] = "err-",
        [FDSTORE_STDIN] = "in-",
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

        for (FdStoreKind k = 0; k < _FDSTORE_KIND_MAX && !p; k++)
                if ((p = startswith(name, kind_prefix[k])))
                        n.kind = k;
        if (!p)
                return 0;

        /* <sid>-<n>: the id is exactly 16 characters */
        if (strnlen(p, 17) < 17 || p[16] != '-')
                return -EINVAL;
        memcpy(n.session_id, p, 16);
        n.session_id[16] = 0;
        if (!session_id_is_valid(n.session_id) || parse_number(p + 17, &n.n) < 0)
                return -EINVAL;

        *ret = n;
        return 1;
}

int fdstore_name_format(const FdStoreName *n, char ret[static FDSTORE_NAME_MAX]) {
        if (n->kind < 0 || n->kind >= _FDSTORE_KIND_MAX || !session_id_is_valid(n->session_id) || n->n == 0)
                return -EINVAL;
        snprintf(ret, FDSTORE_NAME_MAX, "%s%s-%u", kind_prefix[n->kind], n->session_id, n->n);
        return 0;
}
