/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The environment file PID 1 reads for sandboxd-exec: every value must come back from
 * systemd's env-file parser as the exact bytes given. The parser is re-stated here in
 * its rules for double-quoted values (a backslash before " \ ` $ is dropped, any other
 * byte kept as it is, newlines included); the integration tests run the real one. */

#include "exec-env.h"
#include "tests.h"

/* Parses `NAME="..."` lines the way systemd does for double-quoted values. */
static char *value_of(const char *text, const char *name) {
        size_t l = strlen(name);
        const char *p = text;
        Buf v = {};

        while (p && *p) {
                if (strncmp(p, name, l) == 0 && p[l] == '=' && p[l + 1] == '"') {
                        for (p += l + 2; *p && *p != '"'; p++) {
                                if (*p == '\\' && p[1] && strchr("\"\\`$", p[1]))
                                        p++;
                                buf_append(&v, p, 1);
                        }
                        return buf_steal(&v) ?: strdup("");
                }
                /* the next line that is not inside quotes */
                for (bool q = false; *p; p++) {
                        if (*p == '\\' && q && p[1])
                                p++;
                        else if (*p == '"')
                                q = !q;
                        else if (*p == '\n' && !q) {
                                p++;
                                break;
                        }
                }
        }
        return NULL;
}

static void test_round_trip(void) {
        char *argv[] = { (char *) "printf", (char *) "$HOME ${X} `id` \"q\" \\b %n", (char *) "new\nline",
                         (char *) "ünï", (char *) "", NULL };
        char *env[] = { (char *) "SECRET=x$y\"z\\w\nq", (char *) "EMPTY=", (char *) "EQ=a=b", NULL };
        Buf b = {};
        char *v;

        ASSERT(exec_env_format(&b, "/usr/bin/printf", argv, env) == 0);
        ASSERT((v = value_of(b.data, "SECRET")) && streq(v, "x$y\"z\\w\nq"));
        free(v);
        ASSERT((v = value_of(b.data, "EMPTY")) && streq(v, ""));
        free(v);
        ASSERT((v = value_of(b.data, "EQ")) && streq(v, "a=b"));
        free(v);
        ASSERT((v = value_of(b.data, "SANDBOXD_EXEC_PATH")) && streq(v, "/usr/bin/printf"));
        free(v);
        ASSERT(strstr(b.data, "\nSANDBOXD_EXEC_ARGC=5\n"));
        ASSERT(strstr(b.data, "\nSANDBOXD_EXEC_USERDB=" EXEC_USERDB_DIR "\n"));
        for (int i = 0; argv[i]; i++) {
                char name[64];

                snprintf(name, sizeof(name), "SANDBOXD_EXEC_ARGV_%d", i);
                ASSERT((v = value_of(b.data, name)) && streq(v, argv[i]));
                free(v);
        }
        buf_done(&b);
}

static void test_refused(void) {
        char *argv[] = { (char *) "x", NULL }, *none[] = { NULL };
        char *bad_env[] = { (char *) "NOEQUALS", NULL }, *bad_env2[] = { (char *) "=v", NULL };
        Buf b = {};

        ASSERT(exec_env_format(&b, "relative", argv, NULL) == -EINVAL);
        ASSERT(exec_env_format(&b, NULL, argv, NULL) == -EINVAL);
        ASSERT(exec_env_format(&b, "/bin/x", none, NULL) == -EINVAL);
        ASSERT(exec_env_format(&b, "/bin/x", argv, bad_env) == -EINVAL);
        ASSERT(exec_env_format(&b, "/bin/x", argv, bad_env2) == -EINVAL);
        buf_done(&b);
}

int main(void) {
        test_round_trip();
        test_refused();
        return TESTS_DONE();
}
