/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nodes.h"

void nodes_free(NodeEntry *l, size_t n) {
        for (size_t i = 0; l && i < n; i++)
                free(l[i].url);
        free(l);
}

static int fail(NodeEntry *l, size_t n, const char **ret_why, const char *why) {
        nodes_free(l, n);
        *ret_why = why;
        return -EINVAL;
}

int nodes_parse(const char *spec, NodeEntry **ret, size_t *ret_n, const char **ret_why) {
        static const char sep[] = ", \t\r\n";
        NodeEntry *l = NULL;
        const char *p = spec ?: "";
        size_t n = 0;

        *ret = NULL;
        *ret_n = 0;
        *ret_why = NULL;
        if (strnlen(p, NODES_SPEC_MAX + 1) > NODES_SPEC_MAX)
                return fail(l, n, ret_why, "it is longer than 64 KiB");
        for (;;) {
                const char *eq, *url;
                size_t k, len, ulen;
                NodeEntry *m;

                p += strspn(p, sep);
                if (!*p)
                        break;
                len = strcspn(p, sep);
                eq = memchr(p, '=', len);
                if (!eq)
                        return fail(l, n, ret_why, "an entry is not NAME=URL");
                k = (size_t) (eq - p);
                url = eq + 1;
                ulen = (size_t) (p + len - url);
                if (k == 0 || k > NODE_NAME_MAX)
                        return fail(l, n, ret_why, "an entry's NAME is not a node name (a-z, 0-9, a letter first)");
                if (!((ulen > 7 && strncmp(url, "http://", 7) == 0) || (ulen > 8 && strncmp(url, "https://", 8) == 0)))
                        return fail(l, n, ret_why, "an entry's URL is not http://HOST[:PORT] or https://...");
                m = realloc(l, (n + 1) * sizeof(NodeEntry));
                if (!m) {
                        nodes_free(l, n);
                        return -ENOMEM;
                }
                l = m;
                memcpy(l[n].name, p, k);
                l[n].name[k] = 0;
                l[n].url = NULL;
                if (!node_name_is_valid(l[n].name))
                        return fail(l, n, ret_why, "an entry's NAME is not a node name (a-z, 0-9, a letter first)");
                for (size_t i = 0; i < n; i++)
                        if (streq(l[i].name, l[n].name))
                                return fail(l, n, ret_why, "a node is named twice");
                while (ulen > 0 && url[ulen - 1] == '/')
                        ulen--;
                l[n].url = strndup(url, ulen);
                if (!l[n].url) {
                        nodes_free(l, n);
                        return -ENOMEM;
                }
                n++;
                p += len;
        }
        *ret = l;
        *ret_n = n;
        return 0;
}

int nodes_lookup(const char *spec, const char *node, char **ret_url, const char **ret_why) {
        NodeEntry *l;
        size_t n;
        int r;

        *ret_url = NULL;
        r = nodes_parse(spec, &l, &n, ret_why);
        if (r < 0)
                return r;
        r = -ENOENT;
        for (size_t i = 0; i < n; i++)
                if (streq(l[i].name, node)) {
                        *ret_url = TAKE_PTR(l[i].url);
                        r = 0;
                        break;
                }
        nodes_free(l, n);
        return r;
}
