/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

int parse_uint64(const char *s, uint64_t *ret);
int parse_size(const char *s, uint64_t *ret);          /* 1024, 512K, 1M, 2G, 1T (base 1024) */
int parse_percent(const char *s, uint64_t *ret);       /* "150%", 1..100000 */
int parse_duration(const char *s, uint64_t *ret_usec); /* 30, 30s, 500ms, 5min, 2h, 1d */

/* Values of query parameters. A flag, the one parser of every boolean query parameter of the
 * HTTP API: "" (a bare ?flag), 1, true → 1; 0, false → 0; anything else (also "yes", "TRUE")
 * -EINVAL. */
int parse_flag(const char *s);
/* Permission bits in octal, at most 0777, no sign. */
int parse_mode(const char *s, unsigned *ret);
