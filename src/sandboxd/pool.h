/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "manager.h"

/* Warm start: session slices prepared ahead with the default limits (profile "shared"),
 * so that creating a session needs no round trip to PID 1. Profile "local" keeps none. */

typedef struct PoolSlot PoolSlot;
struct PoolSlot {
        Manager *manager;
        char id[17];
        char *slice;
        bool ready;
        sd_bus_slot *slot;
        LIST_FIELDS(PoolSlot, slots);
};

typedef struct PoolStats {
        unsigned size;      /* the configured PoolSize= */
        unsigned min_ready; /* MinReady= */
        unsigned ready;
        unsigned starting;
        unsigned in_use;    /* active sessions */
} PoolStats;

/* Starts slices until MinReady= are ready or starting (never more than PoolSize=). */
void pool_fill(Manager *m);
/* Takes a ready slice: its id becomes the session's. -EAGAIN if none is ready. Call
 * pool_fill() once the session is in the manager's list. */
int pool_take(Manager *m, char ret_id[static 17]);
/* A slice found at start-up that no session owns: back in the pool, or stopped. */
void pool_adopt(Manager *m, const char *slice);
void pool_free(Manager *m);
void pool_stats(Manager *m, PoolStats *ret);

int random_session_id(char ret[static 17]);
