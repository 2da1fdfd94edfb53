/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "encoding.h"
#include "tests.h"

static void test_utf8(void) {
        bool valid;

        ASSERT(utf8_valid_prefix("hello", 5, &valid) == 5 && valid);
        ASSERT(utf8_valid_prefix("h\xc3\xa9", 3, &valid) == 3 && valid);
        /* cut in the middle of é: the prefix stops before it and it is still valid */
        ASSERT(utf8_valid_prefix("h\xc3", 2, &valid) == 1 && valid);
        ASSERT(utf8_valid_prefix("\xe2\x82", 2, &valid) == 0 && valid);
        ASSERT(utf8_valid_prefix("a\xff" "b", 3, &valid) == 1 && !valid);
        ASSERT(utf8_valid_prefix("\xc0\x80", 2, &valid) == 0 && !valid);           /* overlong */
        ASSERT(utf8_valid_prefix("\xed\xa0\x80", 3, &valid) == 0 && !valid);       /* surrogate */
        ASSERT(utf8_valid_prefix("\xf0\x9f\x98\x80", 4, &valid) == 4 && valid);    /* emoji */
        ASSERT(utf8_valid_prefix("\xc3" "a", 2, &valid) == 0 && !valid);
}

static void test_base64(void) {
        Buf b = {}, d = {};

        ASSERT(base64_encode(&b, "", 0) == 0 && b.len == 0);
        ASSERT(base64_encode(&b, "f", 1) == 0);
        ASSERT_STREQ(b.data, "Zg==");
        ASSERT(base64_encode(&b, "oob", 3) == 0);
        ASSERT_STREQ(b.data, "Zg==b29i");
        buf_done(&b);
        ASSERT(base64_encode(&b, "\x00\xff\x10", 3) == 0);
        ASSERT_STREQ(b.data, "AP8Q");
        ASSERT(base64_decode(b.data, b.len, &d) == 0 && d.len == 3 && memcmp(d.data, "\x00\xff\x10", 3) == 0);
        buf_done(&d);
        ASSERT(base64_decode("Zm9vYg==", 8, &d) == 0);
        ASSERT_STREQ(d.data, "foob");
        buf_done(&d);
        ASSERT(base64_decode("Zm9", 3, &d) == -EINVAL);
        ASSERT(base64_decode("Zm=v", 4, &d) == -EINVAL);
        ASSERT(base64_decode("Zm9!", 4, &d) == -EINVAL);
        buf_done(&d);
        buf_done(&b);
}

static void test_sha256(void) {
        uint8_t h[32];
        char hex[65];

        sha256("", 0, h);
        hex_encode(h, 32, hex);
        ASSERT_STREQ(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        sha256("abc", 3, h);
        hex_encode(h, 32, hex);
        ASSERT_STREQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        /* 56 bytes: the padding needs a second block */
        sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, h);
        hex_encode(h, 32, hex);
        ASSERT_STREQ(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");

        ASSERT(memeq_secure("abc", "abc", 3));
        ASSERT(!memeq_secure("abc", "abd", 3));
}

int main(void) {
        test_utf8();
        test_base64();
        test_sha256();
        return TESTS_DONE();
}
