/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "list.h"
#include "macro.h"
#include "pid1-gate.h"

/* a job whose JobRemoved never came (a lost signal) stops counting after this long */
#define JOB_FORGET_USEC (120ULL * 1000000ULL)

typedef struct Pid1Job Pid1Job;
struct Pid1Job {
        char *path;
        uint64_t since_usec;
        LIST_FIELDS(Pid1Job, jobs);
};

struct Pid1Call {
        Pid1Gate *gate;
        Pid1Call **owner;       /* the owner's pointer to us, or NULL when the gate owns us */
        sd_bus_message *msg;    /* while waiting */
        sd_bus_slot *slot;      /* while in flight */
        sd_bus_message_handler_t cb;
        void *userdata;
        LIST_FIELDS(Pid1Call, calls); /* among those waiting, or those in flight */
};

struct Pid1Gate {
        sd_bus *bus;
        unsigned max, in_flight, waiting, jobs;
        Pid1Call *waiting_list; /* newest first */
        Pid1Call *oldest;       /* its last: the next to send */
        Pid1Call *flying;
        /* Jobs PID 1 queued for our calls and has not finished: each holds a match rule
         * of PID 1 on the bus until JobRemoved, and dbus-daemon allows 512 per
         * connection (system.conf); past that PID 1 fails calls, even drops off the bus. */
        Pid1Job *job_list;
        sd_bus_slot *job_match;
};

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000ULL;
}

static void pump(Pid1Gate *g);

static void job_drop(Pid1Gate *g, Pid1Job *j) {
        LIST_REMOVE(jobs, g->job_list, j);
        free(j->path);
        free(j);
        g->jobs--;
}

static void jobs_forget_old(Pid1Gate *g) {
        uint64_t now = now_usec();
        Pid1Job *j, *n;

        LIST_FOREACH_SAFE(jobs, j, n, g->job_list)
                if (now - j->since_usec > JOB_FORGET_USEC)
                        job_drop(g, j);
}

static int on_job_removed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        Pid1Gate *g = userdata;
        const char *path = NULL;
        uint32_t id;
        Pid1Job *j;

        if (sd_bus_message_read(m, "uo", &id, &path) < 0 || !path)
                return 0;
        LIST_FOREACH(jobs, j, g->job_list)
                if (strcmp(j->path, path) == 0) {
                        job_drop(g, j);
                        pump(g);
                        break;
                }
        return 0;
}

/* The answer to StartTransientUnit, StopUnit and the like is the path of a job. */
static void job_note(Pid1Gate *g, sd_bus_message *reply) {
        const char *sig = sd_bus_message_get_signature(reply, true), *path = NULL;
        Pid1Job *j;

        if (!g->job_match || !sig || strcmp(sig, "o") != 0 || sd_bus_message_is_method_error(reply, NULL))
                return;
        if (sd_bus_message_read(reply, "o", &path) < 0 || !path)
                return;
        (void) sd_bus_message_rewind(reply, true);
        j = calloc(1, sizeof(*j));
        if (!j || !(j->path = strdup(path))) {
                /* the job then goes uncounted: the gate lets one more call through */
                free(j);
                return;
        }
        j->since_usec = now_usec();
        LIST_PREPEND(jobs, g->job_list, j);
        g->jobs++;
}

int pid1_gate_new(sd_bus *bus, unsigned max, Pid1Gate **ret) {
        Pid1Gate *g;

        if (!bus || max == 0)
                return -EINVAL;
        g = calloc(1, sizeof(*g));
        if (!g)
                return -ENOMEM;
        g->bus = sd_bus_ref(bus);
        g->max = max;
        /* without the match (no bus daemon: a direct connection), jobs are not counted */
        (void) sd_bus_match_signal_async(bus, &g->job_match, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                         "org.freedesktop.systemd1.Manager", "JobRemoved", on_job_removed, NULL, g);
        *ret = g;
        return 0;
}

static void enqueue(Pid1Call *c) {
        Pid1Gate *g = c->gate;

        LIST_PREPEND(calls, g->waiting_list, c);
        if (!g->oldest)
                g->oldest = c;
        g->waiting++;
}

static void dequeue(Pid1Call *c) {
        Pid1Gate *g = c->gate;

        if (g->oldest == c)
                g->oldest = c->calls_prev;
        LIST_REMOVE(calls, g->waiting_list, c);
        g->waiting--;
}

static void land(Pid1Call *c) {
        LIST_REMOVE(calls, c->gate->flying, c);
        c->slot = sd_bus_slot_unref(c->slot);
        c->gate->in_flight--;
}

