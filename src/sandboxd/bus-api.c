/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the modules of the D-Bus API share: calls answered later, who is calling and
 * whether they may, object paths of commands. */

#include "auth.h"
#include "bus-api.h"
#include "bus-util.h"
#include "image-import.h"
#include "log.h"
#include "output-pipe.h"
#include "polkit.h"
#include "terminal-socket.h"
#include "time-util.h"

/* --- calls answered later ---------------------------------------------------------- */

int bus_pending_new(Manager *m, sd_bus_message *call, Session *s, BusPending **ret) {
        BusPending *p = calloc(1, sizeof(BusPending));

        if (!p)
                return -ENOMEM;
        p->manager = m;
        p->call = sd_bus_message_ref(call);
        if (s)
                memcpy(p->session_id, s->id, sizeof(p->session_id));
        LIST_PREPEND(pending, m->bus_pending, p);
        m->n_bus_waiting++;
        *ret = p;
        return 0;
}

BusPending *bus_pending_free(BusPending *p) {
        if (!p)
                return NULL;
        output_detach(&p->reader);
        op_free(p->op); /* its function is never called now */
        image_import_abandon(p->image_import); /* its tree removed */
        if (p->file_op)
                file_op_detach(p->file_op);
        files_upload_free(p->upload); /* uncommitted: nothing is left */
        free(p->upload_path);
        sd_event_source_disable_unref(p->upload_io);
        sd_event_source_disable_unref(p->upload_timer);
        sd_bus_track_unref(p->upload_track);
        LIST_REMOVE(pending, p->manager->bus_pending, p);
        p->manager->n_bus_waiting--;
        sd_bus_message_unref(p->call);
        free(p);
        return NULL;
}

void bus_pending_fail(BusPending *p, int r, const sd_bus_error *error) {
        int k;

        if (error && sd_bus_error_is_set(error))
                k = sd_bus_reply_method_error(p->call, error);
        else
                k = sd_bus_reply_method_errno(p->call, r, NULL);
        if (k < 0)
                log_debug_errno(k, "Failed to answer a D-Bus call, ignoring: %m");
        bus_pending_free(p);
}

void bus_pending_fail_stopping(BusPending *p) {
        bus_pending_fail(p, 0, &SD_BUS_ERROR_MAKE_CONST(BUS_ERROR_STOPPING, STOPPING_MESSAGE));
}

void manager_bus_stop(Manager *m) {
        /* while the loop runs: sd-bus flushes and closes the bus when the loop exits */
        while (m->bus_pending)
                bus_pending_fail_stopping(m->bus_pending);
        polkit_free_all(m);
}

void manager_bus_free(Manager *m) {
        while (m->bus_pending)
                bus_pending_free(m->bus_pending);
        output_pipes_free_all(m);
        terminal_sockets_free_all(m);
        polkit_free_all(m);
}

/* --- who is calling ------------------------------------------------------------------ */

int bus_caller_uid(Manager *m, sd_bus_message *call, uid_t *ret) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        const char *sender = sd_bus_message_get_sender(call);
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        SenderCacheEntry *oldest = &m->sender_cache[0];
        char *copy;
        uid_t uid;
        int r;

        /* Asking the bus is a synchronous call to dbus-daemon: once per sender, whose unique
         * name is never given to another connection. At most SENDER_CACHE_MAX to scan. */
        for (size_t i = 0; sender && i < SENDER_CACHE_MAX; i++) {
                SenderCacheEntry *c = &m->sender_cache[i];

                if (c->until > now && streq(c->sender, sender)) {
                        *ret = c->uid;
                        return 0;
                }
                if (c->until < oldest->until)
                        oldest = c;
        }

        /* The bus daemon vouches for the uid of a connection: SO_PEERCRED when it connected,
         * which is the effective uid. Never augmented from /proc, which could race. */
        r = sd_bus_query_sender_creds(call, SD_BUS_CREDS_EUID, &creds);
        if (r < 0)
                return r;
        r = sd_bus_creds_get_euid(creds, &uid);
        if (r < 0)
                return r;
        if (sender && (copy = strdup(sender))) {
                free(oldest->sender);
                *oldest = (SenderCacheEntry) { .sender = copy, .uid = uid, .until = now + SENDER_CACHE_USEC };
        }
        *ret = uid;
        return 0;
}

int bus_caller_identity(Manager *m, sd_bus_message *call, BusCaller *ret) {
        uid_t uid;
        int r;

        if (!call)
                return -ENXIO;
        r = bus_caller_uid(m, call, &uid);
        if (r < 0)
                return r;
        ret->uid = uid;
        r = auth_uid_caller(m, uid, &ret->authz, &ret->name);
        if (r < 0)
                return r;
        return 0;
}

int bus_authorize(Manager *m, sd_bus_message *call, AuthzOp op, const char *user, const char *workspace, Session *s,
                  sd_bus_error *error) {
        _cleanup_(bus_caller_done) BusCaller caller = {};
        const char *details[] = { "user", user, "workspace", workspace, "session", s ? s->id : NULL, NULL };
        AuthzTarget target = { .user = user, .session = s, .creator = s ? s->tenant : NULL };
        const char *reason = NULL;
        int r;

        r = bus_caller_identity(m, call, &caller);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Failed to learn who is calling: %m");
        if (!workspace)
                details[2] = NULL;
        else if (!s)
                details[4] = NULL;

        switch (authz_decide(&caller.authz, AUTHZ_DBUS, op, &target, &reason)) {
        case AUTHZ_ALLOW:
                return 1;
        case AUTHZ_ASK_OWN:
                return polkit_verify(m, call, POLKIT_ACTION_MANAGE_SESSIONS, details, true, error);
        case AUTHZ_ASK_ALL:
                return polkit_verify(m, call, POLKIT_ACTION_MANAGE_ALL, details, true, error);
        default:
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED, "%s", reason ?: "Not authorized.");
        }
}

/* --- object paths ------------------------------------------------------------------- */

int command_bus_path(Command *c, char **ret) {
        return asprintf(ret, BUS_SESSION_PREFIX "/%s/command/%u", c->session->id, c->n) < 0 ? -ENOMEM : 0;
}
