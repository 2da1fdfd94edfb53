/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "fdstore.h"
#include "tests.h"

static void test_parse(void) {
        static const char *const bad[] = {
                "out-", "out-0123456789abcdef", "out-0123456789abcdef-", "out-0123456789abcdef-0",
                "out-0123456789abcdef-01", "out-0123456789abcdef-+1", "out-0123456789abcdef-1 ",
                "out-0123456789abcdef-4294967296", "out-0123456789ABCDEF-1", "out-0123456789abcde-1",
                "out-0123456789abcdef0-1", "err-0123456789abcdef-1-2", "in--1",
                "proxy-0123456789abcdef-1", "proxy-0123456789abcdef-", "proxy-0123456789abcde", "proxy-",
        };
        FdStoreName id;
        char name[FDSTORE_NAME_MAX];

        ASSERT(fdstore_name_parse("out-0123456789abcdef-7", &id) == 1);
        ASSERT(id.kind == FDSTORE_STDOUT && id.n == 7);
        ASSERT_STREQ(id.session_id, "0123456789abcdef");
        ASSERT(fdstore_name_parse("err-4f0c2a9d1e7b3c55-4294967295", &id) == 1);
        ASSERT(id.kind == FDSTORE_STDERR && id.n == 4294967295U);
        ASSERT(fdstore_name_format(&id, name) == 0);
        ASSERT_STREQ(name, "err-4f0c2a9d1e7b3c55-4294967295");
        ASSERT(fdstore_name_parse("in-4f0c2a9d1e7b3c55-12", &id) == 1 && id.kind == FDSTORE_STDIN && id.n == 12);
        /* a session's: no number */
        ASSERT(fdstore_name_parse("proxy-4f0c2a9d1e7b3c55", &id) == 1 && id.kind == FDSTORE_PROXY && id.n == 0);
        ASSERT(fdstore_name_format(&id, name) == 0);
        ASSERT_STREQ(name, "proxy-4f0c2a9d1e7b3c55");
        id.n = 3;
        ASSERT(fdstore_name_format(&id, name) == -EINVAL);

        /* not ours: a socket's name, or none given */
        ASSERT(fdstore_name_parse("sandboxd.socket", &id) == 0);
        ASSERT(fdstore_name_parse("unknown", &id) == 0);
        ASSERT(fdstore_name_parse("", &id) == 0);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ASSERT(fdstore_name_parse(bad[i], &id) == -EINVAL);

        id = (FdStoreName) { .kind = FDSTORE_STDOUT, .session_id = "0123456789abcdef", .n = 0 };
        ASSERT(fdstore_name_format(&id, name) == -EINVAL);
}

int main(void) {
        test_parse();
        return TESTS_DONE();
}
