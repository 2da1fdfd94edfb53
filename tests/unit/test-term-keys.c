/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "term-keys.h"
#include "tests.h"

int main(void) {
        char name[8];

        ASSERT_STREQ(term_key_bytes("Enter"), "\r");
        ASSERT_STREQ(term_key_bytes("Backspace"), "\x7f");
        ASSERT_STREQ(term_key_bytes("Up"), "\x1b[A");
        ASSERT_STREQ(term_key_bytes("Left"), "\x1b[D");
        ASSERT_STREQ(term_key_bytes("PageDown"), "\x1b[6~");
        ASSERT_STREQ(term_key_bytes("F1"), "\x1bOP");
        ASSERT_STREQ(term_key_bytes("F12"), "\x1b[24~");
        ASSERT_STREQ(term_key_bytes("C-c"), "\x03");
        ASSERT_STREQ(term_key_bytes("C-d"), "\x04");
        for (char c = 'a'; c <= 'z'; c++) {
                const char *b;

                snprintf(name, sizeof(name), "C-%c", c);
                b = term_key_bytes(name);
                ASSERT(b && b[0] == c - 'a' + 1 && b[1] == 0);
        }
        for (int i = 1; i <= 12; i++) {
                snprintf(name, sizeof(name), "F%d", i);
                ASSERT(term_key_bytes(name) != NULL);
        }
        /* anything else is no key */
        ASSERT(!term_key_bytes(NULL));
        ASSERT(!term_key_bytes(""));
        ASSERT(!term_key_bytes("enter"));
        ASSERT(!term_key_bytes("C-"));
        ASSERT(!term_key_bytes("C-A"));
        ASSERT(!term_key_bytes("C-cc"));
        ASSERT(!term_key_bytes("F0"));
        ASSERT(!term_key_bytes("F13"));
        ASSERT(!term_key_bytes("Enter "));
        return TESTS_DONE();
}
