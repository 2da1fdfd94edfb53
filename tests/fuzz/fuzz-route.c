/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes the matching of request paths against the route table: splitting the path, each
 * pattern with and without a tail, the Allow header. The input is a path as MHD hands it
 * over (decoded, up to its first NUL). */

#include <assert.h>

#include "http.h"
#include "route.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool endswith_char(const char *s, char c) {
        size_t l = strlen(s);
        return l > 0 && s[l - 1] == c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        RoutePath p = ROUTE_PATH_NULL;
        const char *v[ROUTE_PARAMS_MAX];
        const HttpRoute *route;
        char *path, allow[64];
        size_t n;

        path = strndup((const char *) data, size);
        if (!path)
                return 0;
        if (route_path_split(path, &p) < 0) {
                free(path);
                return 0;
        }

        route = http_route_find(&p, v, &n);
        if (route) {
                assert(n <= ROUTE_PARAMS_MAX);
                for (size_t i = 0; i < n; i++)
                        assert(v[i] && strlen(v[i]) <= strlen(path));
                http_route_allow(route, allow, sizeof(allow));
                http_route_allow(route, allow, 4);
        }
        for (size_t i = 0; i < http_routes_n; i++)
                for (int tail = 0; tail <= 1; tail++)
                        if (route_pattern_match(http_routes[i].pattern, tail, &p, v, &n) && tail && n > 0 &&
                            endswith_char(http_routes[i].pattern, '}')) {
                                /* a tail is the end of the path itself */
                                const char *t = v[n - 1];
                                assert(t >= path && t <= path + strlen(path));
                        }
        /* the path as a pattern */
        if (route_pattern_is_valid(path, false))
                (void) route_pattern_match(path, false, &p, v, &n);

        route_path_done(&p);
        free(path);
        return 0;
}
