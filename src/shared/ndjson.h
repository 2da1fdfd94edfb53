/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "buf.h"
#include "result.h"

/* The NDJSON event stream of a command: one JSON object per line. */

int json_append_string(Buf *b, const char *s, size_t n); /* s must be valid UTF-8 */

int ndjson_append_accepted(Buf *b, const char *request_id, const char *unit, const char *session_id);

/* Appends one stdout/stderr event for data[0..n). Bytes that are valid UTF-8 go as "data",
 * anything else as "data_b64". A multi-byte character cut at the end of the chunk is not
 * encoded: *ret_consumed tells how much was, the caller keeps the rest for the next chunk
 * (unless final, when everything is flushed). */
int ndjson_append_output(Buf *b, const char *stream, const char *data, size_t n, bool final,
                         size_t *ret_consumed);

int ndjson_append_result_fields(Buf *b, const CommandResult *r); /* "status":..,"usage":{..} */
int ndjson_append_exit(Buf *b, const CommandResult *r);
