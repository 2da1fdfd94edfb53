/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <string.h>
#include <strings.h>

#include "validate.h"

static bool in_range(char c, char lo, char hi) {
        return c >= lo && c <= hi;
}

bool user_name_is_valid(const char *s) {
        size_t n;

        if (!s || !(in_range(s[0], 'a', 'z') || s[0] == '_'))
                return false;
        for (n = 1; s[n]; n++) {
                char c = s[n];
                if (!(in_range(c, 'a', 'z') || in_range(c, '0', '9') || c == '_' || c == '-'))
                        return false;
        }
        return n <= 32;
}

bool workspace_name_is_valid(const char *s) {
        size_t n;

        if (!s)
                return false;
        for (n = 0; s[n]; n++) {
                char c = s[n];
                if (!(in_range(c, 'a', 'z') || in_range(c, '0', '9') || c == '_' || c == '-'))
                        return false;
        }
        return n >= 1 && n <= 64;
}

bool image_name_is_valid(const char *s) {
        /* a workspace name that starts with a letter or digit: never "-x" on a command line,
         * and no '.', so that NAME.json and the hidden staging directories cannot clash */
        return workspace_name_is_valid(s) && s[0] != '_' && s[0] != '-';
}

bool request_id_is_valid(const char *s) {
        size_t n;

        if (!s)
                return false;
        for (n = 0; s[n]; n++) {
                char c = s[n];
                if (!(in_range(c, 'a', 'z') || in_range(c, 'A', 'Z') || in_range(c, '0', '9') ||
                      c == '.' || c == '_' || c == '-'))
                        return false;
        }
        return n >= 1 && n <= 64;
}

bool request_id_is_reserved(const char *s) {
        /* sandboxd's own commands (the purge of a workspace) */
        return s && strncasecmp(s, "sandboxd.", 9) == 0;
}

bool node_name_is_valid(const char *s) {
        size_t n;

        if (!s || !in_range(s[0], 'a', 'z'))
                return false;
        for (n = 1; s[n]; n++)
                if (!(in_range(s[n], 'a', 'z') || in_range(s[n], '0', '9')) || n >= NODE_NAME_MAX)
                        return false;
        return true;
}

static bool hex16(const char *s) {
        size_t n;

        for (n = 0; s[n]; n++)
                if (!(in_range(s[n], '0', '9') || in_range(s[n], 'a', 'f')) || n >= SESSION_ID_HEX)
                        return false;
        return n == SESSION_ID_HEX;
}

size_t session_id_node_len(const char *id) {
        const char *u;

        if (!id)
                return 0;
        u = strchr(id, '_');
        return u ? (size_t) (u - id) : 0;
}

bool session_id_is_valid(const char *s) {
        char node[NODE_NAME_MAX + 1];
        size_t n;

        if (!s)
                return false;
        n = strnlen(s, SESSION_ID_MAX + 1);
        if (n > SESSION_ID_MAX)
                return false;
        if (n == SESSION_ID_HEX)
                return hex16(s);
        if (n < SESSION_ID_HEX + 2 || s[n - SESSION_ID_HEX - 1] != '_')
                return false;
        memcpy(node, s, n - SESSION_ID_HEX - 1);
        node[n - SESSION_ID_HEX - 1] = 0;
        return node_name_is_valid(node) && hex16(s + n - SESSION_ID_HEX);
}

bool session_id_is_of_node(const char *id, const char *node) {
        size_t n = session_id_node_len(id);

        return n == 0 || (node && strlen(node) == n && strncmp(id, node, n) == 0);
}

size_t session_id_prefix(const char *s, char ret[static SESSION_ID_SIZE]) {
        size_t n = 0;

        ret[0] = 0;
        if (!s)
                return 0;
        while (n <= SESSION_ID_MAX && (in_range(s[n], 'a', 'z') || in_range(s[n], '0', '9') || s[n] == '_'))
                n++;
        if (n > SESSION_ID_MAX)
                return 0;
        memcpy(ret, s, n);
        ret[n] = 0;
        if (!session_id_is_valid(ret)) {
                ret[0] = 0;
                return 0;
        }
        return n;
}

static int unhex(char c) {
        return in_range(c, '0', '9') ? c - '0' : in_range(c, 'a', 'f') ? c - 'a' + 10 : in_range(c, 'A', 'F') ? c - 'A' + 10 : -1;
}

