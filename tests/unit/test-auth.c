/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "auth.h"
#include "tests.h"

static void test_keys(void) {
        char *line = NULL, *error = NULL, *tenant = NULL, text[1024];
        ApiKey *keys = NULL;
        size_t n = 0;
        Manager m = {};

        ASSERT(auth_hash_key("short", &line) == -EINVAL);
        ASSERT(auth_hash_key("correct-horse-battery-staple", &line) == 0);
        ASSERT(strncmp(line, "sha256:", 7) == 0 && strlen(line) == 7 + 64);

        snprintf(text, sizeof(text), "# keys\n\nacme %s  # the acme app\nother sha256:%064d\n", line, 0);
        ASSERT(auth_parse_keys(text, strlen(text), &keys, &n, &error) == 0);
        ASSERT(n == 2);
        ASSERT_STREQ(keys[0].tenant, "acme");

        m.keys = keys;
        m.n_keys = n;
        ASSERT(auth_check_key(&m, "correct-horse-battery-staple", &tenant) == 0);
        ASSERT_STREQ(tenant, "acme");
        free(tenant);
        ASSERT(auth_check_key(&m, "correct-horse-battery-stapl", &tenant) == -EACCES);
        ASSERT(auth_check_key(&m, "", &tenant) == -EACCES);
        free(keys);
        free(line);

        ASSERT(auth_parse_keys("acme plaintext-key\n", 19, &keys, &n, &error) == -EINVAL);
        ASSERT(error && strstr(error, "line 1"));
        free(error), error = NULL;
        ASSERT(auth_parse_keys("Bad! sha256:00\n", 15, &keys, &n, &error) == -EINVAL);
        free(error), error = NULL;
        snprintf(text, sizeof(text), "acme sha256:%064d extra\n", 0);
        ASSERT(auth_parse_keys(text, strlen(text), &keys, &n, &error) == -EINVAL);
        free(error), error = NULL;

        /* a line of any length: the old parser read 511 bytes of it, and missed what followed */
        snprintf(text, sizeof(text), "acme sha256:%064d%600s extra\n", 0, "");
        ASSERT(auth_parse_keys(text, strlen(text), &keys, &n, &error) == -EINVAL);
        ASSERT(error && strstr(error, "line 1"));
        free(error), error = NULL;
        /* a NUL byte ended the text */
        snprintf(text, sizeof(text), "acme sha256:%064d\n", 0);
        memcpy(text + strlen(text), "\0oops\n", 7);
        ASSERT(auth_parse_keys(text, 77 + 7, &keys, &n, &error) == -EINVAL);
        ASSERT(error && strstr(error, "line 2") && strstr(error, "NUL"));
        free(error), error = NULL;
        /* Windows line ends, tabs, a comment right after the hash, no newline at the end */
        snprintf(text, sizeof(text), "\tacme\tsha256:%064d#c\r\n  other sha256:%064d", 0, 1);
        ASSERT(auth_parse_keys(text, strlen(text), &keys, &n, &error) == 0);
        ASSERT(n == 2 && streq(keys[1].tenant, "other") && keys[1].hash[31] == 1);
        free(keys);

}

int main(void) {
        test_keys();
        return TESTS_DONE();
}
