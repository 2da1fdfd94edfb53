/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <sys/random.h>
#include <time.h>

#include "command.h"
#include "encoding.h"
#include "log.h"
#include "ndjson.h"
#include "session.h"
#include "systemd.h"

static const char *const session_state_table[_SESSION_STATE_MAX] = {
        [SESSION_STARTING] = "starting",
        [SESSION_ACTIVE] = "active",
        [SESSION_FAILED] = "failed",
};

const char *session_state_to_string(SessionState s) {
        if (s < 0 || s >= _SESSION_STATE_MAX)
                return NULL;
        return session_state_table[s];
}

int scope_dynamic_user(const char *user, const char *workspace, char **ret) {
        uint8_t digest[SHA256_DIGEST_SIZE];
        _cleanup_free_ char *scope = NULL;
        char hex[2 * SHA256_DIGEST_SIZE + 1];

        if (asprintf(&scope, "%s/%s", user, workspace) < 0)
                return -ENOMEM;
        sha256(scope, strlen(scope), digest);
        hex_encode(digest, 8, hex);
        return asprintf(ret, "sbx-%s", hex) < 0 ? -ENOMEM : 0;
}

static int random_id(char ret[static 17]) {
        uint8_t b[8];
        ssize_t n;

        n = getrandom(b, sizeof(b), 0);
        if (n != (ssize_t) sizeof(b))
                return n < 0 ? -errno : -EIO;
        hex_encode(b, sizeof(b), ret);
        return 0;
}

