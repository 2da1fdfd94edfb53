/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "tests.h"
#include "validate.h"

static void test_names(void) {
        ASSERT(user_name_is_valid("alice"));
        ASSERT(user_name_is_valid("_svc-1"));
        ASSERT(user_name_is_valid("a2345678901234567890123456789012")); /* 32 */
        ASSERT(!user_name_is_valid("a23456789012345678901234567890123")); /* 33 */
        ASSERT(!user_name_is_valid(""));
        ASSERT(!user_name_is_valid("1abc"));
        ASSERT(!user_name_is_valid("-abc"));
        ASSERT(!user_name_is_valid("Alice"));
        ASSERT(!user_name_is_valid("al/ice"));
        ASSERT(!user_name_is_valid("al.ice"));
        ASSERT(!user_name_is_valid(NULL));

        ASSERT(workspace_name_is_valid("w"));
        ASSERT(workspace_name_is_valid("0-project_a"));
        ASSERT(!workspace_name_is_valid(""));
        ASSERT(!workspace_name_is_valid(".."));
        ASSERT(!workspace_name_is_valid("a/b"));
        ASSERT(!workspace_name_is_valid("A"));
        {
                char w[66];
                memset(w, 'a', 64), w[64] = 0;
                ASSERT(workspace_name_is_valid(w));
                memset(w, 'a', 65), w[65] = 0;
                ASSERT(!workspace_name_is_valid(w));
        }

        ASSERT(request_id_is_valid("job-1.retry_2"));
        ASSERT(!request_id_is_valid(""));
        ASSERT(!request_id_is_valid("a b"));
        ASSERT(!request_id_is_valid("a/b"));

        ASSERT(session_id_is_valid("0123456789abcdef"));
        ASSERT(!session_id_is_valid("0123456789ABCDEF"));
        ASSERT(!session_id_is_valid("0123456789abcde"));
        ASSERT(!session_id_is_valid("0123456789abcdef0"));
        ASSERT(!session_id_is_valid("0123456789abcde-"));
        ASSERT(!session_id_is_valid(""));
        ASSERT(!session_id_is_valid(NULL));

        /* node names */
        ASSERT(node_name_is_valid("n"));
        ASSERT(node_name_is_valid("n1a2"));
        ASSERT(node_name_is_valid("a2345678901234567890123456789012")); /* 32 */
        ASSERT(!node_name_is_valid("a23456789012345678901234567890123")); /* 33 */
        ASSERT(!node_name_is_valid(""));
        ASSERT(!node_name_is_valid(NULL));
        ASSERT(!node_name_is_valid("1n"));
        ASSERT(!node_name_is_valid("N1"));
        ASSERT(!node_name_is_valid("n_1"));
        ASSERT(!node_name_is_valid("n-1"));
        ASSERT(!node_name_is_valid("n.1"));

        /* ids that name their node */
        ASSERT(session_id_is_valid("n1_0123456789abcdef"));
        ASSERT(session_id_is_valid("a2345678901234567890123456789012_0123456789abcdef")); /* 49 */
        ASSERT(!session_id_is_valid("a23456789012345678901234567890123_0123456789abcdef")); /* 50 */
        ASSERT(!session_id_is_valid("_0123456789abcdef"));
        ASSERT(!session_id_is_valid("1n_0123456789abcdef"));
        ASSERT(!session_id_is_valid("N1_0123456789abcdef"));
        ASSERT(!session_id_is_valid("n1-0123456789abcdef"));
        ASSERT(!session_id_is_valid("n_1_0123456789abcdef"));
        ASSERT(!session_id_is_valid("n1__0123456789abcdef"));
        ASSERT(!session_id_is_valid("n1_0123456789abcde"));
        ASSERT(!session_id_is_valid("n1_0123456789abcdef0"));
        ASSERT(!session_id_is_valid("n1_0123456789ABCDEF"));
        ASSERT(!session_id_is_valid("n1_0123456789abcdef_"));

        ASSERT(session_id_node_len("n1_0123456789abcdef") == 2);
        ASSERT(session_id_node_len("0123456789abcdef") == 0);
        ASSERT(session_id_is_of_node("n1_0123456789abcdef", "n1"));
        ASSERT(!session_id_is_of_node("n1_0123456789abcdef", "n"));
        ASSERT(!session_id_is_of_node("n1_0123456789abcdef", "n12"));
        ASSERT(!session_id_is_of_node("zz_0123456789abcdef", "n1"));
        ASSERT(session_id_is_of_node("0123456789abcdef", "n1"));

        {
                char id[SESSION_ID_SIZE];

                ASSERT(session_id_prefix("n1_0123456789abcdef-3.service", id) == 19);
                ASSERT_STREQ(id, "n1_0123456789abcdef");
                ASSERT(session_id_prefix("0123456789abcdef.slice", id) == 16);
                ASSERT_STREQ(id, "0123456789abcdef");
                ASSERT(session_id_prefix("0123456789abcdef", id) == 16);
                ASSERT(session_id_prefix("n1_0123456789abcde-3", id) == 0);
                ASSERT_STREQ(id, "");
                ASSERT(session_id_prefix("proxy-n1_0123456789abcdef", id) == 0);
                ASSERT(session_id_prefix("a23456789012345678901234567890123_0123456789abcdef", id) == 0);
                ASSERT(session_id_prefix("", id) == 0);
        }
}

