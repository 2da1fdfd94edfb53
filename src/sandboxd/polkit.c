/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>

#include "bus-util.h"
#include "list.h"
#include "log.h"
#include "polkit.h"
#include "time-util.h"

/* Answers are forgotten when the call's handler is done with them; one that no handler came
 * back for (its object went away, say) is dropped after this long. */
#define POLKIT_ANSWER_MAX_AGE_USEC (5 * 60 * USEC_PER_SEC)

/* polkit's CheckAuthorizationFlags */
#define POLKIT_ALLOW_USER_INTERACTION 1U

typedef enum PolkitAnswer {
        POLKIT_WAITING,
        POLKIT_YES,
        POLKIT_NO,
        POLKIT_CHALLENGE,   /* polkit would ask for a password, the caller did not allow that */
        POLKIT_UNREACHABLE, /* no answer, or an error: no */
} PolkitAnswer;

struct PolkitQuery {
        Manager *manager;
        sd_bus_message *call;
        char *action;
        sd_bus_slot *slot; /* while waiting */
        PolkitAnswer answer;
        uint64_t answered_usec; /* CLOCK_MONOTONIC */
        char *error;       /* UNREACHABLE: what went wrong */
        LIST_FIELDS(PolkitQuery, queries);
};

static PolkitQuery *query_free(PolkitQuery *q) {
        if (!q)
                return NULL;
        if (q->answer == POLKIT_WAITING)
                q->manager->n_polkit_waiting--;
        LIST_REMOVE(queries, q->manager->polkit_queries, q);
        sd_bus_slot_unref(q->slot);
        sd_bus_message_unref(q->call);
        free(q->action);
        free(q->error);
        free(q);
        return NULL;
}

static PolkitQuery *query_find(Manager *m, sd_bus_message *call, const char *action) {
        PolkitQuery *q;

        LIST_FOREACH(queries, q, m->polkit_queries)
                if (q->call == call && (!action || streq(q->action, action)))
                        return q;
        return NULL;
}

static int on_check_authorization(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        PolkitQuery *q = userdata;
        Manager *m = q->manager;
        const sd_bus_error *e;
        int authorized, challenge, r;

        q->slot = sd_bus_slot_unref(q->slot);
        q->answered_usec = now_usec(CLOCK_MONOTONIC);
        assert(q->answer == POLKIT_WAITING && m->n_polkit_waiting > 0);
        m->n_polkit_waiting--; /* whatever comes, it is no longer waiting */

        e = sd_bus_message_get_error(reply);
        if (e) {
                log_warning("polkit did not answer for %s (%s: %s): denying.", q->action, e->name,
                            e->message ?: "no message");
                q->answer = POLKIT_UNREACHABLE;
                q->error = strdup(e->message ?: e->name);
        } else {
                r = sd_bus_message_enter_container(reply, 'r', "bba{ss}");
                if (r >= 0)
                        r = sd_bus_message_read(reply, "bb", &authorized, &challenge);
                if (r < 0) {
                        log_warning_errno(r, "Failed to parse polkit's answer for %s, denying: %m", q->action);
                        q->answer = POLKIT_UNREACHABLE;
                        q->error = strdup("polkit's answer could not be parsed");
                } else if (authorized)
                        q->answer = POLKIT_YES;
                else if (challenge)
                        q->answer = POLKIT_CHALLENGE;
                else
                        q->answer = POLKIT_NO;
        }

        /* Run the call again, now that the answer is known. */
        r = sd_bus_enqueue_for_read(sd_bus_message_get_bus(q->call), q->call);
        if (r < 0) {
                log_error_errno(r, "Failed to dispatch the call again after polkit's answer: %m");
                (void) sd_bus_reply_method_errno(q->call, r, NULL);
                query_free(q);
        }
        manager_check_idle(m);
        return 0;
}

static int append_subject(sd_bus_message *m, const char *sender) {
        int r;

        r = sd_bus_message_open_container(m, 'r', "sa{sv}");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "s", "system-bus-name");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "a{sv}", 1, "name", "s", sender);
        if (r < 0)
                return r;
        return sd_bus_message_close_container(m);
}

