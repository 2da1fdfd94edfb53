/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "internal.h"

static bool unreserved(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
               c == '_' || c == '~';
}

int url_append_escaped(Buf *b, const char *s, bool keep_slash) {
        static const char hex[] = "0123456789ABCDEF";
        int r;

        r = buf_reserve(b, strlen(s) * 3);
        if (r < 0)
                return r;
        for (const char *p = s; *p; p++) {
                if (unreserved(*p) || (keep_slash && *p == '/'))
                        b->data[b->len++] = *p;
                else {
                        unsigned char u = (unsigned char) *p;
                        b->data[b->len++] = '%';
                        b->data[b->len++] = hex[u >> 4];
                        b->data[b->len++] = hex[u & 15];
                }
        }
        b->data[b->len] = 0;
        return 0;
}

int url_append_query(Buf *b, const char *key, const char *value) {
        int r;

        r = buf_puts(b, b->data && strchr(b->data, '?') ? "&" : "?");
        if (r >= 0)
                r = url_append_escaped(b, key, false);
        if (r >= 0 && value) {
                r = buf_puts(b, "=");
                if (r >= 0)
                        r = url_append_escaped(b, value, false);
        }
        return r;
}

/* Path segments must not be empty, "." or "..": those would change the route. */
static bool segment_is_valid(const char *s) {
        return s && *s && !streq(s, ".") && !streq(s, "..");
}

int url_session(Buf *b, const sandboxd_client *c, const char *session, const char *tail) {
        int r;

        if (!segment_is_valid(session))
                return -EINVAL;
        r = buf_puts(b, c->base_url);
        if (r >= 0)
                r = buf_puts(b, "/v1/sessions/");
        if (r >= 0)
                r = url_append_escaped(b, session, false);
        if (r >= 0 && tail) {
                r = buf_puts(b, "/");
                if (r >= 0)
                        r = buf_puts(b, tail);
        }
        return r;
}

int url_command(Buf *b, const sandboxd_client *c, const char *session, const char *request_id, const char *tail) {
        int r;

        if (!segment_is_valid(request_id))
                return -EINVAL;
        r = url_session(b, c, session, "commands/");
        if (r >= 0)
                r = url_append_escaped(b, request_id, false);
        if (r >= 0 && tail) {
                r = buf_puts(b, "/");
                if (r >= 0)
                        r = buf_puts(b, tail);
        }
        return r;
}

int url_file(Buf *b, const sandboxd_client *c, const char *session, const char *path) {
        const char *p = path;
        bool first = true;
        int r;

        if (!path)
                return -EINVAL;
        r = url_session(b, c, session, "files/");
        while (r >= 0 && *p) {
                size_t n = strcspn(p, "/");
                _cleanup_free_ char *seg = NULL;

                if (n == 0) {
                        p++;
                        continue;
                }
                seg = strndup(p, n);
                if (!seg)
                        return -ENOMEM;
                /* ".." is sandboxd's to judge, as over D-Bus (it resolves the path beneath the
                 * workspace: invalid_path for one that climbs out); escaped, so that no HTTP
                 * stack on the way resolves it away first */
                if (!streq(seg, ".")) {
                        if (!first)
                                r = buf_puts(b, "/");
                        if (r >= 0)
                                r = streq(seg, "..") ? buf_puts(b, "%2E%2E") : url_append_escaped(b, seg, false);
                        first = false;
                }
                p += n;
        }
        return r;
}

int url_parse_endpoint(const char *url, char **ret_base, char **ret_unix_path) {
        _cleanup_free_ char *base = NULL, *unix_path = NULL;
        const char *rest;
        size_t n;

        if (!url || !*url)
                url = "unix:" SANDBOXD_DEFAULT_SOCKET;

        if ((rest = startswith(url, "unix:"))) {
                if (rest[0] != '/')
                        return -EINVAL;
                unix_path = strdup(rest);
                base = strdup("http://localhost");
        } else if (startswith(url, "http://") || startswith(url, "https://")) {
                rest = strstr(url, "://") + 3;
                if (!*rest || *rest == '/' || strpbrk(url, " \t\r\n?#"))
                        return -EINVAL;
                n = strlen(url);
                while (n > 0 && url[n - 1] == '/')
                        n--;
                base = strndup(url, n);
        } else
                return -EINVAL;
        if (!base || (startswith(url, "unix:") && !unix_path))
                return -ENOMEM;

        *ret_base = TAKE_PTR(base);
        *ret_unix_path = TAKE_PTR(unix_path);
        return 0;
}

int url_scope_header(const char *user, const char *workspace, char **ret) {
        Buf b = {};
        int r;

        r = buf_puts(&b, "X-Sandboxd-Scope: ");
        if (r >= 0)
                r = url_append_escaped(&b, user, false);
        if (r >= 0)
                r = buf_puts(&b, "/");
        if (r >= 0)
                r = url_append_escaped(&b, workspace, false);
        if (r < 0) {
                buf_done(&b);
                return r;
        }
        *ret = b.data;
        return 0;
}
