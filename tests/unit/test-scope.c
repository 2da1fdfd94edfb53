/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <json-c/json.h>
#include <sys/stat.h>

#include "scope.h"
#include "store.h"
#include "tests.h"

static void test_tenant(void) {
        ASSERT_STREQ(scope_tenant(NULL), SCOPE_TENANT_LOCAL);
        ASSERT_STREQ(scope_tenant("unix:0"), SCOPE_TENANT_LOCAL);
        ASSERT_STREQ(scope_tenant("dbus:1000"), SCOPE_TENANT_LOCAL);
        ASSERT_STREQ(scope_tenant("acme"), "acme");
        ASSERT_STREQ(scope_tenant("Not-Valid"), SCOPE_TENANT_LOCAL);
}

static void test_dynamic_user(void) {
        char *a = NULL, *b = NULL, *c = NULL, *d = NULL;

        ASSERT(scope_dynamic_user("acme", "alice", "w", &a) == 0);
        ASSERT(scope_dynamic_user("other", "alice", "w", &b) == 0);
        ASSERT(scope_dynamic_user("acme", "alice", "w", &c) == 0);
        ASSERT(scope_dynamic_user(SCOPE_TENANT_LOCAL, "alice", "w", &d) == 0);
        ASSERT(a && b && c && d && strlen(a) == 20 && strncmp(a, "sbx-", 4) == 0);
        /* the same scope, the same name; another tenant, another user */
        ASSERT(streq(a, c) && !streq(a, b) && !streq(a, d) && !streq(b, d));
        free(a), free(b), free(c), free(d);
}

static void mkfile(const char *path, const char *text) {
        FILE *f = fopen(path, "we");

        ASSERT(f);
        if (f) {
                fputs(text, f);
                fclose(f);
        }
}

static bool exists(const char *top, const char *rel) {
        char p[PATH_MAX];

        snprintf(p, sizeof(p), "%s/%s", top, rel);
        return access(p, F_OK) >= 0;
}

static void test_migrate(void) {
        char top[] = "/tmp/test-scope-XXXXXX", p[PATH_MAX], state[256], pub[256], priv[256];

        ASSERT(mkdtemp(top));
        snprintf(state, sizeof(state), "%s/state", top);
        snprintf(pub, sizeof(pub), "%s/pub", top);
        snprintf(priv, sizeof(priv), "%s/priv", top);
        /* layout 1: private <kind>/<user>/<workspace>, public symlinks to them */
        for (const char *const *k = scope_kinds; k < scope_kinds + 3; k++) {
                snprintf(p, sizeof(p), "%s/%s/alice/w1", priv, *k);
                ASSERT(store_mkdir_p(p, 0755) == 0);
                snprintf(p, sizeof(p), "%s/%s/bob/w2", priv, *k);
                ASSERT(store_mkdir_p(p, 0755) == 0);
                snprintf(p, sizeof(p), "%s/%s/carol/w3", priv, *k);
                ASSERT(store_mkdir_p(p, 0755) == 0);
                snprintf(p, sizeof(p), "%s/%s/alice", pub, *k);
                ASSERT(store_mkdir_p(p, 0755) == 0);
                snprintf(p, sizeof(p), "%s/%s/alice/w1", pub, *k);
                ASSERT(symlink("../../priv/x/alice/w1", p) == 0);
        }
        snprintf(p, sizeof(p), "%s/ws/alice/w1/file", priv);
        mkfile(p, "data");
        /* records: bob was only ever acme's; carol both acme's and a local caller's */
        snprintf(p, sizeof(p), "%s/sessions/0123456789abcdef", state);
        ASSERT(store_mkdir_p(p, 0700) == 0);
        snprintf(p, sizeof(p), "%s/sessions/0123456789abcdef/session.json", state);
        mkfile(p, "{\"id\":\"0123456789abcdef\",\"user\":\"bob\",\"workspace\":\"w2\",\"tenant\":\"acme\"}");
        snprintf(p, sizeof(p), "%s/sessions/1123456789abcdef", state);
        ASSERT(store_mkdir_p(p, 0700) == 0);
        snprintf(p, sizeof(p), "%s/sessions/1123456789abcdef/session.json", state);
        mkfile(p, "{\"id\":\"1123456789abcdef\",\"user\":\"carol\",\"workspace\":\"w3\",\"tenant\":\"acme\"}");
        snprintf(p, sizeof(p), "%s/sessions/2123456789abcdef", state);
        ASSERT(store_mkdir_p(p, 0700) == 0);
        snprintf(p, sizeof(p), "%s/sessions/2123456789abcdef/session.json", state);
        mkfile(p, "{\"id\":\"2123456789abcdef\",\"user\":\"carol\",\"workspace\":\"w4\",\"tenant\":\"unix:0\"}");

        ASSERT(scope_migrate(state, pub, priv) == 0);
        ASSERT(exists(priv, "ws/local/alice/w1/file"));
        ASSERT(exists(priv, "home/local/alice/w1"));
        ASSERT(exists(priv, "tmp/acme/bob/w2"));
        ASSERT(exists(priv, "ws/acme/bob/w2"));
        ASSERT(exists(priv, "ws/local/carol/w3"));
        ASSERT(!exists(priv, "ws.v1") && !exists(priv, "ws/alice"));
        ASSERT(!exists(pub, "ws") && !exists(pub, "home/alice"));
        ASSERT(exists(priv, "layout"));

        /* once is enough: a second start moves nothing */
        ASSERT(scope_migrate(state, pub, priv) == 0);
        ASSERT(exists(priv, "ws/local/alice/w1/file") && !exists(priv, "ws/local/local"));

        /* a layout newer than this sandboxd knows is left alone */
        snprintf(p, sizeof(p), "%s/layout", priv);
        mkfile(p, "99\n");
        ASSERT(scope_migrate(state, pub, priv) == -EPROTO);

        ASSERT(store_rm_rf(top) == 0);
}

