/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "http-range.h"
#include "tests.h"

/* 1 and the range "start+length", 0 (ignored), or -ERANGE. */
static int range(const char *v, uint64_t size, uint64_t exp_start, uint64_t exp_length) {
        uint64_t start = 7777, length = 7777;
        int r = http_range_parse(v, size, &start, &length);

        if (r == 1 && (start != exp_start || length != exp_length)) {
                fprintf(stderr, "'%s' of %llu: %llu+%llu, expected %llu+%llu\n", v, (unsigned long long) size,
                        (unsigned long long) start, (unsigned long long) length, (unsigned long long) exp_start,
                        (unsigned long long) exp_length);
                return 99;
        }
        if (r != 1 && (start != 7777 || length != 7777))
                return 98; /* nothing written when nothing is to be sent */
        return r;
}

static void test_satisfiable(void) {
        ASSERT(range("bytes=0-99", 1000, 0, 100) == 1);
        ASSERT(range("bytes=0-0", 1000, 0, 1) == 1);
        ASSERT(range("bytes=999-999", 1000, 999, 1) == 1);
        ASSERT(range("bytes=500-", 1000, 500, 500) == 1);
        ASSERT(range("bytes=0-", 1000, 0, 1000) == 1);
        ASSERT(range("bytes=-1", 1000, 999, 1) == 1);
        ASSERT(range("bytes=-500", 1000, 500, 500) == 1);
        /* past the end: up to the end */
        ASSERT(range("bytes=900-5000", 1000, 900, 100) == 1);
        ASSERT(range("bytes=-5000", 1000, 0, 1000) == 1);
        ASSERT(range("bytes=0-99999999999999999999999", 1000, 0, 1000) == 1);
        ASSERT(range("bytes=-99999999999999999999999", 1000, 0, 1000) == 1);
        ASSERT(range("bytes=18446744073709551614-", UINT64_MAX, UINT64_MAX - 1, 1) == 1);
        /* the unit in any case, white space around */
        ASSERT(range("BYTES=1-2", 10, 1, 2) == 1);
        ASSERT(range(" bytes = 1-2 ", 10, 1, 2) == 1);
        ASSERT(range("bytes=\t1-2\t", 10, 1, 2) == 1);
}

static void test_unsatisfiable(void) {
        ASSERT(range("bytes=1000-", 1000, 0, 0) == -ERANGE);
        ASSERT(range("bytes=1000-2000", 1000, 0, 0) == -ERANGE);
        ASSERT(range("bytes=99999999999999999999999-", 1000, 0, 0) == -ERANGE);
        ASSERT(range("bytes=-0", 1000, 0, 0) == -ERANGE);
        ASSERT(range("bytes=0-", 0, 0, 0) == -ERANGE);
        ASSERT(range("bytes=-5", 0, 0, 0) == -ERANGE);
        ASSERT(range("bytes=0-0", 0, 0, 0) == -ERANGE);
}

static void test_ignored(void) {
        ASSERT(range(NULL, 1000, 0, 0) == 0);
        ASSERT(range("", 1000, 0, 0) == 0);
        ASSERT(range("bytes", 1000, 0, 0) == 0);
        ASSERT(range("bytes=", 1000, 0, 0) == 0);
        ASSERT(range("bytes=-", 1000, 0, 0) == 0);
        ASSERT(range("bytes=a-b", 1000, 0, 0) == 0);
        ASSERT(range("bytes=5-1", 1000, 0, 0) == 0);      /* last before first: invalid */
        ASSERT(range("bytes=1-2,4-5", 1000, 0, 0) == 0);  /* several ranges */
        ASSERT(range("bytes=1-2, -5", 1000, 0, 0) == 0);
        ASSERT(range("bytes=1-2junk", 1000, 0, 0) == 0);
        ASSERT(range("bytes=+1-2", 1000, 0, 0) == 0);
        ASSERT(range("bytes=1--2", 1000, 0, 0) == 0);
        ASSERT(range("bytes=--2", 1000, 0, 0) == 0);
        ASSERT(range("bytes=1", 1000, 0, 0) == 0);
        ASSERT(range("bytes=0x10-", 1000, 0, 0) == 0);
        ASSERT(range("items=0-5", 1000, 0, 0) == 0);
        ASSERT(range("bytesx=0-5", 1000, 0, 0) == 0);
        ASSERT(range("bytes:0-5", 1000, 0, 0) == 0);
        ASSERT(range("bytes=1 2-3", 1000, 0, 0) == 0);
        ASSERT(range("bytes=1-2 3", 1000, 0, 0) == 0);
        /* malformed even where the size would make it unsatisfiable */
        ASSERT(range("bytes=5000-1", 1000, 0, 0) == 0);
        ASSERT(range("bytes=1-2,", 0, 0, 0) == 0);
}

int main(void) {
        test_satisfiable();
        test_unsatisfiable();
        test_ignored();
        return TESTS_DONE();
}
