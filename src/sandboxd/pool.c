/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>

#include "log.h"
#include "pool.h"
#include "proxy.h"
#include "systemd.h"
#include "validate.h"

static PoolSlot *slot_free(PoolSlot *p) {
        if (!p)
                return NULL;
        if (p->manager)
                LIST_REMOVE(slots, p->manager->pool, p);
        pid1_call_cancel(p->call);
        pid1_call_cancel(p->proxy_call);
        free(p->slice);
        free(p);
        return NULL;
}

static unsigned pool_count(Manager *m) {
        unsigned n = 0;
        PoolSlot *p;

        LIST_FOREACH(slots, p, m->pool)
                n++;
        return n;
}

static void slot_update_ready(PoolSlot *p) {
        p->ready = p->slice_started && !p->proxy_call;
}

static int on_slot_started(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        PoolSlot *p = userdata;

        p->call = pid1_call_cancel(p->call);
        if (sd_bus_message_is_method_error(reply, NULL)) {
                log_warning("Failed to prepare %s for the pool, ignoring: %s", p->slice, systemd_error_message(reply));
                slot_free(p);
                return 0;
        }
        p->slice_started = true;
        slot_update_ready(p);
        return 0;
}

static int on_slot_proxy_started(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        PoolSlot *p = userdata;

        p->proxy_call = pid1_call_cancel(p->proxy_call);
        /* UnitExists: a slice adopted after a restart kept its proxy units */
        if (sd_bus_message_is_method_error(reply, NULL) &&
            !sd_bus_message_is_method_error(reply, "org.freedesktop.systemd1.UnitExists")) {
                log_warning("Failed to prepare the proxy units of %s, ignoring: %s", p->slice,
                            systemd_error_message(reply));
                p->proxy = false; /* the session that takes it starts them */
        }
        slot_update_ready(p);
        return 0;
}

/* The proxy units a session in the default network mode will need, when that is proxy. */
static void slot_start_proxy(PoolSlot *p) {
        Manager *m = p->manager;
        _cleanup_free_ char *dir = NULL;
        int r;

        if (m->config.default_network_mode != NETWORK_PROXY || !m->proxy)
                return;
        r = proxy_session_dir(m, p->id, &dir);
        if (r >= 0)
                r = systemd_start_proxy_async(m->pid1, &p->proxy_call, p->id, p->slice, dir,
                                              proxy_relay_max_connections(&m->config), on_slot_proxy_started, p);
        if (r < 0) {
                log_warning_errno(r, "Failed to prepare the proxy units of %s, ignoring: %m", p->slice);
                return;
        }
        p->proxy = true;
}

static PoolSlot *slot_new(Manager *m, const char *id) {
        PoolSlot *p = calloc(1, sizeof(PoolSlot));

        if (!p)
                return NULL;
        p->manager = m;
        snprintf(p->id, sizeof(p->id), "%s", id);
        if (asprintf(&p->slice, "sandboxd-%s.slice", id) < 0) {
                free(p);
                return NULL;
        }
        LIST_PREPEND(slots, m->pool, p);
        return p;
}

void pool_fill(Manager *m) {
        const Config *c = &m->config;

        if (c->pool_profile != POOL_SHARED || !m->bus)
                return;

        /* PoolSize= sandboxes at most come from the pool (prepared or in use); MinReady= of them wait ready. */
        while (pool_count(m) < c->pool_min_ready && pool_count(m) + m->n_pool_in_use < c->pool_size) {
                char id[SESSION_ID_SIZE];
                PoolSlot *p;
                int r;

                if (random_session_id(c->node_name, id) < 0)
                        return;
                p = slot_new(m, id);
                if (!p)
                        return;
                r = systemd_start_slice_async(m->pid1, &p->call, p->slice, "sandboxd session", &c->session_limits,
                                              on_slot_started, p);
                if (r < 0) {
                        log_warning_errno(r, "Failed to prepare a slice for the pool, ignoring: %m");
                        slot_free(p);
                        return;
                }
                /* queued after the slice on the same connection: PID 1 starts them in this order */
                slot_start_proxy(p);
        }
}

