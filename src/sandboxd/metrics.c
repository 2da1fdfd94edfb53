/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>

#include "metrics.h"

const double metrics_duration_bounds[METRICS_DURATION_BUCKETS] = {
        0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
};

void metrics_count_http(Metrics *m, const char *route, unsigned status) {
        for (size_t i = 0; i < m->n_http; i++)
                if (m->http[i].status == status && streq(m->http[i].route, route)) {
                        m->http[i].count++;
                        return;
                }
        if (m->n_http >= METRICS_ROUTES_MAX)
                return; /* labels are from a fixed set: this does not happen */
        m->http[m->n_http++] = (MetricsRoute) { .route = route, .status = status, .count = 1 };
}

void metrics_count_command(Metrics *m, const CommandResult *r) {
        double s = (double) r->duration_ms / 1000.0;

        if (r->status >= 0 && r->status < _COMMAND_STATUS_MAX)
                m->commands[r->status]++;
        for (size_t i = 0; i < METRICS_DURATION_BUCKETS; i++)
                if (s <= metrics_duration_bounds[i])
                        m->duration_buckets[i]++;
        m->duration_count++;
        m->duration_sum += s;
}

int metrics_format(const Metrics *m, Buf *b) {
        int r = 0;

        r = buf_puts(b, "# HELP sandboxd_http_requests_total HTTP requests answered, by route and status code.\n"
                        "# TYPE sandboxd_http_requests_total counter\n");
        for (size_t i = 0; r >= 0 && i < m->n_http; i++)
                r = buf_printf(b, "sandboxd_http_requests_total{route=\"%s\",code=\"%u\"} %" PRIu64 "\n",
                               m->http[i].route, m->http[i].status, m->http[i].count);

        if (r >= 0)
                r = buf_puts(b, "# HELP sandboxd_commands_finished_total Commands that reached a terminal status.\n"
                                "# TYPE sandboxd_commands_finished_total counter\n");
        for (CommandStatus s = COMMAND_SUCCEEDED; r >= 0 && s < _COMMAND_STATUS_MAX; s++)
                r = buf_printf(b, "sandboxd_commands_finished_total{status=\"%s\"} %" PRIu64 "\n",
                               command_status_to_string(s), m->commands[s]);

        if (r >= 0)
                r = buf_puts(b, "# HELP sandboxd_command_duration_seconds How long finished commands ran.\n"
                                "# TYPE sandboxd_command_duration_seconds histogram\n");
        for (size_t i = 0; r >= 0 && i < METRICS_DURATION_BUCKETS; i++)
                r = buf_printf(b, "sandboxd_command_duration_seconds_bucket{le=\"%g\"} %" PRIu64 "\n",
                               metrics_duration_bounds[i], m->duration_buckets[i]);
        if (r >= 0)
                r = buf_printf(b,
                               "sandboxd_command_duration_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n"
                               "sandboxd_command_duration_seconds_sum %.3f\n"
                               "sandboxd_command_duration_seconds_count %" PRIu64 "\n",
                               m->duration_count, m->duration_sum, m->duration_count);

        if (r >= 0)
                r = buf_printf(b,
                               "# HELP sandboxd_stream_bytes_total Bytes of NDJSON events sent to clients.\n"
                               "# TYPE sandboxd_stream_bytes_total counter\n"
                               "sandboxd_stream_bytes_total %" PRIu64 "\n"
                               "# HELP sandboxd_auth_failures_total Requests refused for a missing or wrong key or peer.\n"
                               "# TYPE sandboxd_auth_failures_total counter\n"
                               "sandboxd_auth_failures_total %" PRIu64 "\n"
                               "# HELP sandboxd_network_denials_total Connections the egress policy refused.\n"
                               "# TYPE sandboxd_network_denials_total counter\n"
                               "sandboxd_network_denials_total %" PRIu64 "\n",
                               m->bytes_streamed, m->auth_failures, m->network_denials);
        if (r >= 0)
                r = buf_printf(b,
                               "# HELP sandboxd_proxy_refused_total Egress proxy requests refused for want of room: "
                               "a session over its share, or the proxy's totals reached.\n"
                               "# TYPE sandboxd_proxy_refused_total counter\n"
                               "sandboxd_proxy_refused_total{reason=\"session_share\"} %" PRIu64 "\n"
                               "sandboxd_proxy_refused_total{reason=\"total\"} %" PRIu64 "\n"
                               "# HELP sandboxd_http_unauthenticated_closed_total TCP connections closed before "
                               "they sent an authenticated request (too slow, or too many such).\n"
                               "# TYPE sandboxd_http_unauthenticated_closed_total counter\n"
                               "sandboxd_http_unauthenticated_closed_total %" PRIu64 "\n",
                               m->proxy_refused_share, m->proxy_refused_busy, m->http_unauthenticated_closed);
        return r;
}