static int polkit_ask(Manager *m, sd_bus_message *call, const char *action, const char * const *details,
                      bool interactive) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *req = NULL;
        const char *sender = sd_bus_message_get_sender(call);
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        PolkitQuery *q, *n;
        int r;

        if (!sender)
                return -EBADMSG;

        LIST_FOREACH_SAFE(queries, q, n, m->polkit_queries)
                if (q->answer != POLKIT_WAITING && q->answered_usec + POLKIT_ANSWER_MAX_AGE_USEC < now)
                        query_free(q);

        r = sd_bus_message_new_method_call(m->bus, &req, "org.freedesktop.PolicyKit1",
                                           "/org/freedesktop/PolicyKit1/Authority",
                                           "org.freedesktop.PolicyKit1.Authority", "CheckAuthorization");
        if (r < 0)
                return r;
        r = append_subject(req, sender);
        if (r >= 0)
                r = sd_bus_message_append(req, "s", action);
        if (r >= 0)
                r = sd_bus_message_open_container(req, 'a', "{ss}");
        for (const char * const *d = details; r >= 0 && d && d[0] && d[1]; d += 2)
                r = sd_bus_message_append(req, "{ss}", d[0], d[1]);
        if (r >= 0)
                r = sd_bus_message_close_container(req);
        if (r >= 0)
                r = sd_bus_message_append(req, "us", interactive ? POLKIT_ALLOW_USER_INTERACTION : 0U, "");
        if (r < 0)
                return r;

        q = calloc(1, sizeof(PolkitQuery));
        if (!q)
                return -ENOMEM;
        q->manager = m;
        q->call = sd_bus_message_ref(call);
        q->answer = POLKIT_WAITING;
        m->n_polkit_waiting++;
        LIST_PREPEND(queries, m->polkit_queries, q);
        q->action = strdup(action);
        if (!q->action) {
                query_free(q);
                return -ENOMEM;
        }

        /* With interaction, polkit waits for the user to type a password: give that time. */
        r = sd_bus_call_async(m->bus, &q->slot, req, on_check_authorization, q,
                              interactive ? 120 * USEC_PER_SEC : 0);
        if (r < 0) {
                query_free(q);
                return r;
        }
        manager_check_idle(m);
        return 0;
}

int polkit_verify(Manager *m, sd_bus_message *call, const char *action, const char * const *details,
                  bool interactive, sd_bus_error *error) {
        PolkitQuery *q;
        int r;

        interactive = interactive && sd_bus_message_get_allow_interactive_authorization(call) > 0;

        q = query_find(m, call, action);
        if (!q) {
                r = polkit_ask(m, call, action, details, interactive);
                if (r < 0) {
                        log_warning_errno(r, "Failed to ask polkit about %s, denying: %m", action);
                        return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                                 "Authorization for %s could not be checked: polkit is unreachable.",
                                                 action);
                }
                return 0;
        }

        switch (q->answer) {
        case POLKIT_WAITING:
                return 0;
        case POLKIT_YES:
                return 1;
        case POLKIT_CHALLENGE:
                if (!interactive)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED,
                                                 "%s needs interactive authorization; allow it (busctl does by "
                                                 "default) and run a polkit agent.", action);
                _fallthrough_;
        case POLKIT_NO:
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED, "Not authorized for %s.", action);
        default:
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "Authorization for %s could not be checked (%s): denied.", action,
                                         q->error ?: "polkit is unreachable");
        }
}

void polkit_forget(Manager *m, sd_bus_message *call) {
        PolkitQuery *q, *n;

        LIST_FOREACH(queries, q, m->polkit_queries)
                if (q->call == call && q->answer == POLKIT_WAITING)
                        return; /* it comes back: keep what is known */

        LIST_FOREACH_SAFE(queries, q, n, m->polkit_queries)
                if (q->call == call)
                        query_free(q);
}

unsigned polkit_pending(Manager *m) {
        return m->n_polkit_waiting;
}

void polkit_free_all(Manager *m) {
        PolkitQuery *q, *n;

        while ((q = m->polkit_queries)) {
                sd_bus_message *call = sd_bus_message_ref(q->call);
                bool waiting = false;

                LIST_FOREACH(queries, q, m->polkit_queries)
                        if (q->call == call && q->answer == POLKIT_WAITING)
                                waiting = true;
                /* Its handler never comes back: the caller is told now, once, rather than
                 * left to its timeout. A call whose answer is in was dispatched again, and
                 * answered by its handler (or by sd-bus), or is dropped with the bus. */
                if (waiting) {
                        int r = sd_bus_reply_method_errorf(call, BUS_ERROR_STOPPING,
                                                           STOPPING_MESSAGE);
                        if (r < 0)
                                log_debug_errno(r, "Failed to answer a call waiting for polkit, ignoring: %m");
                }
                LIST_FOREACH_SAFE(queries, q, n, m->polkit_queries)
                        if (q->call == call)
                                query_free(q);
                sd_bus_message_unref(call);
        }
}
