/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdint.h>

/* The Range header of a request for a file of `size` bytes (RFC 9110 14.2): one range of
 * bytes, "bytes=A-B", "bytes=A-" or "bytes=-N" (the unit in any case, white space around
 * the range allowed). Numbers past 2^64-1 count as 2^64-1.
 *
 * 1: satisfiable, *ret_start and *ret_length (at least 1 byte) are what to send;
 * 0: ignore the header and send the whole file: it is malformed, names another unit, or
 *    asks for several ranges (which RFC 9110 lets a server answer with the whole);
 * -ERANGE: unsatisfiable (416): starts at or past the end, or "bytes=-0", or any range of
 *    an empty file. */
int http_range_parse(const char *value, uint64_t size, uint64_t *ret_start, uint64_t *ret_length);
