/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "route.h"

int route_path_split(const char *path, RoutePath *ret) {
        RoutePath p = { .path = path };
        size_t i = 0, len = strlen(path);

        p.copy = strdup(path);
        if (!p.copy)
                return -ENOMEM;

        while (i < len) {
                size_t start, end;

                while (i < len && path[i] == '/')
                        i++;
                if (i >= len)
                        break;
                start = i;
                while (i < len && path[i] != '/')
                        i++;
                end = i;
                if (p.n < ROUTE_SEGMENTS_MAX) {
                        p.copy[end] = 0;
                        p.segments[p.n] = p.copy + start;
                        p.ends[p.n] = end;
                }
                p.n++;
        }
        *ret = p;
        return 0;
}

void route_path_done(RoutePath *p) {
        free(p->copy);
        p->copy = NULL;
        p->n = 0;
}

static bool is_placeholder(const char *s, size_t n) {
        return n >= 3 && s[0] == '{' && s[n - 1] == '}';
}

/* The rest of the path after segment `i - 1` and the one slash that follows it. */
static const char *tail_after(const RoutePath *p, size_t i) {
        size_t pos = i == 0 ? 0 : p->ends[i - 1];

        if (p->path[pos] == '/')
                pos++;
        return p->path + pos;
}

bool route_pattern_match(const char *pattern, bool tail, const RoutePath *p, const char *ret_params[static ROUTE_PARAMS_MAX],
                         size_t *ret_n_params) {
        const char *params[ROUTE_PARAMS_MAX];
        size_t i = 0, n_params = 0;
        const char *s = pattern;

        while (*s == '/')
                s++;
        while (*s) {
                size_t l = strcspn(s, "/");
                bool last = s[l] == 0;

                if (i >= ROUTE_SEGMENTS_MAX)
                        return false;
                if (is_placeholder(s, l)) {
                        if (n_params >= ROUTE_PARAMS_MAX)
                                return false;
                        if (tail && last) {
                                /* The rest, possibly empty: "files" and "files/" both name the top. */
                                if (p->n < i)
                                        return false;
                                params[n_params++] = tail_after(p, i);
                                i = p->n;
                                break;
                        }
                        if (i >= p->n)
                                return false;
                        params[n_params++] = p->segments[i];
                } else if (i >= p->n || strlen(p->segments[i]) != l || strncmp(p->segments[i], s, l) != 0)
                        return false;
                i++;
                s += l;
                while (*s == '/')
                        s++;
        }
        if (i != p->n)
                return false;

        memcpy(ret_params, params, n_params * sizeof(params[0]));
        *ret_n_params = n_params;
        return true;
}

bool route_pattern_is_valid(const char *pattern, bool tail) {
        size_t n = 0, n_params = 0;
        const char *s = pattern;
        bool last_is_param = false;

        if (!s || *s != '/')
                return false;
        s++;
        while (*s) {
                size_t l = strcspn(s, "/");

                if (l == 0)
                        return false;
                last_is_param = is_placeholder(s, l);
                if (last_is_param)
                        n_params++;
                else if (memchr(s, '{', l) || memchr(s, '}', l))
                        return false;
                n++;
                s += l;
                if (*s == '/') {
                        s++;
                        if (*s == 0)
                                return false; /* a trailing slash */
                }
        }
        return n <= ROUTE_SEGMENTS_MAX && n_params <= ROUTE_PARAMS_MAX && (!tail || last_is_param);
}
