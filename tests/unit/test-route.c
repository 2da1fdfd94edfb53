/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "http.h"
#include "parse-util.h"
#include "route.h"
#include "tests.h"

/* The pattern of the route `path` matches (NULL: none), and its placeholders joined by '|'. */
static const char *find(const char *path, char *params, size_t n) {
        RoutePath p = ROUTE_PATH_NULL;
        const char *v[ROUTE_PARAMS_MAX];
        const HttpRoute *route;
        size_t n_params = 0, l = 0;

        if (route_path_split(path, &p) < 0)
                return NULL;
        route = http_route_find(&p, v, &n_params);
        params[0] = 0;
        for (size_t i = 0; route && i < n_params; i++)
                l += (size_t) snprintf(params + l, n - l, "%s%s", i > 0 ? "|" : "", v[i]);
        route_path_done(&p);
        return route ? route->pattern : NULL;
}

#define ASSERT_ROUTE(path, pattern, params)                     \
        do {                                                    \
                char _p[256];                                   \
                ASSERT_STREQ(find(path, _p, sizeof(_p)), pattern); \
                ASSERT_STREQ(_p, params);                       \
        } while (0)

#define ASSERT_NO_ROUTE(path)                                   \
        do {                                                    \
                char _p[256];                                   \
                ASSERT(find(path, _p, sizeof(_p)) == NULL);     \
        } while (0)

static void test_table(void) {
        /* The table itself: well-formed patterns, no two alike, methods known and unique. */
        for (size_t i = 0; i < http_routes_n; i++) {
                const HttpRoute *r = &http_routes[i];

                ASSERT(route_pattern_is_valid(r->pattern, FLAGS_SET(r->flags, HTTP_ROUTE_TAIL)));
                ASSERT(r->methods[0].name);
                for (size_t j = 0; j < i; j++)
                        ASSERT(!streq(r->pattern, http_routes[j].pattern));
                for (size_t j = 0; j < HTTP_METHODS_MAX && r->methods[j].name; j++) {
                        const char *m = r->methods[j].name;

                        ASSERT(streq(m, "GET") || streq(m, "POST") || streq(m, "PUT") || streq(m, "DELETE") ||
                               /* the relay to an exposed port passes these on too */
                               (FLAGS_SET(r->flags, HTTP_ROUTE_RELAY) && (streq(m, "PATCH") || streq(m, "OPTIONS"))));
                        ASSERT(r->methods[j].handler);
                        for (size_t k = 0; k < j; k++)
                                ASSERT(!streq(m, r->methods[k].name));
                }
        }
}

static void test_match(void) {
        ASSERT_ROUTE("/healthz", "/healthz", "");
        ASSERT_ROUTE("//healthz/", "/healthz", "");
        ASSERT_ROUTE("/v1/health", "/v1/health", "");
        ASSERT_ROUTE("/v1//health", "/v1/health", "");
        ASSERT_ROUTE("/v1/sessions", "/v1/sessions", "");
        ASSERT_ROUTE("/v1/sessions/", "/v1/sessions", "");
        ASSERT_ROUTE("/v1/sessions/abc", "/v1/sessions/{sid}", "abc");
        ASSERT_ROUTE("/v1/sessions/abc/freeze", "/v1/sessions/{sid}/freeze", "abc");
        ASSERT_ROUTE("/v1/sessions/abc/commands/r1", "/v1/sessions/{sid}/commands/{rid}", "abc|r1");
        ASSERT_ROUTE("/v1/sessions/abc/commands/r1/events", "/v1/sessions/{sid}/commands/{rid}/events", "abc|r1");
        ASSERT_ROUTE("/v1/sessions/abc/commands/events", "/v1/sessions/{sid}/commands/{rid}", "abc|events");

        /* files: the rest of the path, as it was, after the one slash following "files" */
        ASSERT_ROUTE("/v1/sessions/abc/files", "/v1/sessions/{sid}/files", "abc");
        ASSERT_ROUTE("/v1/sessions/abc/files/", "/v1/sessions/{sid}/files", "abc"); /* the top all the same */
        ASSERT_ROUTE("/v1/sessions/abc/files/a", "/v1/sessions/{sid}/files/{path}", "abc|a");
        ASSERT_ROUTE("/v1/sessions/abc/files/a//b/", "/v1/sessions/{sid}/files/{path}", "abc|a//b/");
        ASSERT_ROUTE("/v1/sessions/abc/files//etc", "/v1/sessions/{sid}/files/{path}", "abc|/etc");
        ASSERT_ROUTE("/v1/sessions/abc/files/1/2/3/4/5/6/7/8/9/10", "/v1/sessions/{sid}/files/{path}",
                     "abc|1/2/3/4/5/6/7/8/9/10");
        ASSERT_ROUTE("/v1/sessions/abc/files/../x", "/v1/sessions/{sid}/files/{path}", "abc|../x");

        ASSERT_NO_ROUTE("/");
        ASSERT_NO_ROUTE("");
        ASSERT_NO_ROUTE("/nope");
        ASSERT_NO_ROUTE("/v1");
        ASSERT_NO_ROUTE("/v2/health");
        ASSERT_NO_ROUTE("/healthz/extra");
        ASSERT_NO_ROUTE("/healthzz");
        ASSERT_NO_ROUTE("/v1/health/x");
        ASSERT_NO_ROUTE("/v1/sessions/abc/nope");
        ASSERT_NO_ROUTE("/v1/sessions/abc/filesx");
        ASSERT_NO_ROUTE("/v1/sessions/abc/commands/1/x/y/z/w");
        ASSERT_NO_ROUTE("/a/b/c/d/e/f/g/h/i/j/k");
}