static void call_free(Pid1Call *c) {
        if (c->owner)
                *c->owner = NULL;
        sd_bus_message_unref(c->msg);
        sd_bus_slot_unref(c->slot);
        free(c);
}

static int on_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Pid1Call *c = userdata;
        Pid1Gate *g = c->gate;
        sd_bus_message_handler_t cb = c->cb;
        void *cb_userdata = c->userdata;

        land(c);
        job_note(g, reply);
        call_free(c); /* the owner's pointer is NULL from here on */
        pump(g);
        return cb ? cb(reply, cb_userdata, ret_error) : 0;
}

/* A call the bus refused to send is answered here as PID 1 would refuse it. */
static void fail_locally(Pid1Call *c, int error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message_handler_t cb = c->cb;
        void *cb_userdata = c->userdata;
        int r;

        /* never sent: a cookie of its own only to make a reply to it */
        sd_bus_error_set_errnof(&e, error, "sandboxd could not send its call to systemd: %m");
        r = sd_bus_message_seal(c->msg, 1, 0);
        if (r >= 0 || r == -EPERM)
                r = sd_bus_message_new_method_error(c->msg, &reply, &e);
        call_free(c);
        if (r >= 0 && cb)
                (void) cb(reply, cb_userdata, NULL);
}

static int send_call(Pid1Call *c) {
        int r;

        r = sd_bus_call_async(c->gate->bus, &c->slot, c->msg, on_reply, c, 0);
        if (r < 0)
                return r;
        c->msg = sd_bus_message_unref(c->msg);
        LIST_PREPEND(calls, c->gate->flying, c);
        c->gate->in_flight++;
        return 0;
}

static void pump(Pid1Gate *g) {
        if (g->jobs >= PID1_JOBS_MAX && g->oldest)
                jobs_forget_old(g);
        while (g->oldest && g->in_flight < g->max && g->jobs < PID1_JOBS_MAX) {
                Pid1Call *c = g->oldest;
                int r;

                dequeue(c);
                r = send_call(c);
                if (r < 0)
                        fail_locally(c, -r);
        }
}

int pid1_call(Pid1Gate *g, Pid1Call **ret_call, sd_bus_message *m, sd_bus_message_handler_t cb, void *userdata) {
        Pid1Call *c;
        int r;

        if (!g || !m)
                return -EINVAL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        *c = (Pid1Call) { .gate = g, .msg = sd_bus_message_ref(m), .cb = cb, .userdata = userdata };

        if (g->jobs >= PID1_JOBS_MAX) {
                jobs_forget_old(g);
                /* the calls waiting for those jobs: no JobRemoved of theirs will pump now */
                if (g->jobs < PID1_JOBS_MAX)
                        pump(g);
        }
        if (g->in_flight < g->max && g->jobs < PID1_JOBS_MAX && !g->oldest) {
                r = send_call(c);
                if (r < 0) {
                        call_free(c);
                        return r;
                }
        } else
                enqueue(c);
        if (ret_call) {
                c->owner = ret_call;
                *ret_call = c;
        }
        return 0;
}

Pid1Call *pid1_call_cancel(Pid1Call *c) {
        if (!c)
                return NULL;
        if (c->slot) {
                Pid1Gate *g = c->gate;

                land(c);
                call_free(c);
                pump(g);
                return NULL;
        }
        dequeue(c);
        call_free(c);
        return NULL;
}

Pid1Gate *pid1_gate_free(Pid1Gate *g) {
        if (!g)
                return NULL;
        g->max = 0; /* nothing more goes out through pump() */
        while (g->oldest) {
                Pid1Call *c = g->oldest;

                /* what was asked of PID 1 is still asked (a stop, an unref), only the answer
                 * no longer matters: it goes with the flush of the connection */
                dequeue(c);
                (void) sd_bus_send(g->bus, c->msg, NULL);
                call_free(c);
        }
        while (g->flying) {
                Pid1Call *c = g->flying;

                land(c);
                call_free(c);
        }
        while (g->job_list)
                job_drop(g, g->job_list);
        sd_bus_slot_unref(g->job_match);
        sd_bus_unref(g->bus);
        free(g);
        return NULL;
}

sd_bus *pid1_gate_bus(const Pid1Gate *g) {
        return g ? g->bus : NULL;
}

unsigned pid1_gate_in_flight(const Pid1Gate *g) {
        return g ? g->in_flight : 0;
}

unsigned pid1_gate_jobs(const Pid1Gate *g) {
        return g ? g->jobs : 0;
}

unsigned pid1_gate_waiting(const Pid1Gate *g) {
        return g ? g->waiting : 0;
}
