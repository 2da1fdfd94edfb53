/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes what a tenant names nodes with (validate.c): session ids of both forms in paths
 * and D-Bus object paths (session_id_is_valid(), session_id_prefix(), the node part) and
 * the X-Sandboxd-Scope header of a create (scope_header_matches()). The input is
 * VALUE \0 USER \0 WORKSPACE; a USER and WORKSPACE percent-encoded byte by byte must
 * match themselves. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_id(const char *s) {
        char id[SESSION_ID_SIZE], node[NODE_NAME_MAX + 1];
        size_t n = session_id_prefix(s, id), k;

        if (n > 0 && (!session_id_is_valid(id) || strncmp(s, id, n) != 0 || strlen(id) != n))
                abort();
        if (!session_id_is_valid(s))
                return;
        if (strlen(s) > SESSION_ID_MAX)
                abort();
        k = session_id_node_len(s);
        if (k == 0)
                return;
        if (k > NODE_NAME_MAX)
                abort();
        memcpy(node, s, k);
        node[k] = 0;
        if (!node_name_is_valid(node) || !session_id_is_of_node(s, node))
                abort();
}

static char *encode(const char *s) {
        size_t n = strlen(s);
        char *out = malloc(3 * n + 1);

        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i++)
                snprintf(out + 3 * i, 4, "%%%02X", (unsigned char) s[i]);
        out[3 * n] = 0;
        return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *buf = malloc(size + 3), *user, *workspace;

        if (!buf)
                return 0;
        memcpy(buf, data, size);
        buf[size] = buf[size + 1] = buf[size + 2] = 0;
        user = buf + strlen(buf) + 1;
        if (user > buf + size)
                user = buf + size + 1;
        workspace = user + strlen(user) + 1;

        check_id(buf);
        (void) scope_header_matches(buf, user, workspace);
        if (strlen(user) <= 256 && strlen(workspace) <= 256) {
                char *u = encode(user), *w = encode(workspace), *v = NULL;

                if (u && w && asprintf(&v, "%s/%s", u, w) >= 0) {
                        if (!scope_header_matches(v, user, workspace))
                                abort();
                        free(v);
                }
                free(u);
                free(w);
        }
        free(buf);
        return 0;
}