static void test_patterns(void) {
        RoutePath p = ROUTE_PATH_NULL;
        const char *v[ROUTE_PARAMS_MAX];
        size_t n;

        ASSERT(route_pattern_is_valid("/", false));
        ASSERT(route_pattern_is_valid("/a/{b}/c", false));
        ASSERT(route_pattern_is_valid("/a/{b}", true));
        ASSERT(!route_pattern_is_valid("/a/b", true));
        ASSERT(!route_pattern_is_valid("a/b", false));
        ASSERT(!route_pattern_is_valid("/a//b", false));
        ASSERT(!route_pattern_is_valid("/a/b/", false));
        ASSERT(!route_pattern_is_valid("/a/{b", false));
        ASSERT(!route_pattern_is_valid("/1/2/3/4/5/6/7/8/9", false));
        ASSERT(!route_pattern_is_valid("/{a}/{b}/{c}/{d}/{e}", false));

        /* A tail as the first segment, and one beyond ROUTE_SEGMENTS_MAX segments of path. */
        ASSERT(route_path_split("/x/1/2/3/4/5/6/7/8/9", &p) >= 0);
        ASSERT(p.n == 10);
        ASSERT(route_pattern_match("/{all}", true, &p, v, &n) && n == 1);
        ASSERT_STREQ(v[0], "x/1/2/3/4/5/6/7/8/9");
        ASSERT(route_pattern_match("/x/{all}", true, &p, v, &n) && n == 1);
        ASSERT_STREQ(v[0], "1/2/3/4/5/6/7/8/9");
        ASSERT(!route_pattern_match("/x/{all}", false, &p, v, &n));
        ASSERT(!route_pattern_match("/1/2/3/4/5/6/7/8/{x}", true, &p, v, &n));
        route_path_done(&p);
}

static void test_allow(void) {
        char buf[64];

        for (size_t i = 0; i < http_routes_n; i++)
                if (streq(http_routes[i].pattern, "/v1/drain")) {
                        http_route_allow(&http_routes[i], buf, sizeof(buf));
                        ASSERT_STREQ(buf, "GET, POST, DELETE");
                        http_route_allow(&http_routes[i], buf, 6);
                        ASSERT_STREQ(buf, "GET, ");
                }
}

static void test_query_values(void) {
        unsigned mode;

        ASSERT(parse_mode("644", &mode) == 0 && mode == 0644);
        ASSERT(parse_mode("0777", &mode) == 0 && mode == 0777);
        ASSERT(parse_mode("0", &mode) == 0 && mode == 0);
        ASSERT(parse_mode("1000", &mode) == -EINVAL);
        ASSERT(parse_mode("8", &mode) == -EINVAL);
        ASSERT(parse_mode("-1", &mode) == -EINVAL);
        ASSERT(parse_mode("+7", &mode) == -EINVAL);
        ASSERT(parse_mode(" 7", &mode) == -EINVAL);
        ASSERT(parse_mode("", &mode) == -EINVAL);
        ASSERT(parse_mode("77777777777777777777777", &mode) == -EINVAL);
}

int main(void) {
        test_table();
        test_match();
        test_patterns();
        test_allow();
        test_query_values();
        return TESTS_DONE();
}