static uint64_t now_realtime(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

static void session_set_state(Session *s, SessionState state, int r) {
        SessionWaiter *w;

        s->state = state;
        while ((w = s->waiters)) {
                LIST_REMOVE(waiters, s->waiters, w);
                w->fn(s, r, w->userdata);
                free(w);
        }
}

static int on_slice_started(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Session *s = userdata;

        s->start_slot = sd_bus_slot_unref(s->start_slot);

        if (sd_bus_message_is_method_error(reply, NULL)) {
                const char *msg = systemd_error_message(reply);

                log_error("Failed to start slice %s: %s", s->slice, msg);
                free(s->error);
                s->error = strdup(msg);
                session_set_state(s, SESSION_FAILED, -EIO);
                session_free(s); /* the waiters were told; the scope is free for a new try */
                return 0;
        }

        log_info("Session %s for %s/%s is active in %s.", s->id, s->user, s->workspace, s->slice);
        session_set_state(s, SESSION_ACTIVE, 0);
        return 0;
}

static int limit_check(RequestError *e, const char *field, bool has, uint64_t asked, uint64_t max, uint64_t dflt,
                       uint64_t *ret) {
        if (!has) {
                *ret = dflt;
                return 0;
        }
        if (asked > max) {
                e->code = "limit_exceeded";
                snprintf(e->message, sizeof(e->message), "limits.%s=%" PRIu64 " is above the maximum of %" PRIu64 ".",
                         field, asked, max);
                return -EINVAL;
        }
        *ret = asked;
        return 0;
}

int session_create(Manager *m, const SessionRequest *req, Session **ret, RequestError *error) {
        const Config *c = &m->config;
        Session *s;
        Limits l;
        int r;

        r = limit_check(error, "memory_max", req->has_memory_max, req->memory_max, c->session_limits_max.memory_max,
                        c->session_limits.memory_max, &l.memory_max);
        if (r >= 0)
                r = limit_check(error, "cpu_quota", req->has_cpu_quota, req->cpu_quota_percent,
                                c->session_limits_max.cpu_quota_percent, c->session_limits.cpu_quota_percent,
                                &l.cpu_quota_percent);
        if (r >= 0)
                r = limit_check(error, "tasks_max", req->has_tasks_max, req->tasks_max, c->session_limits_max.tasks_max,
                                c->session_limits.tasks_max, &l.tasks_max);
        if (r < 0)
                return r;
        if (l.memory_max < 4 * 1024 * 1024) {
                error->code = "invalid_value";
                snprintf(error->message, sizeof(error->message), "limits.memory_max must be at least 4M.");
                return -EINVAL;
        }

        s = calloc(1, sizeof(Session));
        if (!s)
                return -ENOMEM;
        s->manager = m;
        s->limits = l;
        s->network = req->network;
        s->state = SESSION_STARTING;
        s->created_realtime_usec = now_realtime();

        r = random_id(s->id);
        if (r < 0)
                goto fail;
        s->user = strdup(req->user);
        s->workspace = strdup(req->workspace);
        if (!s->user || !s->workspace ||
            asprintf(&s->slice, "sandboxd-%s.slice", s->id) < 0 ||
            asprintf(&s->workspace_dir, "/var/lib/sandboxd/ws/%s/%s", req->user, req->workspace) < 0 ||
            asprintf(&s->home_dir, "/var/lib/sandboxd/home/%s/%s", req->user, req->workspace) < 0 ||
            asprintf(&s->tmp_dir, "/var/lib/sandboxd/tmp/%s/%s", req->user, req->workspace) < 0) {
                r = -ENOMEM;
                goto fail;
        }
        r = scope_dynamic_user(req->user, req->workspace, &s->dynamic_user);
        if (r < 0)
                goto fail;

        r = systemd_start_slice_async(m->bus, &s->start_slot, s->slice, "sandboxd session", &s->limits,
                                      on_slice_started, s);
        if (r < 0) {
                log_error_errno(r, "Failed to ask systemd to start %s: %m", s->slice);
                goto fail;
        }

        LIST_PREPEND(sessions, m->sessions, s);
        manager_check_idle(m);
        *ret = s;
        return 0;

fail:
        session_free(s);
        return r;
}

Session *session_free(Session *s) {
        SessionWaiter *w;
        Command *cmd;

        if (!s)
                return NULL;

        while ((w = s->waiters)) {
                LIST_REMOVE(waiters, s->waiters, w);
                w->fn(s, -ECANCELED, w->userdata);
                free(w);
        }
        while ((cmd = s->commands))
                command_free(cmd);

        if (s->manager && (s->sessions_prev || s->manager->sessions == s))
                LIST_REMOVE(sessions, s->manager->sessions, s);

        sd_bus_slot_unref(s->start_slot);
        free(s->user);
        free(s->workspace);
        free(s->slice);
        free(s->dynamic_user);
        free(s->workspace_dir);
        free(s->home_dir);
        free(s->tmp_dir);
        free(s->error);
        free(s->cgroup);
        free(s);
        return NULL;
}

int session_wait_ready(Session *s, SessionReadyFn fn, void *userdata) {
        SessionWaiter *w;

        if (s->state != SESSION_STARTING) {
                fn(s, s->state == SESSION_ACTIVE ? 0 : -EIO, userdata);
                return 0;
        }
        w = calloc(1, sizeof(SessionWaiter));
        if (!w)
                return -ENOMEM;
        w->fn = fn;
        w->userdata = userdata;
        LIST_PREPEND(waiters, s->waiters, w);
        return 0;
}

Command *session_find_command(Session *s, const char *request_id) {
        Command *c;

        LIST_FOREACH(commands, c, s->commands)
                if (streq(c->request_id, request_id))
                        return c;
        return NULL;
}

unsigned session_count_running(Session *s) {
        unsigned n = 0;
        Command *c;

        LIST_FOREACH(commands, c, s->commands)
                if (!command_status_is_terminal(c->result.status))
                        n++;
        return n;
}

int session_append_json(Session *s, Buf *b) {
        int r;

        r = buf_printf(b, "{\"id\":\"%s\",\"user\":\"%s\",\"workspace\":\"%s\",\"state\":\"%s\",\"unit\":\"%s\","
                          "\"dynamic_user\":\"%s\",\"workspace_path\":\"%s\",\"created_at_usec\":%" PRIu64 ","
                          "\"limits\":{\"memory_max\":%" PRIu64 ",\"cpu_quota\":%" PRIu64 ",\"tasks_max\":%" PRIu64 "},"
                          "\"network\":{\"mode\":\"none\"},\"commands\":%u,\"running\":%u}",
                       s->id, s->user, s->workspace, session_state_to_string(s->state), s->slice, s->dynamic_user,
                       s->workspace_dir, s->created_realtime_usec, s->limits.memory_max, s->limits.cpu_quota_percent,
                       s->limits.tasks_max, s->n_commands, session_count_running(s));
        return r;
}