static int on_pool_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        pool_fill(userdata);
        return 0;
}

void pool_fill_soon(Manager *m) {
        int r;

        if (m->pool_timer && sd_event_source_get_enabled(m->pool_timer, NULL) > 0)
                return; /* already due */
        if (!m->pool_timer) {
                r = sd_event_add_time_relative(m->event, &m->pool_timer, CLOCK_MONOTONIC, POOL_FILL_DELAY_USEC,
                                               10 * USEC_PER_MSEC, on_pool_timer, m);
                if (r >= 0)
                        (void) sd_event_source_set_description(m->pool_timer, "pool-fill");
        } else {
                r = sd_event_source_set_time_relative(m->pool_timer, POOL_FILL_DELAY_USEC);
                if (r >= 0)
                        r = sd_event_source_set_enabled(m->pool_timer, SD_EVENT_ONESHOT);
        }
        if (r < 0) {
                log_debug_errno(r, "Failed to defer filling the pool, filling it now: %m");
                pool_fill(m);
        }
}

int pool_take(Manager *m, char ret_id[static SESSION_ID_SIZE], bool *ret_proxy) {
        PoolSlot *p;

        assert(m && ret_id && ret_proxy);

        LIST_FOREACH(slots, p, m->pool)
                if (p->ready) {
                        memcpy(ret_id, p->id, SESSION_ID_SIZE);
                        *ret_proxy = p->proxy;
                        slot_free(p);
                        return 0;
                }
        return -EAGAIN;
}

void pool_adopt(Manager *m, const char *slice, const char *in_use_by) {
        const char *id = startswith(slice, "sandboxd-");
        char buf[SESSION_ID_SIZE];
        size_t n;
        PoolSlot *p;

        n = id ? session_id_prefix(id, buf) : 0;
        if (n == 0 || !streq(id + n, ".slice"))
                return;

        if (in_use_by) {
                /* A session whose record was lost: its processes must never share a slice,
                 * its limits and its freezer with a new scope. Nobody can reach them any more. */
                log_warning("Stopping %s: no session record owns it, and %s is still in it, so it is not reused "
                            "for a new session.", slice, in_use_by);
                (void) systemd_stop_unit_async(m->pid1, slice, NULL, NULL);
                return;
        }
        /* Only a slice with this node's name in it: a new session's id names its node (a slice
         * from before nodes had names, or from before [Node] Name= changed, is stopped). */
        if (m->config.pool_profile == POOL_SHARED && pool_count(m) + m->n_pool_in_use < m->config.pool_size &&
            session_id_node_len(buf) > 0 && session_id_is_of_node(buf, m->config.node_name) && (p = slot_new(m, buf))) {
                /* Its limits may be a former session's: reset them to the defaults. */
                (void) systemd_set_slice_limits_async(m->pid1, slice, &m->config.session_limits, NULL, NULL);
                p->slice_started = true;
                slot_start_proxy(p);
                slot_update_ready(p);
                log_debug("Adopted %s into the pool.", slice);
                return;
        }
        log_info("Stopping %s: no session owns it.", slice);
        (void) systemd_stop_unit_async(m->pid1, slice, NULL, NULL);
}

void pool_free(Manager *m) {
        m->pool_timer = sd_event_source_disable_unref(m->pool_timer);
        /* The prepared slices stay in PID 1: the next start adopts them. */
        while (m->pool)
                slot_free(m->pool);
}

void pool_stats(Manager *m, PoolStats *ret) {
        PoolStats st = { .size = m->config.pool_profile == POOL_SHARED ? m->config.pool_size : 0,
                         .min_ready = m->config.pool_profile == POOL_SHARED ? m->config.pool_min_ready : 0 };
        PoolSlot *p;

        LIST_FOREACH(slots, p, m->pool) {
                if (p->ready)
                        st.ready++;
                else
                        st.starting++;
        }
        st.in_use = m->n_pool_in_use;
        st.refill_due = m->pool_timer && sd_event_source_get_enabled(m->pool_timer, NULL) > 0;
        *ret = st;
}
