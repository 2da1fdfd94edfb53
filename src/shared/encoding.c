/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "encoding.h"

size_t utf8_valid_prefix(const char *s, size_t n, bool *ret_valid) {
        const unsigned char *p = (const unsigned char *) s;
        size_t i = 0;

        while (i < n) {
                unsigned char c = p[i];
                size_t need;
                uint32_t cp, min;

                if (c < 0x80) {
                        /* Plain ASCII is most output: skip it eight bytes at a time. */
                        i++;
                        while (i + 8 <= n) {
                                uint64_t w;

                                memcpy(&w, p + i, sizeof(w));
                                if (w & UINT64_C(0x8080808080808080))
                                        break;
                                i += 8;
                        }
                        continue;
                }
                if ((c & 0xe0) == 0xc0) {
                        need = 1, cp = c & 0x1f, min = 0x80;
                } else if ((c & 0xf0) == 0xe0) {
                        need = 2, cp = c & 0x0f, min = 0x800;
                } else if ((c & 0xf8) == 0xf0) {
                        need = 3, cp = c & 0x07, min = 0x10000;
                } else {
                        *ret_valid = false;
                        return i;
                }

                for (size_t k = 1; k <= need; k++) {
                        if (i + k >= n) {
                                /* Truncated at the end: valid so far if the bytes seen are
                                 * continuation bytes; the caller keeps the tail for later. */
                                for (size_t j = 1; i + j < n; j++)
                                        if ((p[i + j] & 0xc0) != 0x80) {
                                                *ret_valid = false;
                                                return i;
                                        }
                                *ret_valid = true;
                                return i;
                        }
                        if ((p[i + k] & 0xc0) != 0x80) {
                                *ret_valid = false;
                                return i;
                        }
                        cp = (cp << 6) | (p[i + k] & 0x3f);
                }
                if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
                        *ret_valid = false;
                        return i;
                }
                i += need + 1;
        }

        *ret_valid = true;
        return n;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int base64_encode(Buf *out, const void *data, size_t n) {
        const unsigned char *p = data;
        char *o;
        int r;

        r = buf_reserve(out, (n + 2) / 3 * 4);
        if (r < 0)
                return r;
        o = out->data + out->len;

        for (size_t i = 0; i < n; i += 3) {
                uint32_t v = (uint32_t) p[i] << 16;
                if (i + 1 < n)
                        v |= (uint32_t) p[i + 1] << 8;
                if (i + 2 < n)
                        v |= p[i + 2];
                *o++ = b64[(v >> 18) & 63];
                *o++ = b64[(v >> 12) & 63];
                *o++ = i + 1 < n ? b64[(v >> 6) & 63] : '=';
                *o++ = i + 2 < n ? b64[v & 63] : '=';
        }
        out->len = (size_t) (o - out->data);
        out->data[out->len] = 0;
        return 0;
}

static int b64_value(char c) {
        const char *p;

        if (c == 0)
                return -1;
        p = strchr(b64, c);
        return p ? (int) (p - b64) : -1;
}

int base64_decode(const char *s, size_t n, Buf *out) {
        uint32_t acc = 0;
        int bits = 0, r;
        size_t pad = 0;

        if (n % 4 != 0)
                return -EINVAL;
        r = buf_reserve(out, n / 4 * 3);
        if (r < 0)
                return r;

        for (size_t i = 0; i < n; i++) {
                int v;

                if (s[i] == '=') {
                        if (i < n - 2)
                                return -EINVAL;
                        pad++;
                        continue;
                }
                if (pad > 0)
                        return -EINVAL;
                v = b64_value(s[i]);
                if (v < 0)
                        return -EINVAL;
                acc = (acc << 6) | (uint32_t) v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out->data[out->len++] = (char) ((acc >> bits) & 0xff);
                }
        }
        out->data[out->len] = 0;
        return 0;
}

/* FIPS 180-4 SHA-256. Small and slow is fine: it hashes API keys and scope names. */
static const uint32_t K[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const uint8_t *blk) {
        uint32_t w[64], a, b, c, d, e, f, g, hh;

        for (int i = 0; i < 16; i++)
                w[i] = (uint32_t) blk[4 * i] << 24 | (uint32_t) blk[4 * i + 1] << 16 |
                       (uint32_t) blk[4 * i + 2] << 8 | blk[4 * i + 3];
        for (int i = 16; i < 64; i++) {
                uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
                uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
                w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }

        a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
        for (int i = 0; i < 64; i++) {
                uint32_t t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
                uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
                hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
        }
        h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

void sha256(const void *data, size_t n, uint8_t ret[static SHA256_DIGEST_SIZE]) {
        uint32_t h[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                          0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
        const uint8_t *p = data;
        uint8_t tail[128] = {};
        size_t full = n / 64 * 64, rest = n - full, tl;
        uint64_t bits = (uint64_t) n * 8;

        for (size_t i = 0; i < full; i += 64)
                sha256_block(h, p + i);

        memcpy(tail, p + full, rest);
        tail[rest] = 0x80;
        tl = rest + 1 + 8 <= 64 ? 64 : 128;
        for (int i = 0; i < 8; i++)
                tail[tl - 1 - i] = (uint8_t) (bits >> (8 * i));
        sha256_block(h, tail);
        if (tl == 128)
                sha256_block(h, tail + 64);

        for (int i = 0; i < 8; i++) {
                ret[4 * i] = (uint8_t) (h[i] >> 24);
                ret[4 * i + 1] = (uint8_t) (h[i] >> 16);
                ret[4 * i + 2] = (uint8_t) (h[i] >> 8);
                ret[4 * i + 3] = (uint8_t) h[i];
        }
}

void hex_encode(const uint8_t *p, size_t n, char *ret) {
        static const char hex[] = "0123456789abcdef";

        for (size_t i = 0; i < n; i++) {
                ret[2 * i] = hex[p[i] >> 4];
                ret[2 * i + 1] = hex[p[i] & 15];
        }
        ret[2 * n] = 0;
}

bool memeq_secure(const void *a, const void *b, size_t n) {
        const volatile uint8_t *x = a, *y = b;
        uint8_t d = 0;

        for (size_t i = 0; i < n; i++)
                d |= x[i] ^ y[i];
        return d == 0;
}
