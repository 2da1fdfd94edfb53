/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "parse-util.h"
#include "tests.h"

/* parse_flag(): the one parser of every boolean query parameter of the HTTP API. */
static void test_parse_flag(void) {
        ASSERT(parse_flag("") == 1); /* a bare ?flag */
        ASSERT(parse_flag("true") == 1);
        ASSERT(parse_flag("1") == 1);
        ASSERT(parse_flag("false") == 0);
        ASSERT(parse_flag("0") == 0);

        ASSERT(parse_flag(NULL) == -EINVAL);
        ASSERT(parse_flag("TRUE") == -EINVAL);
        ASSERT(parse_flag("True") == -EINVAL);
        ASSERT(parse_flag("yes") == -EINVAL);
        ASSERT(parse_flag("no") == -EINVAL);
        ASSERT(parse_flag("on") == -EINVAL);
        ASSERT(parse_flag("2") == -EINVAL);
        ASSERT(parse_flag("01") == -EINVAL);
        ASSERT(parse_flag("00") == -EINVAL);
        ASSERT(parse_flag(" 1") == -EINVAL);
        ASSERT(parse_flag("1 ") == -EINVAL);
        ASSERT(parse_flag("true\n") == -EINVAL);
        ASSERT(parse_flag("bogus") == -EINVAL);
}

int main(void) {
        test_parse_flag();
        return TESTS_DONE();
}
