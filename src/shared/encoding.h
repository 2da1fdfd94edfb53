/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "buf.h"

/* Length of the longest prefix of p[0..n) that is valid UTF-8 with any incomplete
 * multi-byte sequence at the very end excluded. *ret_valid is false if an invalid byte
 * occurs anywhere before that tail. */
size_t utf8_valid_prefix(const char *p, size_t n, bool *ret_valid);

int base64_encode(Buf *out, const void *p, size_t n);
int base64_decode(const char *s, size_t n, Buf *out);

#define SHA256_DIGEST_SIZE 32
void sha256(const void *p, size_t n, uint8_t ret[static SHA256_DIGEST_SIZE]);
void hex_encode(const uint8_t *p, size_t n, char *ret); /* ret holds 2n+1 */

/* Constant-time comparison for secrets of equal length. */
bool memeq_secure(const void *a, const void *b, size_t n);