static void test_prepare(void) {
        char top[] = "/tmp/test-scope-XXXXXX", p[PATH_MAX];
        struct stat st;

        ASSERT(mkdtemp(top));
        snprintf(p, sizeof(p), "%s/ws", top);
        ASSERT(mkdir(p, 0755) == 0);
        ASSERT(scope_prepare(top, "acme", "alice") == 0);
        for (const char *const *k = scope_kinds; k < scope_kinds + 3; k++) {
                for (int depth = 0; depth < 3; depth++) {
                        snprintf(p, sizeof(p), "%s/%s%s%s", top, *k, depth > 0 ? "/acme" : "",
                                 depth > 1 ? "/alice" : "");
                        /* searchable, not listable: also an existing one made by PID 1 */
                        ASSERT(lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0711);
                }
        }
        ASSERT(store_rm_rf(top) == 0);
}

static void test_userdb(void) {
        char top[] = "/tmp/test-scope-XXXXXX", p[PATH_MAX], link[64];
        json_object *o;
        ssize_t n;

        ASSERT(mkdtemp(top));
        ASSERT(scope_userdb_write(top, "sbx-0123456789abcdef", 61234, "/var/lib/sandboxd/home/acme/a/w") == 0);
        snprintf(p, sizeof(p), "%s/61234.user", top);
        n = readlink(p, link, sizeof(link) - 1);
        ASSERT(n > 0);
        link[n > 0 ? n : 0] = 0;
        ASSERT_STREQ(link, "sbx-0123456789abcdef.user");
        snprintf(p, sizeof(p), "%s/sbx-0123456789abcdef.user", top);
        o = json_object_from_file(p);
        ASSERT(o);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(o, "userName")), "sbx-0123456789abcdef");
        ASSERT(json_object_get_int64(json_object_object_get(o, "uid")) == 61234);
        ASSERT_STREQ(json_object_get_string(json_object_object_get(o, "homeDirectory")), "/var/lib/sandboxd/home/acme/a/w");
        json_object_put(o);
        snprintf(p, sizeof(p), "%s/61234.group", top);
        ASSERT(access(p, F_OK) == 0);

        /* another uid next time: the old links go */
        ASSERT(scope_userdb_write(top, "sbx-0123456789abcdef", 62000, "/h") == 0);
        snprintf(p, sizeof(p), "%s/61234.user", top);
        ASSERT(access(p, F_OK) < 0);
        snprintf(p, sizeof(p), "%s/62000.user", top);
        ASSERT(access(p, F_OK) == 0);
        ASSERT(store_rm_rf(top) == 0);
}

int main(void) {
        test_tenant();
        test_dynamic_user();
        test_migrate();
        test_prepare();
        test_userdb();
        return TESTS_DONE();
}
