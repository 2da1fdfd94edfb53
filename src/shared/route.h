/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* Request paths against route patterns such as "/v1/sessions/{sid}/commands/{rid}/events".
 * A pattern is literal segments and {name} placeholders, each one segment; in a "tail"
 * pattern the last placeholder takes the rest of the path instead, slashes and all (the
 * path of a file). Empty segments ("//") do not count, except inside a tail. */

#define ROUTE_SEGMENTS_MAX 8
#define ROUTE_PARAMS_MAX 4

typedef struct RoutePath {
        const char *path;                        /* the request path, not a copy: it must outlive us */
        char *copy;                              /* the segments, NUL-terminated, point into it */
        const char *segments[ROUTE_SEGMENTS_MAX];
        size_t ends[ROUTE_SEGMENTS_MAX];         /* where each segment ends in `path` */
        size_t n;                                /* segments in all, also those beyond ROUTE_SEGMENTS_MAX */
} RoutePath;

#define ROUTE_PATH_NULL ((RoutePath) {})

int route_path_split(const char *path, RoutePath *ret);
void route_path_done(RoutePath *p);

/* Whether the path matches the pattern; then the placeholders' values, in order, pointing
 * into p (segments) or p->path (a tail). */
bool route_pattern_match(const char *pattern, bool tail, const RoutePath *p, const char *ret_params[static ROUTE_PARAMS_MAX],
                         size_t *ret_n_params);

/* Whether a pattern is well formed: starts with '/', no empty segment, at most
 * ROUTE_SEGMENTS_MAX segments and ROUTE_PARAMS_MAX placeholders, a tail's last segment is one. */
bool route_pattern_is_valid(const char *pattern, bool tail);
