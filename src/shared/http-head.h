/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The head of an HTTP/1.x response read from an upstream that is not trusted (a server in
 * a session answering a relayed WebSocket upgrade): the status line, then header fields,
 * to the empty line. Bounded: HTTP_HEAD_MAX bytes, HTTP_HEAD_FIELDS_MAX fields. The fields
 * point into the bytes given, which must outlive the HttpHead. */

#define HTTP_HEAD_MAX (16U * 1024U)
#define HTTP_HEAD_FIELDS_MAX 100U

typedef struct HttpHeadField {
        const char *name;
        size_t name_len;
        const char *value;     /* without the white space around it */
        size_t value_len;
} HttpHeadField;

typedef struct HttpHead {
        unsigned status;       /* 100..999 */
        size_t size;           /* the head's bytes, the empty line included: the body follows */
        size_t n_fields;
        HttpHeadField fields[HTTP_HEAD_FIELDS_MAX];
} HttpHead;

/* 1 and *ret when p holds a whole head; 0 when more bytes are needed (n < HTTP_HEAD_MAX);
 * -EBADMSG for one that is malformed, -E2BIG past the bounds. Lines end in CRLF or LF. */
int http_head_parse(const char *p, size_t n, HttpHead *ret);
/* The value of the first field of that name (case-insensitive), or NULL. */
const HttpHeadField *http_head_find(const HttpHead *h, const char *name);
/* Whether a comma-separated value lists token (case-insensitive): "keep-alive, Upgrade". */
bool http_value_has_token(const char *value, size_t len, const char *token);
