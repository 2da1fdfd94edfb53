/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "buf.h"
#include "result.h"

/* Counters for GET /metrics (Prometheus text format 0.0.4). Gauges (sessions by state,
 * running commands, pool) are read from the manager when scraped. */

#define METRICS_ROUTES_MAX 64

typedef struct MetricsRoute {
        const char *route; /* a static label such as "/v1/sessions/{sid}/commands" */
        unsigned status;
        uint64_t count;
} MetricsRoute;

#define METRICS_DURATION_BUCKETS 12

typedef struct Metrics {
        MetricsRoute http[METRICS_ROUTES_MAX];
        size_t n_http;
        uint64_t commands[_COMMAND_STATUS_MAX];
        uint64_t duration_buckets[METRICS_DURATION_BUCKETS]; /* cumulative counts, as Prometheus wants */
        uint64_t duration_count;
        double duration_sum;
        uint64_t bytes_streamed;
        uint64_t auth_failures;
        uint64_t network_denials;
        uint64_t proxy_refused_share; /* a session over its share of connections or lookups */
        uint64_t proxy_refused_busy;  /* the proxy's totals reached */
        uint64_t http_unauthenticated_closed; /* TCP connections closed before an authenticated request */
} Metrics;

extern const double metrics_duration_bounds[METRICS_DURATION_BUCKETS];

void metrics_count_http(Metrics *m, const char *route, unsigned status);
void metrics_count_command(Metrics *m, const CommandResult *r);
int metrics_format(const Metrics *m, Buf *b);
