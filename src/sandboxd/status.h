/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "buf.h"
#include "manager.h"

/* What sandboxd says of itself, for both front ends: its health (GET /v1/health, the D-Bus
 * Manager's Health()) and its metrics in Prometheus' text format (GET /metrics, Metrics()). */

typedef struct StatusHealth {
        const char *status; /* "ok", "draining", "degraded" (systemd unreachable) */
        uint64_t timestamp_usec; /* CLOCK_REALTIME */
        uint64_t uptime_usec;
        unsigned sessions;  /* active */
        unsigned running_commands;
} StatusHealth;

/* Connected to systemd's bus. */
bool status_is_ready(Manager *m);
void status_health(Manager *m, StatusHealth *ret);
int status_format_metrics(Manager *m, Buf *b);
