/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Minimal TAP-style assertions: every failure names the expression and the line. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tests_failed;
static int tests_run;

#define ASSERT(expr)                                                                      \
        do {                                                                              \
                tests_run++;                                                              \
                if (!(expr)) {                                                            \
                        tests_failed++;                                                   \
                        fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #expr); \
                }                                                                         \
        } while (0)

#define ASSERT_STREQ(a, b)                                                                \
        do {                                                                              \
                const char *_a = (a), *_b = (b);                                          \
                tests_run++;                                                              \
                if (!_a || !_b || strcmp(_a, _b) != 0) {                                  \
                        tests_failed++;                                                   \
                        fprintf(stderr, "%s:%d: \"%s\" != \"%s\"\n", __FILE__, __LINE__,  \
                                _a ? _a : "(null)", _b ? _b : "(null)");                  \
                }                                                                         \
        } while (0)

#define TESTS_DONE()                                                                      \
        ({                                                                                \
                printf("%d assertions, %d failed\n", tests_run, tests_failed);            \
                tests_failed ? EXIT_FAILURE : EXIT_SUCCESS;                               \
        })