static void test_scope_header(void) {
        ASSERT(scope_header_matches("alice/demo", "alice", "demo"));
        ASSERT(scope_header_matches("al%69ce/d%65mo", "alice", "demo"));
        ASSERT(scope_header_matches("_svc-1/w_-1", "_svc-1", "w_-1"));
        ASSERT(!scope_header_matches("alice/demo2", "alice", "demo"));
        ASSERT(!scope_header_matches("bob/demo", "alice", "demo"));
        ASSERT(!scope_header_matches("alice", "alice", "demo"));
        ASSERT(!scope_header_matches("alice/demo/x", "alice", "demo"));
        ASSERT(!scope_header_matches("alice%2Fdemo", "alice", "demo")); /* an encoded '/' is no separator */
        ASSERT(!scope_header_matches("/alice/demo", "alice", "demo"));
        ASSERT(!scope_header_matches("alice/demo%", "alice", "demo"));
        ASSERT(!scope_header_matches("alice/demo%6", "alice", "demo"));
        ASSERT(!scope_header_matches("alice/dem%zz", "alice", "demo"));
        ASSERT(!scope_header_matches("alice/demo%00", "alice", "demo"));
        ASSERT(!scope_header_matches("", "alice", "demo"));
        ASSERT(!scope_header_matches(NULL, "alice", "demo"));
        {
                char big[600];

                memset(big, 'a', sizeof(big) - 1);
                big[sizeof(big) - 1] = 0;
                big[5] = '/';
                ASSERT(!scope_header_matches(big, "aaaaa", big + 6));
        }
}

static void test_env(void) {
        ASSERT(env_name_is_valid("FOO_1"));
        ASSERT(env_name_is_valid("_x"));
        ASSERT(!env_name_is_valid("1X"));
        ASSERT(!env_name_is_valid("A=B"));
        ASSERT(!env_name_is_valid(""));

        ASSERT(env_name_is_reserved("HOME"));
        ASSERT(env_name_is_reserved("TMPDIR"));
        ASSERT(env_name_is_reserved("XDG_CONFIG_HOME"));
        ASSERT(env_name_is_reserved("XDG_FOO_HOME"));
        ASSERT(env_name_is_reserved("LD_PRELOAD"));
        ASSERT(!env_name_is_reserved("XDG_SESSION_TYPE"));
        ASSERT(!env_name_is_reserved("PATH"));
        ASSERT(!env_name_is_reserved("HOMEDIR"));
        /* sandboxd-exec's command line travels in SANDBOXD_EXEC_* */
        ASSERT(env_name_is_reserved("SANDBOXD_EXEC_PATH"));
        ASSERT(env_name_is_reserved("SANDBOXD_EXEC_ARGV_0"));
        ASSERT(env_name_is_reserved("sandboxd_anything"));
        ASSERT(!env_name_is_reserved("SANDBOX_X"));
        /* sandboxd's own request ids (the purge) */
        ASSERT(request_id_is_reserved("sandboxd.purge"));
        ASSERT(request_id_is_reserved("SandBoxD.x"));
        ASSERT(!request_id_is_reserved("sandboxd-purge"));
        ASSERT(!request_id_is_reserved("my.sandboxd.purge"));
}

static void check_norm(const char *in, int expect_r, const char *expect) {
        char *out = NULL;
        int r = relative_path_normalize(in, &out);

        ASSERT(r == expect_r);
        if (expect_r == 0 && r == 0)
                ASSERT_STREQ(out, expect);
        free(out);
}

static void test_paths(void) {
        check_norm("", 0, "");
        check_norm(".", 0, "");
        check_norm("a/b", 0, "a/b");
        check_norm("a//b/./c/", 0, "a/b/c");
        check_norm("a/../b", 0, "b");
        check_norm("a/b/../..", 0, "");
        check_norm("..", -EPERM, NULL);
        check_norm("a/../..", -EPERM, NULL);
        check_norm("a/../../etc", -EPERM, NULL);
        check_norm("/etc", -EINVAL, NULL);
}

static void check_cwd(const char *cwd, int expect_r, const char *expect) {
        char *out = NULL;
        int r = cwd_relative_to("/var/lib/sandboxd/ws/u/w", cwd, &out);

        ASSERT(r == expect_r);
        if (expect_r == 0 && r == 0)
                ASSERT_STREQ(out, expect);
        free(out);
}

static void test_cwd(void) {
        check_cwd("src", 0, "src");
        check_cwd("/var/lib/sandboxd/ws/u/w", 0, "");
        check_cwd("/var/lib/sandboxd/ws/u/w/", 0, "");
        check_cwd("/var/lib/sandboxd/ws/u/w/src/../lib", 0, "lib");
        check_cwd("/var/lib/sandboxd/ws/u/w2", -EPERM, NULL);
        check_cwd("/var/lib/sandboxd/ws/u/w/../w2", -EPERM, NULL);
        check_cwd("/etc", -EPERM, NULL);
        check_cwd("../w2", -EPERM, NULL);
}

int main(void) {
        test_names();
        test_scope_header();
        test_env();
        test_paths();
        test_cwd();
        return TESTS_DONE();
}
