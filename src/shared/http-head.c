/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "http-head.h"

static bool is_tchar(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c != 0 && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_ows(char c) {
        return c == ' ' || c == '\t';
}

/* A field value: visible bytes, obs-text, spaces and tabs; no control bytes. */
static bool value_is_valid(const char *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) v[i];

                if ((c < 0x20 && c != '\t') || c == 0x7f)
                        return false;
        }
        return true;
}

/* The next line: its length without its end, and where the one after begins. 0: incomplete. */
static int next_line(const char *p, size_t n, size_t pos, size_t *ret_len, size_t *ret_next) {
        const char *nl = memchr(p + pos, '\n', n - pos);
        size_t len;

        if (!nl)
                return 0;
        len = (size_t) (nl - (p + pos));
        if (len > 0 && p[pos + len - 1] == '\r')
                len--;
        *ret_len = len;
        *ret_next = (size_t) (nl - p) + 1;
        return 1;
}

int http_head_parse(const char *p, size_t n, HttpHead *ret) {
        size_t pos = 0, len, next;
        const char *l;
        int r;

        if (n > HTTP_HEAD_MAX)
                n = HTTP_HEAD_MAX;
        r = next_line(p, n, pos, &len, &next);
        if (r == 0)
                goto incomplete;
        /* "HTTP/1.1 101 Switching Protocols": the reason may be empty */
        l = p;
        if (len < 12 || memcmp(l, "HTTP/1.", 7) != 0 || (l[7] != '0' && l[7] != '1') || l[8] != ' ' ||
            l[9] < '1' || l[9] > '9' || l[10] < '0' || l[10] > '9' || l[11] < '0' || l[11] > '9' ||
            (len > 12 && l[12] != ' ') || !value_is_valid(l, len))
                return -EBADMSG;
        ret->status = (unsigned) ((l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0'));
        ret->n_fields = 0;
        pos = next;

        for (;;) {
                HttpHeadField *f;
                const char *colon, *v, *end;

                r = next_line(p, n, pos, &len, &next);
                if (r == 0)
                        goto incomplete;
                l = p + pos;
                if (len == 0) {
                        ret->size = next;
                        return 1;
                }
                colon = memchr(l, ':', len);
                if (!colon || colon == l)
                        return -EBADMSG; /* also an obsolete folded line, which begins with a space */
                for (const char *c = l; c < colon; c++)
                        if (!is_tchar(*c))
                                return -EBADMSG;
                v = colon + 1;
                end = l + len;
                while (v < end && is_ows(*v))
                        v++;
                while (end > v && is_ows(end[-1]))
                        end--;
                if (!value_is_valid(v, (size_t) (end - v)))
                        return -EBADMSG;
                if (ret->n_fields >= HTTP_HEAD_FIELDS_MAX)
                        return -E2BIG;
                f = &ret->fields[ret->n_fields++];
                *f = (HttpHeadField) { .name = l, .name_len = (size_t) (colon - l), .value = v, .value_len = (size_t) (end - v) };
                pos = next;
        }

incomplete:
        return n >= HTTP_HEAD_MAX ? -E2BIG : 0;
}

const HttpHeadField *http_head_find(const HttpHead *h, const char *name) {
        size_t l = strlen(name);

        for (size_t i = 0; i < h->n_fields; i++)
                if (h->fields[i].name_len == l && strncasecmp(h->fields[i].name, name, l) == 0)
                        return &h->fields[i];
        return NULL;
}

bool http_value_has_token(const char *value, size_t len, const char *token) {
        size_t tl = strlen(token), i = 0;

        while (i < len) {
                size_t s, e;

                while (i < len && (is_ows(value[i]) || value[i] == ','))
                        i++;
                s = i;
                while (i < len && value[i] != ',')
                        i++;
                e = i;
                while (e > s && is_ows(value[e - 1]))
                        e--;
                if (e - s == tl && strncasecmp(value + s, token, tl) == 0)
                        return true;
        }
        return false;
}
