/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "manager.h"

/* Warm start: session slices prepared ahead with the default limits (profile "shared"),
 * so that creating a session needs no round trip to PID 1, and, when the default network
 * mode is proxy, their proxy units too, which would otherwise hold up the first command.
 * Profile "local" keeps none. */

typedef struct PoolSlot PoolSlot;
struct PoolSlot {
        Manager *manager;
        char id[SESSION_ID_SIZE];
        char *slice;
        bool slice_started;
        bool proxy;             /* its proxy units are started or starting */
        bool ready;             /* the slice is started, and the proxy units if asked for */
        Pid1Call *call;
        Pid1Call *proxy_call;
        LIST_FIELDS(PoolSlot, slots);
};

typedef struct PoolStats {
        unsigned size;      /* the configured PoolSize= */
        unsigned min_ready; /* MinReady= */
        unsigned ready;
        unsigned starting;
        unsigned in_use;    /* active sessions */
        bool refill_due;    /* a deferred pool_fill() is coming */
} PoolStats;

/* Starts slices until MinReady= are ready or starting (never more than PoolSize=). */
void pool_fill(Manager *m);
/* The same a little later (POOL_FILL_DELAY_USEC): refilling keeps PID 1 busy for a while
 * (a slice, a socket in a new network namespace), which must not hold up the first command
 * of the session that has just taken a slice, usually sent at once. */
#define POOL_FILL_DELAY_USEC (250 * USEC_PER_MSEC)
void pool_fill_soon(Manager *m);
/* Takes a ready slice: its id becomes the session's; *ret_proxy says whether its proxy
 * units are started. -EAGAIN if none is ready. Call pool_fill() once the session is in the
 * manager's list. */
int pool_take(Manager *m, char ret_id[static SESSION_ID_SIZE], bool *ret_proxy);
/* A slice found at start-up that no session owns: back in the pool, or stopped. One with a
 * unit or process in it (in_use_by names one) is never pooled: it is stopped. */
void pool_adopt(Manager *m, const char *slice, const char *in_use_by);
void pool_free(Manager *m);
void pool_stats(Manager *m, PoolStats *ret);

int random_session_id(const char *node, char ret[static SESSION_ID_SIZE]);