/* Decodes one part of the header, up to '/' or the end: *s moves past it. -EINVAL: bad. */
static int scope_part(const char **s, char *buf, size_t size) {
        size_t n = 0;
        const char *p = *s;

        for (; *p && *p != '/'; p++) {
                int c = (unsigned char) *p;

                if (c == '%') {
                        int hi = unhex(p[1]), lo = hi < 0 ? -1 : unhex(p[2]);

                        if (lo < 0)
                                return -EINVAL;
                        c = hi * 16 + lo;
                        p += 2;
                        if (c == 0)
                                return -EINVAL;
                }
                if (n + 1 >= size)
                        return -EINVAL;
                buf[n++] = (char) c;
        }
        buf[n] = 0;
        *s = p;
        return 0;
}

bool scope_header_matches(const char *value, const char *user, const char *workspace) {
        char u[257], w[257];
        const char *p = value;

        if (!value || !user || !workspace)
                return false;
        if (scope_part(&p, u, sizeof(u)) < 0 || *p != '/')
                return false;
        p++;
        if (scope_part(&p, w, sizeof(w)) < 0 || *p != 0)
                return false;
        return streq(u, user) && streq(w, workspace);
}

bool env_name_is_valid(const char *s) {
        size_t n;

        if (!s || !(in_range(s[0], 'a', 'z') || in_range(s[0], 'A', 'Z') || s[0] == '_'))
                return false;
        for (n = 1; s[n]; n++) {
                char c = s[n];
                if (!(in_range(c, 'a', 'z') || in_range(c, 'A', 'Z') || in_range(c, '0', '9') || c == '_'))
                        return false;
        }
        return n <= 255;
}

bool env_name_is_reserved(const char *s) {
        static const char *const reserved[] = {
                "HOME", "TMPDIR", "TMP", "TEMP", "XDG_RUNTIME_DIR", "USER", "LOGNAME",
                "INVOCATION_ID", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT",
        };
        const char *tail;

        for (size_t i = 0; i < ELEMENTSOF(reserved); i++)
                if (streq(s, reserved[i]))
                        return true;

        /* sandboxd's own: SANDBOXD_EXEC_* carries the command line to sandboxd-exec */
        if (strncasecmp(s, "SANDBOXD_", 9) == 0)
                return true;

        /* XDG_CONFIG_HOME, XDG_CACHE_HOME, XDG_DATA_HOME, XDG_STATE_HOME and any future one */
        tail = startswith(s, "XDG_");
        if (tail) {
                size_t l = strlen(tail);
                if (l >= 5 && streq(tail + l - 5, "_HOME"))
                        return true;
        }
        return false;
}

int relative_path_normalize(const char *path, char **ret) {
        _cleanup_free_ char *out = NULL;
        size_t len = 0, n;
        const char *p = path;

        if (!path || !ret)
                return -EINVAL;
        if (path[0] == '/')
                return -EINVAL;
        n = strlen(path);
        if (n > 4096)
                return -ENAMETOOLONG;

        out = malloc(n + 1);
        if (!out)
                return -ENOMEM;

        while (*p) {
                const char *e = strchrnul(p, '/');
                size_t l = (size_t) (e - p);

                if (l == 0 || (l == 1 && p[0] == '.')) {
                        /* skip */
                } else if (l == 2 && p[0] == '.' && p[1] == '.') {
                        char *slash;

                        if (len == 0)
                                return -EPERM; /* climbs above the top */
                        out[len] = 0;
                        slash = strrchr(out, '/');
                        len = slash ? (size_t) (slash - out) : 0;
                } else {
                        if (l > 255)
                                return -ENAMETOOLONG;
                        if (len > 0)
                                out[len++] = '/';
                        memcpy(out + len, p, l);
                        len += l;
                }
                p = *e ? e + 1 : e;
        }

        out[len] = 0;
        *ret = TAKE_PTR(out);
        return 0;
}

int cwd_relative_to(const char *top, const char *cwd, char **ret) {
        const char *rest;

        if (!top || !cwd || !ret || top[0] != '/')
                return -EINVAL;
        if (cwd[0] != '/')
                return relative_path_normalize(cwd, ret);

        rest = startswith(cwd, top);
        if (!rest || (*rest != 0 && *rest != '/'))
                return -EPERM;
        while (*rest == '/')
                rest++;
        return relative_path_normalize(rest, ret);
}
